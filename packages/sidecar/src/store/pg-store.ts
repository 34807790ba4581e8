import {
  RelayError,
  isRelayError,
  isTerminalTxState,
  webhookIdsOfChange,
  type EventCursor,
  type TxState,
} from '@solrelay/core';
import pg from 'pg';
import { connectDatabase, databaseError, type DatabaseOptions } from '../pg/connect';
import { assertSchema } from '../pg/migrations';
import type { DatabaseUrl } from '../pg/url';
import {
  dropPayload,
  patchedRecord,
  spendEffects,
  type PatchOp,
  type StoredAttempt,
  type StoredTx,
} from './records';
import {
  ChangeFeed,
  SpendLimitReached,
  StoreConflict,
  assertWithinSpendLimit,
  matches,
  mayAddAttempt,
  type SpendLimit,
  type StoreCounts,
  type TxChange,
  type TxEvent,
  type TxExpectation,
  type TxStore,
} from './store';
import { WriteChain } from './write-chain';
import { EVENTS_CHANNEL, LOG_START, PgEventLog } from './pg-events';
import { PgLifecycleEntries, type PgQuery } from './pg-lifecycle';

/** What a client refused for want of the database is asked to wait before trying again (`Retry-After`). */
export const DATABASE_RETRY_AFTER_S = 1;
/** While the database is unavailable, the store checks this often whether it is back (one `SELECT 1`). */
const PROBE_EVERY_MS = 500;

/**
 * The database went away or came back, as the store saw it: `down` at the first statement, COMMIT or idle connection
 * lost for want of it (a stop, a restart, a failover, the network), `up` when the store's probe next succeeds. Told
 * once per change, never per failed statement.
 */
export type DatabaseAvailability =
  | { kind: 'down'; url: string; reason: string; at: number }
  | { kind: 'up'; url: string; downMs: number; at: number };

/** The advisory lock every reservation checked against `spend-limit` takes (an arbitrary constant). */
const SPEND_LIMIT_LOCK = 0x72656c6179; // 'relay'

/** Lamports reserved or paid, not released, at or after $1 (ms): what `spend-limit` counts. */
const SPENT_SINCE = `SELECT coalesce(sum(lamports), 0)::bigint AS n FROM spend_reservations
  WHERE released_at IS NULL AND reserved_at >= to_timestamp($1::float8 / 1000)`;

/**
 * The store on PostgreSQL (DESIGN §10, `RELAY_DATABASE_URL`): the schema of `migrations/`, one row per transaction,
 * one per attempt, the spend ledger, and the events and lifecycle entries each change causes.
 *
 * **Every write is one SQL transaction**: it locks the record's row (`FOR UPDATE`), reads the record, checks the
 * caller's expectation (refused: ROLLBACK and {@link StoreConflict} with the record as it is), applies the change
 * (the same `patchedRecord` the local stores apply), writes the row, the attempts it touched, their spend, the
 * eviction count, its events and lifecycle entries, reads the record back, and COMMITs. Only then does the promise
 * resolve with the new record and the change feed tell its listeners.
 *
 * **Write-ahead.** A write resolves only once its COMMIT is acknowledged: the signed tip and bundle id of an
 * attempt are in the database before anything may send them. A write whose COMMIT was sent but not answered (the
 * connection lost mid-commit) may or may not have committed: it rejects with `RELAY_E_DB_COMMIT_UNKNOWN`, and the
 * caller must re-read the record and never send on the strength of that write. A write that fails before its
 * COMMIT did not commit: `RELAY_E_DB_UNAVAILABLE` (connection) or the server's own error.
 *
 * **Outages.** The first failure for want of the database (or an idle connection the server closed: a restart) marks
 * the store unavailable: `healthy` is false, `problem` says why naming the database, and {@link watchAvailability}
 * listeners are told `down` once. While it is, a probe (`SELECT 1`) runs every 500 ms, and the first that succeeds
 * tells `up` once (a caller's statement that succeeds meanwhile does not: it may have begun before). The store never
 * throws for an outage outside a caller's promise: no timer, pool or idle-connection error escapes.
 *
 * **Order and dedupe.** Writes to one record apply in call order within this process (the same {@link WriteChain}
 * as the local stores); across processes the row lock orders them. Dedupe by first signature is the table's UNIQUE
 * constraint (`INSERT ... ON CONFLICT DO NOTHING`, then the existing row is read); "at most one unsettled attempt" is
 * the partial unique index `attempts_one_unsettled`, whose violation becomes a StoreConflict.
 *
 * **Retention.** A record that becomes terminal drops its wire bytes in the same transaction. Old terminal rows are
 * deleted in batches by {@link PgTxStore.pruneTerminal} (run by the store's maintenance timer), never row by row on
 * a transition: so `retainTerminal` is a level the store returns to, not one it holds at every commit.
 *
 * One host for now: the owner and epoch columns stay null (fencing and claiming come with the fleet). No
 * transaction is held across anything but SQL; the statement, lock and idle-in-transaction timeouts are the pool's
 * (`connectDatabase`).
 */
export class PgTxStore implements TxStore {
  readonly changes = new ChangeFeed();
  /** The `events` table in cursor order: what SSE follows on PostgreSQL (see pg-events.ts). */
  readonly eventLog: PgEventLog;
  /** The fleet's lifecycle log (`lifecycle_entries`), what the API reads on PostgreSQL. */
  readonly lifecycleEntries: PgLifecycleEntries;
  private readonly writes = new WriteChain();
  /** Writes begun and not settled (`close` waits for them). */
  private readonly pending = new Set<Promise<unknown>>();
  private readonly options: Required<PgTxStoreOptions>;
  private maintenance: NodeJS.Timeout | null = null;
  /** Told when a periodic upkeep run fails while the database is up (the sidecar logs it); the next run retries. */
  onMaintenanceError: ((error: unknown) => void) | null = null;
  private closed = false;
  /** Since when, and why, the database has been unavailable (cleared when the probe next succeeds). */
  private outage: { since: number; reason: string } | null = null;
  private probe: NodeJS.Timeout | null = null;
  /** A probe is waiting for its answer (one at a time: a server that hangs must not fill the pool with them). */
  private probing = false;
  private readonly availability = new Set<(change: DatabaseAvailability) => void>();

