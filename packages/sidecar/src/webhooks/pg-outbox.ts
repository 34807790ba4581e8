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
 *
 * Order per transaction and endpoint holds across a crash: a row is not leased while an older owed row of its
 * transaction and endpoint is held by someone else (LEASE). A restarted host takes over the leases its host id held
 * in earlier runs at once (start()): the host id is `<hostname>:<API_PORT>`, which two live sidecars cannot share
 * (the port is bound; DESIGN §10 has a second live sidecar with the same id refuse to start), so a lease of an earlier
 * run of this id is a dead process's, and waiting out its lease (up to `leaseMs`) would only hold back the
 * transactions it had leased. Another host's leases are waited out.
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
  /**
   * The fallback poll for rows nobody told this host about, and the one scan from the lowest owed id: a wake (a local
   * commit) looks only above the highest id this run has leased, so it does not walk past the rows it holds (m6);
   * the poll also finds older rows that came free (a lease run out or released, an older row of their transaction
   * done elsewhere, a commit that landed after a later id's). Default 1 s.
   */
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
  duplicate: boolean;
}

/**
 * Lease up to $5 owed rows of the endpoints $4 with id above $6 (0: all), in id order, for this host ($1, $2) for $3
 * ms. Three rules, each in this one statement (so nothing is leased that this host does not then track):
 *
 * - Order per (endpoint, tx) across a crash (M1 of the #28 review). A row waits while an older owed row of its
 *   (endpoint, tx_id) is held by someone else whose lease has not run out: another host, or an earlier run of this
 *   host id (start() takes those over first, so in practice another host). Rows so blocked are left out before the
 *   LIMIT (`c`), so a dead host's transaction does not use up the batch. Then (`k`) a row is kept only if every older
 *   owed row of its (endpoint, tx_id) is this run's already or locked by this statement: an older row skipped by
 *   SKIP LOCKED (another host leasing it at this moment) or one that became leased between the snapshot and the lock
 *   (FOR UPDATE re-checks the WHERE on the row's latest version: PostgreSQL's EvalPlanQual) holds back its younger
 *   rows too. Rows of `c` not kept are not updated, and their locks go at the statement's end.
 * - One row per (endpoint, webhook-id) in memory (M6): a kept row whose webhook-id this run already holds for its
 *   endpoint, or that repeats an older row of this batch, is ended as 'duplicate' (done, lease cleared) instead of
 *   leased; it comes back with `duplicate` true and is not tracked.
 * - Leased rows get this run's lease; `created_at` (the retry window's start) comes back in ms.
 */
const LEASE = `WITH c AS (
    SELECT w.id, w.endpoint, w.tx_id, w.webhook_id FROM webhook_outbox w
    WHERE w.done_at IS NULL AND w.id > $6::bigint AND w.endpoint = ANY($4::text[])
      AND (w.lease_expires_at IS NULL OR w.lease_expires_at < now())
      AND NOT EXISTS (
        SELECT 1 FROM webhook_outbox o
        WHERE o.endpoint = w.endpoint AND o.tx_id = w.tx_id AND o.id < w.id AND o.done_at IS NULL
          AND o.lease_expires_at >= now() AND NOT (o.lease_host = $1 AND o.lease_epoch = $2))
    ORDER BY w.id LIMIT $5 FOR UPDATE OF w SKIP LOCKED
  ), k AS (
    SELECT c.* FROM c
    WHERE NOT EXISTS (
      SELECT 1 FROM webhook_outbox o
      WHERE o.endpoint = c.endpoint AND o.tx_id = c.tx_id AND o.id < c.id AND o.done_at IS NULL
        AND (o.lease_host IS DISTINCT FROM $1 OR o.lease_epoch IS DISTINCT FROM $2)
        AND NOT EXISTS (SELECT 1 FROM c mine WHERE mine.id = o.id))
  ), d AS (
    SELECT k.id,
      row_number() OVER (PARTITION BY k.endpoint, k.webhook_id ORDER BY k.id) > 1
      OR EXISTS (
        SELECT 1 FROM webhook_outbox h
        WHERE h.endpoint = k.endpoint AND h.webhook_id = k.webhook_id AND h.id <> k.id AND h.done_at IS NULL
          AND h.lease_host = $1 AND h.lease_epoch = $2) AS duplicate
    FROM k
  )
  UPDATE webhook_outbox w
  SET lease_host = CASE WHEN d.duplicate THEN NULL ELSE $1 END,
    lease_epoch = CASE WHEN d.duplicate THEN NULL ELSE $2::bigint END,
    lease_expires_at = CASE WHEN d.duplicate THEN NULL ELSE now() + make_interval(secs => $3::float8 / 1000) END,
    done_at = CASE WHEN d.duplicate THEN now() END,
    outcome = CASE WHEN d.duplicate THEN 'duplicate' END
  FROM d WHERE w.id = d.id
  RETURNING w.id::text AS id, w.endpoint, w.tx_id, w.webhook_id, w.event_name, w.payload,
    (extract(epoch FROM w.created_at) * 1000)::float8 AS created_at, d.duplicate`;

const MINE = `lease_host = $1 AND lease_epoch = $2 AND done_at IS NULL`;

