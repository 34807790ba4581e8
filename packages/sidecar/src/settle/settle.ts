import {
  isRetryableOutcome,
  effectivePriority,
  isTerminalTxState,
  relayErrorJson,
  targetPercentile,
  txTransitionPath,
  type AttemptOutcome,
  type BundleStage,
  type LandingRoute,
  type RelayEventMap,
  type TxHistoryEntry,
  type TxState,
} from '@solrelay/core';
import type { RelayPorts } from '../context';
import { lifecycleEntry, statusEvent } from '../events/announce';
import { announcedPricing, bundleToPrice } from '../chain/pricing';
import { inheritedTipMayLand } from '../chain/tip-life';
import type { StoredAttempt, StoredTx } from '../store/records';
import type { TxEvent } from '../store/store';
import { SettleSignals } from './signals';
import { auctionWindow, type TargetWindow } from './window';

export type { TargetWindow } from './window';

/**
 * Settlement: the only writer of a transaction's state (and of the bundle stages that go with it). Each change is
 * one compare-and-set transition of the store that carries what it causes (`tx_status_changed`, `bundle_settled`,
 * lifecycle entries): the store publishes them once the change is durable. It never calls a decider: what a
 * decider may act on is emitted on `signals`.
 *
 * Callers hold the transaction's lock. Every method reads the transaction afresh from the store: a record the
 * caller holds is a snapshot that may be a change behind.
 */
/** The commitments timed from enqueue in `relay_time_to_commitment_seconds`. */
const TIMED_COMMITMENTS: ReadonlySet<TxState> = new Set(['processed', 'confirmed', 'finalized']);

export class Settler {
  readonly signals = new SettleSignals();

  constructor(
    private readonly d: Pick<
      RelayPorts,
      'chain' | 'contention' | 'leaders' | 'log' | 'metrics' | 'now' | 'oracle' | 'policy' | 'store'
    >,
  ) {}

  private path(from: TxState, to: TxState, slot: number, ts: number): TxHistoryEntry[] {
    return txTransitionPath(from, to).map((state) => ({ state, slot, ts }));
  }

  /** The record and one of its attempts as the store has them now (null when either is gone). */
  private async fresh(
    txId: string,
    n?: number,
  ): Promise<{ tx: StoredTx; attempt: StoredAttempt | null } | null> {
    const tx = await this.d.store.get(txId);
    if (!tx) return null;
    if (n === undefined) return { tx, attempt: null };
    const attempt = tx.attempts.find((a) => a.attempt === n);
    return attempt ? { tx, attempt } : null;
  }

  /**
   * The engine took an attempt (answered with its bundle id, or said it already processed it): the bundle is
   * `submitted` with its target window, and a pending transaction moves to `submitted`.
   */
  async markSubmitted(
    given: StoredTx,
    givenAttempt: StoredAttempt,
    targetWindow: (slot: number) => TargetWindow,
    /** The regional engine that took it (its name). */
    region: string,
  ): Promise<void> {
    const found = await this.fresh(given.tx_id, givenAttempt.attempt);
    if (!found?.attempt) return;
    const { tx, attempt } = found;
    const now = this.d.now();
    const slot = this.d.chain.slot;
    const target = targetWindow(slot);
    const timeline = { ...attempt.timeline, submitted: { slot, ts: now } };
    const moves = tx.state === 'pending' ? this.path(tx.state, 'submitted', slot, now) : [];
    const set: Partial<StoredAttempt> = {
      stage: 'submitted',
      slot_submitted: slot,
      target_slot: target.slot,
      window_end_slot: target.end,
      region,
      timeline,
    };
    const after = moves.length ? { ...tx, state: 'submitted' as TxState } : tx;
    const events: TxEvent[] = [{ kind: 'lifecycle', entry: lifecycleEntry(after, { ...attempt, ...set }) }];
    if (moves.length) events.push(statusEvent(after, attempt.bundle_id, now));
    await this.d.store.transition(
      tx.tx_id,
      { state: tx.state, attempt: { n: attempt.attempt, stage: attempt.stage } },
      {
        ...(moves.length ? { set: { state: 'submitted' as TxState }, history: moves } : {}),
        attempts: [{ n: attempt.attempt, set }],
        events,
      },
    );
    for (const _ of moves) this.d.metrics.transitions.inc({ state: 'submitted' });
    this.d.metrics.bundleSubmitted(landingRoute({ ...attempt, region }));
  }

