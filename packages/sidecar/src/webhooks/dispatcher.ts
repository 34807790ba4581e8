import {
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_RETRY_WINDOW_MS,
  displayWebhookUrl,
  isTerminalTxState,
  webhookMessageId,
  webhookPayload,
  webhookRetryDelayMs,
  type RelayEventMap,
  type WebhookEndpointStatus,
  type WebhookEventType,
} from '@solrelay/core';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import type { HubEvent } from '../events/hub';
import type { Journal } from '../journal/journal';
import type { Metrics } from '../metrics';
import type { Clock } from '../runtime/clock';
import type { StoredTx } from '../store/records';
import { cursorOf, missedEvents, type OutboxMessage, type OutboxOp, type OutboxState } from './outbox';

/**
 * Delivers the outbox to each webhook endpoint: Standard Webhooks headers signed with the `standardwebhooks`
 * package, in order per transaction and endpoint, retried with exponential backoff and jitter for
 * WEBHOOK_RETRY_WINDOW_MS.
 *
 * Per endpoint, each transaction is a lane: only a lane's oldest owed message is ever in flight, so a receiver
 * sees a transaction's events in order; different transactions go out side by side (up to `concurrency`).
 * - A lane whose message the receiver refuses (a 4xx) waits out its own backoff; the endpoint stays healthy.
 * - An endpoint that is down (no answer, a timeout, 5xx, 429, a redirect) gets one request at a time after its own
 *   backoff, so a receiver that is down is probed, not flooded with every lane's retry. When a probe succeeds, the
 *   lanes held back by the outage go again at once.
 * - What passed the retry window is given up on each tick without sending, and an endpoint owed more than
 *   `maxOwed` gives up its oldest: a dead receiver costs bounded memory and disk, never the sidecar's time
 *   (publishing an event only queues a journal commit).
 */

/**
 * Where the messages owed are kept: the dispatcher delivers what `messages` holds and reports each endpoint's end
 * of a message to `done`. The local outbox journal (`journalOutbox`), or the database's `webhook_outbox` rows this
 * host leased (webhooks/pg-outbox.ts), which hand new messages over with `take`.
 */
export interface OutboxPort {
  /**
   * The messages owed, oldest first: in `queuedAt` order (expireOverdue stops at the first one inside the retry
   * window). The journal queues them as they come; the table's port restores that order when rows arrive out of it.
   */
  readonly messages: ReadonlyMap<string, OutboxMessage>;
  /** The endpoint took the message, or it was given up there: no longer owed to it. */
  done(message: OutboxMessage, endpoint: string, how: 'delivered' | 'expired'): Promise<void>;
  /** A delivery of the message to the endpoint failed (kept for the operator where the port can). */
  failed?(message: OutboxMessage, endpoint: string, reason: string): void;
}

/** The local outbox journal as the dispatcher's port. */
export function journalOutbox(journal: Journal<OutboxState, OutboxOp>): OutboxPort {
  return {
    get messages() {
      return journal.state.messages;
    },
    done: async (message, endpoint, how) => {
      await journal.commit({ k: 'done', id: message.id, endpoint, how });
    },
  };
}

export interface WebhookDispatcherOptions {
  urls: string[];
  secret: string;
  /** The local outbox (the journal store): events come from the hub (`onEvent`), a start backfills (`recover`). */
  journal?: Journal<OutboxState, OutboxOp>;
  /** Any other outbox (the database's rows): messages come from it (`take`). One of `journal` and `outbox`. */
  outbox?: OutboxPort;
  metrics: Metrics;
  log: Logger;
  clock: Clock;
  /** Requests in flight per endpoint while it is healthy. Default 8. */
  concurrency?: number;
  /** Per-request timeout. Default 10 s. */
  timeoutMs?: number;
  /** Backoff base and cap (tests shorten them); defaults from core. */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** The retry window (default WEBHOOK_RETRY_WINDOW_MS). */
  retryWindowMs?: number;
  /** Deliveries one endpoint may be owed; past it the oldest are given up. Default 100,000. */
  maxOwed?: number;
  /** How often due retries and expired deliveries are looked for. Default 250 ms. */
  tickMs?: number;
  random?: () => number;
  fetch?: typeof fetch;
  /** Crash tests: `webhook.before-outbox` fires after an event is published, before its outbox write. */
  crashPoint?: (name: string) => void;
}

