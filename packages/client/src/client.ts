import type {
  AgentInfo,
  BundleResponse,
  DecisionMode,
  EnqueueRequestBody,
  EnqueueResponse,
  LifecycleListResponse,
  ModeResponse,
  PolicyView,
  QueueResponse,
  RelayError,
  RelayEvent,
  RelayEventName,
  StatusResponse,
  SubmitRequest,
  SubmitResponse,
  TipResponse,
  TxEncoding,
  TxRecord,
} from '@solrelay/core';
import { RELAY_EVENT_NAMES } from '@solrelay/core/wire';
import { ClientClosedError, EventsOverflowError } from './errors';
import { encodeTransactions, type TransactionInput } from './encoding';
import {
  EventStream,
  type ConnectionState,
  type Handler,
  type RelayClientEventMap,
  type RelayClientEventName,
} from './event-stream';
import { HttpTransport, type FetchFunction, type RelayClientLogger } from './http';
import { globalTimers, type Timers } from './reconnect';
import { TxHandle, type TxHandleContext } from './tx-handle';

export interface RelayClientOptions {
  /** The sidecar's address, e.g. `http://127.0.0.1:7777`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` on every request and stream (the sidecar's `RELAY_API_TOKEN`). */
  token?: string;
  /** The fetch to use; defaults to `globalThis.fetch`. */
  fetch?: FetchFunction;
  logger?: RelayClientLogger;
  /** Timer functions for reconnect waits and `waitFor` deadlines; injectable for fake-timer tests. */
  timers?: Timers;
  /**
   * The bound on each read of `GET /tx/{id}` that `waitFor()` makes while it follows a transaction (default
   * `WAIT_READ_TIMEOUT_MS`, 10 s). A read that takes longer counts as a lost connection: it is retried with backoff.
   */
  waitReadTimeoutMs?: number;
  /**
   * Which events the `/internal/events` stream carries when the sidecar is one of a fleet (several sidecars on one
   * database): `fleet` (the default) every host's, `host` only what this sidecar's own commits wrote (its
   * transactions and what it adopted) and its own news: what an agent deciding for this sidecar follows. A sidecar
   * alone sends the same either way.
   */
  eventScope?: 'fleet' | 'host';
}

/** The default of `RelayClientOptions.waitReadTimeoutMs`. */
export const WAIT_READ_TIMEOUT_MS = 10_000;

/** The default of `EventsOptions.highWaterMark`. */
export const EVENTS_HIGH_WATER_MARK = 10_000;

/** Options of `enqueue()`: the enqueue body's fields other than the transactions. */
export interface EnqueueOptions extends Omit<
  EnqueueRequestBody,
  'transactions' | 'transaction' | 'encoding'
> {
  /** How string inputs are encoded; guessed per string when omitted (see `detectEncoding`). */
  encoding?: TxEncoding;
  signal?: AbortSignal;
}

/** `submit()` input: `POST /internal/submit`'s body. */
export type SubmitInput = Omit<SubmitRequest, 'trace' | 'escalated'> &
  Partial<Pick<SubmitRequest, 'trace' | 'escalated'>>;

/** Options of `events()`. */
export interface EventsOptions<K extends RelayEventName> {
  /** Only these events (default: every sidecar event). */
  names?: readonly K[];
  /** Ends the iteration. */
  signal?: AbortSignal;
  /**
   * The most events buffered for a reader that falls behind (default `EVENTS_HIGH_WATER_MARK`, 10,000). One more
   * ends the iterator: the buffered events are still delivered, then `next()` rejects with `EventsOverflowError`.
   */
  highWaterMark?: number;
}

/**
 * relay's client: HTTP calls with typed errors, `enqueue()` → `TxHandle.waitFor()`, and one persistent,
 * resumable SSE connection to `GET /internal/events` opened on the first subscription.
 *
 * @example
 * const relay = new RelayClient({ baseUrl: 'http://127.0.0.1:7777' });
 * const handle = await relay.enqueue(signedTransaction);
 * await handle.waitFor('confirmed');
 */