  /**
   * The engine's answer came after the attempt had moved on (its landing was seen first): record which region took it
   * and count it taken. Nothing else changes.
   */
  async recordRegion(given: StoredTx, givenAttempt: StoredAttempt, region: string): Promise<void> {
    const found = await this.fresh(given.tx_id, givenAttempt.attempt);
    if (!found?.attempt || found.attempt.region) return;
    const { tx, attempt } = found;
    await this.d.store.transition(
      tx.tx_id,
      { attempt: { n: attempt.attempt, stage: attempt.stage } },
      { attempts: [{ n: attempt.attempt, set: { region } }] },
    );
    this.d.metrics.bundleSubmitted(landingRoute({ ...attempt, region }));
  }

  /** A tip landed without its bundle: counted, logged and recorded once (`afterEnd`: after the transaction ended). */
  async markLeaked(
    given: StoredTx,
    givenAttempt: StoredAttempt,
    slot: number,
    options: { afterEnd?: boolean } = {},
  ): Promise<void> {
    const found = await this.fresh(given.tx_id, givenAttempt.attempt);
    if (!found?.attempt) return;
    const { tx, attempt } = found;
    this.d.metrics.tipsLeaked.inc(attempt.tip_lamports);
    this.d.log.warn(
      {
        tx_id: tx.tx_id,
        bundle_id: attempt.bundle_id,
        lamports: attempt.tip_lamports,
        ...(options.afterEnd ? { after_end: true } : {}),
      },
      'tip landed without its bundle (leaked)',
    );
    // The tip was paid: it stays counted against spend-limit even if the attempt was settled before. An attempt
    // that had already ended gets its audit entry again, now leaked (one still open gets it when it settles).
    const set: Partial<StoredAttempt> = { leaked: true, slot_landed: slot, released: false };
    await this.d.store.transition(
      tx.tx_id,
      { attempt: { n: attempt.attempt, stage: attempt.stage } },
      {
        attempts: [{ n: attempt.attempt, set }],
        events: attempt.outcome
          ? [{ kind: 'lifecycle', entry: lifecycleEntry(tx, { ...attempt, ...set }) }]
          : [],
      },
    );
  }

