import type {
  AiDecisionTrace,
  AttemptOutcome,
  BundleStage,
  ContentionClass,
  DecisionMode,
  ErrorBody,
  LifecycleTimeline,
  Priority,
  TipFloor,
  TipMode,
  TxHistoryEntry,
  TxState,
} from '@solrelay/core';
import { isTerminalTxState } from '@solrelay/core';
import type { JournalCodec } from '../journal/journal';

/**
 * What the journal keeps for every accepted transaction, and the operations that change it.
 *
 * Records are changed only through journal operations, so the in-memory view is always exactly what a restart
 * replays. Two kinds of operation: `put` (a whole new record, at enqueue) and `patch` (fields to set, history to
 * append, an attempt to add or attempt fields to set). Terminal records drop their wire bytes and are kept, newest
 * last, up to a retention count; memory stays bounded however many transactions pass through.
 */

export type AttemptStage = 'journaled' | BundleStage;

export interface AttemptDecision {
  mode: DecisionMode;
  bypass: boolean;
  escalated: boolean;
  reason: string;
  trace: AiDecisionTrace | null;
  /** Who asked: the agent, the sidecar's own reflex (agent absent), bypass, or a manual call. */
  source: 'agent' | 'fallback' | 'bypass' | 'manual';
  /**
   * The bundle's requested CU and tip per CU as sent (a pack's once it is packed), the bid per CU the decider asked
   * for and what priced it (DESIGN §11). Absent on attempts built before pricing per CU.
   */
  pricing?: AttemptPricing;
}

/** How an attempt's tip stands per requested CU (the lifecycle entry shows it). */
export interface AttemptPricing {
  /** Requested CU of the whole bundle as sent: user transactions, riders, the tip transaction. */
  compute_units: number;
  /** tip_lamports / compute_units. */
  tip_per_cu: number;
  /**
   * The rank this attempt's own transaction needs, lamports per CU: the decider's bid when it priced per CU, else its
   * own tip over its own bundle's CU. A pack never lowers it.
   */
  bid_per_cu: number;
  /** Contention of the write set when priced; null when the decider did not price per CU. */
  contention: ContentionClass | null;
  /** The signal that priced the tip, or who chose a tip not priced per CU. */
  signal: string;
  /**
   * A packed attempt: its own transaction's tip and its own bundle's CU (user transactions and tip transaction) before
   * packing, which changes the CU and may raise the tip to rank the riders. A retry of this transaction reprices from
   * these, never from the pack's: a lead does not pay its riders' rank on its own.
   */
  own?: { tip_lamports: number; compute_units: number };
}

/** What a retry of a settled attempt reprices from: its own tip and CU (a pack's lead's, before packing). */
export function repricedFrom(attempt: StoredAttempt): { tip_lamports: number; compute_units: number | null } {
  const pricing = attempt.decision.pricing;
  return pricing?.own
    ? { ...pricing.own }
    : { tip_lamports: attempt.tip_lamports, compute_units: pricing?.compute_units ?? null };
}

