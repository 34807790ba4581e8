import {
  decideReflex,
  effectivePriority,
  targetPercentile,
  type ReflexBundle,
  type TipPercentile,
} from '@solrelay/core';
import type { AttemptBuilder } from '../attempts/builder';
import type { RelayPorts } from '../context';
import type { Settler } from '../settle/settle';
import { bundleToPrice } from '../chain/pricing';
import { inFlight, lastSettled } from '../store/queries';
import { repricedFrom, type StoredTx } from '../store/records';

/**
 * The fallback decider: with no agent connected for the grace period (and not bypass), the sidecar decides with
 * core's reflex itself, recording `fallback_reason: "agent_absent"`. Runs on each new slot while active.
 */
export class FallbackDecider {
  constructor(
    private readonly d: Pick<
      RelayPorts,
      'chain' | 'contention' | 'leaders' | 'locks' | 'log' | 'policy' | 'store'
    >,
    private readonly attempts: AttemptBuilder,
    private readonly settle: Pick<Settler, 'stop'>,
  ) {}

  /**
   * The bundle reflex prices (DESIGN §11, `bundleToPrice`) with the contention of its write set read now (an RPC
   * call unless a reading of the last ~5 slots is cached). Null when reflex bids the flat percentile.
   */
  private async bundleOf(tx: StoredTx, percentile: TipPercentile): Promise<ReflexBundle | null> {
    const bundle = bundleToPrice(tx);
    if (!bundle) return null;
    return {
      compute_units: bundle.computeUnits,
      contention: await this.d.contention.read(bundle.writeSet, percentile),
    };
  }

  private fallbackRunning = false;

  /** With no agent for the grace period, decide with the core reflex, recording why. */
  async run(): Promise<void> {
    if (this.fallbackRunning) return;
    this.fallbackRunning = true;
    try {
      const policy = this.d.policy();
      const floor = this.attempts.floorNow();
      const leaders = this.d.leaders.leaderView(this.d.chain.slot);
      for (const listed of await this.d.store.awaitingAttempt()) {
        if (this.d.locks.isBusy(listed.tx_id)) continue;
        // Decided on the record as it is now: an earlier submit of this pass took time, and the listing is a
        // snapshot (its retries and last attempt may be behind).
        const tx = await this.d.store.get(listed.tx_id);
        if (!tx || tx.state !== 'pending' || tx.stopped || inFlight(tx)) continue;
        const previous = lastSettled(tx);
        const priority = effectivePriority(policy, tx.priority);
        const bundle = await this.bundleOf(tx, targetPercentile(policy['tip-percentile'], priority));
        const decision = decideReflex({
          tx: {
            priority,
            max_tip: tx.max_tip,
            tip: tx.tip,
            enqueue_slot: tx.enqueued_slot,
            expires_at_slot: this.d.chain.deadlineOf(tx),
            retries: tx.retries,
          },
          floor,
          leaders,
          policy,
          // A pack's lead reprices from its own tip and CU, not the pack's (a raised tip ranked its riders).
          previous: previous?.outcome ? { ...repricedFrom(previous), outcome: previous.outcome } : null,
          slot: this.d.chain.slot,
          bundle,
        });
        if (decision.action === 'stop') {
          await this.d.locks.run(tx.tx_id, async () => {
            const current = await this.d.store.get(tx.tx_id);
            if (current && current.state === 'pending' && !current.stopped && !inFlight(current)) {
              await this.settle.stop(tx.tx_id, { state: 'pending' });
            }
          });
          continue;
        }
        if (decision.action !== 'submit') continue;
        try {
          await this.attempts.submit(
            {
              tx_id: tx.tx_id,
              tip_lamports: decision.tip_lamports,
              reason: decision.reason,
              trace: {
                fallback_reason: 'agent_absent',
                rationale: decision.reason,
                inputs: { floor, slot: this.d.chain.slot, bundle },
              },
              ...(decision.pricing
                ? {
                    pricing: {
                      bid_per_cu: decision.pricing.bid_per_cu,
                      contention: decision.pricing.contention,
                      signal: decision.pricing.signal,
                    },
                  }
                : {}),
            },
            'fallback',
          );
        } catch (error) {
          this.d.log.debug({ tx_id: tx.tx_id, err: error }, 'fallback submit refused');
        }
      }
    } finally {
      this.fallbackRunning = false;
    }
  }
}
