import {
  RelayError,
  isRelayError,
  isTerminalTxState,
  webhookIdsOfChange,
  type EventCursor,
  type FleetStatus,
  type TxState,
} from '@solrelay/core';
import pg from 'pg';
import { connectDatabase, databaseError, warmPool, type DatabaseOptions } from '../pg/connect';
import { assertSchema } from '../pg/migrations';
import { HostSession } from '../pg/host-session';
import { SoleWriterLock } from '../pg/sole-writer';
import type { DatabaseUrl } from '../pg/url';
import {
  attemptKey,
  dropPayload,
  forgetRecord,
  patchedRecord,
  reservationIncrease,
  spendEffects,
  storeCodec,
  type SpendEffect,
  type PatchOp,
  type StoreState,
  type StoredAttempt,
  type StoredTx,
} from './records';
import { awaitingAttemptOf, followedOf, landedInOf, liveOf } from './queries';
import {
  ChangeFeed,
  SpendLimitReached,
  StoreConflict,
  assertWithinSpendLimit,
  matches,
  tipKey,
  mayAddAttempt,
  type Admission,
  type SpendLimit,
  type StoreCounts,
  type TipRef,
  type TxChange,
  type TxEvent,
  type TxExpectation,
  type TxStore,
} from './store';
import { Semaphore, SemaphoreTimeout } from '../util/semaphore';
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

/** The SQLSTATE of migrations/003's refusal of a row whose owner's session is not live. */
const SESSION_NOT_LIVE = 'RLY01';
/** `relay_admit`'s refusals (migrations/004): the fleet's queue is full, its rate limit reached. */
const QUEUE_FULL = 'RLY02';
const RATE_LIMITED = 'RLY03';
/** `relay_spend_check`'s refusal (migrations/004): this reservation would pass the fleet's spend-limit. */
const SPEND_LIMIT_PASSED = 'RLY04';
/** The fleet's limit functions refuse to run outside READ COMMITTED (migrations/004). */
const NOT_READ_COMMITTED = 'RLY05';

/** The advisory lock one host at a time holds while it sweeps (`PgTxStore.sweep`). */
const SWEEP_LOCK = '8243113858876797815'; // 0x72656c6179737777, "relaysww"

/** The advisory lock the upkeep of `events`' partitions takes (`PgTxStore.partitions`). */
const PARTITIONS_LOCK = 0x72656c70;

/** The advisory lock every reservation checked against `spend-limit` takes (an arbitrary constant). */

/** Lamports reserved or paid, not released, at or after $1 (ms): what `spend-limit` counts. */
const SPENT_SINCE = `SELECT coalesce(sum(lamports), 0)::bigint AS n FROM spend_reservations
  WHERE released_at IS NULL AND reserved_at >= to_timestamp($1::float8 / 1000)`;

/**
 * The store on PostgreSQL (DESIGN §10, `RELAY_DATABASE_URL`): the schema of `migrations/`, one row per transaction,
 * one per attempt, the spend ledger, and the events and lifecycle entries each change causes.
 *
 * **Owned state stays in memory** (DESIGN §10). The store holds the records it owns (on one host: every live one and
 * the retained terminal ones) in the same tables the local stores keep (`records.ts`), read whole at open. The hot
 * reads (get, byFirstSignature, byBundle, live, awaitingAttempt, landedIn, followed) answer from them; a record it
 * does not hold is read from the database. Each held record's row `version` is what its next write expects.
 *
 * **One host (`sole`, the default; `RELAY_FLEET` turns it off).** The store is then the only writer of its database, so
 * what it holds is every live record and the whole unreleased spend ledger (read at open with the records): the
 * admission counts, the rolling hour's spend and dedupe by first signature answer from memory, as the journal's do,
 * and a spend-limit check is the journal's too (what is held, plus reservations being committed right now), ahead of
 * the one statement that reserves. A dedupe that misses memory needs no query: the accept's own insert finds a row
 * the store no longer holds (`ON CONFLICT`). With `sole: false` (several hosts on one database) counts, spend and
 * dedupe misses go to the database, a reservation checked against spend-limit is the same statement in a
 * transaction after the limit's advisory lock and the database's sum, and an accept is checked against `max-queue`
 * and `rate-limit` under the admission lock ({@link admitted}).
 *
 * **Every write is one statement**, computed here and never read back: the caller's expectation is checked on the
 * held record (refused: {@link StoreConflict} with it), the change applied to it (the same `patchedRecord` the local
 * stores apply), and one statement in autocommit writes the row (compare-and-set on its version), the attempts it
 * touched, their spend, the eviction count, its events, webhook rows and lifecycle entries: one round trip and one
 * commit. Only once it is acknowledged does the promise resolve with the new record (applied to the held one) and the
 * change feed tell its listeners. A row not at the expected version (another writer) drops the held record, re-reads
 * it and decides again; so does a write that failed for any reason but a refusal for want of the database. An accept is the same statement with the row's insert (`ON CONFLICT DO NOTHING`) in place of its update.
 *
 * **Write-ahead.** A write resolves only once its commit is acknowledged (synchronous_commit on): the signed tip and
 * bundle id of an attempt are in the database before anything may send them. A write whose commit was sent but not
 * answered (the connection lost while its statement or its COMMIT ran) may or may not have committed: it rejects
 * with `RELAY_E_DB_COMMIT_UNKNOWN`, the held record is dropped (the next list re-reads it before answering, and
 * fails while it cannot), and the caller must re-read the record and never send on the strength of that write. That
 * re-read waits until the lost write's transaction has ended on the server, which may still be finishing it
 * ({@link resolve}); until then every read of the record rejects with `RELAY_E_DB_COMMIT_UNKNOWN` again. A
 * write that fails before its commit was sent did not commit: `RELAY_E_DB_UNAVAILABLE` (connection) or the server's
 * own error.
 *
 * **Outages.** The first failure for want of the database (or an idle connection the server closed: a restart) marks
 * the store unavailable: `healthy` is false, `problem` says why naming the database, and {@link watchAvailability}
 * listeners are told `down` once. While it is, a probe (`SELECT 1`) runs every 500 ms, and the first that succeeds
 * tells `up` once (a caller's statement that succeeds meanwhile does not: it may have begun before). The store never
 * throws for an outage outside a caller's promise: no timer, pool or idle-connection error escapes.
 *
 * **Order and dedupe.** Writes to one record apply in call order within this process (the same {@link WriteChain}
 * as the local stores); across processes the row's version orders them (a write that lost the race re-reads). Dedupe by first signature is the table's UNIQUE
 * constraint (`INSERT ... ON CONFLICT DO NOTHING`, then the existing row is read); "at most one unsettled attempt" is
 * the partial unique index `attempts_one_unsettled`, whose violation becomes a StoreConflict.
 *
 * **Retention.** A record that becomes terminal drops its wire bytes in the same transaction. Old terminal rows are
 * deleted in batches by {@link PgTxStore.pruneTerminal} (run by the store's maintenance timer), never row by row on
 * a transition: so `retainTerminal` is a level the store returns to, not one it holds at every commit.
 *
 * **Owner.** With a host session (`options.session`, pg/host-session.ts) an accept writes the session as the row's
 * owner, the live rows are adopted under each new epoch ({@link adopt}), and every write of a live row is fenced by
 * the owner in its own compare-and-set: the database refuses a write by an epoch whose work moved. With several hosts
 * the store holds only its session's rows, refuses another host's live transaction (`RELAY_E_TX_OWNED_ELSEWHERE`),
 * and the takeover sweep ({@link sweep}) adopts the work of sessions that ended or lapsed. Claiming pending work by
 * send budget is not built yet. No transaction is held across anything but SQL; the statement, lock and
 * idle-in-transaction timeouts are the pool's (`connectDatabase`).
 */
