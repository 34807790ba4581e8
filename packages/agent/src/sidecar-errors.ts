/**
 * How the agent reads the sidecar's refusals: by the stable code of the error body (`{ error: { code } }`, which
 * the client turns back into a `RelayError`), never by the HTTP status. Several causes share a status: a 404 is
 * an unknown transaction, but also an unknown route (a sidecar older or newer than this agent) or an absent agent,
 * and only the code says which it was. Codes are never renamed or reused (core `errors.ts`), so they are safe to
 * branch on; a code this agent does not know falls into the cautious branch (cool down, retry later).
 */
import {
  isRelayError,
  isTerminalTxState,
  isTxState,
  type RelayError,
  type RelayErrorCode,
} from '@solrelay/core';

/** The codes of a missing or wrong bearer token. */
const TOKEN_REFUSAL_CODES: ReadonlySet<RelayErrorCode> = new Set<RelayErrorCode>([
  'RELAY_E_AUTH_MISSING_TOKEN',
  'RELAY_E_AUTH_INVALID_TOKEN',
]);

/**
 * Submit refusals that come from a check the agent runs itself before submitting (policy, tip mode, expiry). When
 * the sidecar refuses with one of these anyway, the agent judged with a policy or state it no longer has. Not
 * spend-limit: the rolling budget is the sidecar's reservations, not something the agent keeps a copy of.
 */
const STALE_COPY_CODES: ReadonlySet<RelayErrorCode> = new Set<RelayErrorCode>([
  'RELAY_E_POLICY_MAX_TIP_EXCEEDED',
  'RELAY_E_POLICY_MIN_TIP_NOT_MET',
  'RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED',
  'RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP',
  'RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED',
  'RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED',
  'RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED',
  'RELAY_E_POLICY_INVALID_FILE',
  'RELAY_E_TX_TIP_NOT_RAISABLE',
  'RELAY_E_TX_BLOCKHASH_EXPIRED',
]);

/** The sidecar refused the token (missing or wrong), which no retry can fix. */
export function isTokenRefusal(error: unknown): error is RelayError {
  return isRelayError(error) && TOKEN_REFUSAL_CODES.has(error.code);
}

/** What a refused `POST /internal/submit` means for the transaction, read from the error's code. */
export type SubmitRefusal =
  /**
   * `RELAY_E_TX_NOT_FOUND`: the sidecar has no such transaction; `RELAY_E_TX_OWNED_ELSEWHERE`: another host of its
   * fleet runs it (that host's agent decides). Either way, stop tracking it.
   */
  | 'unknown_tx'
  /** `RELAY_E_TX_WRONG_STATE` naming a terminal state: the transaction is over; stop tracking it. */
  | 'tx_ended'
  /** `RELAY_E_TX_WRONG_STATE` otherwise (an attempt in flight, attempts stopped): wait for events or the watchdog. */
  | 'not_pending'
  /** The token was refused: stop the agent. */
  | 'token_refused'
  /** A check the agent runs itself failed at the sidecar: re-read the sidecar's state, then retry after a cooldown. */
  | 'stale_copy'
  /** Anything else (spend-limit, 429, 503, 5xx, no answer, an unknown route or code): retry after a cooldown. */
  | 'retry_later';

/** Classifies a submit's failure by its code; only the codes that say so make the agent stop tracking a transaction. */
export function submitRefusalOf(error: unknown): SubmitRefusal {
  if (!isRelayError(error)) return 'retry_later';
  if (TOKEN_REFUSAL_CODES.has(error.code)) return 'token_refused';
  if (error.code === 'RELAY_E_TX_NOT_FOUND' || error.code === 'RELAY_E_TX_OWNED_ELSEWHERE')
    return 'unknown_tx';
  if (error.code === 'RELAY_E_TX_WRONG_STATE') {
    const state = error.details.state;
    return isTxState(state) && isTerminalTxState(state) ? 'tx_ended' : 'not_pending';
  }
  return STALE_COPY_CODES.has(error.code) ? 'stale_copy' : 'retry_later';
}