interface Lane {
  /** Message ids owed to this endpoint for this key, oldest first. */
  ids: string[];
  inFlight: boolean;
  failures: number;
  retryAt: number;
  /** The last failure was the endpoint's (down), not this message's: a successful probe releases the lane. */
  heldByOutage: boolean;
}

interface Endpoint {
  url: string;
  display: string;
  lanes: Map<string, Lane>;
  /** Deliveries owed (in lanes). */
  owed: number;
  inFlight: number;
  consecutiveFailures: number;
  retryAt: number;
  delivered: number;
  failedAttempts: number;
  expired: number;
  lastError: string | null;
  lastSuccessAt: number | null;
}

type Outcome = { ok: true } | { ok: false; reason: string; endpointDown: boolean };

const WEBHOOK_TYPES: ReadonlySet<string> = new Set(WEBHOOK_EVENT_TYPES);

export class WebhookDispatcher {
  private readonly port: OutboxPort;
  private readonly endpoints: Endpoint[];
  private readonly signer: Webhook;
  private readonly concurrency: number;
  private readonly timeoutMs: number;
  private readonly retryWindowMs: number;
  private readonly maxOwed: number;
  private readonly random: () => number;
  private readonly fetch: typeof fetch;
  private readonly timer: NodeJS.Timeout;
  private readonly requests = new Set<AbortController>();
  /** The next status index per live transaction (its history position), for deterministic webhook ids. */
  private readonly nextStatus = new Map<string, number>();
  /** Set once the outbox journal refused a write: events are no longer durable (the next start backfills). */
  private outboxError: string | null = null;
  private closed = false;

  constructor(private readonly o: WebhookDispatcherOptions) {
    const port = o.outbox ?? (o.journal ? journalOutbox(o.journal) : null);
    if (!port) throw new Error('a webhook dispatcher needs an outbox (journal or port)');
    this.port = port;
    this.signer = new Webhook(o.secret);
    this.concurrency = o.concurrency ?? 8;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.retryWindowMs = o.retryWindowMs ?? WEBHOOK_RETRY_WINDOW_MS;
    this.maxOwed = o.maxOwed ?? 100_000;
    this.random = o.random ?? Math.random;
    this.fetch = o.fetch ?? fetch;
    this.endpoints = o.urls.map((url) => ({
      url,
      display: displayWebhookUrl(url),
      lanes: new Map(),
      owed: 0,
      inFlight: 0,
      consecutiveFailures: 0,
      retryAt: 0,
      delivered: 0,
      failedAttempts: 0,
      expired: 0,
      lastError: null,
      lastSuccessAt: null,
    }));
    this.timer = setInterval(() => this.tick(), o.tickMs ?? 250);
    this.timer.unref();
  }

  /**
   * Start-up, before any new event: seed cursors on the first start with webhooks, otherwise add what the store
   * holds beyond them (events a crash or a close kept out of the outbox); drop deliveries owed to endpoints no
   * longer configured; then queue everything owed. Commits are issued together (one group commit, in order).
   */
  async recover(records: Iterable<StoredTx>): Promise<{ backfilled: number; unconfigured: number }> {
    const journal = this.journal();
    const state = journal.state;
    const commits: Promise<unknown>[] = [];
    let backfilled = 0;
    let unconfigured = 0;
    if (!state.initialized) {
      commits.push(
        journal.commit({
          k: 'init',
          cursors: [...records].map((record) => [record.tx_id, cursorOf(record)]),
        }),
      );
    } else {
      const now = this.o.clock.now();
      for (const record of records) {
        for (const event of missedEvents(record, state.cursors.get(record.tx_id), now)) {
          commits.push(this.journalAdd(event.type, record.tx_id, event.data, event.ts, event.id));
          backfilled++;
        }
      }
    }
    const configured = new Set(this.o.urls);
    for (const message of [...state.messages.values()]) {
      for (const endpoint of message.owed) {
        if (configured.has(endpoint)) continue;
        commits.push(journal.commit({ k: 'done', id: message.id, endpoint, how: 'unconfigured' }));
        unconfigured++;
      }
    }
    await Promise.all(commits);
    if (unconfigured > 0) {
      this.o.log.warn(
        { dropped: unconfigured },
        'webhooks: deliveries owed to endpoints no longer in RELAY_WEBHOOK_URL were dropped',
      );
    }
    for (const message of state.messages.values()) this.enqueueInLanes(message);
    this.tick();
    return { backfilled, unconfigured };
  }

