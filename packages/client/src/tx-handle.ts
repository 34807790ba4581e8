import type { EnqueueResponse, TxRecord, TxState, TxStatusChangedEvent } from '@solrelay/core';
import { TX_PROGRESS_PATH, isRelayError, txStatusChangedEvent } from '@solrelay/core/wire';
import { ClientClosedError, TxFailedError, WaitTimeoutError } from './errors';
import { unreachable, type HttpTransport, type RelayClientLogger } from './http';
import { reconnectDelay, type TimerHandle, type Timers } from './reconnect';
import { openSse, type SseConnection } from './sse';

/** A state `waitFor()` can wait for: any state on the forward path (`pending` .. `finalized`). */
export type WaitTarget = (typeof TX_PROGRESS_PATH)[number];

export interface WaitForOptions {
  /** Abort the wait; the promise rejects with the signal's reason. The transaction itself is not affected. */
  signal?: AbortSignal;
  /**
   * Give up after this long with a `WaitTimeoutError`. At the deadline the wait stops following and makes one last
   * read of the sidecar's truth, bounded by `FINAL_READ_TIMEOUT_MS` (2 s, or the client's `waitReadTimeoutMs` if
   * smaller); so the promise settles within `timeoutMs` + that bound, even when the sidecar hangs. When that read
   * fails the error says `verified: false`.
   */
  timeoutMs?: number;
}

/** A transaction's state as the per-transaction stream reports it (`tx_status_changed`). */
export type TxStatus = TxStatusChangedEvent;

/** What a handle needs of its client. */
export interface TxHandleContext {
  http: HttpTransport;
  timers: Timers;
  logger: RelayClientLogger | undefined;
  /** The bound on each read of `GET /tx/{id}` a wait makes while following the transaction. */
  readTimeoutMs: number;
  /** True once the client is closed. */
  isClosed(): boolean;
  /**
   * Registers a cancel function that `close()` calls; returns the function that unregisters it. Once the client
   * is closed it calls `cancel` at once instead (and returns a no-op).
   */
  track(cancel: () => void): () => void;
}

/**
 * The bound on the reads made once a wait is decided or out of time: the last read at the deadline, and the read
 * that attaches the record to a `TxFailedError`. Short, because the caller is already owed an answer.
 */
export const FINAL_READ_TIMEOUT_MS = 2_000;

/** The position of a state on the forward path; -1 for `failed` and `expired`, which are off it. */
function progressRank(state: TxState): number {
  return (TX_PROGRESS_PATH as readonly TxState[]).indexOf(state);
}

function isWaitTarget(value: unknown): value is WaitTarget {
  return typeof value === 'string' && progressRank(value as TxState) >= 0;
}

/** The status view of a full record. */
export function statusOfRecord(record: TxRecord): TxStatus {
  return txStatusChangedEvent({
    tx_id: record.tx_id,
    state: record.state,
    bundle_id: record.bundle_id,
    tx_signatures: record.tx_signatures,
    failure: record.failure,
    ts: record.history[record.history.length - 1]?.ts ?? 0,
  });
}

/** 4xx answers other than 408/429 do not change by retrying (unknown tx, bad token). */
function isPermanent(error: unknown): boolean {
  if (!isRelayError(error)) return false;
  return error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429;
}

/** One enqueued transaction. Get one from `RelayClient.enqueue()` or, for a known id, `RelayClient.handle()`. */
export class TxHandle {
  readonly tx_id: string;
  /** The user transactions' first signatures, in request order. */
  readonly signatures: readonly string[];
  /** The slot at enqueue, when this handle came from an enqueue. */
  readonly slot: number | null;
  /** False when the sidecar already had this transaction (an idempotent repeat, HTTP 200). */
  readonly created: boolean;

  constructor(
    private readonly ctx: TxHandleContext,
    init: Pick<EnqueueResponse, 'tx_id'> &
      Partial<Pick<EnqueueResponse, 'signatures' | 'slot'>> & { created?: boolean },
  ) {
    this.tx_id = init.tx_id;
    this.signatures = Object.freeze([...(init.signatures ?? [])]);
    this.slot = init.slot ?? null;
    this.created = init.created ?? false;
  }

  /** The full record from `GET /tx/{tx_id}`. */
  record(signal?: AbortSignal): Promise<TxRecord> {
    return this.ctx.http.get<TxRecord>(`/tx/${encodeURIComponent(this.tx_id)}`, signal);
  }

