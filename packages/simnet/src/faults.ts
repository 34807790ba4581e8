import { EventEmitter } from 'node:events';

/**
 * Fault injection for the whole simnet. Rates are probabilities in [0, 1] rolled per request / bundle /
 * slot with the simnet's seeded Rng; flags hold until cleared. Every server reads the live values, so a
 * test (or the admin HTTP route) flips a fault and the next request sees it.
 */
export interface FaultSettings {
  /** Block engine (JSON-RPC and gRPC): answer 429 / -32097 (RESOURCE_EXHAUSTED on gRPC) with this probability. */
  engineRateLimitRate: number;
  /** Block engine: answer HTTP 5xx (UNAVAILABLE on gRPC) with this probability. */
  engine5xxRate: number;
  /** Block engine: extra latency added to every answer, in ms. */
  engineLatencyMs: number;
  /** Block engine: open SubscribeBundleResults streams stay open but carry nothing while true (a half-dead stream). */
  bundleResultsSilent: boolean;
  /** Block engine: an accepted bundle is silently dropped (never lands; gRPC `dropped`) with this probability. */
  bundleDropRate: number;
  /**
   * Block engine: its bank lags the cluster by this many slots. Modelled narrowly, for the race it causes: a bundle
   * whose fee payer came into existence within the last N slots fails the engine's simulation with AccountNotFound
   * (gRPC `simulationFailure`), though the cluster would execute it; every other account the engine sees as the
   * cluster does. Creations are recorded only while this is non-zero.
   */
  engineBankLagSlots: number;
  /** Chain: a block that carries a bundle is uncled with this probability: left on an abandoned fork (silently, as
   * `orphanedBlockRate`), and the bundle's transactions are re-broadcast one by one and may land individually (no
   * atomicity). */
  uncleRate: number;
  /** Chain: a produced block is left on an abandoned fork with this probability: its slot never confirms, its
   * transactions' statuses return to null, nothing is re-broadcast, and no stream says so (Yellowstone sends
   * `SLOT_DEAD` only on replay failure, which is `deadSlotRate`). */
  orphanedBlockRate: number;
  /** Chain: a produced slot fails replay with this probability: declared dead (`SLOT_DEAD`) one slot later, its
   * transactions roll back. */
  deadSlotRate: number;
  /** Chain: execution drift. A transaction that would succeed fails at inclusion with this probability, its state
   * having moved since it was simulated (preflight or the block engine's simulation passed): queued ones land failed
   * with their fee charged and nothing else applied, a bundle member fails its whole bundle. Rolled per transaction. */
  executionDriftRate: number;
  /** Chain: the slot clock stops advancing while true. */
  slotStall: boolean;
  /** Tip floor REST route: serve a frozen snapshot with an old `time` while true. */
  staleTipFloor: boolean;
  /** Solana JSON-RPC: refuse connections (HTTP 503 + -32005 unhealthy) while true. */
  rpcDown: boolean;
  /** Solana JSON-RPC: answer HTTP 5xx with this probability. */
  rpc5xxRate: number;
  /** Solana JSON-RPC / gRPC: extra latency in ms. */
  rpcLatencyMs: number;
  /** Solana JSON-RPC: how far behind the tip a lagging node is, in slots (with `rpcLaggingShare`). */
  rpcLagSlots: number;
  /** Solana JSON-RPC: the share of HTTP requests (a batch counts as one) answered by a node `rpcLagSlots` behind, as
   * behind a load balancer: lower `context.slot`, recent signatures null, blockhashes it has not seen invalid,
   * balances, accounts and simulations as they were at its slot (from undo logs the chain keeps while
   * `rpcLagSlots` is non-zero: set it before the writes such a node should not see yet). */
  rpcLaggingShare: number;
  /** Yellowstone: cut every open Subscribe stream (as `cutStreams`) every this many ms while non-zero. */
  streamCutIntervalMs: number;
}

export const DEFAULT_FAULTS: Readonly<FaultSettings> = Object.freeze({
  engineRateLimitRate: 0,
  engine5xxRate: 0,
  engineLatencyMs: 0,
  bundleResultsSilent: false,
  bundleDropRate: 0,
  engineBankLagSlots: 0,
  uncleRate: 0,
  orphanedBlockRate: 0,
  deadSlotRate: 0,
  executionDriftRate: 0,
  slotStall: false,
  staleTipFloor: false,
  rpcDown: false,
  rpc5xxRate: 0,
  rpcLatencyMs: 0,
  rpcLagSlots: 0,
  rpcLaggingShare: 0,
  streamCutIntervalMs: 0,
});

/**
 * How many times each fault actually bit, counted by the server that applies it: what a test reports as "faults
 * injected" (a flag being on proves nothing by itself). Cumulative for the simnet's life: `reset()` clears the
 * settings, not the counts; a test takes differences.
 */