  /** The hub listener: each webhook event becomes one outbox message owed to every endpoint. */
  onEvent = (event: HubEvent): void => {
    if (this.closed || !WEBHOOK_TYPES.has(event.name)) return;
    const type = event.name as WebhookEventType;
    const data = event.data as RelayEventMap[WebhookEventType];
    const key = (data as { tx_id: string }).tx_id;
    const id = this.liveMessageId(type, key, data);
    // The crash window the start-up backfill covers: the store holds the event, the outbox does not yet.
    this.o.crashPoint?.('webhook.before-outbox');
    this.journalAdd(type, key, data, (data as { ts: number }).ts, id).then(
      (message) => {
        if (this.closed) return;
        this.enqueueInLanes(message);
        this.pumpAll();
      },
      (error: unknown) => {
        // Not durable: the outbox journal refuses writes from now on (disk full, I/O error). The store's records
        // still hold every event and the next start adds them; until then /status and the metric say so.
        this.outboxError = `outbox write failed: ${(error as Error).message}`;
        this.o.metrics.webhookOutboxWriteFailures.inc();
        this.o.log.error({ err: error, event: type, key }, 'webhook outbox write failed');
      },
    );
  };

  /** The id of a live event, the same as a backfill of it would get (so receivers dedupe either way). */
  private liveMessageId(type: WebhookEventType, key: string, data: RelayEventMap[WebhookEventType]): string {
    if (type === 'bundle_settled') {
      const settled = data as RelayEventMap['bundle_settled'];
      return webhookMessageId({
        kind: 'settled',
        txId: key,
        bundleId: settled.bundle_id,
        stage: settled.stage,
      });
    }
    const index = this.nextStatus.get(key) ?? this.journal().state.cursors.get(key)?.statuses ?? 0;
    if (isTerminalTxState((data as RelayEventMap['tx_status_changed']).state)) this.nextStatus.delete(key);
    else this.nextStatus.set(key, index + 1);
    return webhookMessageId({ kind: 'status', txId: key, index });
  }

  private async journalAdd(
    type: WebhookEventType,
    key: string,
    data: RelayEventMap[WebhookEventType],
    ts: number,
    id: string,
  ): Promise<OutboxMessage> {
    const message: OutboxMessage = {
      id,
      type,
      ts,
      data,
      key,
      owed: [...this.o.urls],
      queuedAt: this.o.clock.now(),
    };
    await this.journal().commit({ k: 'add', m: message });
    return message;
  }

  private journal(): Journal<OutboxState, OutboxOp> {
    if (!this.o.journal) throw new Error("recover and onEvent are the local outbox journal's");
    return this.o.journal;
  }

  /** Messages the port now holds, owed to `endpoints` (default: every one it owes): queued in their lanes. */
  take(messages: Iterable<{ message: OutboxMessage; endpoints?: readonly string[] }>): void {
    if (this.closed) return;
    for (const { message, endpoints } of messages) this.enqueueInLanes(message, endpoints);
    this.pumpAll();
  }

  private enqueueInLanes(message: OutboxMessage, only?: readonly string[]): void {
    for (const endpoint of this.endpoints) {
      if (!message.owed.includes(endpoint.url) || (only && !only.includes(endpoint.url))) continue;
      let lane = endpoint.lanes.get(message.key);
      if (!lane) {
        lane = { ids: [], inFlight: false, failures: 0, retryAt: 0, heldByOutage: false };
        endpoint.lanes.set(message.key, lane);
      }
      lane.ids.push(message.id);
      endpoint.owed++;
      if (endpoint.owed > this.maxOwed) this.giveUpOldest(endpoint, 'the endpoint is owed more than its cap');
    }
  }

  private tick(): void {
    if (this.closed) return;
    const now = this.o.clock.now();
    for (const endpoint of this.endpoints) {
      this.expireOverdue(endpoint, now);
      this.pump(endpoint);
      const oldest = this.oldestOwed(endpoint);
      this.o.metrics.webhookOutboxPending.set({ endpoint: endpoint.display }, endpoint.owed);
      this.o.metrics.webhookOldestPending.set(
        { endpoint: endpoint.display },
        oldest ? Math.max(0, now - oldest.ts) / 1000 : 0,
      );
    }
  }

  private pumpAll(): void {
    if (this.closed) return;
    for (const endpoint of this.endpoints) this.pump(endpoint);
  }

  /** Messages are kept in queue order, so the oldest owed to an endpoint is near the front. */
  private oldestOwed(endpoint: Endpoint, skipInFlight = false): OutboxMessage | null {
    for (const message of this.port.messages.values()) {
      if (this.owes(endpoint, message) && !(skipInFlight && this.inFlightHead(endpoint, message)))
        return message;
    }
    return null;
  }