export interface StoredAttempt {
  /** 1 for the first attempt of the transaction. */
  attempt: number;
  bundle_id: string;
  tip_lamports: number;
  /** Signed tip transaction, base64; null for `"tip":"included"`; dropped once the attempt settles. */
  tip_tx: string | null;
  tip_signature: string | null;
  tip_account: string | null;
  /**
   * The tipper that signed the tip transaction (base58; it pays the tip and its fee), null for `"tip":"included"`.
   * Absent in attempts journaled before the tipper pool: `tipperOf` reads it from the tip transaction's bytes.
   */
  tipper?: string | null;
  /** Block height after which the tip transaction's blockhash is dead. */
  tip_last_valid_block_height: number | null;
  /** Every signature of the bundle, in bundle order (user transactions, then the tip transaction). */
  bundle_signatures: string[];
  created_at: number;
  created_slot: number;
  /** Slot when the engine acknowledged the bundle. */
  slot_submitted: number | null;
  /**
   * The regional block engine that took the bundle (its name, as `/status` lists it): set when an engine answered with
   * an id. Absent in attempts recorded before relay kept it.
   */
  region?: string | null;
  /** The bundle-engine leader slot this attempt was sent for, and the last slot of that leader's window. */
  target_slot: number | null;
  window_end_slot: number | null;
  leader: string | null;
  stage: AttemptStage;
  outcome: AttemptOutcome | null;
  slot_landed: number | null;
  floor_at_submit: TipFloor;
  decision: AttemptDecision;
  /**
   * Tip + fee reserved against `spend-limit` when the attempt is built. Released only when the attempt provably
   * paid nothing (it failed without landing); a landed or leaked tip stays counted until it ages out of the
   * rolling hour.
   */
  reserved_lamports: number;
  released: boolean;
  /** The tip transaction landed without the user transactions (uncled block): the tip leaked. */
  leaked: boolean;
  timeline: LifecycleTimeline;
  /** Transport failures while sending these bytes (not retries). */
  send_errors: number;
  /**
   * Other transactions riding in this attempt's bundle (packing), after the user transactions and before the tip;
   * absent or empty for a bundle of this transaction alone. Their own attempts stay journaled, unsent.
   */
  passengers?: Array<{ tx_id: string; signatures: string[] }>;
  /** The passengers' wire bytes (base64, bundle order), so a resend needs no other record; dropped when terminal. */
  passenger_wires?: string[] | null;
}

export interface StoredTx {
  tx_id: string;
  state: TxState;
  /** Priority as the caller gave it; the policy's `priority` key may override it at decision time. */
  priority: Priority;
  tip: TipMode;
  max_tip: number | null;
  enqueued_at: number;
  enqueued_slot: number;
  /**
   * The block height relay had seen when it accepted the transaction: its blockhashes come from blocks at or below
   * it (within a small slack), which bounds when they expire. Absent in records journaled before it was kept.
   */
  enqueued_block_height?: number;
  expires_at_slot: number;
  /** The user transactions, base64 wire bytes, in bundle order; null once terminal. */
  wires: string[] | null;
  /** First signature of each user transaction. */
  signatures: string[];
  /** Recent blockhash (or nonce value) of each user transaction. */
  blockhashes: string[];
  /** Durable-nonce account of each user transaction, or null. */
  nonce_accounts: Array<string | null>;
  fee_payers: string[];
  history: TxHistoryEntry[];
  attempts: StoredAttempt[];
  retries: number;
  last_error: ErrorBody['error'] | null;
  failure: AttemptOutcome | null;
  landed_slot: number | null;
  /** No further attempt will be made (retries or expiry exhausted); waits for proof that nothing can land. */
  stopped: boolean;
  /**
   * Several hosts on one database (DESIGN §10, rule 3): the transaction was adopted from another host, whose attempts
   * are numbered up to this one. Each stays unsettled until its tip provably cannot land. Absent: none.
   */
  inherited_attempts?: number;
}

/** Fields to set, history to append, an attempt to add or attempt fields to set, on one record. */
export interface PatchOp {
  k: 'patch';
  id: string;
  set?: Partial<Omit<StoredTx, 'tx_id' | 'history' | 'attempts'>>;
  history?: TxHistoryEntry[];
  attempt?: StoredAttempt;
  attempts?: Array<{ n: number; set: Partial<StoredAttempt> }>;
  /** Count an eviction (left the queue without landing) under this reason. */
  evicted?: string;
}

export type StoreOp =
  | { k: 'put'; tx: StoredTx }
  | PatchOp
  | { k: 'counters'; evicted: Record<string, number> }
  | { k: 'spend'; entries: Array<[string, number, number]> }
  /** Forget spend older than the rolling window (`before` is a wall-clock ms; the caller decides the window). */
  | { k: 'prune-spend'; before: number };

