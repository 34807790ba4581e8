/**
 * @solrelay/client: the SDK for relay's HTTP + SSE API. Runs in Node 20 and browsers; loads neither web3.js nor
 * any Node built-in at run time.
 */
export { RelayClient } from './client';
export type { EnqueueOptions, EventsOptions, RelayClientOptions, SubmitInput } from './client';
export { TxHandle } from './tx-handle';
export type { TxStatus, WaitForOptions, WaitTarget } from './tx-handle';
export type {
  ConnectionState,
  ConnectionStateEvent,
  Handler,
  RelayClientEventMap,
  RelayClientEventName,
} from './event-stream';
export {
  ClientClosedError,
  TxFailedError,
  WaitTimeoutError,
  isClientClosedError,
  isTxFailedError,
  isWaitTimeoutError,
} from './errors';
export { RECONNECT_BASE_MS, RECONNECT_CAP_MS, reconnectDelay } from './reconnect';
export type { TimerHandle, Timers } from './reconnect';
export { base58ToBytes, bytesToBase64, detectEncoding, encodeTransactions } from './encoding';
export type { SerializableTransaction, TransactionInput } from './encoding';
export type { FetchFunction, RelayClientLogger } from './http';

// What callers of the client need from core, so they do not have to depend on it themselves.
export {
  RelayError,
  isRelayError,
  isTerminalTxState,
  parseSseEventId,
  formatSseEventId,
  TX_PROGRESS_PATH,
} from '@solrelay/core';
export type {
  AttemptOutcome,
  RelayErrorCode,
  RelayEvent,
  RelayEventMap,
  RelayEventName,
  TxRecord,
  TxState,
  TxStatusChangedEvent,
  EnqueueResponse,
  StatusResponse,
  TipResponse,
  QueueResponse,
  LifecycleListResponse,
  LifecycleEntry,
  SubmitResponse,
  ModeResponse,
  AgentInfo,
  PolicyView,
} from '@solrelay/core';