  /** Move a transaction forward (emitting every skipped state in order) and its landed attempt's bundle stage. */
  async moveTo(
    given: StoredTx,
    to: TxState,
    slot: number,
    now: number,
    extra: {
      failure?: AttemptOutcome;
      bundleId?: string | null;
      landedSlot?: number;
      attempt?: StoredAttempt | null;
      /** Attempts that may be the one that landed (the block's order will tell): not settled as lost meanwhile. */
      inDoubt?: readonly StoredAttempt[];
    },
  ): Promise<void> {
    const found = await this.fresh(given.tx_id);
    if (!found) return;
    const tx = found.tx;
    const moves = this.path(tx.state, to, slot, now);
    // Commitments this transaction reaches for the first time (a re-landing after a fork is not timed again).
    const firstReached = new Set(
      moves.map((m) => m.state).filter((state) => !tx.history.some((h) => h.state === state)),
    );
    const attempt = extra.attempt
      ? (tx.attempts.find((a) => a.attempt === extra.attempt?.attempt) ?? null)
      : null;
    const seenBefore = { landed: !!attempt?.timeline.landed, confirmed: !!attempt?.timeline.confirmed };
    // Counted lost when it was judged so (settleFailed).
    const resurrectedAfterLoss = attempt?.stage === 'failed' && countedLost(attempt);
    let attemptSet: Partial<StoredAttempt> | null = null;
    const stageChanges: BundleStage[] = [];
    if (attempt && !attempt.leaked) {
      const target = to as BundleStage;
      const order: BundleStage[] = ['submitted', 'landed', 'processed', 'confirmed', 'finalized'];
      // An attempt judged lost (window passed) whose tip is on chain after all landed: the chain wins over the
      // inference, so it continues from `submitted`.
      const resurrected = attempt.stage === 'failed';
      const from = attempt.stage === 'journaled' ? -1 : resurrected ? 0 : order.indexOf(attempt.stage);
      const timeline = { ...attempt.timeline };
      for (let i = from + 1; i <= order.indexOf(target); i++) {
        const stage = order[i] as BundleStage;
        stageChanges.push(stage);
        if (!timeline[stage])
          timeline[stage] = {
            slot: stage === 'submitted' ? (attempt.slot_submitted ?? attempt.created_slot) : slot,
            ts: now,
          };
      }
      if (stageChanges.length > 0) {
        attemptSet = {
          stage: target,
          timeline,
          ...(extra.landedSlot !== undefined ? { slot_landed: extra.landedSlot } : {}),
          ...(resurrected ? { outcome: null, released: false, timeline: { ...timeline, failed: null } } : {}),
        };
      }
    }
    if (moves.length === 0 && attemptSet === null) return;
    const terminal = isTerminalTxState(to);
    const set: Partial<StoredTx> = {
      state: to,
      ...(extra.failure ? { failure: extra.failure } : {}),
      ...(extra.landedSlot !== undefined ? { landed_slot: extra.landedSlot } : {}),
      ...(to === 'finalized' || to === 'failed' || to === 'expired' ? { stopped: true } : {}),
    };
    const events: TxEvent[] = moves.map((m) =>
      statusEvent({ ...tx, ...set, state: m.state }, extra.bundleId ?? null, now),
    );
    const after = attempt && attemptSet ? { ...attempt, ...attemptSet } : null;
    if (after) {
      events.push({ kind: 'lifecycle', entry: lifecycleEntry({ ...tx, ...set }, after) });
      if (after.stage === 'finalized') events.push(this.bundleSettled(tx, after, null, tx.retries, now));
    }
    const next = await this.d.store.transition(
      tx.tx_id,
      { state: tx.state, ...(attempt ? { attempt: { n: attempt.attempt, stage: attempt.stage } } : {}) },
      {
        set,
        history: moves,
        ...(attempt && attemptSet ? { attempts: [{ n: attempt.attempt, set: attemptSet }] } : {}),
        ...(terminal && to !== 'finalized' ? { evicted: to } : {}),
        events,
      },
    );
    for (const m of moves) {
      this.d.metrics.transitions.inc({ state: m.state });
      if (firstReached.has(m.state) && TIMED_COMMITMENTS.has(m.state))
        this.d.metrics.timeToCommitment.observe(
          { commitment: m.state },
          Math.max(0, m.ts - tx.enqueued_at) / 1000,
        );
    }
    if (terminal && to !== 'finalized') this.d.metrics.evicted.inc({ reason: to });
    if (after && stageChanges.length > 0) {
      // An attempt resurrected after its block left the chain passes these stages again: count each once. A tip is
      // paid once its bundle is confirmed (a processed block can still be orphaned); the oracle takes it as soon as
      // it lands, for freshness.
      if (stageChanges.includes('landed') && !seenBefore.landed && after.tip_lamports > 0)
        this.d.oracle.ingestLandedTip(after.tip_lamports, now);
      if (stageChanges.includes('confirmed') && !seenBefore.confirmed) {
        // A bundle judged lost that landed after all (resurrected) is taken back from the lost ones.
        if (resurrectedAfterLoss) this.d.metrics.bundleFoundLanded(landingRoute(after));
        this.d.metrics.bundleLanded(landingRoute(after), after.tip_lamports);
        this.signals.emit('bundle-settled', { landed: true });
      }
    }
    // Once the user transactions landed, no other attempt of this transaction can: settle the rest.
    if (extra.landedSlot !== undefined) {
      const doubted = new Set((extra.inDoubt ?? []).map((a) => a.attempt));
      for (const other of next.attempts) {
        if (other.attempt === attempt?.attempt || other.outcome || other.stage === 'failed') continue;
        if (doubted.has(other.attempt)) continue;
        if (other.stage === 'journaled' || other.stage === 'submitted') {
          await this.settleFailed(next, other, 'dropped', {
            countRetry: false,
            detail: 'the user transactions landed (another attempt, or a bundle they rode in)',
            final: false,
          });
        }
      }
    }
  }

  private bundleSettled(
    tx: StoredTx,
    attempt: StoredAttempt,
    failure: AttemptOutcome | null,
    retries: number,
    ts: number,
    decidedAgain = false,
  ): TxEvent {
    return {
      kind: 'bundle_settled',
      data: {
        bundle_id: attempt.bundle_id,
        stage: failure ? 'failed' : 'finalized',
        failure_type: failure,
        tx_id: tx.tx_id,
        tip_lamports: attempt.tip_lamports,
        retries,
        ...(decidedAgain ? this.repricing(tx, attempt) : {}),
        ts,
      },
    };
  }