  /** Still owed here: in a lane (a delivered or given-up message leaves its lane before its `done` applies). */
  private owes(endpoint: Endpoint, message: OutboxMessage): boolean {
    return message.owed.includes(endpoint.url) && !!endpoint.lanes.get(message.key)?.ids.includes(message.id);
  }

  private inFlightHead(endpoint: Endpoint, message: OutboxMessage): boolean {
    const lane = endpoint.lanes.get(message.key);
    return !!lane?.inFlight && lane.ids[0] === message.id;
  }

  /**
   * Give up, without sending, what passed the retry window (a request in flight decides its own). One pass in
   * queue order, which is the order of `queuedAt` (the port keeps it so): it stops at the first message still inside
   * the window.
   */
  private expireOverdue(endpoint: Endpoint, now: number): void {
    for (const message of this.port.messages.values()) {
      if (now - message.queuedAt < this.retryWindowMs) return;
      if (this.owes(endpoint, message) && !this.inFlightHead(endpoint, message))
        this.giveUp(endpoint, message, 'the retry window passed');
    }
  }

  private giveUpOldest(endpoint: Endpoint, why: string): void {
    const oldest = this.oldestOwed(endpoint, true);
    if (oldest) this.giveUp(endpoint, oldest, why);
  }

  private giveUp(endpoint: Endpoint, message: OutboxMessage, why: string): void {
    this.o.log.error(
      { endpoint: endpoint.display, webhook_id: message.id, type: message.type, key: message.key, why },
      'webhook delivery given up',
    );
    endpoint.expired++;
    this.o.metrics.webhookDeliveries.inc({ endpoint: endpoint.display, result: 'expired' });
    this.removeFromLane(endpoint, message);
    void this.record(message, endpoint, 'expired');
  }

  private removeFromLane(endpoint: Endpoint, message: OutboxMessage): void {
    const lane = endpoint.lanes.get(message.key);
    if (!lane) return;
    const at = lane.ids.indexOf(message.id);
    if (at < 0) return;
    lane.ids.splice(at, 1);
    endpoint.owed--;
    if (lane.ids.length === 0 && !lane.inFlight) endpoint.lanes.delete(message.key);
  }

  private pump(endpoint: Endpoint): void {
    const now = this.o.clock.now();
    const probing = endpoint.consecutiveFailures > 0;
    if (probing && now < endpoint.retryAt) return;
    const limit = probing ? 1 : this.concurrency;
    for (const lane of endpoint.lanes.values()) {
      if (endpoint.inFlight >= limit) return;
      if (lane.inFlight || now < lane.retryAt) continue;
      // A lane not in flight is never empty, and holds only owed messages (see `removeFromLane`).
      const message = this.port.messages.get(lane.ids[0] as string) as OutboxMessage;
      lane.inFlight = true;
      endpoint.inFlight++;
      void this.deliver(endpoint, lane, message);
    }
  }