export class PgWebhookOutbox implements OutboxPort {
  readonly messages = new Map<string, OutboxMessage>();
  /** Per message (webhook-id), the row leased for each endpoint. */
  private readonly rows = new Map<string, Map<string, string>>();
  private held = 0;
  /** The highest row id this run has leased (or ended as a duplicate): where a wake's scan starts. */
  private above = '0';
  /** The next scan starts from the lowest owed id (the poll asked for it). */
  private full = true;
  /** Rows whose `done` UPDATE failed (row id -> outcome): re-issued at each renew until it goes through (m1). */
  private readonly undone = new Map<string, 'delivered' | 'expired'>();
  /** The newest `queuedAt` in `messages`: a row older than it puts `messages` back in queuedAt order. */
  private newestQueuedAt = -Infinity;
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
    // This host id's leases from earlier runs: a dead process's (see the class comment), taken over now. Any other
    // epoch, not just smaller ones: without a host session the epoch is the start's wall clock, which may step back.
    await this.pool.query(
      `UPDATE webhook_outbox SET lease_host = NULL, lease_epoch = NULL, lease_expires_at = NULL
       WHERE done_at IS NULL AND lease_host = $1 AND lease_epoch <> $2`,
      this.lease,
    );
    const { rowCount } = await this.pool.query(
      `UPDATE webhook_outbox SET done_at = now(), outcome = 'unconfigured'
       WHERE done_at IS NULL AND NOT (endpoint = ANY($1::text[]))
         AND (lease_expires_at IS NULL OR lease_expires_at < now())`,
      [this.o.endpoints],
    );
    await this.leaseOwed();
    const leaseMs = this.o.leaseMs ?? 60_000;
    this.timers.push(
      setInterval(() => {
        this.full = true;
        this.wake();
      }, this.o.pollMs ?? 1000),
    );
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
    try {
      await this.markDone([row], [how]);
    } catch (error) {
      // Still leased by this run (and so renewed, and not delivered by anyone else): marked done at the next renew.
      this.undone.set(row, how);
      this.o.onError?.(error);
    }
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
    // What was delivered but not yet marked done is marked now, or else released (and delivered again).
    await this.retryUndone();
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

  private async markDone(rows: string[], how: string[]): Promise<void> {
    await this.pool.query(
      `UPDATE webhook_outbox w SET done_at = now(), outcome = u.how, lease_host = NULL, lease_epoch = NULL,
         lease_expires_at = NULL
       FROM unnest($3::bigint[], $4::text[]) AS u(id, how)
       WHERE w.id = u.id AND w.lease_host = $1 AND w.lease_epoch = $2 AND w.done_at IS NULL`,
      [...this.lease, rows, how],
    );
  }

  /** Re-issue the `done` UPDATEs that failed; those that fail again stay for the next try. */
  private async retryUndone(): Promise<void> {
    if (this.undone.size === 0) return;
    const retry = [...this.undone];
    try {
      await this.markDone(
        retry.map(([row]) => row),
        retry.map(([, how]) => how),
      );
      for (const [row] of retry) this.undone.delete(row);
    } catch (error) {
      this.o.onError?.(error);
    }
  }

  private async leaseOwed(): Promise<void> {
    const room = (this.o.batch ?? 1000) - this.held;
    if (this.closed || room <= 0) return;
    const above = this.full ? '0' : this.above;
    this.full = false;
    try {
      const { rows } = await this.pool.query<LeasedRow>(LEASE, [
        ...this.lease,
        this.o.leaseMs ?? 60_000,
        this.o.endpoints,
        room,
        above,
      ]);
      if (rows.length === 0) return;
      // In id order: the order the rows were written, so a transaction's rows queue oldest first in each lane.
      rows.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      const last = (rows[rows.length - 1] as LeasedRow).id;
      if (BigInt(last) > BigInt(this.above)) this.above = last;
      if (this.closed) return;
      const taken = new Map<OutboxMessage, string[]>();
      let outOfOrder = false;
      for (const row of rows) {
        if (row.duplicate) continue;
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
          if (message.queuedAt < this.newestQueuedAt) outOfOrder = true;
          else this.newestQueuedAt = message.queuedAt;
        }
        const byEndpoint = this.rows.get(message.id) as Map<string, string>;
        // LEASE ends such a row as a duplicate; were one to come back anyway, it is released, not left leased.
        if (byEndpoint.has(row.endpoint)) {
          this.release(row.id);
          continue;
        }
        byEndpoint.set(row.endpoint, row.id);
        this.held++;
        message.owed.push(row.endpoint);
        taken.set(message, [...(taken.get(message) ?? []), row.endpoint]);
      }
      // The dispatcher expects `messages` oldest first by queuedAt (expireOverdue stops at the first one inside the
      // retry window). Rows come in id order, which a commit landing after a later id's, or an older row freed by
      // another host, can put behind rows queued after them: restore the order then (at most `batch` entries).
      if (outOfOrder) this.sortByQueuedAt();
      this.take?.([...taken].map(([message, endpoints]) => ({ message, endpoints })));
    } catch (error) {
      this.o.onError?.(error);
    }
  }

  private sortByQueuedAt(): void {
    // Array.prototype.sort is stable: messages queued at the same ms keep their id order.
    const sorted = [...this.messages.values()].sort((a, b) => a.queuedAt - b.queuedAt);
    this.messages.clear();
    for (const message of sorted) this.messages.set(message.id, message);
  }

  private release(row: string): void {
    this.pool
      .query(
        `UPDATE webhook_outbox SET lease_host = NULL, lease_epoch = NULL, lease_expires_at = NULL
         WHERE id = $3::bigint AND ${MINE}`,
        [...this.lease, row],
      )
      .catch((error: unknown) => this.o.onError?.(error));
  }

  private async renew(): Promise<void> {
    if (this.closed || (this.held === 0 && this.undone.size === 0)) return;
    await this.retryUndone();
    await this.pool
      .query(
        `UPDATE webhook_outbox SET lease_expires_at = now() + make_interval(secs => $3::float8 / 1000) WHERE ${MINE}`,
        [...this.lease, this.o.leaseMs ?? 60_000],
      )
      .catch((error: unknown) => this.o.onError?.(error));
  }
}
