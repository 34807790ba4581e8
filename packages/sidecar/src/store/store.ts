import type { EventCursor, LifecycleEntry, RelayEventMap, TxHistoryEntry, TxState } from '@solrelay/core';
import { isRelayError } from '@solrelay/core';
import type { Journal } from '../journal/journal';
import { awaitingAttemptOf, followedOf, inFlight, landedInOf, liveOf } from './queries';
import {
  reservationIncrease,
  storeCodec,
  type AttemptStage,
  type StoreOp,
  type StoreState,
  type StoredAttempt,
  type StoredTx,
} from './records';
import { WriteChain } from './write-chain';

/** The policy's admission limits (`max-queue`, `rate-limit` per sliding 60 s) an accept is checked against. */
export interface Admission {
  maxQueue: number;
  rateLimit: number;
}

/**
 * The store is relay's system of record (DESIGN §10): every accepted transaction, its attempts, the spend ledger and
 * the events a change causes. Stages never see its tables: they ask named async queries and make transitions that
 * resolve, once durable, with the new record. Records handed out are snapshots: a record never changes under its
 * holder; the next read (or the transition's answer) gives the new one.
 *
 * Three stores answer this interface, each its own way: the local journal (the default; fsync, group commit,
 * snapshot compaction), an in-memory twin (tests, benchmarks, nothing durable), and PostgreSQL (a fleet of
 * sidecars; each transition a fenced SQL transaction). The reference designs: bullmq's queue backends (each
 * transition checks its expectation, changes the row and publishes the event at once) and OpenZeppelin Relayer's
 * repositories (narrow queries, updates that return the new model, an in-memory twin of each).
 */
export interface TxStore extends TxQueries {
  /** False while writes are failing (readiness says so). */
  readonly healthy: boolean;
  /** Why it is not healthy, in words naming what failed (readiness says this when given; else "writes failing"). */
  readonly problem?: string | null;
  /** What each committed change caused, in commit order (SSE, webhooks and the lifecycle log follow it). */
  readonly changes: ChangeFeed;
  /**
   * A store whose events SSE follows from an event log (PostgreSQL): the record and the cursor of its newest event,
   * read at one moment. Absent on the local stores (SSE follows the change feed there).
   */
  getWithEventCursor?(txId: string): Promise<{ tx: StoredTx | undefined; cursor: EventCursor }>;

  /**
   * Accept a transaction: a new record, unless one with the same first signature exists (idempotent enqueue), in
   * which case that one is returned with `created: false` and nothing is written. `admission`: the limits the caller
   * checked in this process; a store shared by several processes (PostgreSQL, several hosts) checks them again in
   * the transaction that admits, fleet-wide, and refuses with `RELAY_E_QUEUE_FULL` / `RELAY_E_RATE_LIMITED`.
   */
  accept(
    tx: StoredTx,
    events?: readonly TxEvent[],
    admission?: Admission,
  ): Promise<{ tx: StoredTx; created: boolean }>;
  /**
   * A new attempt and its spend reservation, atomically (with `set`'s fields). Refused (StoreConflict) while
   * another attempt of the transaction is unsettled (at most one attempt in flight) or the record does not match
   * `expect`.
   */
  addAttempt(
    txId: string,
    attempt: StoredAttempt,
    options?: { expect?: TxExpectation; set?: TxChange['set']; spendLimit?: SpendLimit },
  ): Promise<StoredTx>;
  /**
   * Compare-and-set: apply `change` if the record still matches `expect` (its state, an attempt's stage or bundle
   * id), else refuse with StoreConflict carrying the current record. Writes to one record apply in call order.
   */
  transition(txId: string, expect: TxExpectation, change: TxChange): Promise<StoredTx>;
  /** Forget spend reservations older than `before` (they left the rolling hour). */
  pruneSpend(before: number): Promise<void>;
  /** Flush and stop taking writes. */
  close(): Promise<void>;
}

