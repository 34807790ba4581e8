import {
  isRetryableOutcome,
  isTerminalTxState,
  relayErrorJson,
  txTransitionPath,
  type AttemptOutcome,
  type BundleStage,
  type TxHistoryEntry,
  type TxState,
} from '@solrelay/core';
import type { RelayContext } from '../context';
import type { StoredAttempt, StoredTx } from '../store/records';
import { SettleSignals } from './signals';

/** The bundle-engine window an attempt sent now can land in: its first slot (null if unknown) and its last. */
export interface TargetWindow {
  slot: number | null;
  end: number;
}

/**
 * Settlement: the only writer of transaction state transitions (and of bundle stages that go with them). Each
 * change is journaled (fsync) before it is announced (`tx_status_changed`, `bundle_settled`, lifecycle entries).
 * It never calls a decider: what a decider may act on is emitted on `signals`.
 *
 * Callers hold the transaction's lock.
 */
/** The commitments timed from enqueue in `relay_time_to_commitment_seconds`. */
const TIMED_COMMITMENTS: ReadonlySet<TxState> = new Set(['processed', 'confirmed', 'finalized']);

export class Settler {
  readonly signals = new SettleSignals();

  constructor(private readonly ctx: RelayContext) {}

  private path(from: TxState, to: TxState, slot: number, ts: number): TxHistoryEntry[] {
    return txTransitionPath(from, to).map((state) => ({ state, slot, ts }));
  }

  /**
   * The engine took an attempt (answered with its bundle id, or said it already processed it): the bundle is
   * `submitted` with its target window, and a pending transaction moves to `submitted`.
   */
  async markSubmitted(
    tx: StoredTx,
    attempt: StoredAttempt,
    targetWindow: (slot: number) => TargetWindow,
  ): Promise<void> {
    const now = this.ctx.now();
    const slot = this.ctx.chain.slot;
    const target = targetWindow(slot);
    const timeline = { ...attempt.timeline, submitted: { slot, ts: now } };
    const moves = tx.state === 'pending' ? this.path(tx.state, 'submitted', slot, now) : [];
    await this.ctx.store.update({
      id: tx.tx_id,
      ...(moves.length ? { set: { state: 'submitted' as TxState }, history: moves } : {}),
      attempts: [
        {
          n: attempt.attempt,
          set: {
            stage: 'submitted',
            slot_submitted: slot,
            target_slot: target.slot,
            window_end_slot: target.end,
            timeline,
          },
        },
      ],
    });
    this.ctx.announce.appendLifecycle(tx, attempt);
    for (const _ of moves) this.ctx.o.metrics.transitions.inc({ state: 'submitted' });
    if (moves.length) this.ctx.announce.publishStatus(tx, attempt.bundle_id);
  }

  /** A tip transaction landed without its bundle (an uncled block broke the bundle up): the tip leaked. */
  /** A tip landed without its bundle: counted, logged and recorded once (`afterEnd`: after the transaction ended). */
  async markLeaked(
    tx: StoredTx,
    attempt: StoredAttempt,
    slot: number,
    options: { afterEnd?: boolean } = {},
  ): Promise<void> {
    this.ctx.o.metrics.tipsLeaked.inc(attempt.tip_lamports);
    this.ctx.o.log.warn(
      {
        tx_id: tx.tx_id,
        bundle_id: attempt.bundle_id,
        lamports: attempt.tip_lamports,
        ...(options.afterEnd ? { after_end: true } : {}),
      },
      'tip landed without its bundle (leaked)',
    );
    // The tip was paid: it stays counted against spend-limit even if the attempt was settled before.
    await this.ctx.store.update({
      id: tx.tx_id,
      attempts: [{ n: attempt.attempt, set: { leaked: true, slot_landed: slot, released: false } }],
    });
  }