export class PgTxStore implements TxStore {
  readonly changes = new ChangeFeed();
  /** The `events` table in cursor order: what SSE follows on PostgreSQL (see pg-events.ts). */
  readonly eventLog: PgEventLog;
  /** The fleet's lifecycle log (`lifecycle_entries`), what the API reads on PostgreSQL. */
  readonly lifecycleEntries: PgLifecycleEntries;
  private readonly writes = new WriteChain();
  /** The tables of `records.ts` over the records this store owns (see the class comment), and their rules. */
  private readonly codec;
  private readonly owned: StoreState;
  /** The `version` of each held record's row, as this store last wrote or read it: what its next write expects. */
  private readonly versions = new Map<string, number>();
  /** Records dropped from memory for a write of unknown outcome, refused or beaten: re-read before a list answers. */
  private readonly unsure = new Set<string>();
  /** The server backend of each connection this store wrote on (learned at its first write): see {@link identify}. */
  private readonly backends = new WeakMap<pg.ClientBase, Backend>();
  /**
   * Writes whose answer was lost, by record: the backends they ran on, until each is known to have ended (see
   * {@link resolve}). A record with one is re-read only after that.
   */
  private readonly lost = new Map<string, LostWrite[]>();
  /** The lock that makes this store its database's only writer (`sole`); null without it. */
  private soleLock: SoleWriterLock | null = null;
  /**
   * This host's session (`options.session`): the owner every accept writes and every write of live work is fenced by
   * (DESIGN §10). Null without one: the owner columns stay null and the fence compares nulls.
   */
  private session: HostSession | null = null;
  /** The epoch this host's live work has been adopted under ({@link adopt}): writes wait for it to be the session's. */
  private adoptedEpoch: number | null = null;
  /** Lamports of spend-limited reservations being committed now (`sole`: counted by the next check, as the journal). */
  private reserving = 0;
  /** Writes begun and not settled (`close` waits for them). */
  private readonly pending = new Set<Promise<unknown>>();
  /** Connections writes other than the decision path's may hold at once ({@link lane}). */
  private readonly background: Semaphore;
  private readonly options: Required<PgTxStoreOptions>;
  private maintenance: NodeJS.Timeout | null = null;
  /** Told when a periodic upkeep run fails while the database is up (the sidecar logs it); the next run retries. */
  onMaintenanceError: ((error: unknown) => void) | null = null;
  /** Told each write refused because the work is not this host's (several hosts; the sidecar counts them). */
  onFenced: ((reason: 'owned_elsewhere' | 'session_not_live') => void) | null = null;
  private closed = false;
  /** Since when, and why, the database has been unavailable (cleared when the probe next succeeds). */
  private outage: { since: number; reason: string; session?: boolean } | null = null;
  private probe: NodeJS.Timeout | null = null;
  /** A probe is waiting for its answer (one at a time: a server that hangs must not fill the pool with them). */
  private probing = false;
  private readonly availability = new Set<(change: DatabaseAvailability) => void>();
  /** Several hosts: the takeover sweep's timer ({@link sweep}), and who is told what it adopted. */
  private sweeper: NodeJS.Timeout | null = null;
  private sweeping = false;
  /** A sweep failed in a way that may have committed: read back this session's live rows it does not hold first. */
  private strandedCheck = false;
  private readonly adoptions = new Set<(adopted: Adopted) => void>();

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
    try {
      // The session first: a second sidecar started under the same RELAY_HOST_ID is refused by name
      // (RELAY_E_HOST_ID_IN_USE) before anything else, the sole-writer lock included.
      const session = store.options.session;
      if (session)
        store.session = await HostSession.open(pool.options, target, {
          hostId: session.hostId,
          leaseMs: session.leaseMs,
          onLost: (reason) => store.sessionLost(reason),
        });
      // One host: this store is the database's only writer (what it holds answers counts, spend and dedupe), so
      // another sidecar on the same database is refused, and a dead predecessor's commit still running is waited
      // for before the records are read (see SoleWriterLock).
      // Several hosts hold the same lock shared: a one-host sidecar and a fleet never write one database together.
      if (store.options.sole || store.session)
        store.soleLock = await SoleWriterLock.acquire(
          pool.options,
          target,
          () => store.lockLost(),
          undefined,
          !store.options.sole,
        );
      await warmPool(pool);
      await store.adopt();
      await store.load();
      // Upkeep once before anything is written: after days down, today's `events` partition must exist before the
      // first insert, or rows go to the default partition and that day's partition can never be made (its range would
      // overlap rows already there).
      await store.maintain();
    } catch (error) {
      await store.close().catch(() => undefined);
      throw databaseError(error, target);
    }
    return store;
  }

  private constructor(
    private readonly pool: pg.Pool,
    private readonly target: DatabaseUrl,
    options: PgTxStoreOptions = {},
    private readonly ownsPool = false,
  ) {
    this.options = {
      retainTerminal: options.retainTerminal ?? 20_000,
      maintenanceMs: options.maintenanceMs ?? 60_000,
      eventRetentionDays: options.eventRetentionDays ?? 7,
      hostId: options.session?.hostId ?? options.hostId ?? null,
      webhookEndpoints: options.webhookEndpoints ?? [],
      doneWebhookRetentionMs: options.doneWebhookRetentionMs ?? 60 * 60 * 1000,
      lifecycleRetentionDays: options.lifecycleRetentionDays ?? 30,
      notifyEvents: options.notifyEvents ?? false,
      sole: options.sole ?? true,
      session: options.session ?? null,
      sweepMs: options.sweepMs ?? (options.session ? Math.max(100, options.session.leaseMs / 5) : 0),
    };
    this.codec = storeCodec(this.options.retainTerminal);
    this.owned = this.codec.initial();
    const poolMax = pool.options.max ?? 10;
    this.background = new Semaphore(
      Math.max(1, poolMax - Math.min(DECISION_CONNECTIONS, Math.floor(poolMax / 3))),
    );
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

  /** This host's session (its id and current epoch), or null without one. */
  get hostSession(): HostSession | null {
    return this.session;
  }

  /**
   * `GET /status`'s `fleet`: this host's session and every session of the database (with the live work each owns);
   * `hosts` is null when the database cannot answer (the status still answers).
   */
  async fleetStatus(): Promise<FleetStatus> {
    const session = this.session;
    if (!session) throw new Error('this store has no host session');
    const hosts = await HostSession.fleet((text, values) => this.statement(text, values)).catch(() => null);
    return {
      host_id: session.hostId,
      epoch: session.epoch,
      lease_ms: session.leaseMs,
      live: session.live && this.adoptedEpoch === session.epoch,
      hosts,
    };
  }

  /** Whether each commit with events NOTIFYs other hosts' followers (so followers should LISTEN). */
  get notifiesEvents(): boolean {
    return this.options.notifyEvents;
  }

  get healthy(): boolean {
    // A session found lapsed by its own clock is not healthy even before its heartbeat has told the store.
    return !this.closed && this.outage === null && this.fenced() === null;
  }

  /** Why the store is not healthy, naming the database (null while it is). */
  get problem(): string | null {
    if (this.closed) return 'store closed';
    if (!this.outage) {
      const fenced = this.fenced();
      return fenced
        ? `PostgreSQL at ${this.target.redacted}: writes stopped (${String(fenced.details.reason)})`
        : null;
    }
    const seconds = Math.round((Date.now() - this.outage.since) / 1000);
    // The database may be fine (a pause outlived the lease) or gone (its restart ended the session's connection).
    if (this.outage.session)
      return `PostgreSQL at ${this.target.redacted}: writes stopped for ${seconds} s (${this.outage.reason})`;
    return `PostgreSQL at ${this.target.redacted} unavailable for ${seconds} s (${this.outage.reason})`;
  }

  /** Be told when the database goes away and when it comes back (once per change); returns the unsubscribe. */
  watchAvailability(listener: (change: DatabaseAvailability) => void): () => void {
    this.availability.add(listener);
    return () => this.availability.delete(listener);
  }

  // ------------------------------------------------------------------ transitions

  accept(
    tx: StoredTx,
    events: readonly TxEvent[] = [],
    admission?: Admission,
  ): Promise<{ tx: StoredTx; created: boolean }> {
    const first = tx.signatures[0] as string;
    return this.writes.run(`sig:${first}`, async () => {
      const knownId = this.owned.bySignature.get(first);
      const known =
        knownId === undefined || this.unsure.has(knownId) ? undefined : this.owned.records.get(knownId);
      if (known) return { tx: known, created: false };
      // A copy: the caller's object stays theirs, the held record this store's.
      const record = isTerminalTxState(tx.state) ? retired(tx) : structuredClone(tx);
      const values = this.changeParams(record, [], record.attempts, {}, events);
      let outcome: { tx: StoredTx; created: boolean; version: number } | undefined;
      // Another host (or a retention batch) may delete the row that refused ours before we read it: try again.
      // Several hosts: the fleet's limits are checked again where the row is inserted (one host's checks in
      // memory see only its own enqueues).
      const admit = !this.options.sole && admission ? admission : undefined;
      for (let tries = 0; tries < MAX_TRIES && !outcome; tries++) {
        const inserting = admit
          ? this.admitted(tx.tx_id, admit, values)
          : this.autocommit(tx.tx_id, 'accept', ACCEPT, values);
        const inserted = await inserting.catch((error: unknown) => {
          // Perhaps committed: the next list reads it back (or learns it is not there) before it answers.
          if (isRelayError(error, 'RELAY_E_DB_COMMIT_UNKNOWN')) this.unsure.add(tx.tx_id);
          throw error;
        });
        if (inserted === 1) outcome = { tx: record, created: true, version: 1 };
        else {
          const { rows } = await this.statement<VersionedRow>(
            `SELECT ${HELD} FROM transactions t WHERE t.first_signature = $1`,
            [first],
          );
          const row = rows[0];
          if (row) {
            // Another host's (the fleet's dedupe): answered, not held; its owner runs it.
            if (!this.ours(row)) return { tx: fromRow(row), created: false };
            outcome = { tx: fromRow(row), created: false, version: int(row.version) };
          }
        }
      }
      if (!outcome)
        throw new Error(`transaction ${tx.tx_id}: first signature ${first} neither inserted nor found`);
      const stored = this.remember(outcome.tx, outcome.version);
      if (outcome.created) this.changes.emit(stored, events);
      return { tx: stored, created: outcome.created };
    });
  }

  /**
   * Several hosts: insert the row with {@link ADMIT_ACCEPT}, one autocommit statement that first calls
   * `relay_admit` (migrations/004): under the fleet's admission lock it checks `max-queue` (live transactions) and
   * `rate-limit` (the `admissions` rows of the last 60 s by the database's clock); the statement then inserts the row
   * and, if it did, this enqueue's admission row. Admissions are thereby one at a time across the fleet, each seeing
   * every one committed before it, and the lock is never held across a round trip to this process (a host paused or
   * cut off mid-enqueue stalls no other host's). Refused: `RELAY_E_QUEUE_FULL` / `RELAY_E_RATE_LIMITED`, nothing
   * written. A first signature already taken inserts nothing, its admission row included (resolves 0: the caller reads
   * the existing row).
   */
  private async admitted(txId: string, admission: Admission, values: unknown[]): Promise<number> {
    return this.autocommit(txId, 'accept', ADMIT_ACCEPT, [
      ...values,
      admission.maxQueue,
      admission.rateLimit,
    ]).catch((error: unknown) => {
      if (error instanceof pg.DatabaseError && error.code === QUEUE_FULL)
        throw new RelayError('RELAY_E_QUEUE_FULL', { limit: admission.maxQueue, retry_after_s: 1 });
      if (error instanceof pg.DatabaseError && error.code === RATE_LIMITED)
        throw new RelayError('RELAY_E_RATE_LIMITED', {
          limit: admission.rateLimit,
          retry_after_s: Math.max(1, Math.ceil(Number(error.detail ?? 1000) / 1000)),
        });
      throw error;
    });
  }

  addAttempt(
    txId: string,
    attempt: StoredAttempt,
    options: { expect?: TxExpectation; set?: TxChange['set']; spendLimit?: SpendLimit } = {},
  ): Promise<StoredTx> {
    const expect = options.expect ?? {};
    const op = { attempt, ...(options.set ? { set: options.set } : {}) };
    const limit = options.spendLimit;
    const spend = limit && limit.limit > 0 && !attempt.released ? limit : undefined;
    return this.writes.run(txId, async () => {
      for (let tries = 1; ; tries++) {
        const mine = await this.mine(txId);
        const tx = mine?.tx;
        mayAddAttempt(txId, tx, expect);
        try {
          const next = await this.persist('addAttempt', tx, mine?.version ?? 0, op, [], spend);
          if (next) return next;
        } catch (error) {
          // Another writer's unsettled attempt (another host, or one not in flight yet unsettled): the index decides.
          if (violates(error, 'attempts_one_unsettled'))
            throw new StoreConflict(txId, 'no attempt in flight', (await this.reread(txId))?.tx);
          throw error;
        }
        if (tries >= MAX_TRIES) throw new StoreConflict(txId, expect, (await this.reread(txId))?.tx);
      }
    });
  }

  transition(txId: string, expect: TxExpectation, change: TxChange): Promise<StoredTx> {
    const { events = [], spendLimit, ...op } = change;
    const limit = spendLimit && spendLimit.limit > 0 ? spendLimit : undefined;
    return this.writes.run(txId, async () => {
      for (let tries = 1; ; tries++) {
        const mine = await this.mine(txId);
        if (!mine || !matches(mine.tx, expect)) throw new StoreConflict(txId, expect, mine?.tx);
        const checked = limit && reservationIncrease(mine.tx, op) > 0 ? limit : undefined;
        const next = await this.persist('transition', mine.tx, mine.version, op, events, checked);
        if (next) {
          this.changes.emit(next, events);
          return next;
        }
        if (tries >= MAX_TRIES) throw new StoreConflict(txId, expect, (await this.reread(txId))?.tx);
      }
    });
  }

  async pruneSpend(before: number): Promise<void> {
    await this.statement(
      'DELETE FROM spend_reservations WHERE reserved_at < to_timestamp($1::float8 / 1000)',
      [before],
    );
    // The held ledger: what spend-limit is checked against on one host (`sole`).
    this.codec.apply(this.owned, { k: 'prune-spend', before });
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
    for (const txId of this.versions.keys()) if (!this.owned.records.has(txId)) this.versions.delete(txId);
    await this.pruneTerminal();
    await this.pruneDelivered();
    await this.partitions();
    // Admissions count for a minute (rate-limit's window); kept a few more for anyone looking.
    await this.inBatches(
      `DELETE FROM admissions WHERE ctid IN (SELECT ctid FROM admissions WHERE at < now() - interval '5 minutes' LIMIT $1)`,
      [],
      1000,
    );
    // Ended host sessions are history a week long (no row refers to a session: owners are plain columns).
    await this.statement(`DELETE FROM host_sessions WHERE ended_at < now() - interval '7 days'`);
  }

  /**
   * Make the coming week's daily partitions of `events` and drop those past the retention, in one transaction under
   * an advisory lock: hosts of a fleet start and keep up at the same time, and two `CREATE TABLE ... PARTITION OF`
   * of one day at once fail one of them ("relation already exists"; a fleet's hosts starting together found it).
   */
  private async partitions(): Promise<void> {
    const db = await this.pool.connect().catch((error: unknown) => {
      throw this.failed(error);
    });
    const ignore = () => undefined;
    db.on('error', ignore);
    try {
      await db.query(`BEGIN; SELECT pg_advisory_xact_lock(${PARTITIONS_LOCK})`);
      await db.query('SELECT relay_events_add_partitions(7)');
      await db.query('SELECT relay_events_drop_partitions(now() - make_interval(days => $1))', [
        this.options.eventRetentionDays,
      ]);
      await db.query('COMMIT');
      db.off('error', ignore);
      db.release();
    } catch (error) {
      await rollBack(db, ignore, error);
      throw this.failed(error);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.maintenance) clearInterval(this.maintenance);
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
    await Promise.allSettled([...this.pending]);
    await this.soleLock?.release();
    await this.session?.end();
    if (this.ownsPool) await this.pool.end();
  }

  // ------------------------------------------------------------------ queries
  //
  // The hot reads answer from the records this store owns (kept in memory, see the class comment); a record it does
  // not hold (another host's, one retention let go of) is read from the database. Reads that are the fleet's (all,
  // counts, spend) go to the database.

  async get(txId: string): Promise<StoredTx | undefined> {
    if (this.unsure.has(txId)) {
      // In the record's write order, so the re-read never overtakes a write.
      return this.writes.run(txId, async () => (await this.reread(txId))?.tx);
    }
    return this.owned.records.get(txId) ?? this.find('t.tx_id = $1', [txId]);
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

  async byFirstSignature(signature: string): Promise<StoredTx | undefined> {
    const id = this.owned.bySignature.get(signature);
    if (id !== undefined && !this.unsure.has(id)) {
      const tx = this.owned.records.get(id);
      if (tx) return tx;
    }
    // One host: a record not held is gone, or retention is about to delete it (the accept's insert still finds it),
    // unless it is one this store stopped trusting (dropped from memory until re-read): then the database says.
    if (this.options.sole && id === undefined && this.unsure.size === 0) return undefined;
    return this.sure(await this.find('t.first_signature = $1', [signature]));
  }

  async byBundle(bundleId: string): Promise<StoredTx | undefined> {
    const id = this.owned.byBundle.get(bundleId);
    if (id !== undefined && !this.unsure.has(id)) {
      const tx = this.owned.records.get(id);
      if (tx) return tx;
    }
    return this.sure(
      await this.find(
        `t.tx_id = (SELECT tx_id FROM attempts WHERE bundle_id = $1 OR previous_bundle_ids @> ARRAY[$1::text] LIMIT 1)`,
        [bundleId],
      ),
    );
  }

  /** A record read from the database by a lookup: if this store stopped trusting it, re-read as `get` does. */
  private async sure(tx: StoredTx | undefined): Promise<StoredTx | undefined> {
    return tx && this.unsure.has(tx.tx_id) ? this.get(tx.tx_id) : tx;
  }

  async live(): Promise<StoredTx[]> {
    await this.settle();
    return liveOf(this.owned.records.values());
  }

  async awaitingAttempt(): Promise<StoredTx[]> {
    await this.settle();
    return awaitingAttemptOf(this.owned.records.values());
  }

  async heldTips(tips: readonly TipRef[]): Promise<Set<string>> {
    if (tips.length === 0) return new Set();
    const { rows } = await this.statement<{ tx_id: string; attempt: number; tip_signature: string }>(
      `SELECT a.tx_id, a.attempt, a.tip_signature FROM attempts a
       JOIN unnest($1::text[], $2::int[], $3::text[]) AS w(tx_id, attempt, tip_signature)
         ON a.tx_id = w.tx_id AND a.attempt = w.attempt AND a.tip_signature = w.tip_signature`,
      [tips.map((t) => t.txId), tips.map((t) => t.attempt), tips.map((t) => t.tipSignature)],
    );
    return new Set(
      rows.map((r) => tipKey({ txId: r.tx_id, attempt: r.attempt, tipSignature: r.tip_signature })),
    );
  }

  async landedIn(slot: number): Promise<StoredTx[]> {
    await this.settle();
    return landedInOf(this.owned.records.values(), slot);
  }

  async followed(sinceSlot: number): Promise<{ live: StoredTx[]; ended: StoredTx[] }> {
    await this.settle();
    return followedOf(this.owned.records.values(), sinceSlot);
  }

  all(): Promise<StoredTx[]> {
    return this.read('true');
  }

  async held(): Promise<StoredTx[]> {
    // Every 2 s (the tippers' balance pass): reading the table here was the whole retained set (20,000 terminal
    // records by default) sent and parsed on the sidecar's thread each time.
    await this.settle();
    return [...this.owned.records.values()];
  }

  async otherHostsTips(sinceSlot: number): Promise<StoredAttempt[]> {
    if (this.options.sole || !this.session) return [];
    const { rows } = await this.statement<{ attempts: AttemptJson[] | null }>(OTHER_HOSTS_TIPS, [
      this.session.hostId,
      sinceSlot,
    ]);
    return (rows[0]?.attempts ?? []).map(attemptFromJson);
  }

  async counts(): Promise<StoreCounts> {
    if (this.options.sole) {
      await this.settle();
      const s = this.owned;
      return {
        active: s.active,
        waiting: { ...s.waiting },
        ownWaiting: { ...s.waiting },
        evicted: { ...s.evicted },
      };
    }
    // What this host sends is what it holds (its session's live work), settled as the lists are.
    await this.settle();
    const ownWaiting = { ...this.owned.waiting };
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
      ownWaiting,
      evicted: row.evicted,
    };
  }

  async spentSince(cutoff: number): Promise<number> {
    if (this.options.sole) return this.owned.spend.spentSince(cutoff);
    const { rows } = await this.statement<{ n: string }>(SPENT_SINCE, [cutoff]);
    return int(rows[0]?.n ?? '0');
  }

  async hasSpendOlderThan(before: number): Promise<boolean> {
    // The database's rows, released ones too (the held ledger has only what still counts): they all leave.
    const { rows } = await this.statement<{ older: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM spend_reservations WHERE reserved_at < to_timestamp($1::float8 / 1000)) AS older`,
      [before],
    );
    return rows[0]?.older === true;
  }

  // ------------------------------------------------------------------ internals

  /**
   * Read every retained record into memory (at open): the records this store owns. Terminal ones first, in the order
   * they ended, so the cache's own retention lets the oldest go first; then the live ones in acceptance order.
   */
  private async load(): Promise<void> {
    // Several hosts: this host's own rows only (adopted under its epoch just before); the rest are their owners'.
    const own = this.options.sole || !this.session ? '' : 'WHERE t.owner_host = $1';
    // Spend first: a terminal record put below folds its attempts' entries into per-second sums (records.ts).
    const spend = await this.pool.query<{ tx_id: string; attempt: number; at: number; lamports: string }>(
      `SELECT tx_id, attempt, ${ms('reserved_at')} AS at, lamports FROM spend_reservations WHERE released_at IS NULL`,
    );
    this.codec.apply(this.owned, {
      k: 'spend',
      entries: spend.rows.map((r) => [attemptKey(r.tx_id, r.attempt), r.at, int(r.lamports)]),
    });
    const { rows } = await this.pool.query<VersionedRow>(
      `SELECT ${HELD} FROM transactions t ${own} ORDER BY t.terminal_at NULLS LAST, t.seq`,
      own ? [this.session?.hostId] : [],
    );
    for (const row of rows) this.remember(fromRow(row), int(row.version));
    const counted = await this.pool.query<{ reason: string; count: string }>(
      'SELECT reason, count FROM eviction_counts',
    );
    const evicted: Record<string, number> = {};
    for (const { reason, count } of counted.rows) evicted[reason] = int(count);
    this.codec.apply(this.owned, { k: 'counters', evicted });
  }

  /** Hold `tx` (as the database has it, at `version`) in memory, in place of what was held; returns the held record. */
  private remember(tx: StoredTx, version: number): StoredTx {
    forgetRecord(this.owned, tx.tx_id);
    this.codec.apply(this.owned, { k: 'put', tx });
    this.versions.set(tx.tx_id, version);
    return this.owned.records.get(tx.tx_id) ?? tx;
  }

  /** Stop trusting what is held of `txId` (a write of unknown outcome, refused or beaten): re-read before use. */
  private forget(txId: string): void {
    forgetRecord(this.owned, txId);
    this.versions.delete(txId);
    this.unsure.add(txId);
  }

  /** The record to write, and the version the write expects: held, or read from the database (and then held). */
  private async mine(txId: string): Promise<{ tx: StoredTx; version: number } | undefined> {
    const tx = this.owned.records.get(txId);
    const version = this.versions.get(txId);
    if (tx && version !== undefined && !this.unsure.has(txId)) return { tx, version };
    const read = await this.reread(txId);
    // Several hosts: another host's live transaction is its owner's to write (the database would refuse ours).
    if (read?.owner && !this.ours({ owner_host: read.owner }) && !isTerminalTxState(read.tx.state)) {
      this.onFenced?.('owned_elsewhere');
      throw new RelayError('RELAY_E_TX_OWNED_ELSEWHERE', { tx_id: txId, owner_host: read.owner });
    }
    return read;
  }

  /**
   * Read `txId` from the database and hold what it says (nothing, if the row is gone). A write of it whose answer was
   * lost is waited for first ({@link resolve}): the read must not see the row as it was before a commit the server is
   * still finishing. While one cannot be resolved the read rejects and the record stays unsure.
   */
  private async reread(
    txId: string,
  ): Promise<{ tx: StoredTx; version: number; owner: string | null } | undefined> {
    await this.resolve(txId);
    const { rows } = await this.statement<VersionedRow>(
      `SELECT ${HELD} FROM transactions t WHERE t.tx_id = $1`,
      [txId],
    );
    forgetRecord(this.owned, txId);
    this.versions.delete(txId);
    this.unsure.delete(txId);
    const row = rows[0];
    if (!row) return undefined;
    const version = int(row.version);
    // Another host's row (several hosts): answered, not held; only its owner writes it.
    if (!this.ours(row)) return { tx: fromRow(row), version, owner: row.owner_host };
    return { tx: this.remember(fromRow(row), version), version, owner: row.owner_host };
  }

  /**
   * Several hosts, after a new epoch adopted this host's own rows: drop every held live record the session no longer
   * owns (another host adopted it while this one was gone) and hold what it owns as the database has it. A record
   * with a write of unknown outcome stays unsure: its next read decides.
   */
  private async reloadOwned(): Promise<void> {
    const session = this.session;
    if (!session) return;
    const { rows } = await this.pool.query<VersionedRow>(
      `SELECT ${HELD} FROM transactions t WHERE t.terminal_at IS NULL AND t.owner_host = $1 AND t.owner_epoch = $2`,
      [session.hostId, session.epoch],
    );
    const owned = new Set(rows.map((r) => r.tx_id));
    // Rows this session owns that it did not hold: a sweep that committed as the session lapsed. Resumed as adopted.
    const arrived = rows.filter((r) => !this.owned.records.has(r.tx_id) && !this.unsure.has(r.tx_id));
    for (const tx of [...this.owned.records.values()])
      if (!isTerminalTxState(tx.state) && !owned.has(tx.tx_id)) {
        forgetRecord(this.owned, tx.tx_id);
        this.versions.delete(tx.tx_id);
      }
    for (const row of rows) if (!this.unsure.has(row.tx_id)) this.remember(fromRow(row), int(row.version));
    if (arrived.length > 0)
      this.toldAdopted({
        txs: arrived.map((r) => this.owned.records.get(r.tx_id) ?? fromRow(r)),
        from: new Map(arrived.map((r) => [r.tx_id, { hostId: session.hostId, epoch: session.epoch }])),
      });
  }

  /** Whether this store's process runs `txId`: on one host, every transaction; in a fleet, those its session holds. */
  owns(txId: string): boolean {
    if (this.options.sole || !this.session) return true;
    return this.owned.records.has(txId) || this.unsure.has(txId);
  }

  /** Whether `row` is this store's to hold and write: on one host every row is; in a fleet, its owner's. */
  private ours(row: { owner_host: string | null }): boolean {
    if (this.options.sole || !this.session) return true;
    return row.owner_host === this.session.hostId;
  }

  /**
   * Before a list answers from memory: re-read every record this store stopped trusting (each in its write order,
   * so a re-read never overtakes a write). Rejects while the database cannot answer: a list that might miss a record
   * is not given.
   */
  private async settle(): Promise<void> {
    if (this.unsure.size === 0) return;
    await Promise.all(
      [...this.unsure].map((txId) =>
        this.writes.run(txId, async () => {
          if (this.unsure.has(txId)) await this.reread(txId);
        }),
      ),
    );
  }

  /**
   * Write `op` on `before` (held at `version`): one statement in autocommit (the row compare-and-set on its version,
   * the attempts it added or changed, their spend, the eviction count, its events, webhook rows and lifecycle
   * entries), or with a spend-limit, that statement in a transaction after the limit's lock and check. Resolves with
   * the new record once committed, null when the row was not at `version` (another writer: re-read, decide again).
   * Any failure drops the held record (re-read before it is used again).
   */
  private async persist(
    operation: string,
    before: StoredTx,
    version: number,
    op: Omit<PatchOp, 'k' | 'id'>,
    events: readonly TxEvent[],
    spendLimit?: SpendLimit,
  ): Promise<StoredTx | null> {
    const txId = before.tx_id;
    const next = patchedRecord(before, op);
    if (!isTerminalTxState(before.state) && isTerminalTxState(next.state)) dropPayload(next);
    const changed = next.attempts.filter((a) => !before.attempts.includes(a));
    // Changed attempts first, new ones last: one settling before the next is added never trips the one-unsettled
    // index.
    const known = (a: StoredAttempt) => before.attempts.some((b) => b.attempt === a.attempt);
    changed.sort((a, b) => Number(!known(a)) - Number(!known(b)));
    const effects = spendEffects(next, op);
    const values = this.changeParams(next, effects, changed, { version, evicted: op.evicted }, events);
    // One host: checked as the journal checks it, against the held ledger and the reservations being committed now
    // (a commit applies to the ledger only once acknowledged: two checks in between must both see the other).
    // What this change reserves: a new attempt's reservation, or what it adds to ones the record has (a raised tip).
    const adding = op.attempt
      ? op.attempt.released
        ? 0
        : op.attempt.reserved_lamports
      : reservationIncrease(before, op);
    const reserving = spendLimit && this.options.sole ? adding : 0;
    if (spendLimit && this.options.sole)
      assertWithinSpendLimit(
        spendLimit,
        this.owned.spend.spentSince(spendLimit.since) + this.reserving,
        reserving,
      );
    this.reserving += reserving;
    let committed: number;
    try {
      committed =
        spendLimit && !this.options.sole
          ? await this.autocommit(txId, operation, CHANGE_WITHIN_SPEND, [
              ...values,
              spendLimit.since,
              spendLimit.limit,
              adding,
            ]).catch((error: unknown) => {
              // relay_spend_check (migrations/004) refused: what the window already holds is its DETAIL.
              if (error instanceof pg.DatabaseError && error.code === SPEND_LIMIT_PASSED)
                assertWithinSpendLimit(spendLimit, Number(error.detail ?? spendLimit.limit), adding);
              throw error;
            })
          : await this.autocommit(txId, operation, CHANGE, values);
    } catch (error) {
      // Refused by the limit or for want of the database: nothing written, nothing learned that the held record does
      // not say. Anything else (a commit of unknown outcome, a constraint another writer tripped): re-read first.
      if (!(error instanceof SpendLimitReached) && !isRelayError(error, 'RELAY_E_DB_UNAVAILABLE'))
        this.forget(txId);
      // A reservation that may have committed counts against the limit (the held ledger errs toward spending less;
      // it leaves with the rolling hour).
      if (isRelayError(error, 'RELAY_E_DB_COMMIT_UNKNOWN')) {
        // A recount too (a tip found paid after its release): counted again, as the commit may have.
        const reserved = effects.filter((e) => e.kind === 'reserve' || e.kind === 'recount');
        if (reserved.length > 0)
          this.codec.apply(this.owned, {
            k: 'spend',
            entries: reserved.map((e) => [attemptKey(txId, e.n), e.at, e.lamports]),
          });
      }
      throw error;
    } finally {
      this.reserving -= reserving;
    }
    if (committed === 0) {
      this.forget(txId);
      return null;
    }
    this.versions.set(txId, version + 1);
    this.codec.apply(this.owned, { k: 'patch', id: txId, ...op });
    // Retention may already have let the held record go (a retention of 0): answer with what the change made.
    return this.owned.records.get(txId) ?? next;
  }

  /**
   * The parameters of {@link CHANGE} and {@link ACCEPT}: the row ($1..$21), the version it is expected at ($22), the
   * attempts it added or changed ($23), spend reserved, counted again and released ($24..$26), an eviction ($27),
   * this host ($28), the events (names, payloads, webhook-ids: $29..$31), the webhook endpoints ($32), the lifecycle
   * entries ($33), whether to NOTIFY ($34), and the owner every write is fenced by: this host's session ($35, $36;
   * null without one).
   */
  private changeParams(
    tx: StoredTx,
    spend: readonly SpendEffect[],
    attempts: readonly StoredAttempt[],
    extra: { version?: number; evicted?: string | undefined },
    events: readonly TxEvent[],
  ): unknown[] {
    const told = events.filter((e) => e.kind !== 'lifecycle');
    const entries = events.flatMap((e) => (e.kind === 'lifecycle' ? [JSON.stringify(e.entry)] : []));
    const endpoints = this.options.webhookEndpoints;
    const hooks = endpoints.length > 0 ? webhookIdsOfChange(tx.tx_id, tx.history.length, told) : [];
    const tipper = (n: number) => tx.attempts.find((a) => a.attempt === n)?.tipper ?? null;
    const counted = (kind: 'reserve' | 'recount') =>
      JSON.stringify(
        spend.flatMap((e) =>
          e.kind === kind ? [{ n: e.n, tipper: tipper(e.n), at: e.at, lamports: e.lamports }] : [],
        ),
      );
    return [
      ...txParams(tx),
      extra.version ?? 1,
      JSON.stringify(attempts.map(attemptRow)),
      counted('reserve'),
      counted('recount'),
      spend.flatMap((e) => (e.kind === 'release' ? [e.n] : [])),
      extra.evicted ?? null,
      this.options.hostId,
      told.map((e) => e.kind),
      told.map((e) => JSON.stringify(e.data)),
      told.map((_, i) => hooks[i] ?? null),
      endpoints,
      entries,
      this.options.notifyEvents && told.length > 0,
      this.session?.hostId ?? null,
      this.session?.epoch ?? null,
    ];
  }

  /**
   * One statement in autocommit (its own transaction: answered once committed, synchronous_commit on); resolves with
   * its row count. Refused by the server: nothing committed, rejected as {@link failed} says. Its answer lost (the
   * connection gone while it ran): it may or may not have committed, `RELAY_E_DB_COMMIT_UNKNOWN` (see the class
   * comment). No connection to send it on: `RELAY_E_DB_UNAVAILABLE`.
   */
  private autocommit(txId: string, operation: string, text: string, values: unknown[]): Promise<number> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    const fenced = this.fenced();
    if (fenced) return Promise.reject(fenced);
    const run = this.lane(operation, async () => {
      const db = await this.pool.connect().catch((error: unknown) => {
        throw this.failed(error);
      });
      const ignore = () => undefined;
      db.on('error', ignore);
      let backend: Backend | undefined;
      try {
        backend = await this.identify(db);
        const result = await db.query(prepared(text, values));
        db.off('error', ignore);
        db.release();
        return result.rowCount ?? 0;
      } catch (error) {
        // Refused, never sent, or lost before the write was sent (learning the backend): nothing committed.
        if (backend === undefined || refusedByServer(error) || notSent(error)) {
          db.off('error', ignore);
          db.release(!refusedByServer(error));
          throw this.failed(error);
        }
        db.release(true);
        throw this.commitUnknown(error, txId, operation, backend);
      }
    });
    return this.track(run);
  }

  /**
   * Run a write holding a connection of its lane. The decision path's writes (`accept`, `addAttempt`: what stands
   * between an enqueue and its answer, and between a decision and its send) take any free connection; every other
   * write (the tracker's transitions, which come in bursts at each slot and commitment level) waits for one of all
   * but {@link DECISION_CONNECTIONS} of the pool. A burst of transitions therefore never leaves an enqueue or a submit
   * queued behind it for a connection (measured before this: the pool's wait was 35 ms at an enqueue's p99).
   */
  private async lane<T>(operation: string, work: () => Promise<T>): Promise<T> {
    if (DECISION_PATH.has(operation)) return work();
    // Bounded like a wait for a pooled connection: a busy database is a coded 503 (no outage), never a hang.
    const timeoutMs = this.pool.options.connectionTimeoutMillis ?? 0;
    return this.background.run(work, timeoutMs).catch((error: unknown) => {
      if (!(error instanceof SemaphoreTimeout)) throw error;
      throw new RelayError(
        'RELAY_E_DB_UNAVAILABLE',
        {
          url: this.target.redacted,
          reason: `every connection a ${operation} may take was busy for ${timeoutMs} ms`,
          retry_after_s: DATABASE_RETRY_AFTER_S,
        },
        { cause: error },
      );
    });
  }

  /**
   * A commit sent and not answered: the database is taken as unavailable, the caller told to re-read, and the
   * backend it ran on remembered: the record is re-read only once that backend's transaction is known to have ended
   * ({@link resolve}).
   */
  private commitUnknown(error: unknown, txId: string, operation: string, backend: Backend): RelayError {
    this.down(error);
    const lost = this.lost.get(txId) ?? [];
    lost.push({ ...backend, xid: null, operation });
    this.lost.set(txId, lost);
    return new RelayError(
      'RELAY_E_DB_COMMIT_UNKNOWN',
      { tx_id: txId, operation, reason: reasonOf(error), retry_after_s: DATABASE_RETRY_AFTER_S },
      { cause: error },
    );
  }

  /**
   * The server backend `db` is connected to: its pid and start time, read from the server once per connection (one
   * statement at the connection's first write, never again). pid and backend_start together name one backend for
   * good (a pid is reused only by a later backend, with a later start); the pid node-postgres got at connect
   * (BackendKeyData) would be a pooler's (PgBouncer sends its own), and a pid alone could be another backend's by the
   * time it is looked up.
   */
  private async identify(db: pg.PoolClient): Promise<Backend> {
    const known = this.backends.get(db);
    if (known) return known;
    const { rows } = await db.query<Backend>(prepared(IDENTIFY, []));
    const backend = rows[0];
    if (!backend) throw new Error('pg_stat_activity has no row for this connection');
    this.backends.set(db, backend);
    return backend;
  }

  /**
   * Wait until every write of `txId` whose answer was lost has ended on the server (committed or rolled back), so a
   * read after this sees its outcome (M2 of the issue #28 review). The server may still be finishing such a commit
   * after the connection is gone: flushing its WAL, or waiting for a synchronous standby (`synchronous_commit` with
   * `synchronous_standby_names`); the commit becomes visible to other sessions only when it leaves the proc array,
   * after both (PostgreSQL 15 `src/backend/access/transam/xact.c`: `RecordTransactionCommit` flushes and calls
   * `SyncRepWaitForLSN`, then `CommitTransaction` calls `ProcArrayEndTransaction`). A plain re-read in between sees
   * the row as it was. The PostgreSQL facts this relies on:
   *
   * - `pg_stat_activity.backend_xid` is the top-level transaction id the backend holds, if any, and `state` what it
   *   is doing (docs §28.2.3, "pg_stat_activity"); both read from the backend's own shared state. A role sees them
   *   for its own sessions, and the lost connection is this store's (same role).
   * - `pg_xact_status(xid8)` answers `in progress` while `TransactionIdIsInProgress` (a scan of that same proc array),
   *   then `committed` or `aborted`; NULL once too old to know (docs §9.26, "Transaction ID and Snapshot Information
   *   Functions", which names this very use: whether a transaction committed after the connection was lost while a
   *   COMMIT was in progress). So once it is no longer `in progress`, a snapshot taken after sees the outcome.
   * - `pg_snapshot_xmax(pg_current_snapshot())` is an xid8 close to every running xid (within 2^31): the epoch that
   *   turns the view's 32-bit `backend_xid` into the xid8 `pg_xact_status` takes (same docs section).
   * - `pg_terminate_backend(pid, timeout)` ends a backend and waits up to `timeout` ms for it to exit (docs §9.27.2,
   *   "Server Signaling Functions"; PostgreSQL 14+); a backend that exited has no transaction left running, and
   *   reads nothing more from its socket.
   *
   * Each lost backend (named by pid and start time, {@link identify}) is looked up:
   *
   * - gone (exited, or the server restarted): its transaction ended before it exited. Resolved.
   * - holding a transaction id: resolved once `pg_xact_status` of it is no longer `in progress`. It is the lost
   *   write's: nothing else ran on that connection after the write was sent.
   * - running a statement without one yet (`active`): its write may still come; asked again.
   * - idle with no transaction id: the write ended, or never arrived, or is still on its way to the backend; the
   *   backend is ended (it has no client left and holds no transaction), so that nothing can still arrive, and
   *   looked up again. A backend with a transaction id is never ended: that could end a wait for a synchronous
   *   standby early, making visible a commit not yet replicated.
   *
   * Every look-up is one statement on another connection of the pool, in a loop that pauses between looks; it gives
   * up after {@link RESOLVE_WAIT_MS} with `RELAY_E_DB_COMMIT_UNKNOWN` (still unknown: the caller tries again later,
   * the record stays unsure, nothing is sent on it) and with `RELAY_E_DB_UNAVAILABLE` while the database is away.
   * The hot path pays nothing for this: a write stays one round trip (the backend is learned once per connection).
   */
  private async resolve(txId: string): Promise<void> {
    const lost = this.lost.get(txId);
    if (!lost) return;
    const deadline = Date.now() + RESOLVE_WAIT_MS;
    for (let pause = 10; lost.length > 0; pause = Math.min(pause * 2, 200)) {
      const write = lost[0] as LostWrite;
      if (await this.ended(write)) {
        lost.shift();
        continue;
      }
      if (Date.now() >= deadline) {
        const doing = write.xid === null ? 'running' : `transaction ${write.xid} still in progress`;
        throw new RelayError('RELAY_E_DB_COMMIT_UNKNOWN', {
          tx_id: txId,
          operation: write.operation,
          reason: `its answer was lost and its backend (pid ${write.pid}) is ${doing}; re-read once it ends`,
          retry_after_s: DATABASE_RETRY_AFTER_S,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
    this.lost.delete(txId);
  }

  /** Whether the lost write `write` has ended on the server (see {@link resolve}); ends an idle lost backend. */
  private async ended(write: LostWrite): Promise<boolean> {
    if (write.xid !== null) {
      const { rows } = await this.statement<{ status: string | null }>(XACT_STATUS, [write.xid]);
      return rows[0]?.status !== 'in progress';
    }
    const { rows } = await this.statement<{
      state: string | null;
      xid: string | null;
      status: string | null;
    }>(LOST_BACKEND, [write.pid, write.started]);
    const row = rows[0];
    if (!row) return true;
    if (row.xid !== null) {
      if (row.status !== 'in progress') return true;
      write.xid = row.xid;
      return false;
    }
    if (row.state === 'active') return false;
    await this.statement(END_LOST_BACKEND, [write.pid, write.started]);
    return false;
  }

  /** A write under way, which `close` waits for. */
  private track<T>(run: Promise<T>): Promise<T> {
    this.pending.add(run);
    void run.catch(() => undefined).finally(() => this.pending.delete(run));
    return run;
  }

  /**
   * Run `work` in one SQL transaction and COMMIT it; resolves with what `work` returned once the COMMIT is
   * acknowledged. `work` sends the BEGIN itself, with what goes in the same round trip. Refused by `work` (a
   * SpendLimitReached) or failed before the COMMIT: rolled back, rejected. The COMMIT itself unanswered:
   * `RELAY_E_DB_COMMIT_UNKNOWN` (see the class comment).
   */
  private write<T>(txId: string, operation: string, work: (db: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    const fenced = this.fenced();
    if (fenced) return Promise.reject(fenced);
    return this.track(this.lane(operation, () => this.transaction(txId, operation, work)));
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
    let backend: Backend | undefined;
    try {
      backend = await this.identify(db);
      const result = await work(db);
      committing = true;
      const commit = await db.query('COMMIT');
      // COMMIT of a transaction that had failed answers ROLLBACK; `work` would have thrown first, but never assume.
      if (commit.command !== 'COMMIT') throw new Error(`COMMIT of ${operation} answered ${commit.command}`);
      db.off('error', ignore);
      db.release();
      return result;
    } catch (error) {
      if (committing && backend && !refusedByServer(error)) {
        db.release(true);
        throw this.commitUnknown(error, txId, operation, backend);
      }
      await rollBack(db, ignore, error);
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
    // The database refused a new row of a session that is no longer live (migrations/003's trigger): the session
    // lapsed between this host's own check and the insert. Nothing was written; writes stop until it registers again.
    if (error instanceof pg.DatabaseError && error.code === SESSION_NOT_LIVE) {
      this.onFenced?.('session_not_live');
      this.sessionLost(`the database refused a write: ${error.message}`);
      // Its own clock may not know yet: the heartbeat asks the database, and a lapse it finds renews the session.
      void this.session?.heartbeat().catch(() => undefined);
      return new RelayError(
        'RELAY_E_DB_UNAVAILABLE',
        { url: this.target.redacted, reason: error.message, retry_after_s: DATABASE_RETRY_AFTER_S },
        { cause: error },
      );
    }
    // The fleet's limits refused to run outside READ COMMITTED (migrations/004): the pool asks for it at every
    // connection (pg/connect.ts), so only something between (a pooler that drops startup options) gets here.
    if (error instanceof pg.DatabaseError && error.code === NOT_READ_COMMITTED) {
      return new RelayError(
        'RELAY_E_DB_UNAVAILABLE',
        { url: this.target.redacted, reason: error.message, retry_after_s: DATABASE_RETRY_AFTER_S },
        { cause: error },
      );
    }
    // Every pooled connection busy past the connection timeout, or the server at max_connections: a busy database
    // (the caller retries), not a gone one. Declaring an outage would close the tip gate and fail /readyz for load
    // alone; a database really gone shows itself as a connection error on the busy connections anyway.
    if (poolBusy(error)) {
      return new RelayError(
        'RELAY_E_DB_UNAVAILABLE',
        { url: this.target.redacted, reason: reasonOf(error), retry_after_s: DATABASE_RETRY_AFTER_S },
        { cause: error },
      );
    }
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
    this.startProbe();
    return reason;
  }

  /** Probe every {@link PROBE_EVERY_MS} until the database answers and {@link relock} has what writes need. */
  private startProbe(): void {
    if (this.probe) return;
    this.probe = setInterval(() => {
      if (this.closed || this.probing) return;
      this.probing = true;
      this.pool
        .query('SELECT 1')
        .then(
          () => this.relock(),
          () => undefined,
        )
        .then((ok) => {
          if (ok) this.up();
        })
        .finally(() => {
          this.probing = false;
        });
    }, PROBE_EVERY_MS);
    this.probe.unref();
  }

  /**
   * The probe succeeded: the database is back (told once). Only the probe says so, on a connection it opened after
   * the outage began: a statement begun before (answered as the server shut down) proves nothing.
   */
  /**
   * The sole-writer lock's connection ended (a database restart or failover ends every session): writes stop at once
   * ({@link fenced}) and the store is unavailable until the probe has taken the lock again.
   */
  private lockLost(): void {
    if (!this.closed) this.down(new Error('the sole-writer lock was lost with its connection'));
  }

  /** Writes refused while this store should be the only writer and is not sure it still is. */
  private fenced(): RelayError | null {
    if (this.session && (!this.session.live || this.adoptedEpoch !== this.session.epoch))
      return new RelayError('RELAY_E_DB_UNAVAILABLE', {
        url: this.target.redacted,
        reason: `this sidecar's host session (${this.session.hostId}, epoch ${this.session.epoch}) lapsed: registering again and adopting its work`,
        retry_after_s: DATABASE_RETRY_AFTER_S,
      });
    if (!this.soleLock || this.soleLock.held) return null;
    return new RelayError('RELAY_E_DB_UNAVAILABLE', {
      url: this.target.redacted,
      reason: 'this sidecar lost its sole-writer lock on the database (taking it again)',
      retry_after_s: DATABASE_RETRY_AFTER_S,
    });
  }

  /**
   * The probe's step before the database counts as back: take the sole-writer lock again if it was lost. Another
   * sidecar holding it keeps this store unavailable (its log says so once per outage, through `problem`).
   */
  private async relock(): Promise<boolean> {
    try {
      if (this.soleLock && !this.soleLock.held)
        this.soleLock = await SoleWriterLock.acquire(
          this.pool.options,
          this.target,
          () => this.lockLost(),
          0,
          !this.options.sole,
        );
      const session = this.session;
      if (session) {
        if (!session.live) await session.renew();
        if (this.adoptedEpoch !== session.epoch) {
          // Writes begun under the old epoch end first (fenced() refuses new ones meanwhile): one still waiting
          // for a connection would otherwise commit its old owner after the adoption and strand its row.
          await Promise.allSettled([...this.pending]);
          await this.adopt();
          // Several hosts: what other hosts took while this session was gone is theirs now. Every held view of the
          // old epoch goes; what this session owns is read again (DESIGN §10). Failed: still fenced, tried again.
          if (!this.options.sole)
            await this.reloadOwned().catch((error: unknown) => {
              this.adoptedEpoch = null;
              throw error;
            });
        }
      }
      // The session may have lapsed again meanwhile: the probe goes on until it holds.
      return this.fenced() === null;
    } catch (error) {
      if (this.outage) this.outage.reason = reasonOf(error);
      return false;
    }
  }

  /**
   * The session's heartbeat found its lease gone, or its connection ended: writes stop at once ({@link fenced}), and
   * the store is unavailable until the probe has registered a new epoch and adopted this host's work under it.
   */
  private sessionLost(reason: string): void {
    if (this.closed) return;
    const session = this.session;
    const said = `host session ${session?.hostId ?? ''} (epoch ${session?.epoch ?? '?'}) lapsed: ${reason}`;
    if (this.outage) return;
    this.outage = { since: Date.now(), reason: said, session: true };
    this.tell({ kind: 'down', url: this.target.redacted, reason: said, at: this.outage.since });
    this.startProbe();
  }

  /**
   * Own the live work under this session's epoch (at open, and after each new epoch): one host is its database's
   * only writer (`sole`), so every live row is its own, whoever wrote it before (an earlier epoch of this host, a
   * row of another host id is marked `inherited`). The records held in memory stay valid: no one else wrote.
   */
  private async adopt(): Promise<number> {
    const session = this.session;
    if (!session) return 0;
    if (!this.options.sole) {
      // Several hosts: this host's own live rows of its earlier epochs come back to it (holding the host-id lock
      // proves those epochs' processes are gone); other hosts' work moves by the takeover sweep, not by this.
      const { rowCount } = await this.pool.query(
        `UPDATE transactions SET owner_epoch = $2
         WHERE terminal_at IS NULL AND owner_host = $1 AND owner_epoch <> $2`,
        [session.hostId, session.epoch],
      );
      this.adoptedEpoch = session.epoch;
      return rowCount ?? 0;
    }
    // One host holds the sole-writer lock, so every other session still open is of a process that is gone: ended
    // once its lease has passed (a sidecar being refused the lock right now ends its own).
    await this.pool.query(
      `UPDATE host_sessions SET ended_at = now()
       WHERE ended_at IS NULL AND lease_expires_at < now() AND host_id <> $1`,
      [session.hostId],
    );
    const { rowCount } = await this.pool.query(
      `UPDATE transactions t SET owner_host = $1, owner_epoch = $2,
         inherited = inherited OR (owner_host IS NOT NULL AND owner_host <> $1),
         inherited_attempts = ${INHERITED_ATTEMPTS}
       WHERE terminal_at IS NULL AND (owner_host, owner_epoch) IS DISTINCT FROM ($1::text, $2::bigint)`,
      [session.hostId, session.epoch],
    );
    this.adoptedEpoch = session.epoch;
    return rowCount ?? 0;
  }

  /**
   * Several hosts: start the takeover sweep ({@link sweep}) every `sweepMs`. Called by the sidecar once it listens
   * ({@link watchAdoptions}) and can resume what a sweep adopts; a no-op on one host.
   */
  startSweeping(): void {
    if (this.sweeper || this.closed) return;
    if (this.options.sole || !this.session || this.options.sweepMs <= 0) return;
    this.sweeper = setInterval(() => {
      if (this.sweeping || this.closed || !this.healthy) return;
      this.sweeping = true;
      void this.sweep()
        .catch((error: unknown) => {
          if (!this.outage && !this.closed) this.onMaintenanceError?.(error);
        })
        .finally(() => {
          this.sweeping = false;
        });
    }, this.options.sweepMs);
    this.sweeper.unref();
  }

  /** Be told what each takeover sweep adopted (to resume it as a restart resumes its own); returns the unsubscribe. */
  watchAdoptions(listener: (adopted: Adopted) => void): () => void {
    this.adoptions.add(listener);
    return () => this.adoptions.delete(listener);
  }

  /**
   * The takeover sweep (DESIGN §10, several hosts): adopt the live transactions whose owner's session is gone (its
   * lease lapsed by the database's clock, or it ended: a host stopped, killed or paused past its lease), in batches
   * of `batch`, marked `inherited` when the owner was another host id. Each row is taken under its row lock
   * (`FOR UPDATE SKIP LOCKED`: hosts sweeping at once split the work, none waits on another), and the owner moves in
   * the same statement, so a write of the old owner either committed before (and is what this host reads back) or is
   * refused after by the fence in its own statement. The adopted records are held and told to
   * {@link watchAdoptions}' listeners. Returns how many it adopted.
   *
   * A restarted host re-adopts its own work at open, under the same host id, without waiting for this: its process
   * normally comes back within the lease; one that takes longer finds its work moved, which is as safe.
   */
  async sweep(batch = 1000): Promise<number> {
    const session = this.session;
    if (this.options.sole || !session || this.fenced() || this.closed) return 0;
    return this.track(this.sweepHolding(session, batch));
  }

  /**
   * {@link sweep}'s work, on one connection, batch after batch, each batch a transaction holding the fleet's sweep
   * lock (transaction-scoped, tried, not waited for: another host sweeping now takes what this one would). One host
   * at a time sweeps, a dead host's work (a batch holds 1,000) goes to one adopter, packs with their riders, and is
   * told once. The lock lives only inside a transaction, so a host frozen mid-sweep loses it with that transaction
   * (`idle_in_transaction_session_timeout`) and never blocks the others' sweeps for longer. Tracked as a write: a
   * renewal waits for it before adopting.
   */
  private async sweepHolding(session: HostSession, batch: number): Promise<number> {
    const db = await this.pool.connect().catch((error: unknown) => {
      throw this.failed(error);
    });
    const ignore = () => undefined;
    db.on('error', ignore);
    let broken = false;
    const txs: StoredTx[] = [];
    const from = new Map<string, { hostId: string; epoch: number }>();
    const epoch = session.epoch;
    try {
      for (let conflicts = 0; ;) {
        // The session lapsed meanwhile: what this sweep moved is this host id's, adopted under the next epoch.
        if (this.fenced() || this.closed || session.epoch !== epoch) break;
        const checked = this.strandedCheck;
        const moved = await this.sweepOnce(
          db,
          checked ? STRANDED : SWEEP,
          checked ? [session.hostId, epoch] : [session.hostId, epoch, batch, this.options.notifyEvents],
        ).catch((error: unknown) => {
          broken = true;
          throw error;
        });
        if (moved === 'busy') break; // another host is sweeping
        if (moved === null) {
          // Another writer moved a row this sweep had read (a zombie's last write, under REPEATABLE READ): read again
          // after a moment; the next timer's sweep goes on if this keeps happening.
          if (++conflicts > 10) break;
          await new Promise((resolve) => setTimeout(resolve, 10 * conflicts));
          continue;
        }
        this.strandedCheck = false;
        if (session.epoch !== epoch) break;
        for (const row of moved) {
          // The read-back after a failed sweep: rows held or being re-read already are not news.
          if (checked && (this.owned.records.has(row.tx_id) || this.unsure.has(row.tx_id))) continue;
          txs.push(this.remember(fromRow(row), int(row.version)));
          from.set(row.tx_id, { hostId: row.previous_host, epoch: int(row.previous_epoch) });
        }
        if (!checked && moved.length < batch) break;
      }
    } finally {
      db.off('error', ignore);
      db.release(broken);
      // What earlier batches adopted is this host's now, however a later batch ended: told, so it is resumed.
      if (txs.length > 0) this.toldAdopted({ txs, from });
    }
    return txs.length;
  }

  /** Tell the adoption listeners (each failure its own). */
  private toldAdopted(adopted: Adopted): void {
    for (const listener of this.adoptions) {
      try {
        listener(adopted);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  /**
   * One sweep statement in a REPEATABLE READ transaction on `db`. Under READ COMMITTED a row another writer moved and
   * committed after this statement's snapshot would be re-checked on its new version (EvalPlanQual) and could be
   * adopted twice (a test caught exactly that with concurrent sweepers). Under REPEATABLE READ such a row is a
   * serialization failure instead (PostgreSQL 15 docs §13.2.2): answered null, read again. A failure whose commit
   * may have happened leaves rows this session owns that it does not hold: the next sweep first reads them back
   * ({@link STRANDED}).
   */
  private async sweepOnce(
    db: pg.PoolClient,
    text: string,
    values: unknown[],
  ): Promise<Array<VersionedRow & { previous_host: string; previous_epoch: string }> | null | 'busy'> {
    try {
      // The lock is tried first: under REPEATABLE READ the snapshot is taken by that statement, after the previous
      // holder committed, so this batch sees every row it moved.
      // Two statements in one round trip: node-postgres answers with a result per statement.
      const answers = (await db.query(
        `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_try_advisory_xact_lock(${SWEEP_LOCK}::bigint) AS got`,
      )) as unknown as Array<pg.QueryResult<{ got: boolean }>>;
      if (answers[answers.length - 1]?.rows[0]?.got !== true) {
        await db.query('ROLLBACK');
        return 'busy';
      }
      const { rows } = await db.query<VersionedRow & { previous_host: string; previous_epoch: string }>(
        prepared(text, values),
      );
      await db.query('COMMIT');
      return rows;
    } catch (error) {
      const serialization = error instanceof pg.DatabaseError && error.code === '40001';
      // A connection lost or given up on is not asked to roll back (it would wait behind the statement given up on):
      // the caller destroys it, and the server ends the transaction with the session.
      if (!lostConnection(error)) await db.query('ROLLBACK').catch(() => undefined);
      if (serialization) return null;
      this.strandedCheck = true;
      throw this.failed(error);
    }
  }

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

/** Writes tried again when another writer moved the row between this store's read and its compare-and-set. */
const MAX_TRIES = 3;
/** The writes between an enqueue and its answer, and between a decision and its send ({@link PgTxStore.lane}). */
const DECISION_PATH = new Set(['accept', 'addAttempt']);
/** Connections of the pool kept for the decision path's writes (at most a third of the pool). */
const DECISION_CONNECTIONS = 3;

/** How long one re-read waits for a lost write to end on the server before it gives up for now (see `resolve`). */
const RESOLVE_WAIT_MS = 2_000;

/** A connection's server backend: its pid, and its start time (epoch seconds as exact text, microseconds). */
interface Backend {
  pid: number;
  started: string;
}

/** A write whose answer was lost: the backend it ran on, and its transaction id once seen (xid8 as text). */
interface LostWrite extends Backend {
  xid: string | null;
  operation: string;
}

/** This connection's backend (see `identify`). */
const IDENTIFY = `SELECT pid, extract(epoch FROM backend_start)::text AS started FROM pg_stat_activity
  WHERE pid = pg_backend_pid()`;

/**
 * A lost write's backend ($1 pid, $2 start), if it is still there: its state, and its transaction id, if it holds
 * one, as the xid8 `pg_xact_status` takes with that status. The view's backend_xid is 32 bits; its epoch is that of
 * the xid8 within 2^31 of the snapshot's xmax (running xids are never further apart), computed in bigint.
 */
const LOST_BACKEND = `WITH a AS (
    SELECT a.state, a.backend_xid::text::bigint AS x, pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax
    FROM pg_stat_activity a WHERE a.pid = $1 AND extract(epoch FROM a.backend_start)::text = $2
  ), d AS (
    SELECT state, xmax, ((xmax - x) % 4294967296 + 4294967296) % 4294967296 AS d FROM a
  ), x AS (
    SELECT state, (xmax - d + CASE WHEN d > 2147483648 THEN 4294967296 ELSE 0 END)::text AS xid FROM d
  )
  SELECT state, xid, pg_xact_status(xid::xid8) AS status FROM x`;

/** Whether transaction $1 (an xid8) is still in progress, committed or aborted (NULL: too old to tell). */
const XACT_STATUS = `SELECT pg_xact_status($1::xid8) AS status`;

/**
 * End a lost write's backend ($1 pid, $2 start) that is idle and holds no transaction id, waiting up to a second for
 * it to exit (it has no client left: the store already dropped that connection).
 */
const END_LOST_BACKEND = `SELECT pg_terminate_backend(pid, 1000) AS ended FROM pg_stat_activity
  WHERE pid = $1 AND extract(epoch FROM backend_start)::text = $2 AND backend_xid IS NULL AND state <> 'active'`;

/** A record's row with its version (what the next write of it expects). */
/** A row as this store holds it: the record, the version its next write expects, and who owns it. */
type VersionedRow = TxRow & { version: string; owner_host: string | null };

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
  /**
   * This sidecar's name, recorded with its events and lifecycle entries; the session's host id when there is one
   * (`session`).
   */
  hostId?: string | null;
  /**
   * NOTIFY the event followers of other hosts at each commit with events (pg-events.ts EVENTS_CHANNEL). Off by
   * default: one host has no one to tell, and NOTIFY serializes commits on the notification queue; the fleet turns
   * it on.
   */
  notifyEvents?: boolean;
  /**
   * This store is the only writer of its database (one host): counts, spend and dedupe answer from the records and
   * ledger it holds (see the class comment). Default true; several hosts on one database set false.
   */
  sole?: boolean;
  /** Webhook endpoints (`RELAY_WEBHOOK_URL`): each webhook event is owed to each, a `webhook_outbox` row apiece. */
  webhookEndpoints?: readonly string[];
  /**
   * Register a host session (`RELAY_HOST_ID`, `RELAY_LEASE_MS`; pg/host-session.ts) and own the work this store
   * writes by it: accepts record it as the owner, and every write of live work is fenced by it. None (tests of the
   * store alone): the owner columns stay null.
   */
  session?: { hostId: string; leaseMs: number } | null;
  /**
   * Several hosts (`sole: false` with a session): how often the takeover sweep looks for live work whose owner's
   * session lapsed or ended, in ms; 0: never (tests call {@link PgTxStore.sweep}). Default `leaseMs / 5` (a
   * heartbeat's interval): a dead host's work moves within its lease and one sweep. The sweep starts with
   * {@link PgTxStore.startSweeping}.
   */
  sweepMs?: number;
}

/** What one takeover sweep adopted: the records (now this host's, held), and whose they were. */
export interface Adopted {
  txs: StoredTx[];
  /** The earlier owner of each adopted record, by tx id: `host_id` and epoch. */
  from: Map<string, { hostId: string; epoch: number }>;
}

// ------------------------------------------------------------------ SQL

/** A timestamptz as epoch milliseconds (a JS number). */
const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;

const TERMINAL = `('finalized', 'failed', 'expired')`;

/** An attempt's columns as a record's `attempts` (`created_at` in epoch ms). */
const ATTEMPT = `a.attempt, a.bundle_id, a.tip_lamports, a.tip_tx, a.tip_signature, a.tip_account, a.tipper,
  a.tip_last_valid_block_height, a.bundle_signatures, ${ms('a.created_at')} AS created_at, a.created_slot,
  a.slot_submitted, a.target_slot, a.window_end_slot, a.region, a.leader, a.stage, a.outcome, a.slot_landed, a.floor_at_submit,
  a.decision, a.reserved_lamports, a.released, a.leaked, a.timeline, a.send_errors, a.passengers, a.passenger_wires`;

/**
 * The columns of a whole record: the row, and its attempts in order as one json array (json, not jsonb: the nested
 * objects keep their key order; bigint columns become JSON numbers).
 */
const RECORD = `t.tx_id, t.inherited_attempts, t.state, t.priority, t.tip_mode, t.max_tip, ${ms('t.enqueued_at')} AS enqueued_at,
  t.enqueued_slot, t.enqueued_block_height, t.expires_at_slot, t.wires, t.signatures, t.blockhashes,
  t.nonce_accounts, t.fee_payers, t.history, t.retries, t.last_error, t.failure, t.landed_slot, t.stopped,
  coalesce((SELECT json_agg(x ORDER BY x.attempt) FROM (SELECT ${ATTEMPT} FROM attempts a WHERE a.tx_id = t.tx_id) x),
           '[]'::json) AS attempts`;

/** The columns of a {@link VersionedRow}. */
const HELD = `${RECORD}, t.version, t.owner_host`;

/** $1..$21 of a transaction row ({@link txParams}). */
const TX_VALUES = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, to_timestamp($12::float8 / 1000), $13, $14, $15, $16,
  $17, $18, $19, $20::json, $21::json`;
const TX_COLUMNS = `state, priority, tip_mode, max_tip, first_signature, signatures, blockhashes, nonce_accounts,
  fee_payers, wires, enqueued_at, enqueued_slot, enqueued_block_height, expires_at_slot, retries, stopped, failure,
  landed_slot, last_error, history`;

const ATTEMPT_COLUMNS = `tx_id, attempt, bundle_id, stage, outcome, tip_lamports, tip_tx, tip_signature, tip_account,
  tipper, tip_last_valid_block_height, bundle_signatures, passengers, passenger_wires, created_at, created_slot,
  slot_submitted, target_slot, window_end_slot, region, leader, slot_landed, floor_at_submit, decision, timeline,
  reserved_lamports, released, leaked, send_errors`;
const EXCLUDED_ATTEMPT = ATTEMPT_COLUMNS.split(',')
  .map((c) => `EXCLUDED.${c.trim()}`)
  .join(', ');
const SETTLED = `('finalized', 'failed')`;

/**
 * What one change writes besides the row, each part keyed on the row's CTE `t` (no row written, nothing else is):
 * the attempts added or changed ($23, rows of {@link attemptRow}; a re-signed tip's old bundle id joins
 * `previous_bundle_ids`, still findable), spend reserved ($24), counted again if it was released ($25: an entry
 * still counted stays as it is) and released ($26), an eviction counted ($27), the events ($29..$31) with each
 * webhook event owed to every endpoint of $32 in order, the lifecycle entries ($33), and a NOTIFY for the followers
 * of other hosts ($34: delivered at COMMIT). See {@link PgTxStore.changeParams}.
 */
const EFFECTS = `a AS (
    INSERT INTO attempts AS cur (${ATTEMPT_COLUMNS}, settled_at)
    SELECT t.tx_id, x.attempt, x.bundle_id, x.stage, x.outcome, x.tip_lamports, x.tip_tx, x.tip_signature,
      x.tip_account, x.tipper, x.tip_last_valid_block_height, x.bundle_signatures, x.passengers, x.passenger_wires,
      to_timestamp((j.v->>'created_ms')::float8 / 1000), x.created_slot, x.slot_submitted, x.target_slot, x.window_end_slot, x.region, x.leader, x.slot_landed,
      x.floor_at_submit, x.decision, x.timeline, x.reserved_lamports, x.released, x.leaked, x.send_errors,
      CASE WHEN x.stage IN ${SETTLED} THEN clock_timestamp() END
    FROM t, json_array_elements($23::json) WITH ORDINALITY AS j(v, n), json_populate_record(null::attempts, j.v) x
    ORDER BY j.n
    ON CONFLICT (tx_id, attempt) DO UPDATE SET (${ATTEMPT_COLUMNS}, previous_bundle_ids, settled_at) =
      (${EXCLUDED_ATTEMPT},
       CASE WHEN cur.bundle_id <> EXCLUDED.bundle_id THEN array_append(cur.previous_bundle_ids, cur.bundle_id)
            ELSE cur.previous_bundle_ids END,
       CASE WHEN EXCLUDED.stage IN ${SETTLED} THEN coalesce(cur.settled_at, clock_timestamp()) END)
  ), reserved AS (
    INSERT INTO spend_reservations (tx_id, attempt, tipper, reserved_at, lamports)
    SELECT t.tx_id, s.n, s.tipper, to_timestamp(s.at / 1000), s.lamports
    FROM t, json_to_recordset($24::json) AS s(n integer, tipper text, at float8, lamports bigint)
    ON CONFLICT (tx_id, attempt) DO UPDATE
      SET tipper = EXCLUDED.tipper, reserved_at = EXCLUDED.reserved_at, lamports = EXCLUDED.lamports, released_at = NULL
  ), recounted AS (
    INSERT INTO spend_reservations (tx_id, attempt, tipper, reserved_at, lamports)
    SELECT t.tx_id, s.n, s.tipper, to_timestamp(s.at / 1000), s.lamports
    FROM t, json_to_recordset($25::json) AS s(n integer, tipper text, at float8, lamports bigint)
    ON CONFLICT (tx_id, attempt) DO UPDATE
      SET reserved_at = EXCLUDED.reserved_at, lamports = EXCLUDED.lamports, released_at = NULL
      WHERE spend_reservations.released_at IS NOT NULL
  ), released AS (
    UPDATE spend_reservations r SET released_at = now() FROM t
    WHERE r.tx_id = t.tx_id AND r.attempt = ANY ($26::integer[]) AND r.released_at IS NULL
  ), evicted AS (
    INSERT INTO eviction_counts (reason, count) SELECT $27::text, 1 FROM t WHERE $27::text IS NOT NULL
    ON CONFLICT (reason) DO UPDATE SET count = eviction_counts.count + 1
  ), e AS (
    SELECT nextval(pg_get_serial_sequence('events', 'id')) AS id, u.name, u.payload::json AS payload, u.hook, u.n
    FROM t, unnest($29::text[], $30::text[], $31::text[]) WITH ORDINALITY AS u(name, payload, hook, n)
  ), told AS (
    INSERT INTO events (id, name, tx_id, host_id, payload) OVERRIDING SYSTEM VALUE
    SELECT e.id, e.name, $1, $28::text, e.payload FROM e ORDER BY e.n
  ), hooks AS (
    INSERT INTO webhook_outbox (endpoint, tx_id, webhook_id, event_xid, event_id, event_name, payload)
    SELECT ep.url, $1, e.hook, pg_current_xact_id(), e.id, e.name, e.payload
    FROM e CROSS JOIN unnest($32::text[]) WITH ORDINALITY AS ep(url, m)
    WHERE e.hook IS NOT NULL ORDER BY e.n, ep.m
  ), entries AS (
    INSERT INTO lifecycle_entries (bundle_id, tx_id, attempt, stage, host_id, entry)
    SELECT l.entry->>'bundle_id', l.entry->>'tx_id', (l.entry->>'attempt')::integer, l.entry->>'stage', $28::text,
      l.entry
    FROM t, (SELECT u.text::json AS entry, u.n FROM unnest($33::text[]) WITH ORDINALITY AS u(text, n)) l
    ORDER BY l.n
  ), notified AS (
    SELECT pg_notify('${EVENTS_CHANNEL}', '') FROM t WHERE $34::boolean
  )
  SELECT t.version, (SELECT count(*) FROM notified) AS notified FROM t`;

/**
 * A change to a record, one statement (one round trip, one commit in autocommit): the row, compare-and-set on its
 * version ($22: no row changes if another writer moved it) and fenced by its owner while it is live ($35, $36: a
 * host whose session lapsed, or whose work another session adopted, touches no row: DESIGN §10's fence, checked by
 * the database in the write itself), and every effect of {@link EFFECTS}. A terminal row is no one's work any more
 * (no attempt can be added to it); what is still written to it (a tip found leaked) is ordered by the version alone.
 */
const CHANGE = `WITH t AS (
    UPDATE transactions SET (${TX_COLUMNS}, version, updated_at, terminal_at) =
      (${TX_VALUES.replace('$1, ', '')}, version + 1, now(),
       CASE WHEN $2::text IN ${TERMINAL} THEN coalesce(terminal_at, clock_timestamp()) END)
    WHERE tx_id = $1 AND version = $22::bigint
      AND (terminal_at IS NOT NULL OR (owner_host IS NOT DISTINCT FROM $35::text AND owner_epoch IS NOT DISTINCT FROM $36::bigint))
    RETURNING tx_id, version
  ), ${EFFECTS}`;

/**
 * {@link CHANGE} behind the fleet's spend-limit ($37 the window's start in ms, $38 the limit, $39 the lamports this
 * change reserves): `relay_spend_check` takes the spend lock and refuses by raising (migrations/004); the row is
 * changed only after it returned, in the same statement, so the lock is never held across a round trip.
 */
const CHANGE_WITHIN_SPEND = CHANGE.replace(
  'WITH t AS (',
  `WITH spend AS MATERIALIZED (
    SELECT relay_spend_check($37::float8, $38::bigint, $39::bigint)
  ), t AS (`,
).replace(
  'WHERE tx_id = $1 AND version = $22::bigint',
  'WHERE tx_id = $1 AND version = $22::bigint AND EXISTS (SELECT 1 FROM spend)',
);

/** A new record (at version $22), with its attempts and events; nothing if its first signature is taken. */
const ACCEPT = `WITH t AS (
    INSERT INTO transactions (tx_id, ${TX_COLUMNS}, version, terminal_at, owner_host, owner_epoch)
    VALUES (${TX_VALUES}, $22::bigint, CASE WHEN $2::text IN ${TERMINAL} THEN clock_timestamp() END, $35::text,
      $36::bigint)
    ON CONFLICT (first_signature) DO NOTHING
    RETURNING tx_id, version
  ), ${EFFECTS}`;

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

/**
 * A row's `inherited_attempts` as it moves to host $1: moving from another host id, its attempts so far (rule 3 holds
 * them until their tips are dead); from an earlier epoch of the same host id (a process of this host that is gone:
 * the host-id lock proves it), what it was.
 */
const INHERITED_ATTEMPTS = `CASE WHEN t.owner_host IS NOT NULL AND t.owner_host <> $1
    THEN (SELECT coalesce(max(a.attempt), 0) FROM attempts a WHERE a.tx_id = t.tx_id)
    ELSE t.inherited_attempts END`;

/**
 * The takeover sweep ({@link PgTxStore.sweep}): live rows of another session ($1, $2 is this one) that has ended, whose
 * lease the database's clock says has passed, or that is gone from `host_sessions`; up to $3, oldest first, each
 * locked and skipped if another sweeper holds it; moved to this session in the same statement, with a `tx_adopted`
 * event each (NOTIFYing other hosts' followers when $4).
 */
const SWEEP = `WITH orphaned AS MATERIALIZED (
    SELECT t.tx_id, t.owner_host, t.owner_epoch FROM transactions t
    WHERE t.terminal_at IS NULL AND t.owner_host IS NOT NULL
      AND (t.owner_host, t.owner_epoch) IS DISTINCT FROM ($1::text, $2::bigint)
      AND NOT EXISTS (SELECT 1 FROM host_sessions s WHERE s.host_id = t.owner_host AND s.epoch = t.owner_epoch
        AND s.ended_at IS NULL AND s.lease_expires_at >= now())
    ORDER BY t.seq
    LIMIT $3
    FOR UPDATE OF t SKIP LOCKED
  ), moved AS (
    UPDATE transactions t SET owner_host = $1, owner_epoch = $2, inherited = t.inherited OR t.owner_host <> $1,
      inherited_attempts = ${INHERITED_ATTEMPTS}
    FROM orphaned o WHERE t.tx_id = o.tx_id
    RETURNING ${HELD}, t.seq AS moved_seq, o.owner_host AS previous_host, o.owner_epoch AS previous_epoch
  ), told AS (
    INSERT INTO events (name, tx_id, host_id, payload)
    SELECT 'tx_adopted', m.tx_id, $1::text, json_build_object('tx_id', m.tx_id, 'host_id', $1::text,
      'from_host_id', m.previous_host, 'from_epoch', m.previous_epoch, 'state', m.state, 'priority', m.priority,
      'enqueued_slot', m.enqueued_slot, 'expires_at_slot', m.expires_at_slot, 'max_tip', m.max_tip,
      'tip', m.tip_mode, 'retries', m.retries,
      'previous_attempt', (SELECT json_build_object('tip_lamports', a.tip_lamports, 'outcome', a.outcome)
        FROM attempts a WHERE a.tx_id = m.tx_id AND a.stage = 'failed' AND a.outcome IS NOT NULL
        ORDER BY a.attempt DESC LIMIT 1),
      'ts', (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    FROM moved m ORDER BY m.moved_seq
  ), notified AS (
    SELECT pg_notify('${EVENTS_CHANNEL}', '') WHERE $4::boolean AND EXISTS (SELECT 1 FROM moved)
  )
  SELECT m.*, (SELECT count(*) FROM notified) AS notified FROM moved m ORDER BY m.moved_seq`;

/** This session's live rows ($1, $2), to hold those a sweep of unknown outcome moved (see `sweepOnce`). */
const STRANDED = `SELECT ${HELD}, t.owner_host AS previous_host, t.owner_epoch AS previous_epoch FROM transactions t
  WHERE t.terminal_at IS NULL AND t.owner_host = $1 AND t.owner_epoch = $2 AND t.inherited ORDER BY t.seq`;

/**
 * {@link ACCEPT} behind the fleet's admission ($37 max-queue, $38 rate-limit): `relay_admit` takes the admission lock
 * and refuses by raising (migrations/004); the row is inserted only after it returned, and this enqueue's admission
 * row only with it.
 */
const ADMIT_ACCEPT = `WITH admit AS MATERIALIZED (
    SELECT relay_admit($37::bigint, $38::bigint)
  ), t AS (
    INSERT INTO transactions (tx_id, ${TX_COLUMNS}, version, terminal_at, owner_host, owner_epoch)
    SELECT ${TX_VALUES}, $22::bigint, CASE WHEN $2::text IN ${TERMINAL} THEN clock_timestamp() END, $35::text,
      $36::bigint
    FROM admit
    ON CONFLICT (first_signature) DO NOTHING
    RETURNING tx_id, version
  ), admitted AS (
    INSERT INTO admissions (host_id) SELECT $35::text FROM t
  ), ${EFFECTS}`;

/**
 * Other hosts' attempts ($1: this host) whose tips may still debit a tipper (`tipper-funds.ts` mayStillDebit decides
 * exactly): unsettled (the partial index `attempts_unsettled_tipper`), leaked, or failed since slot $2. One json
 * array.
 */
const OTHER_HOSTS_TIPS = `SELECT json_agg(x) AS attempts FROM (
    SELECT ${ATTEMPT} FROM attempts a JOIN transactions t ON t.tx_id = a.tx_id
    WHERE t.owner_host IS DISTINCT FROM $1 AND a.tip_signature IS NOT NULL
      AND (a.stage NOT IN ('finalized', 'failed') OR a.leaked OR (a.stage = 'failed' AND a.created_slot >= $2))
  ) x`;

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

// ------------------------------------------------------------------ rows

/** A record's row as node-postgres gives it: bigint columns as strings, json parsed, float8 as numbers. */
interface TxRow {
  tx_id: string;
  inherited_attempts: number;
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
  if (row.inherited_attempts > 0) tx.inherited_attempts = row.inherited_attempts;
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
  // Set once an engine took the bundle (absent before, as in the journal's records).
  if (j.region != null) attempt.region = j.region;
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

/**
 * An attempt as a row of {@link EFFECTS}' `$23`: its columns by name (json_populate_record fills the attempts row
 * type from them), the json ones as values, `created_at` as epoch ms apart (`created_ms`: the row type's timestamptz
 * reads no number).
 */
function attemptRow(a: StoredAttempt): Record<string, unknown> {
  return {
    attempt: a.attempt,
    bundle_id: a.bundle_id,
    stage: a.stage,
    outcome: a.outcome,
    tip_lamports: a.tip_lamports,
    tip_tx: a.tip_tx,
    tip_signature: a.tip_signature,
    tip_account: a.tip_account,
    tipper: a.tipper ?? null,
    tip_last_valid_block_height: a.tip_last_valid_block_height,
    bundle_signatures: a.bundle_signatures,
    passengers: a.passengers ?? null,
    passenger_wires: a.passenger_wires ?? null,
    created_ms: a.created_at,
    created_slot: a.created_slot,
    slot_submitted: a.slot_submitted,
    target_slot: a.target_slot,
    window_end_slot: a.window_end_slot,
    region: a.region ?? null,
    leader: a.leader,
    slot_landed: a.slot_landed,
    floor_at_submit: a.floor_at_submit,
    decision: a.decision,
    timeline: a.timeline,
    reserved_lamports: a.reserved_lamports,
    released: a.released,
    leaked: a.leaked,
    send_errors: a.send_errors,
  };
}

/** A record accepted already terminal keeps no payload (a copy: the caller's object is theirs). */
function retired(tx: StoredTx): StoredTx {
  const copy = structuredClone(tx);
  dropPayload(copy);
  return copy;
}

// ------------------------------------------------------------------ errors

/** node-postgres refused the statement before sending it (the connection was already gone): nothing was written. */
function notSent(error: unknown): boolean {
  return /not queryable|Client was closed/i.test(
    String((error as { message?: unknown } | null)?.message ?? ''),
  );
}

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
/**
 * End a failed transaction on `db` and give the connection back to the pool; one the ROLLBACK cannot reach is
 * destroyed instead. `ignore` is the error listener the caller put on it while it was checked out.
 */
/**
 * Roll back `db`'s transaction after `error` and give the connection back; a connection lost or given up on
 * (`lostConnection`: after node-postgres' `query_timeout` the statement it gave up on is still the client's active
 * one, and a ROLLBACK would wait behind it for as long again) is destroyed instead: the server ends the transaction
 * with the session.
 */
async function rollBack(db: pg.PoolClient, ignore: () => void, error?: unknown): Promise<void> {
  if (error !== undefined && lostConnection(error)) {
    db.release(true);
    return;
  }
  try {
    await db.query('ROLLBACK');
    db.off('error', ignore);
    db.release();
  } catch {
    db.release(true);
  }
}

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
  // `Query read timeout`: node-postgres' query_timeout, no answer well past statement_timeout (pg/connect.ts).
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|not queryable|Client has encountered a connection error|Query read timeout/i.test(
    message,
  );
}

/**
 * No connection free in time: pg-pool's own wait for a pooled client ran out (`timeout exceeded when trying to
 * connect`, pg-pool 3.x `connect`; a connection that could not be opened says `Connection terminated due to
 * connection timeout` instead), or the server refused a new connection at max_connections (53300).
 */
export function poolBusy(error: unknown): boolean {
  if (error instanceof pg.DatabaseError) return error.code === '53300';
  const message = String((error as { message?: unknown } | null)?.message ?? '');
  return message === 'timeout exceeded when trying to connect';
}

function reasonOf(error: unknown): string {
  return String((error as { message?: unknown } | null)?.message ?? error);
}