/** The named reads. Every one is async: a database answers them by query, the local stores from memory. */
export interface TxQueries {
  get(txId: string): Promise<StoredTx | undefined>;
  /** The transaction whose first user transaction has this first signature (dedupe). */
  byFirstSignature(signature: string): Promise<StoredTx | undefined>;
  /** The transaction an attempt's bundle id belongs to (an old bundle id of a re-signed tip included). */
  byBundle(bundleId: string): Promise<StoredTx | undefined>;
  /** Every transaction not yet terminal. */
  live(): Promise<StoredTx[]>;
  /** Non-terminal transactions waiting for an attempt: pending, not stopped, nothing in flight. */
  awaitingAttempt(): Promise<StoredTx[]>;
  /** Non-terminal transactions whose landing slot is `slot` (a dead slot un-lands them). */
  landedIn(slot: number): Promise<StoredTx[]>;
  /**
   * Live transactions, and retained terminal ones with an attempt that ended unleaked and was built at or after
   * `sinceSlot` (its tip may still land: the caller decides exactly, by the tip's blockhash).
   */
  followed(sinceSlot: number): Promise<{ live: StoredTx[]; ended: StoredTx[] }>;
  /** Every retained record, terminal ones included (recovery). */
  all(): Promise<StoredTx[]>;
  /**
   * The records this store holds in memory (the tippers' loads, every balance read): on the local stores every
   * retained one, as `all`; on PostgreSQL with one host the same set (every live record and the retained terminal
   * ones), without reading the table.
   */
  held(): Promise<StoredTx[]>;
  /**
   * Several hosts on one database: the attempts of other hosts' transactions whose tips may still take from a tipper
   * (unsettled, leaked, or failed since `sinceSlot` with a tip that may still be live), for the tippers' loads when
   * hosts share tippers (DESIGN §10: reservations against a tipper's balance are fleet-wide). None on one host.
   */
  otherHostsTips(sinceSlot: number): Promise<StoredAttempt[]>;
  /**
   * Whether this process runs `txId` (sends it, settles it): on one host every transaction; with several hosts on one
   * database, those its host session owns (held in memory). Synchronous: asked on the send path after a read.
   */
  owns(txId: string): boolean;
  /**
   * Which of these tips the store itself holds on that attempt, read from where it keeps them (a database: read from
   * it now, not from what this process holds). After a database outage, a tip this process sent that the database
   * does not hold (a failover that lost an acknowledged commit) is one nothing else would follow (see `OutageGate`).
   * Answers the {@link tipKey} of each one held.
   */
  heldTips(tips: readonly TipRef[]): Promise<Set<string>>;
  /** What admission and metrics count. */
  counts(): Promise<StoreCounts>;
  /** Lamports reserved or paid at or after `cutoff` (ms): what `spend-limit` is checked against. */
  spentSince(cutoff: number): Promise<number>;
  /** Whether any spend reservation is older than `before` (due for pruning). */
  hasSpendOlderThan(before: number): Promise<boolean>;
}

/** One attempt's tip, by the signature it was sent with. */
export interface TipRef {
  txId: string;
  attempt: number;
  tipSignature: string;
}

/** The key `heldTips` answers with: the transaction, the attempt and the tip's signature. */
export function tipKey(tip: TipRef): string {
  return `${tip.txId}#${tip.attempt}#${tip.tipSignature}`;
}

export interface StoreCounts {
  /** Non-terminal transactions (what `max-queue` limits). */
  active: number;
  /** Waiting for an attempt to go out, by the priority they were enqueued with (a fleet's: every host's). */
  waiting: Readonly<StoreState['waiting']>;
  /**
   * Of those, what this process sends: on one host the same; in a fleet, the work its session owns. Admission weighs
   * it against this host's own send budget (each host sends what it owns, from its own address).
   */
  ownWaiting: Readonly<StoreState['waiting']>;
  /** Left the queue without landing, by reason. */
  evicted: Readonly<Record<string, number>>;
}

/**
 * `spend-limit` checked where the reservation is made, atomically with it: what is reserved or paid at or after
 * `since`, plus reservations being committed, plus this attempt's, must not pass `limit` (0: no limit). Refused with
 * SpendLimitReached.
 */
export interface SpendLimit {
  limit: number;
  since: number;
}

/** An attempt's reservation would pass `spend-limit` (the store checked it with the reservations of every host). */
export class SpendLimitReached extends Error {
  constructor(
    readonly limit: number,
    /** Lamports already reserved or paid in the window, this attempt's included. */
    readonly actual: number,
  ) {
    super(`spend-limit ${limit} would be passed: ${actual} lamports in the window with this attempt`);
    this.name = 'SpendLimitReached';
  }
}

