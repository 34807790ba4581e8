import type {
  BlockEngineRegionStatus,
  ConsensusSnapshot,
  StatusResponse,
  DecisionMode,
  EventCursor,
  EnqueueResponse,
  LandingView,
  LifecycleEntry,
  QueueResponse,
  SubmitResponse,
  TipperStatus,
  TxRecord,
} from '@solrelay/core';
import { spentInWindow } from './store/spend';
import { composeRelay, type RelayStages } from './compose';
import type { RelayOptions } from './context';
import { lifecycleEntry } from './events/announce';
import type { AgentConnection } from './operator/operator';
import type { TipperReading } from './operator/tippers';
import type { DatabaseAvailability } from './store/pg-store';
import type { AttemptDecision, StoredAttempt, StoredTx } from './store/records';
import type { StoreCounts } from './store/store';
import type { TrackKind } from './track/tracker';
import type { BundleResultMessage } from './upstream/block-engine';
import { queueView, streamAccounts, txRecordOf } from './views/views';

export type { CrashPointName, RelayOptions } from './context';
export type { AgentConnection } from './operator/operator';
export type { TipperReading } from './operator/tippers';
export type { TrackKind } from './track/tracker';
export { toTxRecord } from './views/views';

/**
 * The sidecar's heart: accepts transactions, builds and sends attempts, follows them on chain, and tells everyone.
 *
 * Truth rules (DESIGN §2): a transaction is `landed` only when its own signatures are seen in a slot; commitment is
 * promoted only from the signatures' own status and never demoted by a `null`; `failed` and `expired` are declared
 * only when nothing can land any more. Every change is journaled (fsync) before it is acted on or announced.
 *
 * This class is a facade over the stages `compose.ts` wires, each over the narrow ports it declares; a transaction's
 * path reads as their folders, one way:
 *
 *   intake/ (parse, admit, journal) → deciders/ (bypass, fallback; the agent calls `submit` over HTTP)
 *   → attempts/ (policy, spend, tip transaction, write-ahead) → send/ (budgeted queue; sender turns the engine's
 *   answer into a verdict) → track/ (pass scheduling; a pure judge) → settle/ (the only writer of a transaction's state;
 *   never calls a decider: it emits `back-to-pending`, which bypass subscribes to) → events/, views/.
 */
export class Relay {
  private readonly s: RelayStages;

  constructor(o: RelayOptions) {
    this.s = composeRelay(o);
  }

  // ---------------------------------------------------------------- views

  /** What the store counts: live transactions, those waiting for an attempt, evictions. */
  counts(): Promise<StoreCounts> {
    return this.s.ports.store.counts();
  }

  get slot(): number {
    return this.s.ports.chain.slot;
  }

  get decisionMode(): DecisionMode {
    return this.s.operator.decisionMode;
  }

  get bypass(): boolean {
    return this.s.ports.bypass.enabled;
  }

  /** Why submission is paused (the tippers cannot pay), or null. */
  get paused(): string | null {
    return this.s.tippers.paused;
  }

  /** Why new tips are held after a database outage (see `OutageGate`), or null. */
  get tipsHeld(): string | null {
    return this.s.outage.held;
  }

  /** The store's database went away or came back (see `OutageGate`). */
  onDatabaseAvailability(change: DatabaseAvailability): void {
    this.s.outage.onAvailability(change);
  }

  /** Every tipper of the pool: balance, reserved, in flight, available, held. */
  tipperStatus(): TipperStatus[] {
    return this.s.tippers.status();
  }

  /** Per tipper, what it lacked for the tip that last waited on it (for /metrics). */
  tipperShortfalls(): Array<{ pubkey: string; lamports: number }> {
    return this.s.tippers.shortfalls();
  }

  /** The tippers' addresses, in `KEYPAIR_PATH` order. */
  get tipperKeys(): string[] {
    return this.s.tippers.pubkeys;
  }

  /** Whether a balance read is wanted now, sooner than the usual interval (paused, or a tipper held). */
  get tipperBalanceWanted(): boolean {
    return this.s.tippers.wantsFreshBalance;
  }

  get agent(): AgentConnection | null {
    return this.s.operator.agent;
  }

  /** Whether the sidecar is deciding by itself because no agent has been connected for the grace period. */
  get fallbackActive(): boolean {
    return this.s.operator.fallbackActive;
  }