  /**
   * Connect (`connectDatabase`: coded errors for a bad URL, an unreachable server, wrong credentials, a missing
   * database), refuse a schema this relay cannot run on (`assertSchema`), and open the store on the pool, which the
   * store then owns (closed with it).
   */
  static async open(
    url: string | DatabaseUrl,
    options: PgTxStoreOptions & { database?: DatabaseOptions } = {},
  ): Promise<PgTxStore> {
    const { pool, target } = await connectDatabase(url, options.database);
    try {
      await assertSchema(pool);
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw databaseError(error, target);
    }
    const store = new PgTxStore(pool, target, options, true);
    // Upkeep once before anything is written: after days down, today's `events` partition must exist before the first
    // insert, or rows go to the default partition and that day's partition can never be made (its range would overlap
    // rows already there).
    try {
      await store.maintain();
    } catch (error) {
      await store.close().catch(() => undefined);
      throw databaseError(error, target);
    }
    return store;
  }

  constructor(
    private readonly pool: pg.Pool,
    private readonly target: DatabaseUrl,
    options: PgTxStoreOptions = {},
    private readonly ownsPool = false,
  ) {
    this.options = {
      retainTerminal: options.retainTerminal ?? 20_000,
      maintenanceMs: options.maintenanceMs ?? 60_000,
      eventRetentionDays: options.eventRetentionDays ?? 7,
      hostId: options.hostId ?? null,
      webhookEndpoints: options.webhookEndpoints ?? [],
      doneWebhookRetentionMs: options.doneWebhookRetentionMs ?? 60 * 60 * 1000,
      lifecycleRetentionDays: options.lifecycleRetentionDays ?? 30,
      notifyEvents: options.notifyEvents ?? false,
    };
    const query: PgQuery = (text, values) => this.statement(text, values);
    this.eventLog = new PgEventLog(pool, query);
    this.lifecycleEntries = new PgLifecycleEntries(query);
    // An idle connection the server closed (a restart, a failover, an administrator) is a detected outage, even if
    // no statement failed: the store re-checks the database before it calls it healthy again.
    pool.on('error', (error) => {
      if (!this.closed) this.down(error);
    });
    if (this.options.maintenanceMs > 0) {
      this.maintenance = setInterval(
        () =>
          void this.maintain().catch((error: unknown) => {
            // Told, not thrown: the next run tries again (an outage is already told once by the store).
            if (!this.outage && !this.closed) this.onMaintenanceError?.(error);
          }),
        this.options.maintenanceMs,
      );
      this.maintenance.unref();
    }
  }

  /**
   * The store's pool, for what reads and updates its tables beside it (the webhook outbox, webhooks/pg-outbox.ts).
   * Closed with the store when the store owns it.
   */
  get database(): pg.Pool {
    return this.pool;
  }

  get healthy(): boolean {
    return !this.closed && this.outage === null;
  }

  /** Why the store is not healthy, naming the database (null while it is). */
  get problem(): string | null {
    if (this.closed) return 'store closed';
    if (!this.outage) return null;
    const seconds = Math.round((Date.now() - this.outage.since) / 1000);
    return `PostgreSQL at ${this.target.redacted} unavailable for ${seconds} s (${this.outage.reason})`;
  }

  /** Be told when the database goes away and when it comes back (once per change); returns the unsubscribe. */
  watchAvailability(listener: (change: DatabaseAvailability) => void): () => void {
    this.availability.add(listener);
    return () => this.availability.delete(listener);
  }

  // ------------------------------------------------------------------ transitions

  accept(tx: StoredTx, events: readonly TxEvent[] = []): Promise<{ tx: StoredTx; created: boolean }> {
    const first = tx.signatures[0] as string;
    return this.writes.run(`sig:${first}`, async () => {
      const outcome = await this.write(tx.tx_id, 'accept', async (db) => {
        // Another host (or a retention batch) may delete the row that refused ours before we read it: try again.
        for (let tries = 0; tries < 3; tries++) {
          const record = isTerminalTxState(tx.state) ? retired(tx) : tx;
          const inserted = await db.query(INSERT_TX, txParams(record));
          if (inserted.rowCount === 0) {
            const existing = await readOne(db, 't.first_signature = $1', [first]);
            if (existing) return { tx: existing, created: false };
            continue;
          }
          for (const attempt of record.attempts)
            await db.query(INSERT_ATTEMPT, attemptParams(tx.tx_id, attempt));
          await this.insertEvents(db, record, events);
          return { tx: (await readOne(db, 't.tx_id = $1', [tx.tx_id])) as StoredTx, created: true };
        }
        throw new Error(`transaction ${tx.tx_id}: first signature ${first} neither inserted nor found`);
      });
      if (outcome.created) this.changes.emit(outcome.tx, events);
      return outcome;
    });
  }

  addAttempt(
    txId: string,
    attempt: StoredAttempt,
    options: { expect?: TxExpectation; set?: TxChange['set']; spendLimit?: SpendLimit } = {},
  ): Promise<StoredTx> {
    const expect = options.expect ?? {};
    return this.writes.run(txId, async () => {
      try {
        return await this.write(txId, 'addAttempt', async (db) => {
          const tx = await lockRecord(db, txId);
          mayAddAttempt(txId, tx, expect);
          const limit = options.spendLimit;
          if (limit && limit.limit > 0 && !attempt.released) {
            // Every reservation checked against spend-limit takes this transaction-scoped lock first, so two
            // reservations (of any host) are checked one after the other, each seeing the other's row once committed.
            await db.query('SELECT pg_advisory_xact_lock($1)', [SPEND_LIMIT_LOCK]);
            const { rows } = await db.query<{ n: string }>(SPENT_SINCE, [limit.since]);
            assertWithinSpendLimit(limit, int(rows[0]?.n ?? '0'), attempt.reserved_lamports);
          }
          return this.patch(db, tx, { attempt, ...(options.set ? { set: options.set } : {}) }, []);
        });
      } catch (error) {
        // Another writer's unsettled attempt (another host, or one not in flight yet unsettled): the index decides.
        if (violates(error, 'attempts_one_unsettled'))
          throw new StoreConflict(txId, 'no attempt in flight', await this.get(txId));
        throw error;
      }
    });
  }

