/**
 * @solrelay/client: the SDK for relay's HTTP + SSE API. Runs in Node 20 and browsers; loads neither web3.js nor
 * any Node built-in at run time.
 */
export { EVENTS_HIGH_WATER_MARK, RelayClient, WAIT_READ_TIMEOUT_MS } from './client';
export type { EnqueueOptions, EventsOptions, RelayClientOptions, SubmitInput } from './client';
export { FINAL_READ_TIMEOUT_MS, TxHandle } from './tx-handle';
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
  EventsOverflowError,
  TxFailedError,
  WaitTimeoutError,
  isClientClosedError,
  isEventsOverflowError,
  isTxFailedError,
  isWaitTimeoutError,
} from './errors';
export { RECONNECT_BASE_MS, RECONNECT_CAP_MS, reconnectDelay } from './reconnect';
export type { TimerHandle, Timers } from './reconnect';
export { base58ToBytes, bytesToBase64, detectEncoding, encodeTransactions } from './encoding';
export type { KitTransaction, ReadonlyBytes, SerializableTransaction, TransactionInput } from './encoding';
export type { FetchFunction, RelayClientLogger } from './http';

// What callers of the client need from core, so they do not have to depend on it themselves. Values come from the
// zod-free `wire` entry so a browser bundle of the client does not carry the rest of core; types are free.
export {
  RelayError,
  isRelayError,
  isTerminalTxState,
  parseSseEventId,
  formatSseEventId,
  TX_PROGRESS_PATH,
} from '@solrelay/core/wire';
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
  LandingStat,
  LandingView,
  TipResponse,
  QueueResponse,
  LifecycleListResponse,
  LifecycleEntry,
  SubmitResponse,
  ModeResponse,
  AgentInfo,
  PolicyView,
} from '@solrelay/core';