  get lastErrors(): { engine: string | null } {
    return this.s.ports.lastErrors;
  }

  /** Send capacity and the wait ahead of a new transaction (what admission decides on). */
  async capacity(): Promise<StatusResponse['capacity']> {
    const { sendRatePerSecond, landedShare, waiting, expectedWaitMs } = await this.s.intake.capacity();
    return {
      send_rate_per_s: sendRatePerSecond,
      landed_share: Math.round(landedShare * 1000) / 1000,
      slot_ms: Math.round(this.s.ports.chain.slotMs),
      waiting,
      expected_wait_s: Math.round(expectedWaitMs / 100) / 10,
      refused_total: this.s.intake.refusedForCapacity,
    };
  }

  /** Each regional block engine: name, address, cool-down left, and what its sends came to. */
  engineRegions(): BlockEngineRegionStatus[] {
    const cooling = this.s.queue.coolingMs(this.s.ports.now());
    return this.s.ports.engine.regions.map((region, i) => ({
      region: region.name,
      url: region.url,
      cooling_ms: cooling[i] ?? 0,
      accepted: region.answers.accepted,
      rejected: region.answers.rejected,
      transport_errors: region.answers.transport,
    }));
  }

  /**
   * What became of the bundles sent since start, by the regional engine that took each one (the configured regions
   * first) and by the contention class their tip was priced for.
   */
  landing(): LandingView {
    return this.s.ports.metrics.landing.view(this.s.ports.engine.regions.map((r) => r.name));
  }

  /** Bundles waiting in the send queue (not yet on the wire; held ones included). */
  get sendsWaiting(): number {
    return this.s.queue.length;
  }

  /** Lamports reserved or paid in the rolling hour (what `spend-limit` is checked against). */
  spentThisHour(): Promise<number> {
    return spentInWindow(this.s.ports.store, this.s.ports.now());
  }

  async txRecord(txId: string): Promise<TxRecord> {
    return txRecordOf(await this.s.ports.store.get(txId), txId);
  }

  stored(txId: string): Promise<StoredTx | undefined> {
    return this.s.ports.store.get(txId);
  }

  /**
   * Calls `use` with the record as it is now, synchronously after a read that no commit raced (the store's change
   * feed did not move while it was read): a subscriber attached inside `use` misses no change made after the record
   * it was given. After a few raced reads under heavy load it uses the newest one. On an event log (PostgreSQL)
   * `use` also gets the cursor of the record's newest event, to resume its stream after.
   */
  async withCurrent<T>(txId: string, use: (tx: StoredTx | undefined, after?: EventCursor) => T): Promise<T> {
    const { store } = this.s.ports;
    // On an event log: the record with its newest event's cursor, a stream resumes after it (no race to lose).
    if (store.getWithEventCursor) {
      const { tx, cursor } = await store.getWithEventCursor(txId);
      return use(tx, cursor);
    }
    for (let tries = 1; ; tries++) {
      const at = store.changes.position;
      const tx = await store.get(txId);
      if (store.changes.position === at || tries >= 10) return use(tx);
    }
  }

  async queueView(): Promise<QueueResponse> {
    const [live, counts] = await Promise.all([this.s.ports.store.live(), this.s.ports.store.counts()]);
    return queueView(live, counts, this.s.ports.policy(), this.s.ports.chain.slot);
  }

  /** The accounts the stream watches besides this host's tippers (see `streamAccounts`). */
  async streamAccounts(): Promise<string[]> {
    return streamAccounts(
      await this.s.ports.store.live(),
      this.s.tippers.pubkeys,
      this.s.tippers.fleetTippers,
    );
  }

  lifecycleEntry(tx: StoredTx, attempt: StoredAttempt): LifecycleEntry {
    return lifecycleEntry(tx, attempt);
  }

  // ---------------------------------------------------------------- intake and deciding

  /** Accept a transaction (1 to 4 signed transactions that land together). */
  enqueue(body: unknown): Promise<{ response: EnqueueResponse; created: boolean }> {
    return this.s.intake.enqueue(body);
  }

  /** An attempt at a tip, asked by the agent (or a manual call, bypass, or the sidecar's own reflex). */
  submit(body: unknown, source: AttemptDecision['source'] = 'agent'): Promise<SubmitResponse> {
    return this.s.attempts.submit(body, source);
  }