  transition(txId: string, expect: TxExpectation, change: TxChange): Promise<StoredTx> {
    const { events = [], ...op } = change;
    return this.writes.run(txId, async () => {
      const next = await this.write(txId, 'transition', async (db) => {
        const tx = await lockRecord(db, txId);
        if (!tx || !matches(tx, expect)) throw new StoreConflict(txId, expect, tx);
        return this.patch(db, tx, op, events);
      });
      this.changes.emit(next, events);
      return next;
    });
  }

  async pruneSpend(before: number): Promise<void> {
    await this.statement(
      'DELETE FROM spend_reservations WHERE reserved_at < to_timestamp($1::float8 / 1000)',
      [before],
    );
  }

  /**
   * Delete the terminal records beyond the newest `keep` (in the order they ended), in batches of `batch` rows, each
   * its own statement: retention never deletes row by row on a transition, and never holds a long transaction.
   * Their spend stays (it leaves with the rolling hour). Returns how many it deleted.
   */
  async pruneTerminal(keep = this.options.retainTerminal, batch = 1000): Promise<number> {
    return this.inBatches(PRUNE_TERMINAL, [keep], batch);
  }

  /**
   * Delete webhook deliveries done (delivered or given up) more than `doneWebhookRetentionMs` ago, and lifecycle
   * entries older than `lifecycleRetentionDays`, in batches of `batch` rows, each its own statement. Returns how many
   * of each it deleted.
   */
  async pruneDelivered(batch = 1000): Promise<{ webhooks: number; lifecycle: number }> {
    return {
      webhooks: await this.inBatches(PRUNE_WEBHOOKS, [this.options.doneWebhookRetentionMs], batch),
      lifecycle: await this.inBatches(PRUNE_LIFECYCLE, [this.options.lifecycleRetentionDays], batch),
    };
  }