export interface StoreState {
  records: Map<string, StoredTx>;
  /** First signature of the first user transaction -> tx_id (idempotent enqueue). */
  bySignature: Map<string, string>;
  /** bundle_id -> tx_id. */
  byBundle: Map<string, string>;
  /** Terminal records, oldest first, for retention. */
  terminalOrder: string[];
  terminalHead: number;
  /** Non-terminal count (what `max-queue` limits). */
  active: number;
  /**
   * Transactions waiting for an attempt to go out (state `pending`, attempts not stopped), by the priority they were
   * enqueued with: what admission counts ahead of a new one. Stopped ones only wait for proof of expiry.
   */
  waiting: Record<Priority, number>;
  evicted: Record<string, number>;
  /** Spend counted against `spend-limit` (reserved, landed or leaked): `${tx_id}#${attempt}` -> [reserved_at, lamports]. */
  spend: SpendLedger;
}

/** The key prefix of a per-second sum of folded spend, as snapshots write it (`folded:<unix second>`). */
export const FOLDED_SPEND_PREFIX = 'folded:';

/**
 * The spend map, with the sum of what is in the rolling window kept up to date, so checking a submit against
 * `spend-limit` costs O(1) amortized rather than a pass over every reservation of the hour (720,000 of them at 200
 * submits a second).
 *
 * It keeps a running total of every entry and the part of it known to be older than the last cutoff asked for.
 * Entries age in the order they were added: an entry added with an older time than one before it (a reservation
 * counted again after its release) is counted as in the window until the entries before it have aged: the sum can
 * only be over, never under, the exact one (a submit may be refused a little early, never let through past the
 * limit), and `prune-spend` removes it within the minute.
 *
 * An entry that can no longer change (its transaction is terminal: its attempts were released or stay counted, see
 * {@link fold}) leaves the keyed map for a sum per second of its reservation time. A keyed entry costs about 250 bytes
 * of heap (its key, the map's slot, the tuples); an hour at 200 submits a second held 720,000 of them, about 180 MB,
 * while the seconds of an hour are at most 3,600 sums. A second's sum stays in the window until the whole second has
 * left it: over by at most a second's spend, never under.
 */
export class SpendLedger extends Map<string, [number, number]> {
  private total = 0;
  private aged = 0;
  /** Entries in the order they were added: [key, reserved_at], consumed from `head` as they age. */
  private order: Array<[string, number]> = [];
  private head = 0;
  private readonly agedKeys = new Set<string>();
  /** Folded spend: unix seconds, ascending, and the lamports reserved in each; `foldHead` of them have aged. */
  private foldSeconds: number[] = [];
  private foldLamports: number[] = [];
  private foldHead = 0;
  private foldTotal = 0;
  private foldAged = 0;

  override set(key: string, value: [number, number]): this {
    if (key.startsWith(FOLDED_SPEND_PREFIX)) {
      this.addFolded(value[0], value[1]);
      return this;
    }
    this.delete(key);
    super.set(key, value);
    this.total += value[1];
    this.order.push([key, value[0]]);
    return this;
  }

  override delete(key: string): boolean {
    const value = super.get(key);
    if (value === undefined) return false;
    super.delete(key);
    this.total -= value[1];
    if (this.agedKeys.delete(key)) this.aged -= value[1];
    // Entries that left before aging (released, folded) leave their place in `order` behind: drop those places once
    // they outnumber the entries, so the order costs O(entries), amortized O(1) a delete.
    if (this.order.length - this.head > 2 * this.size + 1024) this.compactOrder();
    return true;
  }

  override clear(): void {
    super.clear();
    this.total = 0;
    this.aged = 0;
    this.order = [];
    this.head = 0;
    this.agedKeys.clear();
    this.foldSeconds = [];
    this.foldLamports = [];
    this.foldHead = 0;
    this.foldTotal = 0;
    this.foldAged = 0;
  }

