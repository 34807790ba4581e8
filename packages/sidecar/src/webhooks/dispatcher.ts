import {
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_RETRY_WINDOW_MS,
  displayWebhookUrl,
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
import { newUlid } from '../util/ids';
import { cursorOf, missedEvents, type OutboxMessage, type OutboxOp, type OutboxState } from './outbox';

/**
 * Delivers the outbox to each webhook endpoint: Standard Webhooks headers signed with the `standardwebhooks`
 * package, in order per transaction and endpoint, retried with exponential backoff and jitter for
 * WEBHOOK_RETRY_WINDOW_MS.
 *
 * Per endpoint, each transaction is a lane: only a lane's oldest owed message is ever in flight, so a receiver
 * sees a transaction's events in order; different transactions go out side by side (up to `concurrency`). A
 * failed lane waits out its own backoff. An endpoint that failed and has not succeeded since gets one request at a
 * time, after its own backoff: a receiver that is down is probed, not flooded with every lane's retry. Nothing here
 * runs on the sidecar's paths: publishing an event only queues a journal commit; a slow or dead receiver costs
 * memory for what it is owed, never time.
 */

export interface WebhookDispatcherOptions {
  urls: string[];
  secret: string;
  journal: Journal<OutboxState, OutboxOp>;
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
  /** How often due retries are looked for. Default 250 ms. */
  tickMs?: number;
  random?: () => number;
  fetch?: typeof fetch;
}

interface Lane {
  /** Message ids owed to this endpoint for this key, oldest first. */
  ids: string[];
  inFlight: boolean;
  failures: number;
  retryAt: number;
}

interface Endpoint {
  url: string;
  display: string;
  lanes: Map<string, Lane>;
  inFlight: number;
  consecutiveFailures: number;
  retryAt: number;
  delivered: number;
  failedAttempts: number;
  expired: number;
  lastError: string | null;
  lastSuccessAt: number | null;
}

const WEBHOOK_TYPES: ReadonlySet<string> = new Set(WEBHOOK_EVENT_TYPES);

export class WebhookDispatcher {
  private readonly endpoints: Endpoint[];
  private readonly signer: Webhook;
  private readonly concurrency: number;
  private readonly timeoutMs: number;
  private readonly retryWindowMs: number;
  private readonly random: () => number;
  private readonly fetch: typeof fetch;
  private readonly timer: NodeJS.Timeout;
  private readonly requests = new Set<AbortController>();
  private closed = false;

  constructor(private readonly o: WebhookDispatcherOptions) {
    this.signer = new Webhook(o.secret);
    this.concurrency = o.concurrency ?? 8;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.retryWindowMs = o.retryWindowMs ?? WEBHOOK_RETRY_WINDOW_MS;
    this.random = o.random ?? Math.random;
    this.fetch = o.fetch ?? fetch;
    this.endpoints = o.urls.map((url) => ({
      url,
      display: displayWebhookUrl(url),
      lanes: new Map(),
      inFlight: 0,
      consecutiveFailures: 0,
      retryAt: 0,
      delivered: 0,
      failedAttempts: 0,
      expired: 0,
      lastError: null,
      lastSuccessAt: null,
    }));
    this.timer = setInterval(() => this.pumpAll(), o.tickMs ?? 250);
    this.timer.unref();
  }

  /**
   * Start-up, before any new event: seed cursors on the first start with webhooks, otherwise add what the store
   * holds beyond them (events a crash kept out of the outbox); drop deliveries owed to endpoints no longer
   * configured; then queue everything owed.
   */
  async recover(records: Iterable<StoredTx>): Promise<{ backfilled: number; unconfigured: number }> {
    const state = this.o.journal.state;
    let backfilled = 0;
    let unconfigured = 0;
    if (!state.initialized) {
      await this.o.journal.commit({
        k: 'init',
        cursors: [...records].map((record) => [record.tx_id, cursorOf(record)]),
      });
    } else {
      const now = this.o.clock.now();
      for (const record of records) {
        for (const event of missedEvents(record, state.cursors.get(record.tx_id), now)) {
          await this.journalAdd(event.type, record.tx_id, event.data, event.ts);
          backfilled++;
        }
      }
    }
    const configured = new Set(this.o.urls);
    for (const message of [...state.messages.values()]) {
      for (const endpoint of message.owed) {
        if (configured.has(endpoint)) continue;
        await this.o.journal.commit({ k: 'done', id: message.id, endpoint, how: 'unconfigured' });
        unconfigured++;
      }
    }
    for (const message of state.messages.values()) this.enqueueInLanes(message);
    this.refreshGauge();
    this.pumpAll();
    return { backfilled, unconfigured };
  }

  /** The hub listener: each webhook event becomes one outbox message owed to every endpoint. */
  onEvent = (event: HubEvent): void => {
    if (this.closed || !WEBHOOK_TYPES.has(event.name)) return;
    const data = event.data as RelayEventMap[WebhookEventType];
    const key = (data as { tx_id: string }).tx_id;
    this.add(event.name as WebhookEventType, key, data, (data as { ts: number }).ts).catch(
      (error: unknown) => {
        // The outbox journal refused the write (disk full, closed): this event is not durable; the store's record
        // still holds it and the next start adds it (reconcile).
        this.o.log.error({ err: error, event: event.name, key }, 'webhook outbox write failed');
      },
    );
  };

  private async add(
    type: WebhookEventType,
    key: string,
    data: RelayEventMap[WebhookEventType],
    ts: number,
  ): Promise<void> {
    const message = await this.journalAdd(type, key, data, ts);
    if (this.closed) return;
    this.enqueueInLanes(message);
    this.refreshGauge();
    this.pumpAll();
  }

  private async journalAdd(
    type: WebhookEventType,
    key: string,
    data: RelayEventMap[WebhookEventType],
    ts: number,
  ): Promise<OutboxMessage> {
    const message: OutboxMessage = {
      id: `msg_${newUlid()}`,
      type,
      ts,
      data,
      key,
      owed: [...this.o.urls],
      queuedAt: this.o.clock.now(),
    };
    await this.o.journal.commit({ k: 'add', m: message });
    return message;
  }

  private enqueueInLanes(message: OutboxMessage): void {
    for (const endpoint of this.endpoints) {
      if (!message.owed.includes(endpoint.url)) continue;
      let lane = endpoint.lanes.get(message.key);
      if (!lane) {
        lane = { ids: [], inFlight: false, failures: 0, retryAt: 0 };
        endpoint.lanes.set(message.key, lane);
      }
      lane.ids.push(message.id);
    }
  }

  private pumpAll(): void {
    if (this.closed) return;
    for (const endpoint of this.endpoints) this.pump(endpoint);
  }

  private pump(endpoint: Endpoint): void {
    const now = this.o.clock.now();
    const probing = endpoint.consecutiveFailures > 0;
    if (probing && now < endpoint.retryAt) return;
    const limit = probing ? 1 : this.concurrency;
    for (const [key, lane] of endpoint.lanes) {
      if (endpoint.inFlight >= limit) return;
      if (lane.inFlight || now < lane.retryAt) continue;
      const message = this.o.journal.state.messages.get(lane.ids[0] as string);
      if (!message || !message.owed.includes(endpoint.url)) {
        // Settled elsewhere (e.g. before a restart): move on to the next one.
        lane.ids.shift();
        if (lane.ids.length === 0) endpoint.lanes.delete(key);
        continue;
      }
      lane.inFlight = true;
      endpoint.inFlight++;
      void this.deliver(endpoint, key, lane, message);
    }
  }

  private async deliver(endpoint: Endpoint, key: string, lane: Lane, message: OutboxMessage): Promise<void> {
    const body = JSON.stringify(webhookPayload(message.type, message.data as never, message.ts));
    const sentAt = new Date(this.o.clock.now());
    const controller = new AbortController();
    const timeout = setTimeout(() => controller.abort(), this.timeoutMs);
    this.requests.add(controller);
    let failure: string | null = null;
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
        signal: controller.signal,
      });
      // Read the body so the connection can be reused; its content is not used.
      await response.arrayBuffer().catch(() => undefined);
      if (!response.ok) failure = `HTTP ${response.status}`;
    } catch (error) {
      failure = controller.signal.aborted
        ? this.closed
          ? 'closed'
          : `no answer within ${this.timeoutMs} ms`
        : ((error as Error).cause as Error | undefined)?.message || (error as Error).message;
    } finally {
      clearTimeout(timeout);
      this.requests.delete(controller);
    }
    if (this.closed) return;
    // The lane stays in flight until its outcome is journaled, so a tick in between cannot send the head again.
    const now = this.o.clock.now();
    if (failure === null) {
      await this.settle(endpoint, key, lane, message, 'delivered');
      endpoint.delivered++;
      endpoint.consecutiveFailures = 0;
      endpoint.lastSuccessAt = now;
      lane.failures = 0;
      lane.retryAt = 0;
      this.o.metrics.webhookDeliveries.inc({ result: 'delivered' });
      this.o.metrics.webhookDeliveryLag.observe(Math.max(0, now - message.ts) / 1000);
    } else {
      endpoint.failedAttempts++;
      endpoint.lastError = failure;
      this.o.metrics.webhookDeliveries.inc({ result: 'failed' });
      if (now - message.queuedAt >= this.retryWindowMs) {
        this.o.log.error(
          { endpoint: endpoint.display, webhook_id: message.id, type: message.type, key, error: failure },
          'webhook delivery given up after the retry window',
        );
        await this.settle(endpoint, key, lane, message, 'expired');
        endpoint.expired++;
        this.o.metrics.webhookDeliveries.inc({ result: 'expired' });
        lane.failures = 0;
        lane.retryAt = 0;
      } else {
        lane.failures++;
        lane.retryAt = now + this.delay(lane.failures);
        if (endpoint.consecutiveFailures === 0) {
          this.o.log.warn(
            { endpoint: endpoint.display, webhook_id: message.id, error: failure },
            'webhook delivery failed; retrying with backoff',
          );
        }
        endpoint.consecutiveFailures++;
        endpoint.retryAt = now + this.delay(endpoint.consecutiveFailures);
      }
    }
    lane.inFlight = false;
    endpoint.inFlight--;
    this.refreshGauge();
    this.pump(endpoint);
  }

  private delay(failures: number): number {
    return webhookRetryDelayMs(failures, this.random(), this.o.retryBaseMs, this.o.retryCapMs);
  }

  private async settle(
    endpoint: Endpoint,
    key: string,
    lane: Lane,
    message: OutboxMessage,
    how: 'delivered' | 'expired',
  ): Promise<void> {
    try {
      await this.o.journal.commit({ k: 'done', id: message.id, endpoint: endpoint.url, how });
    } catch (error) {
      // Not recorded: it will be delivered again after a restart (receivers dedupe on webhook-id).
      this.o.log.error({ err: error, webhook_id: message.id }, 'webhook outbox write failed');
    }
    if (lane.ids[0] === message.id) lane.ids.shift();
    if (lane.ids.length === 0 && endpoint.lanes.get(key) === lane) endpoint.lanes.delete(key);
  }

  private refreshGauge(): void {
    for (const endpoint of this.endpoints) {
      let pending = 0;
      for (const lane of endpoint.lanes.values()) pending += lane.ids.length;
      this.o.metrics.webhookOutboxPending.set({ endpoint: endpoint.display }, pending);
    }
  }

  /** Each endpoint's delivery state, for `GET /status`. */
  status(): WebhookEndpointStatus[] {
    const now = this.o.clock.now();
    return this.endpoints.map((endpoint) => {
      let pending = 0;
      let oldest: number | null = null;
      for (const lane of endpoint.lanes.values()) {
        pending += lane.ids.length;
        const head = this.o.journal.state.messages.get(lane.ids[0] as string);
        if (head && (oldest === null || head.ts < oldest)) oldest = head.ts;
      }
      return {
        url: endpoint.display,
        pending,
        oldest_pending_ms: oldest === null ? null : Math.max(0, now - oldest),
        delivered: endpoint.delivered,
        failed_attempts: endpoint.failedAttempts,
        expired: endpoint.expired,
        consecutive_failures: endpoint.consecutiveFailures,
        last_error: endpoint.lastError,
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