  /** Run a deleting statement (its last parameter: the batch size) until a batch comes back short. */
  private async inBatches(text: string, values: unknown[], batch: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      const { rowCount } = await this.statement(text, [...values, batch]);
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) return deleted;
    }
  }

  /**
   * The store's periodic upkeep: retention of terminal records, of done webhook deliveries and old lifecycle
   * entries (in batches), and the daily partitions of `events` (a week's made ahead, those past the retention
   * dropped whole).
   */
  async maintain(): Promise<void> {
    if (this.closed) return;
    await this.pruneTerminal();
    await this.pruneDelivered();
    await this.statement('SELECT relay_events_add_partitions(7)');
    await this.statement(`SELECT relay_events_drop_partitions(now() - make_interval(days => $1))`, [
      this.options.eventRetentionDays,
    ]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.maintenance) clearInterval(this.maintenance);
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
    await Promise.allSettled([...this.pending]);
    if (this.ownsPool) await this.pool.end();
  }

  // ------------------------------------------------------------------ queries

  get(txId: string): Promise<StoredTx | undefined> {
    return this.find('t.tx_id = $1', [txId]);
  }

  /**
   * The record and the cursor of its newest event, read together (one statement, one snapshot): a stream of the
   * record's events that starts after that cursor misses none and repeats none of what the record already shows.
   */
  async getWithEventCursor(txId: string): Promise<{ tx: StoredTx | undefined; cursor: EventCursor }> {
    const { rows } = await this.statement<TxRow & { event_xid: string | null; event_id: string | null }>(
      `SELECT ${RECORD}, e.xid::text AS event_xid, e.id::text AS event_id FROM transactions t
       LEFT JOIN LATERAL (SELECT xid, id FROM events WHERE tx_id = t.tx_id ORDER BY xid DESC, id DESC LIMIT 1) e
         ON true
       WHERE t.tx_id = $1`,
      [txId],
    );
    const row = rows[0];
    if (!row) return { tx: undefined, cursor: LOG_START };
    const cursor =
      row.event_xid === null ? LOG_START : { xid: BigInt(row.event_xid), id: BigInt(row.event_id as string) };
    return { tx: fromRow(row), cursor };
  }

  byFirstSignature(signature: string): Promise<StoredTx | undefined> {
    return this.find('t.first_signature = $1', [signature]);
  }

  byBundle(bundleId: string): Promise<StoredTx | undefined> {
    return this.find(
      `t.tx_id = (SELECT tx_id FROM attempts WHERE bundle_id = $1 OR previous_bundle_ids @> ARRAY[$1::text] LIMIT 1)`,
      [bundleId],
    );
  }

  live(): Promise<StoredTx[]> {
    return this.read('t.terminal_at IS NULL');
  }

  awaitingAttempt(): Promise<StoredTx[]> {
    // Pending, not stopped, and the last attempt (if any) not in flight (`inFlight`: journaled or submitted).
    return this.read(
      `t.state = 'pending' AND NOT t.stopped AND NOT EXISTS (
         SELECT 1 FROM attempts a WHERE a.tx_id = t.tx_id AND a.stage IN ('journaled', 'submitted')
           AND a.attempt = (SELECT max(b.attempt) FROM attempts b WHERE b.tx_id = t.tx_id))`,
    );
  }

  landedIn(slot: number): Promise<StoredTx[]> {
    return this.read('t.terminal_at IS NULL AND t.landed_slot = $1', [slot]);
  }

  async followed(sinceSlot: number): Promise<{ live: StoredTx[]; ended: StoredTx[] }> {
    // One statement, so a record moving from live to ended meanwhile is in exactly one of the lists.
    const records = await this.read(
      `t.terminal_at IS NULL OR EXISTS (
         SELECT 1 FROM attempts a WHERE a.tx_id = t.tx_id AND a.stage = 'failed' AND NOT a.leaked
           AND a.created_slot >= $1)`,
      [sinceSlot],
    );
    return {
      live: records.filter((tx) => !isTerminalTxState(tx.state)),
      ended: records.filter((tx) => isTerminalTxState(tx.state)),
    };
  }

  all(): Promise<StoredTx[]> {
    return this.read('true');
  }

  async counts(): Promise<StoreCounts> {
    const { rows } = await this.statement<{
      active: string;
      waiting: Record<string, number>;
      evicted: Record<string, number>;
    }>(COUNTS);
    const row = rows[0] as {
      active: string;
      waiting: Record<string, number>;
      evicted: Record<string, number>;
    };
    return {
      active: int(row.active),
      waiting: { high: 0, normal: 0, low: 0, ...row.waiting },
      evicted: row.evicted,
    };
  }

  async spentSince(cutoff: number): Promise<number> {
    const { rows } = await this.statement<{ n: string }>(SPENT_SINCE, [cutoff]);
    return int(rows[0]?.n ?? '0');
  }

  async hasSpendOlderThan(before: number): Promise<boolean> {
    const { rows } = await this.statement<{ older: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM spend_reservations WHERE reserved_at < to_timestamp($1::float8 / 1000)) AS older`,
      [before],
    );
    return rows[0]?.older === true;
  }

  // ------------------------------------------------------------------ internals

  /**
   * Apply `op` to `before` (locked by this transaction): the row, the attempts it added or changed, their spend,
   * the eviction count and the events; returns the record as the database now holds it.
   */
  private async patch(
    db: pg.PoolClient,
    before: StoredTx,
    op: Omit<PatchOp, 'k' | 'id'>,
    events: readonly TxEvent[],
  ): Promise<StoredTx> {
    const next = patchedRecord(before, op);
    if (!isTerminalTxState(before.state) && isTerminalTxState(next.state)) dropPayload(next);
    await db.query(prepared(UPDATE_TX, txParams(next)));
    for (const attempt of next.attempts) {
      const old = before.attempts.find((a) => a.attempt === attempt.attempt);
      if (!old) await db.query(prepared(INSERT_ATTEMPT, attemptParams(next.tx_id, attempt)));
      else if (old !== attempt) await db.query(prepared(UPDATE_ATTEMPT, attemptParams(next.tx_id, attempt)));
    }
    for (const effect of spendEffects(next, op)) {
      const tipper = next.attempts.find((a) => a.attempt === effect.n)?.tipper ?? null;
      if (effect.kind === 'release') await db.query(RELEASE_SPEND, [next.tx_id, effect.n]);
      else {
        await db.query(effect.kind === 'reserve' ? RESERVE_SPEND : RECOUNT_SPEND, [
          next.tx_id,
          effect.n,
          tipper,
          effect.at,
          effect.lamports,
        ]);
      }
    }
    if (op.evicted) await db.query(COUNT_EVICTION, [op.evicted]);
    await this.insertEvents(db, next, events);
    return (await readOne(db, 't.tx_id = $1', [next.tx_id])) as StoredTx;
  }

  /**
   * A change's events into `events` (SSE), one `webhook_outbox` row per configured endpoint for each webhook event
   * (with the `webhook-id` the local outbox would give it), and its lifecycle entries into `lifecycle_entries`.
   */
  private async insertEvents(db: pg.PoolClient, tx: StoredTx, events: readonly TxEvent[]): Promise<void> {
    const told = events.filter((e) => e.kind !== 'lifecycle');
    const entries = events.flatMap((e) => (e.kind === 'lifecycle' ? [JSON.stringify(e.entry)] : []));
    if (told.length > 0) {
      const values = [
        tx.tx_id,
        this.options.hostId,
        told.map((e) => e.kind),
        told.map((e) => JSON.stringify(e.data)),
      ];
      const endpoints = this.options.webhookEndpoints;
      const hooks = endpoints.length > 0 ? webhookIdsOfChange(tx.tx_id, tx.history.length, told) : [];
      if (hooks.some((id) => id !== null))
        await db.query(INSERT_EVENTS_AND_WEBHOOKS, [...values, hooks, endpoints]);
      else await db.query(INSERT_EVENTS, values);
      // Delivered at COMMIT, to followers on other hosts (this host's follower is woken by the change feed).
      if (this.options.notifyEvents) await db.query(`SELECT pg_notify('${EVENTS_CHANNEL}', '')`);
    }
    if (entries.length > 0) await db.query(INSERT_LIFECYCLE, [this.options.hostId, entries]);
  }

  /**
   * Run `work` in one SQL transaction and COMMIT it; resolves with what `work` returned once the COMMIT is
   * acknowledged. Refused by `work` (a StoreConflict) or failed before the COMMIT: rolled back, rejected. The COMMIT
   * itself unanswered: `RELAY_E_DB_COMMIT_UNKNOWN` (see the class comment).
   */
  private write<T>(txId: string, operation: string, work: (db: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    const run = this.transaction(txId, operation, work);
    this.pending.add(run);
    void run.catch(() => undefined).finally(() => this.pending.delete(run));
    return run;
  }

  private async transaction<T>(
    txId: string,
    operation: string,
    work: (db: pg.PoolClient) => Promise<T>,
  ): Promise<T> {
    const db = await this.pool.connect().catch((error: unknown) => {
      throw this.failed(error);
    });
    // A checked-out connection that dies between statements emits on the client: the failing statement says so.
    const ignore = () => undefined;
    db.on('error', ignore);
    let committing = false;
    try {
      await db.query('BEGIN');
      const result = await work(db);
      committing = true;
      const commit = await db.query('COMMIT');
      // COMMIT of a transaction that had failed answers ROLLBACK; `work` would have thrown first, but never assume.
      if (commit.command !== 'COMMIT') throw new Error(`COMMIT of ${operation} answered ${commit.command}`);
      db.off('error', ignore);
      db.release();
      return result;
    } catch (error) {
      if (committing && !refusedByServer(error)) {
        db.release(true);
        this.down(error);
        throw new RelayError(
          'RELAY_E_DB_COMMIT_UNKNOWN',
          { tx_id: txId, operation, reason: reasonOf(error), retry_after_s: DATABASE_RETRY_AFTER_S },
          { cause: error },
        );
      }
      try {
        await db.query('ROLLBACK');
        db.off('error', ignore);
        db.release();
      } catch {
        db.release(true);
      }
      // The store's own refusals are answers, not database failures.
      if (error instanceof StoreConflict || error instanceof SpendLimitReached) throw error;
      throw this.failed(error);
    }
  }

  /** A query outside any transaction (reads, retention). */
  private async statement<R extends pg.QueryResultRow>(
    text: string,
    values: unknown[] = [],
  ): Promise<pg.QueryResult<R>> {
    if (this.closed) throw new Error('store is closed');
    try {
      return await this.pool.query<R>(prepared(text, values));
    } catch (error) {
      throw this.failed(error);
    }
  }

  /**
   * A failure for want of the database becomes `RELAY_E_DB_UNAVAILABLE` (nothing was written; the client is asked to
   * retry after {@link DATABASE_RETRY_AFTER_S}) and marks the store unavailable. A statement the server cancelled
   * for a timeout, a deadlock or a serialization failure (a busy database, not a gone one) is the same answer to a
   * caller, nothing committed, and marks nothing: a client sees a coded 503, never a 500.
   */
  private failed(error: unknown): unknown {
    if (!lostConnection(error)) {
      if (!cancelledByServer(error)) return error;
      return new RelayError(
        'RELAY_E_DB_UNAVAILABLE',
        { url: this.target.redacted, reason: reasonOf(error), retry_after_s: DATABASE_RETRY_AFTER_S },
        { cause: error },
      );
    }
    const reason = this.down(error);
    return new RelayError(
      'RELAY_E_DB_UNAVAILABLE',
      { url: this.target.redacted, reason, retry_after_s: DATABASE_RETRY_AFTER_S },
      { cause: error },
    );
  }

  /** The database is unavailable: told once (and probed until it is back). Returns the reason, redacted. */
  private down(error: unknown): string {
    const coded = databaseError(error, this.target);
    const reason = String(coded.details.reason ?? coded.message);
    if (this.outage || this.closed) return reason;
    this.outage = { since: Date.now(), reason };
    this.tell({ kind: 'down', url: this.target.redacted, reason, at: this.outage.since });
    this.probe = setInterval(() => {
      if (this.closed || this.probing) return;
      this.probing = true;
      this.pool
        .query('SELECT 1')
        .then(
          () => this.up(),
          () => undefined,
        )
        .finally(() => {
          this.probing = false;
        });
    }, PROBE_EVERY_MS);
    this.probe.unref();
    return reason;
  }

  /**
   * The probe succeeded: the database is back (told once). Only the probe says so, on a connection it opened after
   * the outage began: a statement begun before (answered as the server shut down) proves nothing.
   */
  private up(): void {
    if (!this.outage) return;
    const since = this.outage.since;
    this.outage = null;
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
    const at = Date.now();
    this.tell({ kind: 'up', url: this.target.redacted, downMs: at - since, at });
  }

  private tell(change: DatabaseAvailability): void {
    for (const listener of this.availability) {
      try {
        listener(change);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private async read(where: string, values: unknown[] = []): Promise<StoredTx[]> {
    const { rows } = await this.statement<TxRow>(
      `SELECT ${RECORD} FROM transactions t WHERE ${where} ORDER BY t.seq`,
      values,
    );
    return rows.map(fromRow);
  }

  private async find(where: string, values: unknown[]): Promise<StoredTx | undefined> {
    const { rows } = await this.statement<TxRow>(
      `SELECT ${RECORD} FROM transactions t WHERE ${where}`,
      values,
    );
    return rows[0] ? fromRow(rows[0]) : undefined;
  }
}

export interface PgTxStoreOptions {
  /** Terminal records kept: retention deletes older ones in batches (`pruneTerminal`). Default 20,000. */
  retainTerminal?: number;
  /** How often the store's upkeep runs (retention, event partitions), in ms; 0: never (tests call it). Default 60 s. */
  maintenanceMs?: number;
  /** Days of events kept (older daily partitions are dropped whole). Default 7. */
  eventRetentionDays?: number;
  /** How long a done webhook delivery (delivered or given up) stays in `webhook_outbox`, in ms. Default 1 hour. */
  doneWebhookRetentionMs?: number;
  /** Days of lifecycle entries kept in `lifecycle_entries` (LIFECYCLE_PATH is this host's to rotate). Default 30. */
  lifecycleRetentionDays?: number;
  /** This sidecar's name, recorded with its events and lifecycle entries (nothing is fenced by it yet). */
  hostId?: string | null;
  /**
   * NOTIFY the event followers of other hosts at each commit with events (pg-events.ts EVENTS_CHANNEL). Off by
   * default: one host has no one to tell, and NOTIFY serializes commits on the notification queue; the fleet turns
   * it on.
   */
  notifyEvents?: boolean;
  /** Webhook endpoints (`RELAY_WEBHOOK_URL`): each webhook event is owed to each, a `webhook_outbox` row apiece. */
  webhookEndpoints?: readonly string[];
}

// ------------------------------------------------------------------ SQL

/** A timestamptz as epoch milliseconds (a JS number). */
const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;

const TERMINAL = `('finalized', 'failed', 'expired')`;

/** An attempt's columns as a record's `attempts` (`created_at` in epoch ms). */
const ATTEMPT = `a.attempt, a.bundle_id, a.tip_lamports, a.tip_tx, a.tip_signature, a.tip_account, a.tipper,
  a.tip_last_valid_block_height, a.bundle_signatures, ${ms('a.created_at')} AS created_at, a.created_slot,
  a.slot_submitted, a.target_slot, a.window_end_slot, a.leader, a.stage, a.outcome, a.slot_landed, a.floor_at_submit,
  a.decision, a.reserved_lamports, a.released, a.leaked, a.timeline, a.send_errors, a.passengers, a.passenger_wires`;

/**
 * The columns of a whole record: the row, and its attempts in order as one json array (json, not jsonb: the nested
 * objects keep their key order; bigint columns become JSON numbers).
 */
const RECORD = `t.tx_id, t.state, t.priority, t.tip_mode, t.max_tip, ${ms('t.enqueued_at')} AS enqueued_at,
  t.enqueued_slot, t.enqueued_block_height, t.expires_at_slot, t.wires, t.signatures, t.blockhashes,
  t.nonce_accounts, t.fee_payers, t.history, t.retries, t.last_error, t.failure, t.landed_slot, t.stopped,
  coalesce((SELECT json_agg(x ORDER BY x.attempt) FROM (SELECT ${ATTEMPT} FROM attempts a WHERE a.tx_id = t.tx_id) x),
           '[]'::json) AS attempts`;

/** $1..$21 of a transaction row ({@link txParams}). */
const TX_VALUES = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, to_timestamp($12::float8 / 1000), $13, $14, $15, $16,
  $17, $18, $19, $20::json, $21::json`;

const INSERT_TX = `INSERT INTO transactions (tx_id, state, priority, tip_mode, max_tip, first_signature, signatures,
    blockhashes, nonce_accounts, fee_payers, wires, enqueued_at, enqueued_slot, enqueued_block_height, expires_at_slot,
    retries, stopped, failure, landed_slot, last_error, history, terminal_at)
  VALUES (${TX_VALUES}, CASE WHEN $2::text IN ${TERMINAL} THEN clock_timestamp() END)
  ON CONFLICT (first_signature) DO NOTHING`;

const UPDATE_TX = `UPDATE transactions SET (state, priority, tip_mode, max_tip, first_signature, signatures,
    blockhashes, nonce_accounts, fee_payers, wires, enqueued_at, enqueued_slot, enqueued_block_height, expires_at_slot,
    retries, stopped, failure, landed_slot, last_error, history, version, updated_at, terminal_at) =
  ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, to_timestamp($12::float8 / 1000), $13, $14, $15, $16, $17, $18, $19,
   $20::json, $21::json, version + 1, now(),
   CASE WHEN $2::text IN ${TERMINAL} THEN coalesce(terminal_at, clock_timestamp()) END)
  WHERE tx_id = $1`;

/** $1..$28 of an attempt row ({@link attemptParams}). */
const ATTEMPT_VALUES = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::json, $14,
  to_timestamp($15::float8 / 1000), $16, $17, $18, $19, $20, $21, $22::json, $23::json, $24::json, $25, $26, $27, $28`;
const ATTEMPT_COLUMNS = `tx_id, attempt, bundle_id, stage, outcome, tip_lamports, tip_tx, tip_signature, tip_account,
  tipper, tip_last_valid_block_height, bundle_signatures, passengers, passenger_wires, created_at, created_slot,
  slot_submitted, target_slot, window_end_slot, leader, slot_landed, floor_at_submit, decision, timeline,
  reserved_lamports, released, leaked, send_errors`;
const SETTLED = `('finalized', 'failed')`;

const INSERT_ATTEMPT = `INSERT INTO attempts (${ATTEMPT_COLUMNS}, settled_at)
  VALUES (${ATTEMPT_VALUES}, CASE WHEN $4::text IN ${SETTLED} THEN clock_timestamp() END)`;

/** A re-signed tip's old bundle id joins `previous_bundle_ids` (still findable); SET reads the row's old values. */
const UPDATE_ATTEMPT = `UPDATE attempts SET (${ATTEMPT_COLUMNS}, previous_bundle_ids, settled_at) =
  (${ATTEMPT_VALUES},
   CASE WHEN bundle_id <> $3 THEN array_append(previous_bundle_ids, bundle_id) ELSE previous_bundle_ids END,
   CASE WHEN $4::text IN ${SETTLED} THEN coalesce(settled_at, clock_timestamp()) END)
  WHERE tx_id = $1 AND attempt = $2`;

const RESERVE_SPEND = `INSERT INTO spend_reservations (tx_id, attempt, tipper, reserved_at, lamports)
  VALUES ($1, $2, $3, to_timestamp($4::float8 / 1000), $5)
  ON CONFLICT (tx_id, attempt) DO UPDATE
    SET tipper = EXCLUDED.tipper, reserved_at = EXCLUDED.reserved_at, lamports = EXCLUDED.lamports, released_at = NULL`;

/** Counted again if it was released (or pruned); an entry still counted stays as it is. */
const RECOUNT_SPEND = `INSERT INTO spend_reservations (tx_id, attempt, tipper, reserved_at, lamports)
  VALUES ($1, $2, $3, to_timestamp($4::float8 / 1000), $5)
  ON CONFLICT (tx_id, attempt) DO UPDATE
    SET reserved_at = EXCLUDED.reserved_at, lamports = EXCLUDED.lamports, released_at = NULL
    WHERE spend_reservations.released_at IS NOT NULL`;

const RELEASE_SPEND = `UPDATE spend_reservations SET released_at = now()
  WHERE tx_id = $1 AND attempt = $2 AND released_at IS NULL`;

const COUNT_EVICTION = `INSERT INTO eviction_counts (reason, count) VALUES ($1, 1)
  ON CONFLICT (reason) DO UPDATE SET count = eviction_counts.count + 1`;

const INSERT_EVENTS = `INSERT INTO events (name, tx_id, host_id, payload)
  SELECT e.name, $1, $2, e.payload::json FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS e(name, payload, n)
  ORDER BY e.n`;

/** INSERT_EVENTS, and each webhook event ($5: its webhook-id, or null) owed to every endpoint of $6, in order. */
const INSERT_EVENTS_AND_WEBHOOKS = `WITH e AS (
    SELECT nextval(pg_get_serial_sequence('events', 'id')) AS id, u.name, u.payload::json AS payload, u.hook, u.n
    FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(name, payload, hook, n)
  ), told AS (
    INSERT INTO events (id, name, tx_id, host_id, payload) OVERRIDING SYSTEM VALUE
    SELECT e.id, e.name, $1, $2, e.payload FROM e ORDER BY e.n
  )
  INSERT INTO webhook_outbox (endpoint, tx_id, webhook_id, event_xid, event_id, event_name, payload)
  SELECT ep.url, $1, e.hook, pg_current_xact_id(), e.id, e.name, e.payload
  FROM e CROSS JOIN unnest($6::text[]) WITH ORDINALITY AS ep(url, m)
  WHERE e.hook IS NOT NULL ORDER BY e.n, ep.m`;

const INSERT_LIFECYCLE = `INSERT INTO lifecycle_entries (bundle_id, tx_id, attempt, stage, host_id, entry)
  SELECT e.entry->>'bundle_id', e.entry->>'tx_id', (e.entry->>'attempt')::integer, e.entry->>'stage', $1, e.entry
  FROM (SELECT u.text::json AS entry, u.n FROM unnest($2::text[]) WITH ORDINALITY AS u(text, n)) e
  ORDER BY e.n`;

/** One batch of terminal rows older than the newest `$1` ones, `$2` at most, oldest first. */
const PRUNE_TERMINAL = `WITH cut AS (
    SELECT terminal_at, seq FROM transactions WHERE terminal_at IS NOT NULL
    ORDER BY terminal_at DESC, seq DESC OFFSET $1 LIMIT 1
  ), doomed AS (
    SELECT t.tx_id FROM transactions t, cut
    WHERE t.terminal_at IS NOT NULL AND (t.terminal_at, t.seq) <= (cut.terminal_at, cut.seq)
    ORDER BY t.terminal_at, t.seq LIMIT $2
  )
  DELETE FROM transactions t USING doomed WHERE t.tx_id = doomed.tx_id`;

/** One batch ($2 rows at most) of webhook deliveries done more than $1 ms ago, oldest first. */
const PRUNE_WEBHOOKS = `DELETE FROM webhook_outbox WHERE id IN (
    SELECT id FROM webhook_outbox WHERE done_at < now() - make_interval(secs => $1::float8 / 1000)
    ORDER BY done_at LIMIT $2)`;

/** One batch ($2 rows at most) of lifecycle entries written more than $1 days ago, oldest first. */
const PRUNE_LIFECYCLE = `DELETE FROM lifecycle_entries WHERE seq IN (
    SELECT seq FROM lifecycle_entries WHERE written_at < now() - make_interval(days => $1)
    ORDER BY written_at LIMIT $2)`;

const COUNTS = `SELECT
  (SELECT count(*) FROM transactions WHERE terminal_at IS NULL) AS active,
  (SELECT coalesce(jsonb_object_agg(priority, n), '{}'::jsonb)
     FROM (SELECT priority, count(*) AS n FROM transactions WHERE state = 'pending' AND NOT stopped
           GROUP BY priority) w) AS waiting,
  (SELECT coalesce(jsonb_object_agg(reason, count), '{}'::jsonb) FROM eviction_counts) AS evicted`;

/** Statement names by text (see {@link prepared}); the texts are this file's constants and where-clauses. */
const PREPARED = new Map<string, string>();

/**
 * `text` as a named statement: node-postgres prepares it once per connection (parse, analysis) and from then on only
 * binds and executes it, so the server parses no hot statement again and may keep a plan. The same SQL with the same
 * parameters and results; it only saves the server work per statement. Measured (bench `stores`,
 * `BENCH_PG_STATEMENTS=1`): planning the record read by id cost the server more time than executing it.
 */
function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = PREPARED.get(text);
  if (name === undefined) {
    name = `relay_${PREPARED.size + 1}`;
    PREPARED.set(text, name);
  }
  return { name, text, values };
}

/** Lock a record's row, then read it whole: a statement begun after the lock sees every write committed before. */
async function lockRecord(db: pg.PoolClient, txId: string): Promise<StoredTx | undefined> {
  const locked = await db.query(prepared('SELECT 1 FROM transactions WHERE tx_id = $1 FOR UPDATE', [txId]));
  if (locked.rowCount === 0) return undefined;
  return readOne(db, 't.tx_id = $1', [txId]);
}

async function readOne(db: pg.PoolClient, where: string, values: unknown[]): Promise<StoredTx | undefined> {
  const { rows } = await db.query<TxRow>(
    prepared(`SELECT ${RECORD} FROM transactions t WHERE ${where}`, values),
  );
  return rows[0] ? fromRow(rows[0]) : undefined;
}

// ------------------------------------------------------------------ rows

/** A record's row as node-postgres gives it: bigint columns as strings, json parsed, float8 as numbers. */
interface TxRow {
  tx_id: string;
  state: TxState;
  priority: StoredTx['priority'];
  tip_mode: StoredTx['tip'];
  max_tip: string | null;
  enqueued_at: number;
  enqueued_slot: string;
  enqueued_block_height: string | null;
  expires_at_slot: string;
  wires: string[] | null;
  signatures: string[];
  blockhashes: string[];
  nonce_accounts: Array<string | null>;
  fee_payers: string[];
  history: StoredTx['history'];
  retries: number;
  last_error: StoredTx['last_error'];
  failure: StoredTx['failure'];
  landed_slot: string | null;
  stopped: boolean;
  attempts: AttemptJson[];
}

/** An attempt as the record's `attempts` json gives it (bigints as JSON numbers, `created_at` in epoch ms). */
type AttemptJson = Omit<StoredAttempt, 'tipper' | 'passengers' | 'passenger_wires'> & {
  tipper: string | null;
  passengers: StoredAttempt['passengers'] | null;
  passenger_wires: string[] | null;
};

/** A bigint column (a string from node-postgres) as a JS number; refuses one a JS number cannot hold exactly. */
function int(value: string | number): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`${value} is not an integer a JS number holds exactly`);
  return n;
}

function intOrNull(value: string | null): number | null {
  return value === null ? null : int(value);
}

function fromRow(row: TxRow): StoredTx {
  const tx: StoredTx = {
    tx_id: row.tx_id,
    state: row.state,
    priority: row.priority,
    tip: row.tip_mode,
    max_tip: intOrNull(row.max_tip),
    enqueued_at: row.enqueued_at,
    enqueued_slot: int(row.enqueued_slot),
    expires_at_slot: int(row.expires_at_slot),
    wires: row.wires,
    signatures: row.signatures,
    blockhashes: row.blockhashes,
    nonce_accounts: row.nonce_accounts,
    fee_payers: row.fee_payers,
    history: row.history,
    attempts: row.attempts.map(attemptFromJson),
    retries: row.retries,
    last_error: row.last_error,
    failure: row.failure,
    landed_slot: intOrNull(row.landed_slot),
    stopped: row.stopped,
  };
  if (row.enqueued_block_height !== null) tx.enqueued_block_height = int(row.enqueued_block_height);
  return tx;
}

function attemptFromJson(j: AttemptJson): StoredAttempt {
  const attempt: StoredAttempt = {
    attempt: j.attempt,
    bundle_id: j.bundle_id,
    tip_lamports: j.tip_lamports,
    tip_tx: j.tip_tx,
    tip_signature: j.tip_signature,
    tip_account: j.tip_account,
    tipper: j.tipper,
    tip_last_valid_block_height: j.tip_last_valid_block_height,
    bundle_signatures: j.bundle_signatures,
    created_at: j.created_at,
    created_slot: j.created_slot,
    slot_submitted: j.slot_submitted,
    target_slot: j.target_slot,
    window_end_slot: j.window_end_slot,
    leader: j.leader,
    stage: j.stage,
    outcome: j.outcome,
    slot_landed: j.slot_landed,
    floor_at_submit: j.floor_at_submit,
    decision: j.decision,
    reserved_lamports: j.reserved_lamports,
    released: j.released,
    leaked: j.leaked,
    timeline: j.timeline,
    send_errors: j.send_errors,
  };
  // Packing sets both; the wires go (null) when the record is terminal, the passengers stay.
  if (j.passengers !== null) {
    attempt.passengers = j.passengers;
    attempt.passenger_wires = j.passenger_wires;
  }
  return attempt;
}

/** json parameters go as JSON text (node-postgres would send a JS array as a PostgreSQL array). */
function json(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value);
}

function txParams(tx: StoredTx): unknown[] {
  return [
    tx.tx_id,
    tx.state,
    tx.priority,
    tx.tip,
    tx.max_tip,
    tx.signatures[0],
    tx.signatures,
    tx.blockhashes,
    tx.nonce_accounts,
    tx.fee_payers,
    tx.wires,
    tx.enqueued_at,
    tx.enqueued_slot,
    tx.enqueued_block_height ?? null,
    tx.expires_at_slot,
    tx.retries,
    tx.stopped,
    tx.failure,
    tx.landed_slot,
    json(tx.last_error),
    JSON.stringify(tx.history),
  ];
}

function attemptParams(txId: string, a: StoredAttempt): unknown[] {
  return [
    txId,
    a.attempt,
    a.bundle_id,
    a.stage,
    a.outcome,
    a.tip_lamports,
    a.tip_tx,
    a.tip_signature,
    a.tip_account,
    a.tipper ?? null,
    a.tip_last_valid_block_height,
    a.bundle_signatures,
    json(a.passengers),
    a.passenger_wires ?? null,
    a.created_at,
    a.created_slot,
    a.slot_submitted,
    a.target_slot,
    a.window_end_slot,
    a.leader,
    a.slot_landed,
    json(a.floor_at_submit),
    json(a.decision),
    json(a.timeline),
    a.reserved_lamports,
    a.released,
    a.leaked,
    a.send_errors,
  ];
}

/** A record accepted already terminal keeps no payload (a copy: the caller's object is theirs). */
function retired(tx: StoredTx): StoredTx {
  const copy = { ...tx };
  dropPayload(copy);
  return copy;
}

// ------------------------------------------------------------------ errors

/** A unique violation of `constraint` (SQLSTATE 23505). */
function violates(error: unknown, constraint: string): boolean {
  return error instanceof pg.DatabaseError && error.code === '23505' && error.constraint === constraint;
}

/**
 * The server answered the COMMIT with an ERROR (a deferred constraint, a serialization failure): the transaction
 * rolled back. FATAL and PANIC, connection errors (08) and shutdowns (57P) end the session without telling.
 */
function refusedByServer(error: unknown): boolean {
  if (!(error instanceof pg.DatabaseError)) return false;
  const code = error.code ?? '';
  return error.severity === 'ERROR' && !code.startsWith('08') && !code.startsWith('57P');
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/**
 * The server cancelled the statement for a limit relay sets (lock_timeout 55P03, statement_timeout 57014) or broke a
 * deadlock or serialization conflict (40P01, 40001): its transaction rolled back, and the same request may succeed
 * later.
 */
function cancelledByServer(error: unknown): boolean {
  if (!(error instanceof pg.DatabaseError)) return false;
  return ['55P03', '57014', '40P01', '40001'].includes(error.code ?? '');
}

/**
 * The database is not there (refused, reset, shut down, out of connections), as opposed to a refused statement. For
 * readers of the pool beside the store (the event log's follower): such a failure is the store's outage, which the
 * store reports itself.
 */
export function lostConnection(error: unknown): boolean {
  if (error instanceof StoreConflict || isRelayError(error)) return false;
  if (error instanceof pg.DatabaseError) {
    const code = error.code ?? '';
    return code.startsWith('08') || code.startsWith('57P') || code === '53300';
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  const message = String((error as { message?: unknown } | null)?.message ?? '');
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|not queryable|Client has encountered a connection error/i.test(
    message,
  );
}

function reasonOf(error: unknown): string {
  return String((error as { message?: unknown } | null)?.message ?? error);
}
