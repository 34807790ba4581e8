import { pruneSpend } from '../store/spend';
import { isDatabaseOutage } from '../store/store';
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
      'chain' | 'now' | 'metrics' | 'leaders' | 'hub' | 'bypass' | 'store' | 'log'
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
    void this.work
      .capacity()
      .then((capacity) => {
        d.metrics.sendCapacity.set(capacity.sendRatePerSecond);
        d.metrics.expectedQueueWait.set(capacity.expectedWaitMs / 1000);
      })
      .catch((error: unknown) => d.log.debug({ err: error }, 'capacity read failed'));
    d.leaders.advance(slot);
    d.metrics.slot.set(slot);
    const view = d.leaders.leaderView(slot);
    const voteOnly = d.chain.consensus.voteOnlyWindows();
    d.hub.publish('slot_update', {
      slot,
      leader: view.leader,
      bundle_engine_leader: view.bundle_engine[0] ?? null,
      next_bundle_engine_slot: d.leaders.nextBundleEngineSlot(slot, 64),
      ...(voteOnly.length > 0 ? { vote_only_windows: voteOnly } : {}),
      ts: d.now(),
    });
    // Each slot's work runs beside the stream; a failure is logged and the next slot tries again.
    // The database being away is said once, by the store: not at every slot.
    const failed = (what: string) => (error: unknown) =>
      d.log[isDatabaseOutage(error) ? 'debug' : 'warn']({ err: error, slot }, `${what} failed`);
    if (this.work.fallbackActive()) void this.work.runFallback().catch(failed('fallback pass'));
    if (d.bypass.enabled) void this.work.sweepBypass().catch(failed('bypass sweep'));
    const now = d.now();
    if (now - this.lastSpendPrune > SPEND_PRUNE_EVERY_MS) {
      this.lastSpendPrune = now;
      void pruneSpend(d.store, now).catch(failed('spend pruning'));
    }
  }
}