  /**
   * What the agent prices the next attempt on (DESIGN §11), as `tx_enqueued` tells it: the settled attempt's CU (a
   * retry reprices from its tip per CU), the next bundle's CU and the contention the sidecar holds (no RPC call).
   */
  private repricing(tx: StoredTx, attempt: StoredAttempt): Partial<RelayEventMap['bundle_settled']> {
    const policy = this.d.policy();
    // A pack's lead reprices from its own tip and CU (see `repricedFrom`).
    const own = attempt.decision.pricing?.own;
    const sent = own?.compute_units ?? attempt.decision.pricing?.compute_units;
    return {
      ...(sent === undefined ? {} : { attempt_compute_units: sent }),
      ...(own ? { attempt_own_tip_lamports: own.tip_lamports } : {}),
      ...announcedPricing(
        bundleToPrice(tx),
        targetPercentile(policy['tip-percentile'], effectivePriority(policy, tx.priority)),
        this.d.contention,
      ),
    };
  }

  /**
   * Whether the slots an attempt really competed in reach into a consensus migration's vote-only window. Keyed on
   * the engine's auction (the first bundle-engine window after the send slot, `auctionWindow`), together with the
   * window relay waited on: relay's window can be the send slot alone (its leader's last slot) while the engine
   * auctions the bundle in the next leader's slots, past the boundary. Only asked when the cluster announced a
   * migration: under TowerBFT or Alpenglow alone nothing changes.
   */
  private auctionCutByMigration(attempt: StoredAttempt): boolean {
    const consensus = this.d.chain.consensus;
    if (consensus.snapshot().migrationSlot === null) return false;
    const sent = attempt.slot_submitted ?? attempt.timeline.submitted?.slot ?? null;
    const ranges: Array<{ first: number; last: number }> = [];
    if (sent !== null) ranges.push(auctionWindow(this.d.leaders, sent));
    if (attempt.window_end_slot !== null)
      ranges.push({ first: attempt.target_slot ?? attempt.window_end_slot, last: attempt.window_end_slot });
    if (ranges.length === 0) return consensus.inMigrationWindow(this.d.chain.slot);
    return ranges.some(({ first, last }) => {
      for (let s = first; s <= last; s++) if (consensus.inMigrationWindow(s)) return true;
      return false;
    });
  }

