import { pruneSpend } from '../store/spend';
import type { RelayPorts } from '../context';

/** How often spend older than the rolling hour is pruned from the store. */
const SPEND_PRUNE_EVERY_MS = 60_000;

/**
 * What relay does once per new highest slot: move the chain position, refresh the slot's metrics and leaders, tell
 * subscribers (`slot_update`), and start the per-slot work of the deciders (the fallback reflex while no agent is
 * connected; bypass's sweep of transactions still waiting for an attempt) and the spend ledger's pruning. The
 * deciders are ports: the tick knows when, not how.
 */
export class SlotTick {
  private lastSpendPrune = 0;

  constructor(
    private readonly d: Pick<
      RelayPorts,
      'chain' | 'now' | 'metrics' | 'leaders' | 'hub' | 'bypass' | 'store'
    >,
    private readonly work: {
      /** Send capacity and the expected queue wait, for the metrics. */
      capacity: () => Promise<{ sendRatePerSecond: number; expectedWaitMs: number }>;
      /** Whether the sidecar decides itself (no agent for the grace period), and the pass that does. */
      fallbackActive: () => boolean;
      runFallback: () => Promise<void>;
      /** Bypass: submit what still waits for an attempt (a refusal at enqueue must not strand it). */
      sweepBypass: () => Promise<void>;
    },
  ) {}

  /** A new highest processed slot (from the stream, or RPC while the stream is down). */
  onSlot(slot: number, blockHeight?: number): void {
    const d = this.d;
    if (!d.chain.advance(slot, blockHeight)) return;
    d.chain.observeSlotTime(slot, d.now());
    // The per-slot work reads the store; a read that fails (a database away, a store closing) skips this slot's
    // work, and the next slot tries again: nothing here may reject unhandled.
    this.work
      .capacity()
      .then((capacity) => {
        d.metrics.sendCapacity.set(capacity.sendRatePerSecond);
        d.metrics.expectedQueueWait.set(capacity.expectedWaitMs / 1000);
      })
      .catch(skip);
    d.leaders.advance(slot);
    d.metrics.slot.set(slot);
    const view = d.leaders.leaderView(slot);
    d.hub.publish('slot_update', {
      slot,
      leader: view.leader,
      bundle_engine_leader: view.bundle_engine[0] ?? null,
      next_bundle_engine_slot: d.leaders.nextBundleEngineSlot(slot, 64),
      ts: d.now(),
    });
    if (this.work.fallbackActive()) this.work.runFallback().catch(skip);
    if (d.bypass.enabled) this.work.sweepBypass().catch(skip);
    const now = d.now();
    if (now - this.lastSpendPrune > SPEND_PRUNE_EVERY_MS) {
      this.lastSpendPrune = now;
      pruneSpend(d.store, now).catch(skip);
    }
  }
}

/** This slot's part of the work is skipped; the next slot does it. */
function skip(): void {}