  /**
   * Move `key`'s entry into the sum of its reservation's second: it stays counted until that second leaves the window,
   * but can no longer be released or replaced by key. Only for an entry that cannot change: its attempt is settled
   * (finalized or failed) and its transaction terminal. (Were one released after all, it would stay counted: over,
   * never under.)
   */
  fold(key: string): void {
    const value = super.get(key);
    if (value === undefined) return;
    this.delete(key);
    this.addFolded(value[0], value[1]);
  }

  /** Lamports of the entries reserved at or after `cutoff` (ms). Cutoffs must not go backwards. */
  spentSince(cutoff: number): number {
    while (this.head < this.order.length) {
      const [key, at] = this.order[this.head] as [string, number];
      if (at >= cutoff) break;
      this.head++;
      const value = super.get(key);
      // Skip what was deleted, or re-set since (its newer place in `order` decides).
      if (value === undefined || value[0] !== at || this.agedKeys.has(key)) continue;
      this.agedKeys.add(key);
      this.aged += value[1];
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    // A second ages once all of it is before the cutoff.
    while (
      this.foldHead < this.foldSeconds.length &&
      ((this.foldSeconds[this.foldHead] as number) + 1) * 1000 <= cutoff
    ) {
      this.foldAged += this.foldLamports[this.foldHead] as number;
      this.foldHead++;
    }
    return this.total - this.aged + this.foldTotal - this.foldAged;
  }

  /** Whether any entry is older than `cutoff` (and so due for `prune-spend`). */
  hasOlderThan(cutoff: number): boolean {
    this.spentSince(cutoff);
    return this.agedKeys.size > 0 || this.foldHead > 0;
  }

  /** Forget every entry reserved before `before` (ms): keyed ones by their time, folded seconds once wholly before. */
  prune(before: number): void {
    for (const [key, [at]] of this) if (at < before) this.delete(key);
    let gone = 0;
    while (gone < this.foldSeconds.length && ((this.foldSeconds[gone] as number) + 1) * 1000 <= before)
      gone++;
    if (gone === 0) return;
    for (let i = 0; i < gone; i++) {
      const lamports = this.foldLamports[i] as number;
      this.foldTotal -= lamports;
      if (i < this.foldHead) this.foldAged -= lamports;
    }
    this.foldSeconds.splice(0, gone);
    this.foldLamports.splice(0, gone);
    this.foldHead = Math.max(0, this.foldHead - gone);
  }

  /**
   * The folded sums as snapshot entries: [`folded:<second>`, the second's last ms, lamports]. The last, not the first:
   * a relay from before folding reads them as ordinary entries and must not age a second's spend before all of it
   * has left the window.
   */
  *folded(): Generator<[string, number, number]> {
    for (let i = 0; i < this.foldSeconds.length; i++) {
      const second = this.foldSeconds[i] as number;
      yield [`${FOLDED_SPEND_PREFIX}${second}`, second * 1000 + 999, this.foldLamports[i] as number];
    }
  }

  private addFolded(at: number, lamports: number): void {
    const second = Math.floor(at / 1000);
    const seconds = this.foldSeconds;
    // Where `second` goes: after every second not above it (folds come nearly in time order; the common case is the
    // last place, and an old one costs a binary search, not a scan).
    let i = seconds.length;
    if (i > 0 && (seconds[i - 1] as number) > second) {
      let lo = 0;
      let hi = i - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((seconds[mid] as number) <= second) lo = mid + 1;
        else hi = mid;
      }
      i = lo;
    }
    if (i > 0 && seconds[i - 1] === second) {
      this.foldLamports[i - 1] = (this.foldLamports[i - 1] as number) + lamports;
      if (i - 1 < this.foldHead) this.foldAged += lamports;
    } else {
      seconds.splice(i, 0, second);
      this.foldLamports.splice(i, 0, lamports);
      // Before a second that has aged: aged too.
      if (i < this.foldHead) {
        this.foldHead++;
        this.foldAged += lamports;
      }
    }
    this.foldTotal += lamports;
  }