export class RelayClient {
  private readonly http: HttpTransport;
  private readonly stream: EventStream;
  /**
   * Per event: each handler that is called, mapped to the handler the caller passed (itself for `on()`, the
   * caller's function for a `once()` wrapper), so `off(event, handler)` finds `once()` registrations too.
   */
  private readonly handlers = new Map<RelayClientEventName, Map<Handler<never>, Handler<never>>>();
  private readonly cancels = new Set<() => void>();
  private readonly handleContext: TxHandleContext;
  private closed = false;
  private readonly logger: RelayClientLogger | undefined;

  constructor(options: RelayClientOptions) {
    if (!options.baseUrl) throw new TypeError('RelayClient needs a baseUrl');
    const fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.logger = options.logger;
    const readTimeoutMs = options.waitReadTimeoutMs ?? WAIT_READ_TIMEOUT_MS;
    if (!(readTimeoutMs > 0) || !Number.isFinite(readTimeoutMs)) {
      throw new TypeError(`waitReadTimeoutMs must be a positive number of ms (got ${readTimeoutMs})`);
    }
    this.http = new HttpTransport({
      baseUrl: options.baseUrl,
      token: options.token,
      fetch: fetchImpl,
      isClosed: () => this.closed,
    });
    const timers = options.timers ?? globalTimers;
    this.stream = new EventStream(
      this.http,
      timers,
      options.logger,
      (name, data) => this.dispatch(name, data),
      options.eventScope === 'host' ? '/internal/events?scope=host' : '/internal/events',
    );
    this.handleContext = {
      http: this.http,
      timers,
      logger: options.logger,
      readTimeoutMs,
      isClosed: () => this.closed,
      track: (cancel) => {
        // A handle made before close() must not start anything after it: cancel (reject) right away.
        if (this.closed) {
          cancel();
          return () => undefined;
        }
        this.cancels.add(cancel);
        return () => this.cancels.delete(cancel);
      },
    };
  }

  // ------------------------------------------------------------------ events

  /**
   * Subscribe to an event of the global stream (opening it on the first subscription). Returns the unsubscribe
   * function.
   *
   * @example
   * const off = relay.on('tx_status_changed', (e) => console.log(e.tx_id, e.state));
   */
  on<K extends RelayClientEventName>(
    event: K,
    handler: Handler<RelayClientEventMap[K]>,
    options: { signal?: AbortSignal } = {},
  ): () => void {
    return this.subscribe(event, handler as Handler<never>, handler as Handler<never>, options.signal);
  }

  /** Like `on()`, for the next occurrence only. */
  once<K extends RelayClientEventName>(
    event: K,
    handler: Handler<RelayClientEventMap[K]>,
    options: { signal?: AbortSignal } = {},
  ): () => void {
    const wrapper: Handler<RelayClientEventMap[K]> = (data) => {
      unsubscribe();
      handler(data);
    };
    const unsubscribe = this.subscribe(
      event,
      wrapper as Handler<never>,
      handler as Handler<never>,
      options.signal,
    );
    return unsubscribe;
  }

  /** Remove a handler added with `on()` or `once()` (every registration of it for this event). */
  off<K extends RelayClientEventName>(event: K, handler: Handler<RelayClientEventMap[K]>): void {
    const registered = this.handlers.get(event);
    if (!registered) return;
    for (const [called, original] of [...registered]) {
      if (called === handler || original === handler) registered.delete(called);
    }
  }

  /** Register `called` for `event` on behalf of the caller's `original`; returns the unsubscribe function. */
  private subscribe(
    event: RelayClientEventName,
    called: Handler<never>,
    original: Handler<never>,
    signal: AbortSignal | undefined,
  ): () => void {
    this.assertOpen();
    let registered = this.handlers.get(event);
    if (!registered) this.handlers.set(event, (registered = new Map()));
    registered.set(called, original);
    const unsubscribe = () => {
      this.handlers.get(event)?.delete(called);
      // Without this a long-lived signal would keep the handler (and this client) reachable after unsubscribing.
      signal?.removeEventListener('abort', unsubscribe);
    };
    if (signal) {
      if (signal.aborted) unsubscribe();
      else signal.addEventListener('abort', unsubscribe, { once: true });
    }
    this.stream.start();
    return unsubscribe;
  }

