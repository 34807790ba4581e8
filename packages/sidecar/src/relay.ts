import type {
  BlockEngineRegionStatus,
  StatusResponse,
  DecisionMode,
  EnqueueResponse,
  LifecycleEntry,
  QueueResponse,
  SubmitResponse,
  TipperStatus,
  TxRecord,
} from '@solrelay/core';
import { AttemptBuilder } from './attempts/builder';
import { pruneSpend, spentInWindow } from './attempts/spend';
import { createContext, type RelayContext, type RelayOptions } from './context';
import { BypassDecider } from './deciders/bypass';
import { FallbackDecider } from './deciders/fallback';
import { lifecycleEntry } from './events/announce';
import { Intake } from './intake/intake';
import { Operator, type AgentConnection } from './operator/operator';
import { TipperPool, type TipperReading } from './operator/tippers';
import { Recovery } from './recovery/resume';
import { SendQueue } from './send/queue';
import { Packer } from './send/packer';
import { Sender } from './send/sender';
import { Expiry } from './settle/expiry';
import { Settler } from './settle/settle';
import type { AttemptDecision, StoredAttempt, StoredTx } from './store/records';
import type { StoreCounts } from './store/store';
import { Evaluator } from './track/evaluate';
import { Tracker, type TrackKind } from './track/tracker';
import type { BundleResultMessage } from './upstream/block-engine';
import { SEND_PACING } from './upstream/engine-regions';
import { includedPayers, queueView, txRecordOf } from './views/views';

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
 * This class is a facade: it wires the stage modules over one shared context, and a transaction's path reads as
 * their folders, one way:
 *
 *   intake/ (parse, admit, journal) → deciders/ (bypass, fallback; the agent calls `submit` over HTTP)
 *   → attempts/ (policy, spend, tip transaction, write-ahead) → send/ (budgeted queue; sender turns the engine's
 *   answer into a verdict) → track/ (pass scheduling; a pure judge) → settle/ (the only writer of transitions;
 *   never calls a decider: it emits `back-to-pending`, which bypass subscribes to) → events/, views/.
 */
export class Relay {
  private readonly ctx: RelayContext;
  private readonly operator: Operator;
  private readonly tippers: TipperPool;
  private readonly queue: SendQueue;
  private readonly packer: Packer;
  private readonly settler: Settler;
  private readonly attempts: AttemptBuilder;
  private readonly tracker: Tracker;
  private readonly intake: Intake;
  private readonly bypassDecider: BypassDecider;
  private readonly fallback: FallbackDecider;
  private readonly recovery: Recovery;
  private lastSpendPrune = 0;

  constructor(o: RelayOptions) {
    const ctx = createContext(o);
    this.ctx = ctx;
    this.operator = new Operator(ctx);
    this.tippers = new TipperPool(ctx, o.tippers);
    this.settler = new Settler(ctx);
    const queue: SendQueue = new SendQueue({
      now: ctx.now,
      policy: o.policy,
      ratePerSecond: o.bundleEngineRps,
      pacing: SEND_PACING,
      regions: o.engine.size,
      preferredRegion: () => {
        // The region of the bundle-engine leader a bundle sent now targets.
        const next = o.leaders.nextBundleEngineSlot(ctx.chain.slot, 64);
        return next === null ? null : o.engine.indexOf(o.leaders.regionAt(next));
      },
      send: (job, region) => sender.sendOne(job, region),
      log: o.log,
      isClosed: () => ctx.closed,
    });
    this.attempts = new AttemptBuilder(ctx, this.operator, this.tippers, queue);
    const attempts = this.attempts;
    const packer = new Packer(ctx, queue, o.packMaxTransactions ?? 1, (txId, n) =>
      attempts.isUnsent(txId, n),
    );
    this.packer = packer;
    const sender = new Sender(ctx, this.settler, queue, packer, async (tx, attempt) => {
      if (!attempts.takeFirstSend(tx.tx_id, attempt.attempt)) return attempt;
      return packer.pack(tx, await attempts.freshenTipBeforeFirstSend(tx, attempt));
    });
    // An attempt that settled is never sent: forget it, and let go of the passengers it carried.
    this.settler.signals.on('attempt-ended', ({ txId, attempt }) => {
      attempts.forget(txId, attempt);
      packer.release(txId, attempt);
    });
    this.queue = queue;
    this.bypassDecider = new BypassDecider(ctx, this.attempts);
    // Settlement never calls a decider: bypass listens for transactions put back to pending.
    this.bypassDecider.subscribe(this.settler.signals);
    this.fallback = new FallbackDecider(ctx, this.attempts, this.settler);
    this.intake = new Intake(
      ctx,
      this.bypassDecider,
      () => queue.regionsTakingBundles(),
      () => packer.transactionsPerBundle,
    );
    // Relay's own tip transaction failing is an operator fault: its tipper is held, the user's transaction waits.
    const tipFailed = (attempt: StoredAttempt, detail: string) => this.tippers.tipFailed(attempt, detail);
    this.tracker = new Tracker(
      ctx,
      this.settler,
      new Evaluator(ctx, this.settler, tipFailed, packer),
      new Expiry(ctx, this.settler),
      tipFailed,
      packer,
    );
    this.recovery = new Recovery(ctx, queue, this.bypassDecider, packer);
  }