  /** The current state, read from the sidecar (never cached). */
  async state(signal?: AbortSignal): Promise<TxState> {
    return (await this.record(signal)).state;
  }

  /**
   * Resolves once the transaction is at `target` or later on `pending → submitted → landed → processed →
   * confirmed → finalized` (so `finalized` satisfies `confirmed`, `processed` satisfies `landed`), with the
   * status that satisfied it. Rejects with `TxFailedError` on `failed` / `expired` (with the failure class).
   * Follows `GET /tx/events/{tx_id}`; when that stream drops or the sidecar restarts it re-reads
   * `GET /tx/{tx_id}` and reconnects with backoff, so a landed transaction is never reported as timed out. Every
   * read is bounded (the client's `waitReadTimeoutMs`, and the deadline), so a sidecar that stops answering cannot
   * hold the wait past `timeoutMs`. Rejects with `ClientClosedError` once the client is closed.
   *
   * @example
   * const status = await handle.waitFor('confirmed', { timeoutMs: 60_000 });
   */
  waitFor(target: WaitTarget = 'finalized', options: WaitForOptions = {}): Promise<TxStatus> {
    if (!isWaitTarget(target)) {
      return Promise.reject(new TypeError(`waitFor target must be one of ${TX_PROGRESS_PATH.join(', ')}`));
    }
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    if (this.ctx.isClosed()) return Promise.reject(new ClientClosedError());
    return new Promise<TxStatus>((resolve, reject) =>
      new Wait(this, this.ctx, target, options, resolve, reject).start(),
    );
  }
}

/**
 * One `waitFor()` call: its stream, its reconnect schedule, its deadline.
 *
 * Phases: *following* (read the record, then the stream; re-read and reconnect after a drop) until the outcome is
 * known or the deadline passes; then at most one bounded read (the deadline's truth, or the record for a
 * `TxFailedError`); then *settled*. Every read is aborted when its phase ends, so none outlives the wait.
 */
class Wait {
  /** The promise is settled. */
  private settled = false;
  /** The outcome is known (a bounded follow-up read may still run) or the promise is settled. */
  private decided = false;
  /** The deadline passed: the deadline's own read decides, nothing else may retry or reconnect. */
  private pastDeadline = false;
  private attempt = 0;
  private connection: SseConnection | null = null;
  private retryTimer: TimerHandle | null = null;
  private deadlineTimer: TimerHandle | null = null;
  private lastState: TxState | null = null;
  private untrack: () => void = () => undefined;
  /** Aborted when following stops (deadline, outcome, settle): ends the reads of the follow phase. */
  private readonly following = new AbortController();
  /** Aborted when the wait settles: ends any read still in flight, the final ones included. */
  private readonly lifetime = new AbortController();
  private readonly onAbort = () => this.finish(() => this.reject(this.options.signal?.reason));