  private compactOrder(): void {
    const kept: Array<[string, number]> = [];
    for (let i = this.head; i < this.order.length; i++) {
      const place = this.order[i] as [string, number];
      const value = super.get(place[0]);
      if (value !== undefined && value[0] === place[1] && !this.agedKeys.has(place[0])) kept.push(place);
    }
    this.order = kept;
    this.head = 0;
  }
}

/** The key of one attempt of a transaction (`tx_id#n`): spend entries, unsent attempts, held packs. */
export function attemptKey(txId: string, attempt: number): string {
  return `${txId}#${attempt}`;
}

export function storeCodec(retainTerminal: number): JournalCodec<StoreState, StoreOp> {
  return {
    initial: () => ({
      records: new Map(),
      bySignature: new Map(),
      byBundle: new Map(),
      terminalOrder: [],
      terminalHead: 0,
      active: 0,
      waiting: { high: 0, normal: 0, low: 0 },
      evicted: {},
      spend: new SpendLedger(),
    }),
    apply: (state, op) => applyOp(state, op, retainTerminal),
    *snapshot(state) {
      yield { k: 'counters', evicted: { ...state.evicted } };
      yield {
        k: 'spend',
        entries: [
          ...state.spend.folded(),
          ...[...state.spend].map(([key, [at, lamports]]): [string, number, number] => [key, at, lamports]),
        ],
      };
      // Terminal records first (oldest first) so replay rebuilds the retention order, then the active ones.
      for (let i = state.terminalHead; i < state.terminalOrder.length; i++) {
        const tx = state.records.get(state.terminalOrder[i] as string);
        if (tx) yield { k: 'put', tx };
      }
      for (const tx of state.records.values()) if (!isTerminalTxState(tx.state)) yield { k: 'put', tx };
    },
  };
}

function applyOp(state: StoreState, op: StoreOp, retainTerminal: number): void {
  switch (op.k) {
    case 'counters':
      for (const [reason, n] of Object.entries(op.evicted))
        state.evicted[reason] = (state.evicted[reason] ?? 0) + n;
      return;
    case 'spend':
      for (const [key, at, lamports] of op.entries) state.spend.set(key, [at, lamports]);
      return;
    case 'prune-spend':
      state.spend.prune(op.before);
      return;
    case 'put': {
      const tx = op.tx;
      const existing = state.records.get(tx.tx_id);
      if (existing && !isTerminalTxState(existing.state)) state.active--;
      if (existing && isWaiting(existing)) state.waiting[existing.priority]--;
      if (isWaiting(tx)) state.waiting[tx.priority]++;
      state.records.set(tx.tx_id, tx);
      const first = tx.signatures[0];
      if (first) state.bySignature.set(first, tx.tx_id);
      for (const a of tx.attempts) state.byBundle.set(a.bundle_id, tx.tx_id);
      if (isTerminalTxState(tx.state)) retire(state, tx, retainTerminal);
      else state.active++;
      return;
    }
    case 'patch': {
      const before = state.records.get(op.id);
      if (!before) return; // evicted by retention before this patch: nothing left to change
      const tx = patchedRecord(before, op);
      if (op.attempt) state.byBundle.set(op.attempt.bundle_id, tx.tx_id);
      // A tip signed again before its first send gives the attempt a new bundle id (the old one stays findable).
      for (const change of op.attempts ?? []) {
        if (change.set.bundle_id !== undefined && tx.attempts.some((a) => a.attempt === change.n))
          state.byBundle.set(change.set.bundle_id, tx.tx_id);
      }
      for (const effect of spendEffects(tx, op)) {
        const key = attemptKey(tx.tx_id, effect.n);
        if (effect.kind === 'release') state.spend.delete(key);
        // Counted again only what had been released: an entry still counted may be folded (no longer by key).
        else if (effect.kind === 'reserve' || (wasReleased(before, effect.n) && !state.spend.has(key)))
          state.spend.set(key, [effect.at, effect.lamports]);
      }
      state.records.set(tx.tx_id, tx);
      const wasWaiting = isWaiting(before);
      if (wasWaiting !== isWaiting(tx)) state.waiting[tx.priority] += wasWaiting ? -1 : 1;
      if (op.evicted) state.evicted[op.evicted] = (state.evicted[op.evicted] ?? 0) + 1;
      if (!isTerminalTxState(before.state) && isTerminalTxState(tx.state)) {
        state.active--;
        retire(state, tx, retainTerminal);
      } else if (isTerminalTxState(tx.state) && op.attempts?.length) foldSettled(state, tx);
      return;
    }
  }
}