  private async send(endpoint: Endpoint, message: OutboxMessage): Promise<Outcome> {
    const body = JSON.stringify(webhookPayload(message.type, message.data as never, message.ts));
    const sentAt = new Date(this.o.clock.now());
    const controller = new AbortController();
    const timeout = setTimeout(() => controller.abort(), this.timeoutMs);
    this.requests.add(controller);
    try {
      const response = await this.fetch(endpoint.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'relay-webhooks/1',
          'webhook-id': message.id,
          'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
          'webhook-signature': this.signer.sign(message.id, sentAt, body),
        },
        body,
        // A redirect is not followed: the signed body goes only where the operator said.
        redirect: 'manual',
        signal: controller.signal,
      });
      // The answer's body is not used; dropping it frees the connection without reading an unbounded body.
      await response.body?.cancel().catch(() => undefined);
      if (response.ok) return { ok: true };
      const status = response.status;
      // A 4xx other than 408/429 refuses this message; anything else says the endpoint is not taking deliveries.
      const refusesMessage = status >= 400 && status < 500 && status !== 408 && status !== 429;
      return { ok: false, reason: `HTTP ${status}`, endpointDown: !refusesMessage };
    } catch (error) {
      // Never the URL itself in the reason (it may carry a token): the cause's code and message name the problem.
      const cause = (error as Error).cause as (Error & { code?: string }) | undefined;
      const reason = controller.signal.aborted
        ? `no answer within ${this.timeoutMs} ms`
        : (cause?.code ?? cause?.message ?? (error as Error).name);
      return { ok: false, reason, endpointDown: true };
    } finally {
      clearTimeout(timeout);
      this.requests.delete(controller);
    }
  }

  private async deliver(endpoint: Endpoint, lane: Lane, message: OutboxMessage): Promise<void> {
    const outcome = await this.send(endpoint, message);
    if (this.closed) return;
    // The lane stays in flight until its outcome is applied, so a tick in between cannot send the head again.
    const now = this.o.clock.now();
    if (outcome.ok) {
      endpoint.delivered++;
      endpoint.lastSuccessAt = now;
      lane.failures = 0;
      lane.retryAt = 0;
      lane.heldByOutage = false;
      if (endpoint.consecutiveFailures > 0) {
        endpoint.consecutiveFailures = 0;
        // The endpoint is back: what its outage held back goes now, not at each lane's own backoff.
        for (const other of endpoint.lanes.values()) {
          if (other.heldByOutage) {
            other.retryAt = 0;
            other.heldByOutage = false;
          }
        }
      }
      this.o.metrics.webhookDeliveries.inc({ endpoint: endpoint.display, result: 'delivered' });
      this.o.metrics.webhookDeliveryLag.observe(Math.max(0, now - message.ts) / 1000);
      this.removeFromLane(endpoint, message);
      await this.record(message, endpoint, 'delivered');
    } else if (now - message.queuedAt >= this.retryWindowMs) {
      endpoint.lastError = outcome.reason;
      this.giveUp(endpoint, message, `the retry window passed (last: ${outcome.reason})`);
    } else {
      endpoint.failedAttempts++;
      endpoint.lastError = outcome.reason;
      this.port.failed?.(message, endpoint.url, outcome.reason);
      this.o.metrics.webhookDeliveries.inc({ endpoint: endpoint.display, result: 'failed' });
      lane.failures++;
      lane.retryAt = now + this.delay(lane.failures);
      lane.heldByOutage = outcome.endpointDown;
      if (outcome.endpointDown) {
        if (endpoint.consecutiveFailures === 0) {
          this.o.log.warn(
            { endpoint: endpoint.display, webhook_id: message.id, error: outcome.reason },
            'webhook endpoint not taking deliveries; retrying with backoff',
          );
        }
        endpoint.consecutiveFailures++;
        endpoint.retryAt = now + this.delay(endpoint.consecutiveFailures);
      } else {
        this.o.log.warn(
          { endpoint: endpoint.display, webhook_id: message.id, error: outcome.reason },
          'webhook endpoint refused a delivery; retrying it with backoff',
        );
      }
    }
    lane.inFlight = false;
    endpoint.inFlight--;
    if (lane.ids.length === 0 && endpoint.lanes.get(message.key) === lane) endpoint.lanes.delete(message.key);
    this.pump(endpoint);
  }

  private delay(failures: number): number {
    return webhookRetryDelayMs(failures, this.random(), this.o.retryBaseMs, this.o.retryCapMs);
  }

  private async record(
    message: OutboxMessage,
    endpoint: Endpoint,
    how: 'delivered' | 'expired',
  ): Promise<void> {
    try {
      await this.port.done(message, endpoint.url, how);
    } catch (error) {
      // Not recorded: it will be delivered again after a restart (receivers dedupe on webhook-id).
      this.outboxError = `outbox write failed: ${(error as Error).message}`;
      this.o.log.error({ err: error, webhook_id: message.id }, 'webhook outbox write failed');
    }
  }

  /** Each endpoint's delivery state, for `GET /status`. */
  status(): WebhookEndpointStatus[] {
    const now = this.o.clock.now();
    return this.endpoints.map((endpoint) => {
      const oldest = endpoint.owed > 0 ? this.oldestOwed(endpoint) : null;
      return {
        url: endpoint.display,
        pending: endpoint.owed,
        oldest_pending_ms: oldest ? Math.max(0, now - oldest.ts) : null,
        delivered: endpoint.delivered,
        failed_attempts: endpoint.failedAttempts,
        expired: endpoint.expired,
        consecutive_failures: endpoint.consecutiveFailures,
        last_error: this.outboxError ?? endpoint.lastError,
        last_success_at: endpoint.lastSuccessAt,
      };
    });
  }

  /** Stop delivering (in-flight requests are aborted; what they carried stays owed). */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const controller of this.requests) controller.abort();
  }
}