  /** Move a transaction forward (emitting every skipped state in order) and its landed attempt's bundle stage. */
  async moveTo(
    tx: StoredTx,
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
    const moves = this.path(tx.state, to, slot, now);
    // Commitments this transaction reaches for the first time (a re-landing after a fork is not timed again).
    const firstReached = new Set(
      moves.map((m) => m.state).filter((state) => !tx.history.some((h) => h.state === state)),
    );
    const attempt = extra.attempt ?? null;
    const seenBefore = { landed: !!attempt?.timeline.landed, confirmed: !!attempt?.timeline.confirmed };
    const attemptChanges: Array<{ n: number; set: Partial<StoredAttempt> }> = [];
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
        attemptChanges.push({
          n: attempt.attempt,
          set: {
            stage: target,
            timeline,
            ...(extra.landedSlot !== undefined ? { slot_landed: extra.landedSlot } : {}),
            ...(resurrected
              ? { outcome: null, released: false, timeline: { ...timeline, failed: null } }
              : {}),
          },
        });
      }
    }
    if (moves.length === 0 && attemptChanges.length === 0) return;
    const terminal = isTerminalTxState(to);
    await this.ctx.store.update({
      id: tx.tx_id,
      set: {
        state: to,
        ...(extra.failure ? { failure: extra.failure } : {}),
        ...(extra.landedSlot !== undefined ? { landed_slot: extra.landedSlot } : {}),
        ...(to === 'finalized' || to === 'failed' || to === 'expired' ? { stopped: true } : {}),
      },
      history: moves,
      ...(attemptChanges.length ? { attempts: attemptChanges } : {}),
      ...(terminal && to !== 'finalized' ? { evicted: to } : {}),
    });
    for (const m of moves) {
      this.ctx.o.metrics.transitions.inc({ state: m.state });
      if (firstReached.has(m.state) && TIMED_COMMITMENTS.has(m.state))
        this.ctx.o.metrics.timeToCommitment.observe(
          { commitment: m.state },
          Math.max(0, m.ts - tx.enqueued_at) / 1000,
        );
      this.ctx.announce.publishStatus({ ...tx, state: m.state }, extra.bundleId ?? null);
    }
    if (terminal && to !== 'finalized') this.ctx.o.metrics.evicted.inc({ reason: to });
    if (attempt && stageChanges.length > 0) {
      const fresh =
        this.ctx.state.records.get(tx.tx_id)?.attempts.find((a) => a.attempt === attempt.attempt) ?? attempt;
      this.ctx.announce.appendLifecycle(tx, fresh);
      // An attempt resurrected after its block left the chain passes these stages again: count each once. A tip is
      // paid once its bundle is confirmed (a processed block can still be orphaned); the oracle takes it as soon as
      // it lands, for freshness.
      if (stageChanges.includes('landed') && !seenBefore.landed && fresh.tip_lamports > 0)
        this.ctx.o.oracle.ingestLandedTip(fresh.tip_lamports, now);
      if (stageChanges.includes('confirmed') && !seenBefore.confirmed)
        this.ctx.o.metrics.tipsPaid.inc(fresh.tip_lamports);
      if (fresh.stage === 'finalized') {
        this.ctx.o.hub.publish('bundle_settled', {
          bundle_id: fresh.bundle_id,
          stage: 'finalized',
          failure_type: null,
          tx_id: tx.tx_id,
          tip_lamports: fresh.tip_lamports,
          retries: tx.retries,
          ts: now,
        });
      }
    }
    // Once the user transactions landed, no other attempt of this transaction can: settle the rest.
    if (extra.landedSlot !== undefined) {
      for (const other of tx.attempts) {
        if (other === attempt || other.outcome || other.stage === 'failed') continue;
        if (extra.inDoubt?.includes(other)) continue;
        if (other.stage === 'journaled' || other.stage === 'submitted') {
          await this.settleFailed(tx, other, 'dropped', {
            countRetry: false,
            detail: 'the user transactions landed (another attempt, or a bundle they rode in)',
            final: false,
          });
        }
      }
    }
  }

  /**
   * An attempt ended without landing. Releases its spend reservation, records the bundle's failed stage, tells the
   * agent (`bundle_settled`), then either re-pends the transaction for another attempt or, for a non-retryable
   * outcome, fails it.
   */
  async settleFailed(
    tx: StoredTx,
    attempt: StoredAttempt,
    outcome: AttemptOutcome,
    options: { countRetry: boolean; detail: string; stop?: boolean; final?: boolean },
  ): Promise<void> {
    const now = this.ctx.now();
    const slot = this.ctx.chain.slot;
    const policy = this.ctx.o.policy();
    const timeline = { ...attempt.timeline, failed: { slot, ts: now } };
    const retries = tx.retries + (options.countRetry ? 1 : 0);
    const retryable = isRetryableOutcome(outcome);
    const fails = !retryable && options.final !== false;
    const exhausted = retries > policy['max-retries'] || slot > tx.expires_at_slot;
    const backToPending =
      !fails && (tx.state === 'submitted' || tx.state === 'pending') && options.final !== false;
    const moves = fails
      ? this.path(tx.state, 'failed', slot, now)
      : backToPending && tx.state !== 'pending'
        ? this.path(tx.state, 'pending', slot, now)
        : [];
    await this.ctx.store.update({
      id: tx.tx_id,
      set: {
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
      },
      history: moves,
      attempts: [
        { n: attempt.attempt, set: { stage: 'failed', outcome, released: !attempt.leaked, timeline } },
      ],
      ...(fails ? { evicted: 'failed' } : {}),
    });
    this.ctx.o.metrics.attemptOutcomes.inc({ outcome });
    if (fails) this.ctx.o.metrics.evicted.inc({ reason: 'failed' });
    for (const m of moves) {
      this.ctx.o.metrics.transitions.inc({ state: m.state });
      this.ctx.announce.publishStatus(
        { ...tx, state: m.state, failure: fails ? outcome : tx.failure },
        attempt.bundle_id,
      );
    }
    const fresh =
      this.ctx.state.records.get(tx.tx_id)?.attempts.find((a) => a.attempt === attempt.attempt) ?? attempt;
    this.ctx.announce.appendLifecycle(tx, fresh);
    this.ctx.o.hub.publish('bundle_settled', {
      bundle_id: attempt.bundle_id,
      stage: 'failed',
      failure_type: outcome,
      tx_id: tx.tx_id,
      tip_lamports: attempt.tip_lamports,
      retries,
      ts: now,
    });
    this.signals.emit('attempt-ended', { txId: tx.tx_id, attempt: attempt.attempt });
    // Settlement never calls a decider: it tells whoever listens (bypass retries at once) that the transaction is
    // pending again. Listeners run synchronously here, after the journal commit, as fire-and-forget work.
    if (backToPending && !fails) this.signals.emit('back-to-pending', { txId: tx.tx_id });
  }

  /** Under the transaction's lock: its landing slot died, so it is pending again and the landed attempt dropped. */
  async unland(txId: string, slot: number, why = `slot ${slot} died`): Promise<void> {
    const current = this.ctx.state.records.get(txId);
    if (!current || current.landed_slot !== slot) return;
    if (current.state !== 'landed' && current.state !== 'processed') return;
    const landed = current.attempts.find((a) => a.slot_landed === slot && !a.leaked);
    const now = this.ctx.now();
    await this.ctx.store.update({
      id: current.tx_id,
      set: { state: 'pending', landed_slot: null },
      history: [{ state: 'pending', slot: this.ctx.chain.slot, ts: now }],
    });
    this.ctx.o.metrics.transitions.inc({ state: 'pending' });
    this.ctx.announce.publishStatus(current);
    if (landed)
      await this.settleFailed(current, landed, 'dropped', {
        countRetry: false,
        detail: why,
      });
  }
}