/** Refuses an attempt of `lamports` when what is already counted in the window (`spent`) and it pass `limit`. */
export function assertWithinSpendLimit(limit: SpendLimit, spent: number, lamports: number): void {
  const actual = spent + lamports;
  if (actual > limit.limit) throw new SpendLimitReached(limit.limit, actual);
}

/** What a transition expects of the record; every field given must match. */
export interface TxExpectation {
  state?: TxState | readonly TxState[];
  /** Whether the transaction may have stopped making attempts (false: it must not have stopped). */
  stopped?: boolean;
  attempt?: { n: number; stage?: AttemptStage | readonly AttemptStage[]; bundleId?: string };
}

/** One change to a record: fields, history entries, attempt fields, an eviction count, and what it causes. */
export interface TxChange {
  set?: Partial<Omit<StoredTx, 'tx_id' | 'history' | 'attempts'>>;
  history?: TxHistoryEntry[];
  attempts?: Array<{ n: number; set: Partial<StoredAttempt> }>;
  /** Count an eviction (left the queue without landing) under this reason. */
  evicted?: string;
  /** Committed with the change, published after it (never before it is durable). */
  events?: readonly TxEvent[];
  /**
   * Checked as the change commits, atomically with it: what it adds to an attempt's reservation (a raised tip) must
   * not pass `spend-limit` with everything else reserved (refused with SpendLimitReached). Not stored.
   */
  spendLimit?: SpendLimit;
}

/** What a change causes: an SSE event (and webhook) or an audit-log entry. */
export type TxEvent =
  | { kind: 'tx_status_changed'; data: RelayEventMap['tx_status_changed'] }
  | { kind: 'bundle_settled'; data: RelayEventMap['bundle_settled'] }
  | { kind: 'tx_enqueued'; data: RelayEventMap['tx_enqueued'] }
  | { kind: 'lifecycle'; entry: LifecycleEntry };

/** One committed change, as the change feed delivers it. */
export interface StoreChange {
  /** Position in this store's feed (increasing; a listener that saw n has seen everything before it). */
  seq: number;
  tx: StoredTx;
  events: readonly TxEvent[];
}

/** The record did not match what a transition expected: re-read, decide again. */
export class StoreConflict extends Error {
  constructor(
    readonly txId: string,
    readonly expected: TxExpectation | 'no attempt in flight',
    readonly current: StoredTx | undefined,
  ) {
    super(
      `transaction ${txId} changed: expected ${JSON.stringify(expected)}, found ${
        current ? `state ${current.state}` : 'no record'
      }`,
    );
    this.name = 'StoreConflict';
  }
}

/**
 * Whether `error` is the store telling that its database is unavailable (`RELAY_E_DB_UNAVAILABLE`, nothing written)
 * or lost a COMMIT's answer (`RELAY_E_DB_COMMIT_UNKNOWN`: re-read, never send on it). The store reports an outage once
 * (see PgTxStore); the loops that meet it at every slot or send log it at debug and try again.
 */
export function isDatabaseOutage(error: unknown): boolean {
  return (
    isRelayError(error, 'RELAY_E_DB_UNAVAILABLE') ||
    isRelayError(error, 'RELAY_E_DB_COMMIT_UNKNOWN') ||
    isRelayError(error, 'RELAY_E_DB_UNREACHABLE')
  );
}

export function isStoreConflict(error: unknown): error is StoreConflict {
  return error instanceof StoreConflict;
}

/** The change feed: listeners run synchronously, in commit order, after each change is durable. */
export class ChangeFeed {
  private seq = 0;
  private readonly listeners = new Set<(change: StoreChange) => void>();