/**
 * The record a patch makes of `before`. Copy on write: a record handed out earlier is a snapshot and never changes
 * under its holder; the new record replaces it (attempts that did not change keep their identity, so a store can
 * tell which attempts a patch touched).
 */
export function patchedRecord(before: StoredTx, op: Omit<PatchOp, 'k' | 'id'>): StoredTx {
  const tx: StoredTx = { ...before, ...op.set };
  if (op.history?.length) tx.history = [...before.history, ...op.history];
  if (op.attempt || op.attempts?.length) tx.attempts = [...before.attempts];
  if (op.attempt) tx.attempts.push(op.attempt);
  for (const change of op.attempts ?? []) {
    const i = tx.attempts.findIndex((a) => a.attempt === change.n);
    if (i >= 0) tx.attempts[i] = { ...(tx.attempts[i] as StoredAttempt), ...change.set };
  }
  return tx;
}

/**
 * Lamports `op` adds to the reservations of attempts `before` already has (a raised reservation; never negative): what
 * a transition's `spend-limit` check counts.
 */
export function reservationIncrease(before: StoredTx, op: Pick<PatchOp, 'attempts'>): number {
  let more = 0;
  for (const change of op.attempts ?? []) {
    const lamports = change.set.reserved_lamports;
    const attempt = before.attempts.find((a) => a.attempt === change.n);
    if (lamports === undefined || !attempt || attempt.released || change.set.released) continue;
    more += Math.max(0, lamports - attempt.reserved_lamports);
  }
  return more;
}

/** What a patch does to the spend counted against `spend-limit`, attempt by attempt. */
export type SpendEffect =
  /** A new attempt's reservation. */
  | { kind: 'reserve'; n: number; at: number; lamports: number }
  /** A tip found paid after its reservation was released (a late landing, a leak): counted again unless it is. */
  | { kind: 'recount'; n: number; at: number; lamports: number }
  /** The attempt provably paid nothing. */
  | { kind: 'release'; n: number };

/** The spend effects of `op`, given the record it made (`after`, from {@link patchedRecord}). */
export function spendEffects(after: StoredTx, op: Omit<PatchOp, 'k' | 'id'>): SpendEffect[] {
  const effects: SpendEffect[] = [];
  const a = op.attempt;
  if (a && a.reserved_lamports > 0 && !a.released)
    effects.push({ kind: 'reserve', n: a.attempt, at: a.created_at, lamports: a.reserved_lamports });
  for (const change of op.attempts ?? []) {
    const attempt = after.attempts.find((x) => x.attempt === change.n);
    if (!attempt) continue;
    if (change.set.released === true) effects.push({ kind: 'release', n: change.n });
    // A reservation changed (a pack's tip raised before its first send): it replaces the one counted.
    if (
      change.set.reserved_lamports !== undefined &&
      change.set.released === undefined &&
      !attempt.released &&
      attempt.reserved_lamports > 0
    )
      effects.push({
        kind: 'reserve',
        n: change.n,
        at: attempt.created_at,
        lamports: attempt.reserved_lamports,
      });
    if (change.set.released === false && attempt.reserved_lamports > 0) {
      effects.push({
        kind: 'recount',
        n: change.n,
        at: attempt.created_at,
        lamports: attempt.reserved_lamports,
      });
    }
  }
  return effects;
}