  constructor(
    private readonly handle: TxHandle,
    private readonly ctx: TxHandleContext,
    private readonly target: WaitTarget,
    private readonly options: WaitForOptions,
    private readonly resolve: (status: TxStatus) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  start(): void {
    this.untrack = this.ctx.track(() => this.finish(() => this.reject(new ClientClosedError())));
    // A client closed in the meantime cancels at once, inside track(): nothing may be armed after that.
    if (this.settled) return;
    this.options.signal?.addEventListener('abort', this.onAbort, { once: true });
    if (this.options.timeoutMs !== undefined) {
      this.deadlineTimer = this.ctx.timers.setTimeout(() => void this.deadline(), this.options.timeoutMs);
    }
    void this.cycle();
  }

  /** Read the truth, then follow the stream. Runs first and after every drop. */
  private async cycle(): Promise<void> {
    this.retryTimer = null;
    let record: TxRecord;
    try {
      record = await this.read(this.following.signal, this.ctx.readTimeoutMs);
    } catch (error) {
      // Once decided or past the deadline, another read owns the outcome; retrying would only leak a timer.
      if (this.decided || this.pastDeadline) return;
      if (isPermanent(error)) this.finish(() => this.reject(error));
      else this.retryLater(error);
      return;
    }
    if (this.decided || this.observe(statusOfRecord(record), record) || this.pastDeadline) return;
    this.connection = openSse(
      this.ctx.http,
      `/tx/events/${encodeURIComponent(this.handle.tx_id)}`,
      ['tx_status_changed'],
      null,
      {
        onOpen: () => {
          this.attempt = 0;
        },
        onEvent: (_name, data) => {
          const status = data as TxStatus;
          if (!this.decided && status.tx_id === this.handle.tx_id) this.observe(status, null);
        },
        onDrop: (drop) => {
          this.connection = null;
          if (this.decided || this.pastDeadline) return;
          if (drop.status !== null && isPermanent(drop.error)) this.finish(() => this.reject(drop.error));
          else this.retryLater(drop.error);
        },
      },
      this.ctx.logger,
    );
  }

  /** `GET /tx/{tx_id}`, abandoned when `scope` aborts or after `boundMs`, whichever comes first. */
  private async read(scope: AbortSignal, boundMs: number): Promise<TxRecord> {
    const controller = new AbortController();
    const onScopeAbort = () => controller.abort(scope.reason);
    if (scope.aborted) onScopeAbort();
    else scope.addEventListener('abort', onScopeAbort, { once: true });
    const timer = this.ctx.timers.setTimeout(
      () =>
        controller.abort(
          unreachable(new Error(`GET /tx/${this.handle.tx_id} did not answer within ${boundMs} ms`)),
        ),
      boundMs,
    );
    try {
      return await this.handle.record(controller.signal);
    } finally {
      this.ctx.timers.clearTimeout(timer);
      scope.removeEventListener('abort', onScopeAbort);
    }
  }

  /** The bound on a read made after following stopped. */
  private finalReadBound(): number {
    return Math.min(this.ctx.readTimeoutMs, FINAL_READ_TIMEOUT_MS);
  }

  private retryLater(error: unknown): void {
    this.attempt += 1;
    const delay = reconnectDelay(this.attempt);
    this.ctx.logger?.debug?.(
      { tx_id: this.handle.tx_id, attempt: this.attempt, delay_ms: delay, err: error },
      'relay client: waitFor lost the sidecar; re-reading after a backoff',
    );
    this.retryTimer = this.ctx.timers.setTimeout(() => void this.cycle(), delay);
  }

  /** True when this status decides the wait. */
  private observe(status: TxStatus, record: TxRecord | null): boolean {
    this.lastState = status.state;
    if (status.state === 'failed' || status.state === 'expired') {
      const state = status.state;
      this.decided = true;
      this.stopFollowing();
      // The record names the last attempt's outcome, which is what an expiry's class is; read it if the stream
      // was the one that reported the end. The read is bounded: it only adds detail to an outcome already known.
      const full = record
        ? Promise.resolve(record)
        : this.read(this.lifetime.signal, this.finalReadBound()).catch(() => null);
      void full.then((full) => {
        const lastOutcome = full?.attempts[full.attempts.length - 1]?.outcome ?? null;
        const failure = state === 'failed' ? (status.failure ?? full?.failure ?? lastOutcome) : lastOutcome;
        this.finish(() =>
          this.reject(new TxFailedError({ tx_id: this.handle.tx_id, state, failure, record: full })),
        );
      });
      return true;
    }
    if (progressRank(status.state) >= progressRank(this.target)) {
      this.finish(() => this.resolve(status));
      return true;
    }
    return false;
  }

  /** At the deadline, read the sidecar once more: the stream may be down while the transaction moved on. */
  private async deadline(): Promise<void> {
    this.deadlineTimer = null;
    if (this.decided) return;
    this.pastDeadline = true;
    this.stopFollowing();
    let verified = false;
    try {
      const record = await this.read(this.lifetime.signal, this.finalReadBound());
      if (this.decided || this.observe(statusOfRecord(record), record)) return;
      verified = true;
    } catch {
      // No answer within the bound (or an error answer): the last state is what was seen before, unverified.
    }
    const timeoutMs = this.options.timeoutMs ?? 0;
    this.finish(() =>
      this.reject(
        new WaitTimeoutError({
          tx_id: this.handle.tx_id,
          target: this.target,
          last_state: this.lastState,
          verified,
          timeoutMs,
        }),
      ),
    );
  }

  /** Stop the follow phase: the stream, the reconnect and deadline timers, and the follow reads in flight. */
  private stopFollowing(): void {
    this.connection?.close();
    this.connection = null;
    if (this.retryTimer !== null) this.ctx.timers.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.deadlineTimer !== null) this.ctx.timers.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.following.abort();
  }

  private finish(settle: () => void): void {
    if (this.settled) return;
    this.settled = true;
    this.decided = true;
    this.stopFollowing();
    this.lifetime.abort();
    this.options.signal?.removeEventListener('abort', this.onAbort);
    this.untrack();
    settle();
  }
}