  // ---------------------------------------------------------------- views

  /** What the store counts: live transactions, those waiting for an attempt, evictions. */
  counts(): Promise<StoreCounts> {
    return this.ctx.store.counts();
  }

  get slot(): number {
    return this.ctx.chain.slot;
  }

  get decisionMode(): DecisionMode {
    return this.operator.decisionMode;
  }

  get bypass(): boolean {
    return this.ctx.o.bypass.enabled;
  }

  /** Why submission is paused (the tippers cannot pay), or null. */
  get paused(): string | null {
    return this.tippers.paused;
  }

  /** Every tipper of the pool: balance, reserved, in flight, available, held. */
  tipperStatus(): TipperStatus[] {
    return this.tippers.status();
  }

  /** Per tipper, what it lacked for the tip that last waited on it (for /metrics). */
  tipperShortfalls(): Array<{ pubkey: string; lamports: number }> {
    return this.tippers.shortfalls();
  }

  /** The tippers' addresses, in `KEYPAIR_PATH` order. */
  get tipperKeys(): string[] {
    return this.tippers.pubkeys;
  }

  /** Whether a balance read is wanted now, sooner than the usual interval (paused, or a tipper held). */
  get tipperBalanceWanted(): boolean {
    return this.tippers.wantsFreshBalance;
  }

  get agent(): AgentConnection | null {
    return this.operator.agent;
  }

  /** Whether the sidecar is deciding by itself because no agent has been connected for the grace period. */
  get fallbackActive(): boolean {
    return this.operator.fallbackActive;
  }

  get lastErrors(): { engine: string | null } {
    return this.ctx.lastErrors;
  }

  /** Send capacity and the wait ahead of a new transaction (what admission decides on). */
  async capacity(): Promise<StatusResponse['capacity']> {
    const { sendRatePerSecond, waiting, expectedWaitMs } = await this.intake.capacity();
    return {
      send_rate_per_s: sendRatePerSecond,
      slot_ms: Math.round(this.ctx.chain.slotMs),
      waiting,
      expected_wait_s: Math.round(expectedWaitMs / 100) / 10,
      refused_total: this.intake.refusedForCapacity,
    };
  }

  /** Each regional block engine: name, address, cool-down left, and what its sends came to. */
  engineRegions(): BlockEngineRegionStatus[] {
    const cooling = this.queue.coolingMs(this.ctx.now());
    return this.ctx.o.engine.regions.map((region, i) => ({
      region: region.name,
      url: region.url,
      cooling_ms: cooling[i] ?? 0,
      accepted: region.answers.accepted,
      rejected: region.answers.rejected,
      transport_errors: region.answers.transport,
    }));
  }

  /** Lamports reserved or paid in the rolling hour (what `spend-limit` is checked against). */
  spentThisHour(): Promise<number> {
    return spentInWindow(this.ctx.store, this.ctx.now());
  }

  async txRecord(txId: string): Promise<TxRecord> {
    return txRecordOf(await this.ctx.store.get(txId), txId);
  }

  stored(txId: string): Promise<StoredTx | undefined> {
    return this.ctx.store.get(txId);
  }

  async queueView(): Promise<QueueResponse> {
    const [live, counts] = await Promise.all([this.ctx.store.live(), this.ctx.store.counts()]);
    return queueView(live, counts, this.ctx.o.policy(), this.ctx.chain.slot);
  }

  /**
   * Fee payers of live `"tip":"included"` transactions: they carry no relay tip transaction, so the stream must
   * watch their payers to see them land (DESIGN §8).
   */
  async includedPayers(): Promise<string[]> {
    return includedPayers(await this.ctx.store.live());
  }

  lifecycleEntry(tx: StoredTx, attempt: StoredAttempt): LifecycleEntry {
    return lifecycleEntry(tx, attempt);
  }

  // ---------------------------------------------------------------- intake and deciding