  /**
   * Every sidecar event (or the named ones) as an async iterator of `{ event, data }`. Events are buffered
   * between reads, up to `highWaterMark` (default 10,000): a reader that falls further behind gets the buffered
   * events, then an `EventsOverflowError`, and the iterator ends (re-read state before iterating again). Several
   * `next()` calls may be pending at once; they resolve in call order. Breaking out of the loop, the signal, or
   * `close()` ends it.
   *
   * @example
   * for await (const { event, data } of relay.events({ names: ['tx_status_changed'] })) console.log(event, data);
   */
  events<K extends RelayEventName = RelayEventName>(
    options: EventsOptions<K> = {},
  ): AsyncIterableIterator<Extract<RelayEvent, { event: K }>> {
    type Item = Extract<RelayEvent, { event: K }>;
    const names = (options.names ?? RELAY_EVENT_NAMES) as readonly K[];
    const highWaterMark = options.highWaterMark ?? EVENTS_HIGH_WATER_MARK;
    if (!Number.isInteger(highWaterMark) || highWaterMark < 1) {
      throw new RangeError(`events() highWaterMark must be a positive integer (got ${highWaterMark})`);
    }
    const buffer: Item[] = [];
    // Pending next() calls, oldest first. Only ever non-empty while the buffer is empty.
    const waiters: Array<(result: IteratorResult<Item, undefined>) => void> = [];
    let done = false;
    let overflow: EventsOverflowError | null = null;
    const offs: Array<() => void> = [];
    const finish = () => {
      if (done) return;
      done = true;
      for (const off of offs) off();
      this.cancels.delete(finish);
      options.signal?.removeEventListener('abort', finish);
      for (const waiter of waiters.splice(0)) waiter({ value: undefined, done: true });
    };
    const deliver = (item: Item) => {
      if (done) return;
      const waiter = waiters.shift();
      if (waiter) waiter({ value: item, done: false });
      else if (buffer.length < highWaterMark) buffer.push(item);
      else {
        overflow = new EventsOverflowError(highWaterMark);
        this.logger?.warn?.(
          { high_water_mark: highWaterMark },
          'relay client: events() reader fell behind; ended',
        );
        finish();
      }
    };
    for (const name of names) offs.push(this.on(name, (data) => deliver({ event: name, data } as Item)));
    this.cancels.add(finish);
    if (options.signal?.aborted) finish();
    else options.signal?.addEventListener('abort', finish, { once: true });
    const iterator: AsyncIterableIterator<Item> = {
      next: () => {
        const item = buffer.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (overflow) {
          const error = overflow;
          overflow = null;
          return Promise.reject(error);
        }
        if (done) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => waiters.push(resolve));
      },
      return: async () => {
        finish();
        buffer.length = 0;
        overflow = null;
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** The global stream's connection state (`idle` until the first subscription). */
  get connectionState(): ConnectionState {
    return this.stream.connectionState;
  }

  /**
   * The id of the last event received on the global stream (`<bootId>-<seq>`, see `parseSseEventId`; on a sidecar on
   * PostgreSQL the event cursor `<xid>.<id>`, see `parseEventCursor`).
   */
  get lastEventId(): string | null {
    return this.stream.lastEventId;
  }

  /** The error that stopped (401) or last interrupted the global stream, if any. */
  get streamError(): RelayError | null {
    return this.stream.error;
  }

  /** Close the stream, stop reconnecting, end `events()` iterators and reject pending `waitFor()`s. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stream.close();
    for (const cancel of [...this.cancels]) cancel();
    this.cancels.clear();
    this.handlers.clear();
  }

  // ------------------------------------------------------------------ transactions

  /**
   * Enqueue 1 to 4 signed transactions that land together (`POST /tx/enqueue`). Accepts web3.js
   * `Transaction` / `VersionedTransaction` objects, @solana/kit `Transaction` objects (`{ messageBytes, signatures }`),
   * wire bytes, or base64 / base58 strings.
   *
   * @example
   * const handle = await relay.enqueue([tx1, tx2], { priority: 'high' });
   */
  async enqueue(
    input: TransactionInput | readonly TransactionInput[],
    options: EnqueueOptions = {},
  ): Promise<TxHandle> {
    this.assertOpen();
    const list: readonly TransactionInput[] = Array.isArray(input) ? input : [input as TransactionInput];
    const { encoding: stringEncoding, signal, ...rest } = options;
    const { transactions, encoding } = encodeTransactions(list, stringEncoding);
    const body: EnqueueRequestBody = { ...rest, transactions, encoding };
    const response = await this.enqueueRaw(body, signal);
    return new TxHandle(this.handleContext, response);
  }

  /** `POST /tx/enqueue` with a body as is; `created` says 202 (new) or 200 (an idempotent repeat). */
  private async enqueueRaw(
    body: EnqueueRequestBody,
    signal?: AbortSignal,
  ): Promise<EnqueueResponse & { created: boolean }> {
    const { status, body: response } = await this.http.request<EnqueueResponse>(
      'POST',
      '/tx/enqueue',
      body,
      signal,
    );
    return { ...response, created: status === 202 };
  }

  /** A handle for a transaction enqueued earlier (for example by another process). */
  handle(txId: string): TxHandle {
    this.assertOpen();
    return new TxHandle(this.handleContext, { tx_id: txId });
  }

  /** `GET /tx/{tx_id}`: the full record. */
  tx(txId: string, signal?: AbortSignal): Promise<TxRecord> {
    return this.http.get(`/tx/${encodeURIComponent(txId)}`, signal);
  }

  /**
   * Ask for an attempt at a tip (`POST /internal/submit`, emits `submit_requested`). The sidecar checks it against
   * the policy: a 422 names the broken key; a 409 means the transaction is not pending.
   */
  submit(input: SubmitInput, signal?: AbortSignal): Promise<SubmitResponse> {
    return this.http.post('/internal/submit', input, signal);
  }

  // ------------------------------------------------------------------ views

  /** `GET /status`. */
  status(signal?: AbortSignal): Promise<StatusResponse> {
    return this.http.get('/status', signal);
  }

  /** `GET /tip`: the tip floor in lamports. */
  tip(signal?: AbortSignal): Promise<TipResponse> {
    return this.http.get('/tip', signal);
  }

  /** `GET /queue`. */
  queue(signal?: AbortSignal): Promise<QueueResponse> {
    return this.http.get('/queue', signal);
  }

  /** `GET /lifecycle?last=N` (default 10), most recent last. */
  lifecycle(options: { last?: number; signal?: AbortSignal } = {}): Promise<LifecycleListResponse> {
    const query = options.last === undefined ? '' : `?last=${encodeURIComponent(String(options.last))}`;
    return this.http.get(`/lifecycle${query}`, options.signal);
  }

  /** `GET /bundle/{bundle_id}`: one full lifecycle entry. */
  bundle(bundleId: string, signal?: AbortSignal): Promise<BundleResponse> {
    return this.http.get(`/bundle/${encodeURIComponent(bundleId)}`, signal);
  }

  /** `GET /policy`. */
  policy(signal?: AbortSignal): Promise<PolicyView> {
    return this.http.get('/policy', signal);
  }

  /** `GET /internal/mode`. */
  mode(signal?: AbortSignal): Promise<ModeResponse> {
    return this.http.get('/internal/mode', signal);
  }

  /** `POST /internal/mode`: switch the decision tier at run time. */
  setMode(decisionMode: DecisionMode, signal?: AbortSignal): Promise<ModeResponse> {
    return this.http.post('/internal/mode', { decision_mode: decisionMode }, signal);
  }

  /** `GET /internal/agent/info`; rejects with `RELAY_E_AGENT_NOT_CONNECTED` when no agent is connected. */
  agentInfo(signal?: AbortSignal): Promise<AgentInfo> {
    return this.http.get('/internal/agent/info', signal);
  }

  // ------------------------------------------------------------------ internals

  private dispatch<K extends RelayClientEventName>(name: K, data: RelayClientEventMap[K]): void {
    const set = this.handlers.get(name);
    if (!set) return;
    for (const handler of [...set.keys()]) {
      try {
        (handler as Handler<RelayClientEventMap[K]>)(data);
      } catch (error) {
        // One throwing handler must not starve the others or kill the stream.
        this.logger?.error?.({ err: error, event: name }, 'relay client: an event handler threw');
      }
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new ClientClosedError();
  }
}