  /**
   * An attempt ended without landing. Releases its spend reservation, records the bundle's failed stage, tells the
   * agent (`bundle_settled`), then either re-pends the transaction for another attempt or, for a non-retryable
   * outcome, fails it. Resolves false when there was nothing to settle (the attempt had already ended, or is gone).
   */
  async settleFailed(
    given: StoredTx,
    givenAttempt: StoredAttempt,
    outcome: AttemptOutcome,
    options: { countRetry: boolean; detail: string; stop?: boolean; final?: boolean },
  ): Promise<boolean> {
    const found = await this.fresh(given.tx_id, givenAttempt.attempt);
    // Settled already (the caller's record was a change behind): nothing more to settle.
    if (!found?.attempt || found.attempt.outcome || found.attempt.stage === 'failed') return false;
    const { tx, attempt } = found;
    const now = this.d.now();
    const slot = this.d.chain.slot;
    const policy = this.d.policy();
    const timeline = { ...attempt.timeline, failed: { slot, ts: now } };
    // A window lost in a consensus migration's vote-only window (SIMD-0371: no user transactions are packed) is
    // nobody's doing: no retry counted.
    const inMigration = this.auctionCutByMigration(attempt);
    const retries = tx.retries + (options.countRetry && !inMigration ? 1 : 0);
    const retryable = isRetryableOutcome(outcome);
    const fails = !retryable && options.final !== false;
    // The give-up slot does not count a migration window's vote-only slots (no user transaction could land there).
    const exhausted = retries > policy['max-retries'] || slot > this.d.chain.deadlineOf(tx);
    const backToPending =
      !fails && (tx.state === 'submitted' || tx.state === 'pending') && options.final !== false;
    // DESIGN §10, rule 3: an attempt adopted from another host goes back to be decided again (a new tip) only once
    // its own tip provably cannot land; until then it stays in flight, whatever judged it lost.
    if (backToPending && inheritedTipMayLand(tx, attempt, this.d.chain)) return false;
    const moves = fails
      ? this.path(tx.state, 'failed', slot, now)
      : backToPending && tx.state !== 'pending'
        ? this.path(tx.state, 'pending', slot, now)
        : [];
    const set: Partial<StoredTx> = {
      retries,
      // Journals written before RELAY_E_ATTEMPT_LOST carry RELAY_E_UPSTREAM_INVALID_RESPONSE here (same details).
      last_error: relayErrorJson('RELAY_E_ATTEMPT_LOST', {
        outcome,
        bundle_id: attempt.bundle_id,
        reason: options.detail,
      }),
      ...(fails ? { state: 'failed' as TxState, failure: outcome, stopped: true } : {}),
      ...(!fails && backToPending && tx.state !== 'pending' ? { state: 'pending' as TxState } : {}),
      ...(options.stop || (backToPending && exhausted) ? { stopped: true } : {}),
    };
    const attemptSet: Partial<StoredAttempt> = {
      stage: 'failed',
      outcome,
      released: !attempt.leaked,
      timeline,
    };
    const events: TxEvent[] = moves.map((m) =>
      statusEvent({ ...tx, state: m.state, failure: fails ? outcome : tx.failure }, attempt.bundle_id, now),
    );
    events.push(
      { kind: 'lifecycle', entry: lifecycleEntry({ ...tx, ...set }, { ...attempt, ...attemptSet }) },
      this.bundleSettled(tx, attempt, outcome, retries, now, backToPending && !exhausted && !options.stop),
    );
    await this.d.store.transition(
      tx.tx_id,
      { state: tx.state, attempt: { n: attempt.attempt, stage: attempt.stage } },
      {
        set,
        history: moves,
        attempts: [{ n: attempt.attempt, set: attemptSet }],
        ...(fails ? { evicted: 'failed' } : {}),
        events,
      },
    );
    this.d.metrics.attemptOutcomes.inc({ outcome });
    // A bundle an engine took that ends here did not land (one that was confirmed and then orphaned was counted landed).
    // Admission's landed share counts the loss only when the transaction goes out again: only then does it spend
    // another send token (not when it fails for good, stops, or is dropped because it landed another way).
    if (countedLost(attempt)) {
      this.d.metrics.bundleLost(landingRoute(attempt));
      if (backToPending && !fails && !exhausted && !options.stop)
        this.signals.emit('bundle-settled', { landed: false });
    }
    if (fails) this.d.metrics.evicted.inc({ reason: 'failed' });
    for (const m of moves) this.d.metrics.transitions.inc({ state: m.state });
    this.signals.emit('attempt-ended', { txId: tx.tx_id, attempt: attempt.attempt });
    // Settlement never calls a decider: it tells whoever listens (bypass retries at once) that the transaction is
    // pending again. Listeners run synchronously here, after the store's commit, as fire-and-forget work.
    if (backToPending && !fails) this.signals.emit('back-to-pending', { txId: tx.tx_id });
    return true;
  }

  /** No further attempt will be made: the transaction only waits for proof one way or the other. */
  async stop(txId: string, expect: { state: TxState }): Promise<void> {
    await this.d.store.transition(txId, { state: expect.state, stopped: false }, { set: { stopped: true } });
  }

  /** Under the transaction's lock: its landing slot died, so it is pending again and the landed attempt dropped. */
  async unland(txId: string, slot: number, why = `slot ${slot} died`): Promise<void> {
    const current = await this.d.store.get(txId);
    if (!current || current.landed_slot !== slot) return;
    if (current.state !== 'landed' && current.state !== 'processed') return;
    const landed = current.attempts.find((a) => a.slot_landed === slot && !a.leaked);
    const now = this.d.now();
    const next = await this.d.store.transition(
      current.tx_id,
      { state: current.state },
      {
        set: { state: 'pending', landed_slot: null },
        history: [{ state: 'pending', slot: this.d.chain.slot, ts: now }],
        events: [statusEvent({ ...current, state: 'pending' }, undefined, now)],
      },
    );
    this.d.metrics.transitions.inc({ state: 'pending' });
    if (landed)
      await this.settleFailed(next, landed, 'dropped', {
        countRetry: false,
        detail: why,
      });
  }
}

/** Whether the landing figures count an attempt that ends unlanded as lost: an engine took it and it never confirmed. */
function countedLost(attempt: StoredAttempt): boolean {
  return attempt.slot_submitted !== null && !attempt.timeline.confirmed;
}

/** Where a bundle went and what its tip was priced for, as the landing figures count it. */
function landingRoute(attempt: StoredAttempt): LandingRoute {
  return { region: attempt.region ?? null, contention: attempt.decision.pricing?.contention ?? null };
}