/** Whether attempt `n` of `tx` had its reservation released (it provably paid nothing, until found otherwise). */
function wasReleased(tx: StoredTx, n: number): boolean {
  return tx.attempts.find((a) => a.attempt === n)?.released === true;
}

/**
 * A terminal record keeps its signatures and history but not its payload: the user transactions' and tips' wire
 * bytes go. Changes `tx` itself, which must be a record the caller just made (never a snapshot handed out).
 */
export function dropPayload(tx: StoredTx): void {
  tx.wires = null;
  tx.attempts = tx.attempts.map((a) =>
    a.tip_tx === null && !a.passenger_wires
      ? a
      : { ...a, tip_tx: null, ...(a.passenger_wires ? { passenger_wires: null } : {}) },
  );
}

/**
 * Remove one record from the tables as if it had never been put (a store that caches records drops one it is no
 * longer sure of, then puts it again as re-read). Its counts leave with it; its spend entries stay (the ledger is
 * keyed by attempt, not by record).
 */
export function forgetRecord(state: StoreState, txId: string): void {
  const tx = state.records.get(txId);
  if (!tx) return;
  state.records.delete(txId);
  if (!isTerminalTxState(tx.state)) state.active--;
  if (isWaiting(tx)) state.waiting[tx.priority]--;
  const first = tx.signatures[0];
  if (first && state.bySignature.get(first) === txId) state.bySignature.delete(first);
  // A re-signed tip's old bundle id may stay mapped to this id: a lookup by it finds no record and asks again.
  for (const a of tx.attempts)
    if (state.byBundle.get(a.bundle_id) === txId) state.byBundle.delete(a.bundle_id);
}

/** Waiting for an attempt to go out: pending, attempts not stopped. */
function isWaiting(tx: Pick<StoredTx, 'state' | 'stopped'>): boolean {
  return tx.state === 'pending' && !tx.stopped;
}

/** A terminal record keeps its signatures and history but not its payload; the oldest beyond retention go. */
/**
 * A terminal transaction's settled attempts can no longer be released: what they reserved stays counted for the
 * rolling hour, by second ({@link SpendLedger.fold}). An attempt still open (in doubt when its transaction ended) keeps
 * its entry by key until it settles.
 */
function foldSettled(state: StoreState, tx: StoredTx): void {
  for (const a of tx.attempts)
    if (a.stage === 'finalized' || a.stage === 'failed') state.spend.fold(attemptKey(tx.tx_id, a.attempt));
}

function retire(state: StoreState, tx: StoredTx, retainTerminal: number): void {
  // `tx` is the record this operation just created (or put): changing it here changes no snapshot handed out.
  dropPayload(tx);
  foldSettled(state, tx);
  state.terminalOrder.push(tx.tx_id);
  while (state.terminalOrder.length - state.terminalHead > retainTerminal) {
    const oldId = state.terminalOrder[state.terminalHead++] as string;
    const old = state.records.get(oldId);
    if (old && isTerminalTxState(old.state)) {
      state.records.delete(oldId);
      if (old.signatures[0] && state.bySignature.get(old.signatures[0]) === oldId) {
        state.bySignature.delete(old.signatures[0]);
      }
      for (const a of old.attempts) state.byBundle.delete(a.bundle_id);
    }
  }
  // Compact the order array now and then so it does not grow without bound.
  if (state.terminalHead > 4096 && state.terminalHead * 2 > state.terminalOrder.length) {
    state.terminalOrder = state.terminalOrder.slice(state.terminalHead);
    state.terminalHead = 0;
  }
}