  subscribe(listener: (change: StoreChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get position(): number {
    return this.seq;
  }

  /**
   * @internal the store calls this after a commit. A listener that throws is reported to `onListenerError` and
   * never reaches the writer: the change is durable whatever a listener does with it.
   */
  emit(tx: StoredTx, events: readonly TxEvent[]): void {
    const change: StoreChange = { seq: ++this.seq, tx, events };
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (error) {
        this.onListenerError(error, change);
      }
    }
  }

  /** Where a listener's failure goes (the composition logs it). */
  onListenerError: (error: unknown, change: StoreChange) => void = () => undefined;
}

/** `tx` with `change` applied (what a store answers for a record it no longer keeps). */
function applied(tx: StoredTx, change: Omit<TxChange, 'events'>): StoredTx {
  const attempts = tx.attempts.map((a) => {
    const set = change.attempts?.find((c) => c.n === a.attempt)?.set;
    return set ? { ...a, ...set } : a;
  });
  return { ...tx, ...change.set, history: [...tx.history, ...(change.history ?? [])], attempts };
}

/** Refuse (StoreConflict) a new attempt for `tx` unless it matches `expect` and has no attempt in flight. */
export function mayAddAttempt(
  txId: string,
  tx: StoredTx | undefined,
  expect: TxExpectation,
): asserts tx is StoredTx {
  if (!tx || !matches(tx, expect)) throw new StoreConflict(txId, expect, tx);
  if (inFlight(tx)) throw new StoreConflict(txId, 'no attempt in flight', tx);
}

/** Whether `tx` matches `expect`. */
export function matches(tx: StoredTx, expect: TxExpectation): boolean {
  if (expect.state !== undefined) {
    const states: readonly TxState[] = typeof expect.state === 'string' ? [expect.state] : expect.state;
    if (!states.includes(tx.state)) return false;
  }
  if (expect.stopped !== undefined && tx.stopped !== expect.stopped) return false;
  if (expect.attempt) {
    const { n, stage, bundleId } = expect.attempt;
    const attempt = tx.attempts.find((a) => a.attempt === n);
    if (!attempt) return false;
    if (stage !== undefined) {
      const stages: readonly AttemptStage[] = typeof stage === 'string' ? [stage] : stage;
      if (!stages.includes(attempt.stage)) return false;
    }
    if (bundleId !== undefined && attempt.bundle_id !== bundleId) return false;
  }
  return true;
}

/**
 * A store over the in-memory tables of `records.ts` (the journal's state, or a plain one): reads answer from the
 * tables, writes go through `commit` (durable first for the journal) and are applied in order. Writes to one record
 * are chained, so a compare-and-set checks the record as every earlier write to it left it.
 */
abstract class TableTxStore implements TxStore {
  readonly changes = new ChangeFeed();
  /** Writes to one record, in call order. */
  private readonly writes = new WriteChain();

  protected abstract get state(): StoreState;
  protected abstract commit(op: StoreOp): Promise<void>;
  abstract get healthy(): boolean;
  abstract close(): Promise<void>;

  private current(txId: string): StoredTx | undefined {
    return this.state.records.get(txId);
  }

  async accept(tx: StoredTx, events: readonly TxEvent[] = []): Promise<{ tx: StoredTx; created: boolean }> {
    const first = tx.signatures[0] as string;
    return this.writes.run(`sig:${first}`, async () => {
      const existingId = this.state.bySignature.get(first);
      const existing = existingId === undefined ? undefined : this.current(existingId);
      if (existing) return { tx: existing, created: false };
      await this.commit({ k: 'put', tx });
      const stored = this.current(tx.tx_id) as StoredTx;
      this.changes.emit(stored, events);
      return { tx: stored, created: true };
    });
  }

  /** Lamports of attempts checked against `spend-limit` whose commit has not applied yet. */
  private reserving = 0;

  addAttempt(
    txId: string,
    attempt: StoredAttempt,
    options: { expect?: TxExpectation; set?: TxChange['set']; spendLimit?: SpendLimit } = {},
  ): Promise<StoredTx> {
    const expect = options.expect ?? {};
    return this.writes.run(txId, async () => {
      const tx = this.current(txId);
      mayAddAttempt(txId, tx, expect);
      const lamports = attempt.released ? 0 : attempt.reserved_lamports;
      const limit = options.spendLimit;
      if (limit && limit.limit > 0) {
        // Reservations of other transactions being committed right now count too: a commit applies only after its
        // fsync, and two attempts checked in between would both pass.
        assertWithinSpendLimit(limit, this.state.spend.spentSince(limit.since) + this.reserving, lamports);
      }
      this.reserving += lamports;
      try {
        await this.commit({ k: 'patch', id: txId, attempt, ...(options.set ? { set: options.set } : {}) });
      } finally {
        this.reserving -= lamports;
      }
      return this.current(txId) as StoredTx;
    });
  }