  /** Tip accounts, cached: they change only with a network, and the engine's request budget is for bundles. */
  ensureTipAccounts(): Promise<string[]> {
    return this.s.attempts.ensureTipAccounts();
  }

  // ---------------------------------------------------------------- chain inputs

  /** A new highest processed slot (from the stream, or RPC while the stream is down). */
  onSlot(slot: number, blockHeight?: number): void {
    this.s.slotTick.onSlot(slot, blockHeight);
  }

  setBlockHeight(height: number): void {
    this.s.ports.chain.setBlockHeight(height);
  }

  /** Every slot update of the stream, for telling the cluster's consensus (DESIGN §12). */
  onConsensusSlot(update: { slot: number; status: string; parent?: number | null }): void {
    this.s.ports.chain.consensus.observeSlot(update);
  }

  /** The node's Agave 4.3 consensus answers (undefined: the node cannot say). */
  onConsensusInfo(migrationSlot: number | null | undefined, genesisSlot: number | null | undefined): void {
    this.s.ports.chain.consensus.observeMigrationSlot(migrationSlot);
    this.s.ports.chain.consensus.observeGenesisSlot(genesisSlot);
  }

  /** The consensus relay sees the cluster run (and whether a migration window holds sending). */
  consensus(): ConsensusSnapshot {
    return this.s.ports.chain.consensus.snapshot();
  }

  /** The stream reports a slot finalized (rooted): confirmed transactions up to it are worth a status read. */
  onFinalizedSlot(slot: number): void {
    this.s.tracker.onFinalizedSlot(slot);
  }

  /** A slot was abandoned: whatever landed in it is back to pending. */
  onDeadSlot(slot: number): Promise<void> {
    return this.s.tracker.onDeadSlot(slot);
  }

  /** A transaction status seen on the stream (tip transactions, and payers of tip-included transactions). */
  onStreamTransaction(signature: string): void {
    this.s.tracker.onStreamTransaction(signature);
  }

  /** A block the stream reported: its blockhash's height (how long a caller's blockhash has left, for admission). */
  onBlock(blockhash: string, blockHeight: number): void {
    this.s.ports.blockhashes.recordBlock(blockhash, blockHeight);
  }

  /** The gRPC transport's push results: auction losses, simulation failures and drops settle an attempt at once. */
  onBundleResult(result: BundleResultMessage): Promise<void> {
    return this.s.tracker.onBundleResult(result);
  }

  /** How the tracker learns whether the stream is watching (see `Tracker.watchStreamWith`). */
  watchStreamWith(watching: () => boolean): void {
    this.s.tracker.watchStreamWith(watching);
  }

  /**
   * Read the statuses of every signature relay is following and move transactions accordingly. Runs each slot or
   * two, and at once when the stream hints that something landed.
   */
  track(kind: TrackKind = 'slot'): Promise<void> {
    return this.s.tracker.track(kind);
  }

  // ---------------------------------------------------------------- mode, agents, operator state

  setMode(mode: DecisionMode): DecisionMode {
    return this.s.operator.setMode(mode);
  }

  agentConnected(model: string, provider: string): AgentConnection {
    return this.s.operator.agentConnected(model, provider);
  }

  agentDisconnected(id: string): void {
    this.s.operator.agentDisconnected(id);
  }

  /**
   * Tipper balances from RPC, each with the slot it describes. A tip is built only on a tipper whose balance covers
   * it besides its tips in flight and the rent-exempt minimum; otherwise the transaction waits (never failing).
   */
  setTipperBalances(readings: readonly TipperReading[]): Promise<void> {
    return this.s.tippers.setBalances(readings);
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * Resend what was journaled but not acknowledged before a restart (the same bytes), resume tracking, and write
   * again the lifecycle entries the crash lost.
   */
  resumeAfterRestart(): Promise<{ resent: number; tracked: number; relogged: number }> {
    return this.s.recovery.resumeAfterRestart();
  }

  /** Resume what this host adopted from another one of its fleet (see `Recovery.resumeAdopted`). */
  resumeAdopted(txIds: readonly string[]): Promise<{ resent: number; tracked: number }> {
    return this.s.recovery.resumeAdopted(txIds);
  }

  close(): void {
    this.s.close();
  }
}
