import type { WebhookEventType } from '@solrelay/core';
import type pg from 'pg';
import { SingleFlight } from '../util/single-flight';
import type { OutboxPort } from './dispatcher';
import type { OutboxMessage } from './outbox';

/**
 * The webhook outbox on PostgreSQL: the `webhook_outbox` rows each change inserted with its events (one per endpoint
 * per webhook event), delivered by leasing them. This host leases the oldest owed rows of its endpoints (at most
 * `batch` held at once), renews its leases while it holds them, and marks each row done when the dispatcher is done
 * with it (delivered or given up). A host that stops releases what it held; one that dies lets its leases run out,
 * and whoever leases the rows next delivers them again (at least once; the `webhook-id` lets receivers dedupe). So a
 * sidecar started on an empty data directory still delivers everything owed.
 */

export interface PgWebhookOutboxOptions {
  /** The configured endpoints (`RELAY_WEBHOOK_URL`): rows owed to others are left, or ended at start. */
  endpoints: readonly string[];
  /** Who holds a lease: this host's name and this run's epoch. */
  hostId: string;
  epoch: number;
  /** How long a lease lasts unless renewed (renewed every third of it). Default 60 s. */
  leaseMs?: number;
  /** Rows held (leased, in memory) at most. Default 1,000. */
  batch?: number;
  /** The fallback poll for rows nobody told this host about. Default 1 s. */
  pollMs?: number;
  /** A query failed (tried again at the next wake or poll). */
  onError?: (error: unknown) => void;
}

interface LeasedRow {
  id: string;
  endpoint: string;
  tx_id: string | null;
  webhook_id: string;
  event_name: WebhookEventType;
  payload: { ts?: number };
  created_at: number;
}

const LEASE = `WITH c AS (
    SELECT id FROM webhook_outbox
    WHERE done_at IS NULL AND endpoint = ANY($4::text[]) AND (lease_expires_at IS NULL OR lease_expires_at < now())
    ORDER BY id LIMIT $5 FOR UPDATE SKIP LOCKED
  )
  UPDATE webhook_outbox w
  SET lease_host = $1, lease_epoch = $2, lease_expires_at = now() + make_interval(secs => $3::float8 / 1000)
  FROM c WHERE w.id = c.id
  RETURNING w.id::text AS id, w.endpoint, w.tx_id, w.webhook_id, w.event_name, w.payload,
    (extract(epoch FROM w.created_at) * 1000)::float8 AS created_at`;

const MINE = `lease_host = $1 AND lease_epoch = $2 AND done_at IS NULL`;