  transition(txId: string, expect: TxExpectation, change: TxChange): Promise<StoredTx> {
    return this.writes.run(txId, async () => {
      const tx = this.current(txId);
      if (!tx || !matches(tx, expect)) throw new StoreConflict(txId, expect, tx);
      const { events = [], spendLimit, ...rest } = change;
      const more = spendLimit && spendLimit.limit > 0 ? reservationIncrease(tx, rest) : 0;
      if (spendLimit && more > 0)
        assertWithinSpendLimit(
          spendLimit,
          this.state.spend.spentSince(spendLimit.since) + this.reserving,
          more,
        );
      this.reserving += more;
      try {
        await this.commit({ k: 'patch', id: txId, ...rest });
      } finally {
        this.reserving -= more;
      }
      const next = this.current(txId);
      // Retention may already have evicted a record that went terminal (a retention of 0): answer with what the
      // change made of it.
      const answer = next ?? applied(tx, rest);
      this.changes.emit(answer, events);
      return answer;
    });
  }

  async pruneSpend(before: number): Promise<void> {
    await this.commit({ k: 'prune-spend', before });
  }

  // ------------------------------------------------------------------ queries

  get(txId: string): Promise<StoredTx | undefined> {
    return Promise.resolve(this.current(txId));
  }

  byFirstSignature(signature: string): Promise<StoredTx | undefined> {
    const id = this.state.bySignature.get(signature);
    return Promise.resolve(id === undefined ? undefined : this.current(id));
  }

  byBundle(bundleId: string): Promise<StoredTx | undefined> {
    const id = this.state.byBundle.get(bundleId);
    return Promise.resolve(id === undefined ? undefined : this.current(id));
  }

  live(): Promise<StoredTx[]> {
    return Promise.resolve(liveOf(this.state.records.values()));
  }

  awaitingAttempt(): Promise<StoredTx[]> {
    return Promise.resolve(awaitingAttemptOf(this.state.records.values()));
  }

  heldTips(tips: readonly TipRef[]): Promise<Set<string>> {
    const held = new Set<string>();
    for (const tip of tips) {
      const attempt = this.state.records.get(tip.txId)?.attempts.find((a) => a.attempt === tip.attempt);
      if (attempt?.tip_signature === tip.tipSignature) held.add(tipKey(tip));
    }
    return Promise.resolve(held);
  }

  landedIn(slot: number): Promise<StoredTx[]> {
    return Promise.resolve(landedInOf(this.state.records.values(), slot));
  }

  followed(sinceSlot: number): Promise<{ live: StoredTx[]; ended: StoredTx[] }> {
    return Promise.resolve(followedOf(this.state.records.values(), sinceSlot));
  }

  all(): Promise<StoredTx[]> {
    return Promise.resolve([...this.state.records.values()]);
  }

  held(): Promise<StoredTx[]> {
    return this.all();
  }

  otherHostsTips(): Promise<StoredAttempt[]> {
    return Promise.resolve([]);
  }

  owns(): boolean {
    return true;
  }

  counts(): Promise<StoreCounts> {
    const s = this.state;
    return Promise.resolve({
      active: s.active,
      waiting: { ...s.waiting },
      ownWaiting: { ...s.waiting },
      evicted: { ...s.evicted },
    });
  }

  spentSince(cutoff: number): Promise<number> {
    return Promise.resolve(this.state.spend.spentSince(cutoff));
  }

  hasSpendOlderThan(before: number): Promise<boolean> {
    return Promise.resolve(this.state.spend.hasOlderThan(before));
  }
}

/** The store on the local append-only journal (fsync, group commit, snapshot compaction): the default. */
export class JournalTxStore extends TableTxStore {
  constructor(private readonly journal: Journal<StoreState, StoreOp>) {
    super();
  }

  protected get state(): StoreState {
    return this.journal.state;
  }

  protected commit(op: StoreOp): Promise<void> {
    return this.journal.commit(op);
  }

  get healthy(): boolean {
    return this.journal.healthy;
  }

  close(): Promise<void> {
    return this.journal.close();
  }
}

/** The in-memory twin: the same tables and rules, nothing durable (tests, benchmarks of the stages alone). */
export class InMemoryTxStore extends TableTxStore {
  private readonly codec;
  private readonly tables: StoreState;
  private closed = false;

  constructor(retainTerminal = 20_000) {
    super();
    this.codec = storeCodec(retainTerminal);
    this.tables = this.codec.initial();
  }

  protected get state(): StoreState {
    return this.tables;
  }

  protected commit(op: StoreOp): Promise<void> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    // Like the journal, a change becomes visible when the commit resolves, not when it is asked for.
    return Promise.resolve().then(() => this.codec.apply(this.tables, op));
  }

  get healthy(): boolean {
    return !this.closed;
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}