export interface FaultCounts {
  /** Solana JSON-RPC HTTP requests answered 503 (-32005) and PubSub WebSocket connections closed, under `rpcDown`. */
  rpcRefused: number;
  /** Solana JSON-RPC HTTP requests answered 5xx by `rpc5xxRate`. */
  rpc5xx: number;
  /** Tip-floor REST answers served from the frozen, old snapshot under `staleTipFloor`. */
  staleTipFloorServed: number;
  /** Slot-clock ticks that produced no slot under `slotStall`. */
  slotsStalled: number;
  /** Block-engine requests answered 429 / -32097 (RESOURCE_EXHAUSTED) by `engineRateLimitRate`. */
  engineRateLimited: number;
  /** Block-engine requests answered 5xx (UNAVAILABLE) by `engine5xxRate`. */
  engine5xx: number;
  /** Open Yellowstone Subscribe streams ended with UNAVAILABLE by `cutStreams` / `streamCutIntervalMs`. */
  streamsCut: number;
  /** Block engine SubscribeBundleResults streams ended cleanly by `endBundleResultStreams`. */
  bundleResultStreamsEnded: number;
  /** Solana JSON-RPC HTTP requests answered by a lagging node (`rpcLaggingShare`). */
  rpcLagged: number;
  /** Blocks abandoned: replay failures (`deadSlotRate`), uncled blocks (`uncleRate`), orphaned ones. */
  deadSlots: number;
  uncledBlocks: number;
  orphanedBlocks: number;
  /** Transactions failed at inclusion by `executionDriftRate`. */
  executionDrifts: number;
  /** Bundles the engine failed in simulation because its lagging bank had not seen their fee payer yet. */
  engineBankLagFailures: number;
}

const ZERO_COUNTS: Readonly<FaultCounts> = Object.freeze({
  rpcRefused: 0,
  rpc5xx: 0,
  staleTipFloorServed: 0,
  slotsStalled: 0,
  engineRateLimited: 0,
  engine5xx: 0,
  streamsCut: 0,
  bundleResultStreamsEnded: 0,
  rpcLagged: 0,
  deadSlots: 0,
  uncledBlocks: 0,
  orphanedBlocks: 0,
  executionDrifts: 0,
  engineBankLagFailures: 0,
});

/** One-shot fault actions, delivered as events to whoever implements them. */
export interface FaultActions {
  /** Cut every open Yellowstone Subscribe stream (UNAVAILABLE), as a load balancer would. */
  cutStreams: [];
  /** Make every blockhash issued so far invalid at once. */
  expireBlockhashes: [];
  /** End every open SubscribeBundleResults stream with status OK and no error, as a block engine's stream can end
   * (jito-ts 4.2.1's `onBundleResult` then calls neither callback). */
  endBundleResultStreams: [];
}

export class Faults extends EventEmitter<
  { [K in keyof FaultActions]: FaultActions[K] } & { changed: [FaultSettings] }
> {
  private settings: FaultSettings = { ...DEFAULT_FAULTS };
  private readonly counts: FaultCounts = { ...ZERO_COUNTS };

  get current(): Readonly<FaultSettings> {
    return this.settings;
  }

  /** A copy of the counts of faults that bit so far (see `FaultCounts`). */
  get injected(): Readonly<FaultCounts> {
    return { ...this.counts };
  }

  /** Called by the server that just applied a fault. */
  count(kind: keyof FaultCounts): void {
    this.counts[kind]++;
  }

  /** Set some faults; unknown keys and out-of-range values throw, so a typo in a test fails loudly. */
  set(patch: Partial<FaultSettings>): void {
    const next = { ...this.settings };
    for (const [key, value] of Object.entries(patch)) {
      if (!(key in DEFAULT_FAULTS)) throw new Error(`unknown fault "${key}"`);
      const expected = typeof DEFAULT_FAULTS[key as keyof FaultSettings];
      if (typeof value !== expected) throw new Error(`fault "${key}" must be a ${expected}`);
      if (typeof value === 'number') {
        const isRate = key.endsWith('Rate') || key.endsWith('Share');
        if (!Number.isFinite(value) || value < 0 || (isRate && value > 1)) {
          throw new Error(
            `fault "${key}" must be ${isRate ? 'a probability in [0, 1]' : 'a non-negative number'}`,
          );
        }
      }
      (next as Record<string, unknown>)[key] = value;
    }
    this.settings = next;
    this.emit('changed', this.settings);
  }

  /** Clear every fault. */
  reset(): void {
    this.settings = { ...DEFAULT_FAULTS };
    this.emit('changed', this.settings);
  }

  cutStreams(): void {
    this.emit('cutStreams');
  }

  expireBlockhashes(): void {
    this.emit('expireBlockhashes');
  }
  endBundleResultStreams(): void {
    this.emit('endBundleResultStreams');
  }
}