  /** Accept a transaction (1 to 4 signed transactions that land together). */
  enqueue(body: unknown): Promise<{ response: EnqueueResponse; created: boolean }> {
    return this.intake.enqueue(body);
  }

  /** An attempt at a tip, asked by the agent (or a manual call, bypass, or the sidecar's own reflex). */
  submit(body: unknown, source: AttemptDecision['source'] = 'agent'): Promise<SubmitResponse> {
    return this.attempts.submit(body, source);
  }

  /** Tip accounts, cached: they change only with a network, and the engine's request budget is for bundles. */
  ensureTipAccounts(): Promise<string[]> {
    return this.attempts.ensureTipAccounts();
  }

  // ---------------------------------------------------------------- chain inputs

  /** A new highest processed slot (from the stream, or RPC while the stream is down). */
  onSlot(slot: number, blockHeight?: number): void {
    if (!this.ctx.chain.advance(slot, blockHeight)) return;
    this.ctx.chain.observeSlotTime(slot, this.ctx.now());
    const o = this.ctx.o;
    void this.intake.capacity().then((capacity) => {
      o.metrics.sendCapacity.set(capacity.sendRatePerSecond);
      o.metrics.expectedQueueWait.set(capacity.expectedWaitMs / 1000);
    });
    o.leaders.advance(slot);
    o.metrics.slot.set(slot);
    const view = o.leaders.leaderView(slot);
    const next = o.leaders.nextBundleEngineSlot(slot, 64);
    o.hub.publish('slot_update', {
      slot,
      leader: view.leader,
      bundle_engine_leader: view.bundle_engine[0] ?? null,
      next_bundle_engine_slot: next,
      ts: this.ctx.now(),
    });
    if (this.fallbackActive) void this.fallback.run();
    // Bypass decides at enqueue, but a refusal then (tipper paused, RPC down, spend limit) must not strand the
    // transaction: every slot, retry the ones still waiting for an attempt.
    if (o.bypass.enabled) void this.bypassDecider.sweep();
    const now = this.ctx.now();
    if (now - this.lastSpendPrune > 60_000) {
      this.lastSpendPrune = now;
      void pruneSpend(this.ctx.store, now);
    }
  }

  setBlockHeight(height: number): void {
    this.ctx.chain.setBlockHeight(height);
  }

  /** The stream reports a slot finalized (rooted): confirmed transactions up to it are worth a status read. */
  onFinalizedSlot(slot: number): void {
    this.tracker.onFinalizedSlot(slot);
  }

  /** A slot was abandoned: whatever landed in it is back to pending. */
  onDeadSlot(slot: number): Promise<void> {
    return this.tracker.onDeadSlot(slot);
  }

  /** A transaction status seen on the stream (tip transactions, and payers of tip-included transactions). */
  onStreamTransaction(signature: string): void {
    this.tracker.onStreamTransaction(signature);
  }

  /** The gRPC transport's push results: auction losses, simulation failures and drops settle an attempt at once. */
  onBundleResult(result: BundleResultMessage): Promise<void> {
    return this.tracker.onBundleResult(result);
  }

  /** How the tracker learns whether the stream is watching (see `Tracker.watchStreamWith`). */
  watchStreamWith(watching: () => boolean): void {
    this.tracker.watchStreamWith(watching);
  }

  /**
   * Read the statuses of every signature relay is following and move transactions accordingly. Runs each slot or
   * two, and at once when the stream hints that something landed.
   */
  track(kind: TrackKind = 'slot'): Promise<void> {
    return this.tracker.track(kind);
  }

  // ---------------------------------------------------------------- mode, agents, operator state

  setMode(mode: DecisionMode): DecisionMode {
    return this.operator.setMode(mode);
  }

  agentConnected(model: string, provider: string): AgentConnection {
    return this.operator.agentConnected(model, provider);
  }

  agentDisconnected(id: string): void {
    this.operator.agentDisconnected(id);
  }

  /**
   * Tipper balances from RPC, each with the slot it describes. A tip is built only on a tipper whose balance covers
   * it besides its tips in flight and the rent-exempt minimum; otherwise the transaction waits (never failing).
   */
  setTipperBalances(readings: readonly TipperReading[]): Promise<void> {
    return this.tippers.setBalances(readings);
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * Resend what was journaled but not acknowledged before a restart (the same bytes), resume tracking, and write
   * again the lifecycle entries the crash lost.
   */
  resumeAfterRestart(): Promise<{ resent: number; tracked: number; relogged: number }> {
    return this.recovery.resumeAfterRestart();
  }

  close(): void {
    this.ctx.closed = true;
    this.queue.close();
    this.packer.close();
  }
}
