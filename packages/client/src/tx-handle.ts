import {
  TX_PROGRESS_PATH,
  isRelayError,
  type EnqueueResponse,
  type TxRecord,
  type TxState,
  type TxStatusChangedEvent,
} from '@solrelay/core';
import { ClientClosedError, TxFailedError, WaitTimeoutError } from './errors';
import type { HttpTransport, RelayClientLogger } from './http';
import { reconnectDelay, type TimerHandle, type Timers } from './reconnect';
import { openSse, type SseConnection } from './sse';

/** A state `waitFor()` can wait for: any state on the forward path (`pending` .. `finalized`). */
export type WaitTarget = (typeof TX_PROGRESS_PATH)[number];

export interface WaitForOptions {
  /** Abort the wait; the promise rejects with the signal's reason. The transaction itself is not affected. */
  signal?: AbortSignal;
  /** Give up after this long with a `WaitTimeoutError` (after one last read of the sidecar's truth). */
  timeoutMs?: number;
}

/** A transaction's state as the per-transaction stream reports it (`tx_status_changed`). */
export type TxStatus = TxStatusChangedEvent;

/** What a handle needs of its client. */
export interface TxHandleContext {
  http: HttpTransport;
  timers: Timers;
  logger: RelayClientLogger | undefined;
  /** Registers a cancel function that `close()` calls; returns the function that unregisters it. */
  track(cancel: () => void): () => void;
}

/** The position of a state on the forward path; -1 for `failed` and `expired`, which are off it. */
function progressRank(state: TxState): number {
  return (TX_PROGRESS_PATH as readonly TxState[]).indexOf(state);
}

function isWaitTarget(value: unknown): value is WaitTarget {
  return typeof value === 'string' && progressRank(value as TxState) >= 0;
}

/** The status view of a full record. */
export function statusOfRecord(record: TxRecord): TxStatus {
  return {
    tx_id: record.tx_id,
    state: record.state,
    bundle_id: record.bundle_id,
    tx_signatures:
      record.state === 'pending' || record.state === 'submitted' ? [] : [...record.tx_signatures],
    failure: record.failure,
    ts: record.history[record.history.length - 1]?.ts ?? 0,
  };
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
   * `GET /tx/{tx_id}` and reconnects with backoff, so a landed transaction is never reported as timed out.
   *
   * @example
   * const status = await handle.waitFor('confirmed', { timeoutMs: 60_000 });
   */
  waitFor(target: WaitTarget = 'finalized', options: WaitForOptions = {}): Promise<TxStatus> {
    if (!isWaitTarget(target)) {
      return Promise.reject(new TypeError(`waitFor target must be one of ${TX_PROGRESS_PATH.join(', ')}`));
    }
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    return new Promise<TxStatus>((resolve, reject) =>
      new Wait(this, this.ctx, target, options, resolve, reject).start(),
    );
  }
}

/** One `waitFor()` call: its stream, its reconnect schedule, its deadline. */
class Wait {
  private settled = false;
  private attempt = 0;
  private connection: SseConnection | null = null;
  private retryTimer: TimerHandle | null = null;
  private deadlineTimer: TimerHandle | null = null;
  private lastState: TxState | null = null;
  private untrack: () => void = () => undefined;
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
      record = await this.handle.record();
    } catch (error) {
      if (this.settled) return;
      if (isPermanent(error)) this.finish(() => this.reject(error));
      else this.retryLater(error);
      return;
    }
    if (this.settled || this.observe(statusOfRecord(record), record)) return;
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
          if (!this.settled && status.tx_id === this.handle.tx_id) this.observe(status, null);
        },
        onDrop: (drop) => {
          this.connection = null;
          if (this.settled) return;
          if (drop.status !== null && isPermanent(drop.error)) this.finish(() => this.reject(drop.error));
          else this.retryLater(drop.error);
        },
      },
      this.ctx.logger,
    );
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
      this.finish(() => undefined);
      // The record names the last attempt's outcome, which is what an expiry's class is; read it if the stream
      // was the one that reported the end.
      void (record ? Promise.resolve(record) : this.handle.record().catch(() => null)).then((full) => {
        const lastOutcome = full?.attempts[full.attempts.length - 1]?.outcome ?? null;
        const failure = state === 'failed' ? (status.failure ?? full?.failure ?? lastOutcome) : lastOutcome;
        this.reject(new TxFailedError({ tx_id: this.handle.tx_id, state, failure, record: full }));
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
    if (this.settled) return;
    this.connection?.close();
    this.connection = null;
    if (this.retryTimer !== null) this.ctx.timers.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    let verified = false;
    try {
      const record = await this.handle.record();
      if (this.settled || this.observe(statusOfRecord(record), record)) return;
      verified = true;
    } catch {
      /* unreachable at the deadline: the timeout says the state is unverified */
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

  private finish(settle: () => void): void {
    if (this.settled) return;
    this.settled = true;
    this.connection?.close();
    this.connection = null;
    if (this.retryTimer !== null) this.ctx.timers.clearTimeout(this.retryTimer);
    if (this.deadlineTimer !== null) this.ctx.timers.clearTimeout(this.deadlineTimer);
    this.options.signal?.removeEventListener('abort', this.onAbort);
    this.untrack();
    settle();
  }
}