export class PgWebhookOutbox implements OutboxPort {
  readonly messages = new Map<string, OutboxMessage>();
  /** Per message (webhook-id), the row leased for each endpoint. */
  private readonly rows = new Map<string, Map<string, string>>();
  private held = 0;
  private take: ((entries: Array<{ message: OutboxMessage; endpoints: string[] }>) => void) | null = null;
  private readonly leases = new SingleFlight(() => this.leaseOwed());
  private readonly timers: NodeJS.Timeout[] = [];
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly o: PgWebhookOutboxOptions,
  ) {}

  private get lease(): [string, number] {
    return [this.o.hostId, this.o.epoch];
  }

  /**
   * End what is owed to endpoints no longer configured (and leased by nobody), then lease what is owed and hand it
   * to `take` (the dispatcher), now and at each wake. Returns how many rows were ended as unconfigured.
   */
  async start(
    take: (entries: Array<{ message: OutboxMessage; endpoints: string[] }>) => void,
  ): Promise<number> {
    this.take = take;
    const { rowCount } = await this.pool.query(
      `UPDATE webhook_outbox SET done_at = now(), outcome = 'unconfigured'
       WHERE done_at IS NULL AND NOT (endpoint = ANY($1::text[]))
         AND (lease_expires_at IS NULL OR lease_expires_at < now())`,
      [this.o.endpoints],
    );
    await this.leaseOwed();
    const leaseMs = this.o.leaseMs ?? 60_000;
    this.timers.push(setInterval(() => this.wake(), this.o.pollMs ?? 1000));
    this.timers.push(setInterval(() => void this.renew(), Math.max(1, Math.floor(leaseMs / 3))));
    for (const timer of this.timers) timer.unref();
    return rowCount ?? 0;
  }

  /** Look for new rows now (a local commit added some). One query per wake; wakes during one coalesce. */
  wake(): void {
    if (!this.closed && this.take) this.leases.request();
  }

  async done(message: OutboxMessage, endpoint: string, how: 'delivered' | 'expired'): Promise<void> {
    const row = this.forget(message, endpoint);
    if (row === undefined) return;
    await this.pool.query(
      `UPDATE webhook_outbox SET done_at = now(), outcome = $4, lease_host = NULL, lease_epoch = NULL,
         lease_expires_at = NULL
       WHERE id = $3::bigint AND ${MINE}`,
      [...this.lease, row, how],
    );
    // Room for more: take the next owed rows.
    this.wake();
  }

  failed(message: OutboxMessage, endpoint: string, reason: string): void {
    const row = this.rows.get(message.id)?.get(endpoint);
    if (row === undefined) return;
    this.pool
      .query(
        `UPDATE webhook_outbox SET attempts = attempts + 1, last_error = $4 WHERE id = $3::bigint AND ${MINE}`,
        [...this.lease, row, reason],
      )
      .catch((error: unknown) => this.o.onError?.(error));
  }

  /** Stop leasing and release what this host still holds (another host, or the next start, delivers it). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    await this.leases.idle();
    await this.pool
      .query(
        `UPDATE webhook_outbox SET lease_host = NULL, lease_epoch = NULL, lease_expires_at = NULL WHERE ${MINE}`,
        this.lease,
      )
      .catch((error: unknown) => this.o.onError?.(error));
  }

  private forget(message: OutboxMessage, endpoint: string): string | undefined {
    const rows = this.rows.get(message.id);
    const row = rows?.get(endpoint);
    if (!rows || row === undefined) return undefined;
    rows.delete(endpoint);
    this.held--;
    const held = this.messages.get(message.id);
    if (held) held.owed = held.owed.filter((url) => url !== endpoint);
    if (rows.size === 0) {
      this.rows.delete(message.id);
      this.messages.delete(message.id);
    }
    return row;
  }

  private async leaseOwed(): Promise<void> {
    const room = (this.o.batch ?? 1000) - this.held;
    if (this.closed || room <= 0) return;
    try {
      const { rows } = await this.pool.query<LeasedRow>(LEASE, [
        ...this.lease,
        this.o.leaseMs ?? 60_000,
        this.o.endpoints,
        room,
      ]);
      if (rows.length === 0 || this.closed) return;
      // In id order: the order the rows were written, so a transaction's rows queue oldest first in each lane.
      rows.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      const taken = new Map<OutboxMessage, string[]>();
      for (const row of rows) {
        let message = this.messages.get(row.webhook_id);
        if (!message) {
          message = {
            id: row.webhook_id,
            type: row.event_name,
            ts: row.payload.ts ?? row.created_at,
            data: row.payload as OutboxMessage['data'],
            key: row.tx_id ?? row.webhook_id,
            owed: [],
            queuedAt: row.created_at,
          };
          this.messages.set(message.id, message);
          this.rows.set(message.id, new Map());
        }
        const byEndpoint = this.rows.get(message.id) as Map<string, string>;
        if (byEndpoint.has(row.endpoint)) continue;
        byEndpoint.set(row.endpoint, row.id);
        this.held++;
        message.owed.push(row.endpoint);
        taken.set(message, [...(taken.get(message) ?? []), row.endpoint]);
      }
      this.take?.([...taken].map(([message, endpoints]) => ({ message, endpoints })));
    } catch (error) {
      this.o.onError?.(error);
    }
  }

  private async renew(): Promise<void> {
    if (this.closed || this.held === 0) return;
    await this.pool
      .query(
        `UPDATE webhook_outbox SET lease_expires_at = now() + make_interval(secs => $3::float8 / 1000) WHERE ${MINE}`,
        [...this.lease, this.o.leaseMs ?? 60_000],
      )
      .catch((error: unknown) => this.o.onError?.(error));
  }
}
