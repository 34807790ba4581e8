import type { AttemptOutcome, TxRecord, TxState } from '@solrelay/core';

/**
 * A transaction ended without reaching the state a caller waited for: it is `failed` (a non-retryable outcome;
 * `failure` is the class) or `expired` (attempts stopped and its blockhash died; `failure` is the outcome of the
 * last attempt, when there was one). Either way it can no longer land.
 */
export class TxFailedError extends Error {
  override readonly name = 'TxFailedError';
  readonly tx_id: string;
  readonly state: 'failed' | 'expired';
  readonly failure: AttemptOutcome | null;
  /** The full record read from the sidecar when the failure was seen, or null if it could not be read. */
  readonly record: TxRecord | null;

  constructor(init: {
    tx_id: string;
    state: 'failed' | 'expired';
    failure: AttemptOutcome | null;
    record: TxRecord | null;
  }) {
    super(
      init.state === 'failed'
        ? `Transaction ${init.tx_id} failed (${init.failure ?? 'unknown class'})`
        : `Transaction ${init.tx_id} expired${init.failure ? ` (last attempt: ${init.failure})` : ''}`,
    );
    this.tx_id = init.tx_id;
    this.state = init.state;
    this.failure = init.failure;
    this.record = init.record;
  }
}

/**
 * `waitFor()` ran out of time. `last_state` is the state the sidecar reported last and `verified` says whether it
 * was read from the sidecar at the deadline (false when the sidecar could not be reached then).
 */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
  readonly tx_id: string;
  readonly target: TxState;
  readonly last_state: TxState | null;
  readonly verified: boolean;

  constructor(init: {
    tx_id: string;
    target: TxState;
    last_state: TxState | null;
    verified: boolean;
    timeoutMs: number;
  }) {
    super(
      `Transaction ${init.tx_id} did not reach ${init.target} within ${init.timeoutMs} ms ` +
        `(last state: ${init.last_state ?? 'unknown'}${init.verified ? '' : ', unverified'})`,
    );
    this.tx_id = init.tx_id;
    this.target = init.target;
    this.last_state = init.last_state;
    this.verified = init.verified;
  }
}

/** The client was closed while an operation was still waiting. */
export class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
  constructor() {
    super('The RelayClient was closed');
  }
}

/**
 * An `events()` iterator ended because its reader fell `highWaterMark` events behind: it stopped buffering rather
 * than grow without bound. Every event before the overflow was delivered; later ones were not, so re-read the
 * state you follow (for example `queue()` or `lifecycle()`) before iterating again.
 */
export class EventsOverflowError extends Error {
  override readonly name = 'EventsOverflowError';
  readonly highWaterMark: number;

  constructor(highWaterMark: number) {
    super(
      `relay events() iterator ended: ${highWaterMark} events were buffered and unread, so later events were dropped`,
    );
    this.highWaterMark = highWaterMark;
  }
}

/** Guards by `name`, not `instanceof`, so they hold across duplicated package copies. */
export function isTxFailedError(e: unknown): e is TxFailedError {
  return hasName(e, 'TxFailedError');
}

export function isWaitTimeoutError(e: unknown): e is WaitTimeoutError {
  return hasName(e, 'WaitTimeoutError');
}

export function isClientClosedError(e: unknown): e is ClientClosedError {
  return hasName(e, 'ClientClosedError');
}

export function isEventsOverflowError(e: unknown): e is EventsOverflowError {
  return hasName(e, 'EventsOverflowError');
}

function hasName(e: unknown, name: string): boolean {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === name;
}
