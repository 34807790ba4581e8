/**
 * @solrelay/core/wire: the plain values a client of relay's HTTP + SSE API needs (error codes and the
 * RelayError type, event names and SSE ids, transaction states), without the rest of core.
 *
 * This entry exists so browser bundles of the client stay small: the modules re-exported here must not import
 * zod, @noble/hashes or bs58, directly or through another module (a test in test/wire.test.ts walks the import
 * graph to hold that). Everything here is also exported, identically, by the main entry.
 */
export {
  RELAY_ERRORS,
  RELAY_ERROR_CODES,
  RELAY_ERROR_CODE_PATTERN,
  RelayError,
  formatRelayErrorMessage,
  httpStatusOf,
  isRelayError,
  isRelayErrorCode,
  relayErrorFromBody,
  relayErrorJson,
} from './errors';
export type {
  ErrorBody,
  RelayErrorArgs,
  RelayErrorCode,
  RelayErrorContext,
  RelayErrorDetails,
  RelayErrorDetailsOf,
  RelayErrorOptions,
} from './errors';
export {
  RELAY_EVENT_NAMES,
  SPEC_EVENT_NAMES,
  formatSseEventId,
  isRelayEventName,
  parseSseEventId,
  txStatusChangedEvent,
} from './events';
export type {
  RelayEvent,
  RelayEventMap,
  RelayEventName,
  TxStatusChangedEvent,
  TxStatusSource,
} from './events';
export { TERMINAL_TX_STATES, TX_PROGRESS_PATH, TX_STATES, isTerminalTxState, isTxState } from './states';
export type { TerminalTxState, TxState } from './states';
