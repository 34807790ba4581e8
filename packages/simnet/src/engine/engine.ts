import { EventEmitter } from 'node:events';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle.js';
import type {
  BlockContext,
  BundleCandidate,
  BundleExecution,
  BundleSource,
  Cluster,
  LeaderInfo,
  PrioritizationFeeEntry,
  SlotEvent,
  TransactionErrorJson,
} from '../chain/types';
import type { Faults } from '../faults';
import { type Rng } from '../rng';
import { MAINNET_TIP_ACCOUNTS } from '../tip-accounts';
import { Auction, type AuctionOptions, type Regime, type SlotAuction } from './auction';
import { pinnedTipFor, resolveSlot, tipPerCu, type Bid, type TickLoss } from './auction-model';
import { RATE_LIMIT_MESSAGES, RateLimiter, type RateLimitOptions } from './rate-limit';
import { JITO_MAINNET_REGIONS, assignRegions, regionLatencyMs, type RegionStake } from './regions';
import { TipFloor, toJitoTipFloor, type JitoTipFloorEntry, type TipFloorOptions } from './tip-floor';
import { validateBundle, type BundleRejection } from './validate';
import {
  decodeWire,
  deriveBundleId,
  parseTransaction,
  type ParsedTransaction,
  type WireEncoding,
} from './wire';

/** `DroppedReason` of jito-ts's bundle.proto (numbers on the wire). */
export const DroppedReason = { BlockhashExpired: 0, PartiallyProcessed: 1, NotFinalized: 2 } as const;

export const NO_LEADER_MESSAGE = 'Bundle Dropped, no connected leader up soon.';

/** Compute-unit prices are in micro-lamports per CU (SetComputeUnitPrice). */
const MICRO_LAMPORTS_PER_LAMPORT = 1_000_000;

export type InflightStatus = 'Invalid' | 'Pending' | 'Failed' | 'Landed';

/**
 * `'auction'`: a bundle competes in the first auction (50 ms tick) it reaches in its leader window and is dropped if
 * it does not win there, as Jito described bundles (jito.canny.io "Bundle meshpool", Jito's reply: "Bundles are only
 * kept around for as long as the auction window is (currently 200ms). If the bundle didn't win the auction ... we
 * will drop it."; dated, from the 200 ms-tick era, on a request the board marks complete, which asked for retries
 * across regions: an assumption, not a documented current behaviour). `'window'`: the earlier model, competing at
 * every tick of every slot of its window from its arrival.
 */
export type BundleLifetime = 'auction' | 'window';

/** Why a bundle that was accepted did not land (what the gRPC stream reported). */
export type BundleFailure =
  | 'no_leader'
  | 'auction_lost'
  | 'dropped'
  | 'blockhash_expired'
  | 'simulation_failure'
  | 'partially_processed'
  | 'slot_dead';

export interface TrackedBundle {
  bundleId: string;
  transactions: ParsedTransaction[];
  /** Every transaction's first signature, in bundle order. */
  signatures: string[];
  tipLamports: number;
  blockhashes: string[];
  /** The regional engine it was sent to: its results go to that region's stream. */
  region: string;
  receivedMs: number;
  /**
   * When it reaches its window's leader: on receipt in the leader's own region, later when another region must
   * forward it. It competes in no slot produced before then.
   */
  arrivesAtMs: number;
  /** A slot of its window was produced before it arrived (forwarding delay): at the window's end it is forwarded on. */
  missedByForwarding: boolean;
  receivedSlot: number;
  state: 'pending' | 'landed' | 'failed';
  /** The bundle-engine leader window it competes in; null when no such leader was close enough. */
  window: { firstSlot: number; lastSlot: number; leader: LeaderInfo } | null;
  /** Chosen to be dropped by the `bundleDropRate` fault: forwarded, but the leader never includes it. */
  faultDropped: boolean;
  acceptedSlots: number[];
  lastCompetedSlot: number | null;
  /** Slot it was handed to the leader for, until the chain reports the execution. */
  offeredSlot: number | null;
  /** Sum of its transactions' requested compute units: with the tip, its rank (tip per CU) in the auction. */
  computeUnits: number;
  /** Why it lost its last tick, when it did. */
  lastLoss: (TickLoss & { slot: number; tick: number }) | null;
  landedSlot: number | null;
  failure: BundleFailure | null;
  finalized: boolean;
}

export type AdmitDecision =
  | { ok: true }
  | { ok: false; kind: 'rate_limited'; message: string; retryAfterMs: number }
  | { ok: false; kind: 'unavailable'; message: string };

export type SubmitResult = { ok: true; bundleId: string } | { ok: false; error: BundleRejection };

/**
 * One bundle as the engine received it (`sendBundle`, or `sendTransaction` with `bundleOnly`), accepted or refused:
 * an observation for tests (what a client actually put on the wire), never consulted by the engine itself.
 */
export interface ReceivedBundle {
  /** Its place in the engine's receive order, from 1. */
  seq: number;
  /** The engine's clock (epoch ms) when it read the bundle. */
  receivedMs: number;
  region: string;
  /** Each transaction's first signature (base58), in bundle order; null for one that does not decode. */
  signatures: Array<string | null>;
  /** Its bundle id (SHA-256 of the first signatures), when every transaction decoded. */
  bundleId: string | null;
  /** null when accepted (answered with its id), else the refusal's message. */
  refused: string | null;
}

/** Received bundles the engine keeps for `received` (the oldest go first beyond it). */
const RECEIVED_KEPT = 50_000;

export interface BlockEngineOptions {
  cluster: Cluster;
  faults: Faults;
  /** The simnet's seeded generator; the engine forks its own streams from it. */
  rng: Rng;
  tipAccounts?: readonly string[];
  /** Regional engines (default: Jito's eight mainnet regions); the first is where a region-less caller lands. */
  regions?: readonly string[];
  /**
   * A flat added time for a bundle sent to a region its target leader is not connected to. Absent (default): the
   * pairwise one-way latency between the two regions ({@link regionLatencyMs}).
   */
  crossRegionDelayMs?: number;
  /**
   * How bundle-engine validators spread over regions: `'mainnet'` by stake geography, or `'uniform'` (default: the
   * realistic spread makes a reliability test of relay's submit path time out, relay's per-region budget being its
   * bottleneck; see the README).
   */
  regionStake?: RegionStake;
  /** A bundle is dropped unless a bundle-engine leader holds one of the next this-many slots (default 4). */
  leaderLookaheadSlots?: number;
  /**
   * How long a bundle competes (see {@link BundleLifetime}); default `'window'` (the earlier model); `'auction'`: one
   * auction, then dropped if it lost.
   */
  bundleLifetime?: BundleLifetime;
  /** Most real bundles one slot includes (in auction order: highest tip per requested CU first). */
  maxBundlesPerSlot?: number;
  rateLimit?: RateLimitOptions;
  auction?: AuctionOptions;
  tipFloor?: TipFloorOptions;
  /** getInflightBundleStatuses lookback (Jito: 5 minutes). */
  inflightLookbackMs?: number;
  /** getBundleStatuses sees bundles landed within this many slots of the finalized slot (Jito: ~300). */
  statusLookbackSlots?: number;
  /** How old the frozen tip floor claims to be while `staleTipFloor` is on. */
  staleTipFloorAgeMs?: number;
  /**
   * The background market's contention in getRecentPrioritizationFees (default true): see
   * {@link BlockEngine.backgroundPrioritizationFees}. false: only executed transactions set the fees.
   */
  backgroundPrioritizationFees?: boolean;
  now?: () => number;
}

export interface BlockEngineEvents {
  /** Every gRPC BundleResult the engine produces, in order, with the region the bundle was sent to. */
  result: [BundleResult, string];
}

/**
 * The Jito block engine's brain, shared by its JSON-RPC and gRPC faces: admission, the per-slot auction, bundle
 * tracking through landing, finalization or loss, leader data and the tip floor. It plugs into the chain as its
 * `BundleSource`.
 *
 * Competing window (decided): a bundle competes only in the slots of the first bundle-engine leader window it meets
 * (the first such slot within `leaderLookaheadSlots` after the current one, through the last consecutive slot of
 * that leader). With `bundleLifetime: 'auction'` it competes at the one 50 ms tick it arrives in and is
 * dropped if it loses; with `'window'` (the default) at every tick of those slots from the tick it arrives in (`auction-model.ts`;
 * tick 0 of each later slot), landing in the slot of the first tick it wins. Losing means gRPC
 * `rejected.stateAuctionBidRejected`, inflight `Failed`: it must be resent.
 */
export class BlockEngine extends EventEmitter<BlockEngineEvents> implements BundleSource {
  readonly cluster: Cluster;
  readonly faults: Faults;
  readonly auction: Auction;
  readonly tipFloor: TipFloor;
  readonly rateLimiter: RateLimiter;
  readonly tipAccounts: readonly string[];
  readonly regions: readonly string[];
  /** Bundle-engine validator identity -> the region it is connected to. */
  readonly validatorRegions: ReadonlyMap<string, string>;
  /** A flat cross-region delay, or null for the pairwise latency matrix. */
  crossRegionDelayMs: number | null;
  leaderLookaheadSlots: number;
  readonly bundleLifetime: BundleLifetime;
  private readonly tipAccountSet: ReadonlySet<string>;
  private readonly faultRng: Rng;
  private readonly maxBundlesPerSlot: number;
  /** The cluster's slot length (400 ms unless it says otherwise): how long a running clock's slot lasts. */
  private readonly slotMs: number;
  private readonly inflightLookbackMs: number;
  private readonly statusLookbackSlots: number;
  private readonly staleTipFloorAgeMs: number;
  private readonly modelPrioritizationFees: boolean;
  private readonly now: () => number;
  private readonly bundles = new Map<string, TrackedBundle>();
  private readonly receivedLog: ReceivedBundle[] = [];
  private receivedCount = 0;
  /**
   * Tips of real bundles that landed since the last tip-floor update. The chain reports bundle results after the
   * slot's processed event, so they join the next bundle-engine slot's update.
   */
  private realLandedTips: number[] = [];
  /** Tips of the background bundles that won each bundle-engine slot's auction next to the real ones. */
  private readonly backgroundLanded = new Map<number, number[]>();
  private frozenTipFloor: JitoTipFloorEntry[] | null = null;
  private readonly onSlot = (event: SlotEvent) => this.handleSlot(event);
  private attached = false;

  constructor(options: BlockEngineOptions) {
    super();
    this.cluster = options.cluster;
    this.faults = options.faults;
    const slotMs = (options.cluster as Cluster & { slotMs?: number }).slotMs;
    this.slotMs = slotMs ?? 400;
    this.auction = new Auction(options.rng.fork('auction'), {
      ...(slotMs !== undefined ? { slotMs } : {}),
      tipAccounts: options.tipAccounts ?? MAINNET_TIP_ACCOUNTS,
      ...options.auction,
    });
    this.faultRng = options.rng.fork('engine-faults');
    this.tipFloor = new TipFloor(options.tipFloor);
    this.rateLimiter = new RateLimiter(options.rateLimit);
    this.tipAccounts = options.tipAccounts ?? MAINNET_TIP_ACCOUNTS;
    this.tipAccountSet = new Set(this.tipAccounts);
    this.regions = options.regions ?? JITO_MAINNET_REGIONS;
    this.validatorRegions = assignRegions(
      this.cluster.validators().filter((v) => v.bundleEngine),
      this.regions,
      options.rng.fork('regions'),
      options.regionStake ?? 'uniform',
    );
    this.crossRegionDelayMs = options.crossRegionDelayMs ?? null;
    this.leaderLookaheadSlots = options.leaderLookaheadSlots ?? 4;
    // 'window' stays the default until relay's side of issue 30 (resend after a lost auction) is built: see README.
    this.bundleLifetime = options.bundleLifetime ?? 'window';
    if (this.bundleLifetime !== 'auction' && this.bundleLifetime !== 'window')
      throw new Error(`unknown bundleLifetime "${String(this.bundleLifetime)}"`);
    this.maxBundlesPerSlot = options.maxBundlesPerSlot ?? 64;
    this.inflightLookbackMs = options.inflightLookbackMs ?? 5 * 60_000;
    this.statusLookbackSlots = options.statusLookbackSlots ?? 300;
    this.staleTipFloorAgeMs = options.staleTipFloorAgeMs ?? 5 * 60_000;
    this.modelPrioritizationFees = options.backgroundPrioritizationFees ?? true;
    this.now = options.now ?? Date.now;
  }

  /** Register as the chain's bundle source and warm the tip floor with a window of synthetic history. */
  attach(): this {
    if (this.attached) return this;
    this.attached = true;
    const current = this.cluster.slot;
    const warmup = 150;
    for (let slot = current - warmup; slot <= current; slot++) {
      const auction = this.auction.slot(slot);
      const leader = slot >= 0 ? this.cluster.leaderAt(slot) : null;
      if (auction && (leader?.bundleEngine ?? true)) this.tipFloor.record(slot, auction.competitorLandedTips);
    }
    this.cluster.setBundleSource(this);
    this.cluster.on('slot', this.onSlot);
    return this;
  }

  detach(): void {
    if (!this.attached) return;
    this.attached = false;
    this.cluster.setBundleSource(null);
    this.cluster.off('slot', this.onSlot);
  }

  // ---- transport-level admission (rate limit and engine faults), shared by JSON-RPC and gRPC ----

  /**
   * Decide whether a request to `region` gets through: injected 5xx / 429 storms first, then (unless `limit` is
   * false) that region's per-IP limiter.
   */
  admit(ip: string, uuid: string | undefined, limit = true, region = this.homeRegion): AdmitDecision {
    const faults = this.faults.current;
    if (this.faultRng.chance(faults.engine5xxRate)) {
      this.faults.count('engine5xx');
      return {
        ok: false,
        kind: 'unavailable',
        message: 'upstream connect error or disconnect/reset before headers',
      };
    }
    if (this.faultRng.chance(faults.engineRateLimitRate)) {
      this.faults.count('engineRateLimited');
      // A storm: alternate between the two texts users have seen, so clients must handle both.
      const retryAfterMs = 1000 + this.faultRng.int(0, 999);
      const message = this.faultRng.chance(0.5)
        ? RATE_LIMIT_MESSAGES.global
        : RATE_LIMIT_MESSAGES.perIp(uuid ? this.rateLimiter.uuidRps : this.rateLimiter.rps, retryAfterMs);
      return { ok: false, kind: 'rate_limited', message, retryAfterMs };
    }
    const decision = limit ? this.rateLimiter.take(ip, uuid, region) : ({ allowed: true } as const);
    if (!decision.allowed) {
      return {
        ok: false,
        kind: 'rate_limited',
        message: RATE_LIMIT_MESSAGES.perIp(decision.limit, decision.retryAfterMs),
        retryAfterMs: decision.retryAfterMs,
      };
    }
    return { ok: true };
  }

  /** Added latency of the `engineLatencyMs` fault. */
  async delay(): Promise<void> {
    const ms = this.faults.current.engineLatencyMs;
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  }

  // ---- bundles ----

  /**
   * The background flow's hot accounts (AMM-pool-like), most popular first: a bundle write-locking one competes with
   * the background bids on it; one that touches none competes only for block space.
   */
  get hotAccounts(): readonly string[] {
    return this.auction.hotAccounts;
  }

  /** The region a caller that names none is served by (the first). */
  get homeRegion(): string {
    return this.regions[0] as string;
  }

  /**
   * How long a bundle sent to `from` takes to reach a leader connected to `to`: 0 in the same region, else the flat
   * `crossRegionDelayMs` when set, else the pairwise one-way latency ({@link regionLatencyMs}).
   */
  forwardingDelayMs(from: string, to: string): number {
    if (from === to) return 0;
    return this.crossRegionDelayMs ?? regionLatencyMs(from, to);
  }

  /** The region a bundle-engine validator is connected to; null for validators without the bundle engine. */
  regionOf(identity: string): string | null {
    return this.validatorRegions.get(identity) ?? null;
  }

  submitBundle(
    transactions: ReadonlyArray<string | Uint8Array>,
    encoding: WireEncoding = 'base58',
    region: string = this.homeRegion,
  ): SubmitResult {
    const validation = validateBundle(transactions, encoding, this.cluster, this.tipAccountSet);
    this.observe(transactions, encoding, region, validation);
    if (!validation.ok) return validation;
    const { bundle } = validation;
    const existing = this.bundles.get(bundle.bundleId);
    // The same bytes again: the same id, and no second entry while the first attempt is still alive.
    if (existing && existing.state !== 'failed') return { ok: true, bundleId: bundle.bundleId };

    const slot = this.clockSlot();
    const window = this.findWindow(slot);
    const receivedMs = this.now();
    const leaderRegion = window === null ? null : this.regionOf(window.leader.identity);
    const tracked: TrackedBundle = {
      bundleId: bundle.bundleId,
      transactions: bundle.transactions,
      signatures: bundle.transactions.map((tx) => tx.signatures[0] as string),
      tipLamports: bundle.tipLamports,
      blockhashes: bundle.blockhashes,
      region,
      receivedMs,
      arrivesAtMs: receivedMs + (leaderRegion === null ? 0 : this.forwardingDelayMs(region, leaderRegion)),
      missedByForwarding: false,
      receivedSlot: slot,
      state: 'pending',
      window,
      faultDropped: this.faultRng.chance(this.faults.current.bundleDropRate),
      acceptedSlots: [],
      lastCompetedSlot: null,
      offeredSlot: null,
      computeUnits: bundle.transactions.reduce((sum, tx) => sum + tx.requestedComputeUnits, 0),
      lastLoss: null,
      landedSlot: null,
      failure: null,
      finalized: false,
    };
    this.bundles.delete(bundle.bundleId);
    this.bundles.set(bundle.bundleId, tracked);
    if (!tracked.window) {
      // Reported after the id goes back, as the real engine's stream does.
      setImmediate(() =>
        this.fail(tracked, 'no_leader', { rejected: { droppedBundle: { msg: NO_LEADER_MESSAGE } } }),
      );
    }
    return { ok: true, bundleId: bundle.bundleId };
  }

  /**
   * The bundles received, oldest first, after `afterSeq` (the last {@link RECEIVED_KEPT} kept), and how many were
   * received in all: what clients sent, accepted or refused, whether or not anything of it landed.
   */
  received(afterSeq = 0): { bundles: ReceivedBundle[]; total: number } {
    return { bundles: this.receivedLog.filter((b) => b.seq > afterSeq), total: this.receivedCount };
  }

  private observe(
    transactions: ReadonlyArray<string | Uint8Array>,
    encoding: WireEncoding,
    region: string,
    validation: ReturnType<typeof validateBundle>,
  ): void {
    const signatures = validation.ok
      ? validation.bundle.transactions.map((tx) => tx.signatures[0] as string)
      : transactions.map((item) => {
          const wire = typeof item === 'string' ? decodeWire(item, encoding) : item;
          try {
            return wire ? (parseTransaction(wire, this.tipAccountSet).signatures[0] ?? null) : null;
          } catch {
            return null;
          }
        });
    const complete = signatures.every((sig): sig is string => sig !== null);
    this.receivedLog.push({
      seq: ++this.receivedCount,
      receivedMs: this.now(),
      region,
      signatures,
      bundleId: validation.ok
        ? validation.bundle.bundleId
        : complete && signatures.length > 0
          ? deriveBundleId(signatures)
          : null,
      refused: validation.ok ? null : validation.error.message,
    });
    if (this.receivedLog.length > RECEIVED_KEPT) this.receivedLog.shift();
  }

  getBundle(bundleId: string): TrackedBundle | undefined {
    return this.bundles.get(bundleId);
  }

  pendingBundles(): TrackedBundle[] {
    return [...this.bundles.values()].filter((b) => b.state === 'pending');
  }

  /** getInflightBundleStatuses: 5-minute lookback; unknown or older ids are `Invalid`. */
  inflightStatuses(bundleIds: readonly string[]): {
    context: { slot: number };
    value: Array<{ bundle_id: string; status: InflightStatus; landed_slot: number | null }>;
  } {
    const cutoff = this.now() - this.inflightLookbackMs;
    return {
      context: { slot: this.cluster.slot },
      value: bundleIds.map((id) => {
        const bundle = this.bundles.get(id);
        if (!bundle || bundle.receivedMs < cutoff)
          return { bundle_id: id, status: 'Invalid', landed_slot: null };
        const status: InflightStatus =
          bundle.state === 'landed' ? 'Landed' : bundle.state === 'failed' ? 'Failed' : 'Pending';
        return { bundle_id: id, status, landed_slot: bundle.state === 'landed' ? bundle.landedSlot : null };
      }),
    };
  }

  /**
   * getBundleStatuses: only bundles that landed within the recent-status window, each with its own bundle_id (unknown
   * and not-yet-landed ids are left out, as QuickNode's sample shows), commitment from the chain's status cache.
   */
  bundleStatuses(bundleIds: readonly string[]): {
    context: { slot: number };
    value: Array<{
      bundle_id: string;
      transactions: string[];
      slot: number;
      confirmation_status: string;
      err: { Ok: null };
    }>;
  } {
    const oldest = this.cluster.slotAt('finalized') - this.statusLookbackSlots;
    const value = [];
    for (const id of bundleIds) {
      const bundle = this.bundles.get(id);
      if (!bundle || bundle.state !== 'landed' || bundle.landedSlot === null || bundle.landedSlot < oldest)
        continue;
      const status = this.cluster.signatureStatus(bundle.signatures[0] as string);
      if (!status) continue;
      value.push({
        bundle_id: id,
        transactions: [...bundle.signatures],
        slot: bundle.landedSlot,
        confirmation_status: status.confirmationStatus,
        err: { Ok: null } as { Ok: null },
      });
    }
    return { context: { slot: this.cluster.slot }, value };
  }

  // ---- leaders ----

  /**
   * First slot after the current one led by a bundle-engine validator connected to one of `regions` (null: any
   * region), searching `horizon` slots.
   */
  nextScheduledLeader(
    regions: readonly string[] | null = null,
    horizon = 4096,
  ): {
    currentSlot: number;
    nextLeaderSlot: number;
    nextLeaderIdentity: string;
    nextLeaderRegion: string;
  } | null {
    const current = this.clockSlot();
    for (let slot = current + 1; slot <= current + horizon; slot++) {
      const leader = this.cluster.leaderAt(slot);
      if (!leader) break;
      const region = leader.bundleEngine ? this.regionOf(leader.identity) : null;
      if (region !== null && (regions === null || regions.includes(region))) {
        return {
          currentSlot: current,
          nextLeaderSlot: slot,
          nextLeaderIdentity: leader.identity,
          nextLeaderRegion: region,
        };
      }
    }
    return null;
  }

  /**
   * Bundle-engine validators connected to `region` (null: every region) and their upcoming leader slots (absolute),
   * over the next `horizon` slots.
   */
  connectedLeaders(region: string | null = null, horizon = 4096): Record<string, { slots: number[] }> {
    const out: Record<string, { slots: number[] }> = {};
    for (const [identity, connectedTo] of this.validatorRegions) {
      if (region === null || connectedTo === region) out[identity] = { slots: [] };
    }
    const current = this.clockSlot();
    for (let slot = current + 1; slot <= current + horizon; slot++) {
      const leader = this.cluster.leaderAt(slot);
      if (!leader) break;
      out[leader.identity]?.slots.push(slot);
    }
    return out;
  }

  // ---- tip floor ----

  /** The tip-floor REST answer; frozen with an old `time` while the `staleTipFloor` fault is on. */
  tipFloorEntries(): JitoTipFloorEntry[] {
    if (this.faults.current.staleTipFloor) {
      this.faults.count('staleTipFloorServed');
      this.frozenTipFloor ??= toJitoTipFloor(this.tipFloor.snapshot(), this.now() - this.staleTipFloorAgeMs);
      return this.frozenTipFloor;
    }
    this.frozenTipFloor = null;
    return toJitoTipFloor(this.tipFloor.snapshot());
  }

  /** Summary for /admin/state. */
  state(): {
    slot: number;
    leader: LeaderInfo | null;
    /** The current leader's region (null when it runs no bundle engine). */
    leaderRegion: string | null;
    /** Each regional engine and how many bundle-engine validators are connected to it. */
    regions: Array<{ region: string; connectedValidators: number }>;
    regime: Regime;
    pinnedRegime: Regime | null;
    /**
     * What a 201,400-CU bundle must tip: the pinned clearing tip(s) (the per-CU one priced over that bundle), else
     * the slot's summary: that bundle at the lowest contended winning rank.
     */
    clearingTip: number;
    fixedClearingTip: number | null;
    /** The pinned clearing tip per requested CU (lamports per CU), null when none is pinned. */
    fixedClearingTipPerCu: number | null;
    /** The current slot's auction with only the background: ticks and lowest winning tip per CU. */
    auction: {
      ticks: number;
      bundleBlockUnits: number;
      lowestWinningTipPerCu: { contended: number | null; uncontended: number | null };
    } | null;
    nextBundleEngineLeaderSlot: number | null;
    tipFloorLamports: ReturnType<TipFloor['snapshot']>['lamports'];
    pendingBundles: Array<{
      bundleId: string;
      tipLamports: number;
      region: string;
      window: TrackedBundle['window'];
    }>;
    bundlesTracked: number;
  } {
    const slot = this.cluster.slot;
    const leader = this.cluster.leaderAt(slot);
    const counts = new Map(this.regions.map((region) => [region, 0]));
    for (const region of this.validatorRegions.values()) counts.set(region, (counts.get(region) ?? 0) + 1);
    return {
      slot,
      leader,
      leaderRegion: leader ? this.regionOf(leader.identity) : null,
      regions: [...counts].map(([region, connectedValidators]) => ({ region, connectedValidators })),
      regime: this.auction.regime,
      pinnedRegime: this.auction.pinnedRegimeValue,
      clearingTip: this.auction.clearingTip(slot),
      fixedClearingTip: this.auction.fixedClearingTipValue,
      fixedClearingTipPerCu: this.auction.fixedClearingTipPerCuValue,
      auction: summarize(this.auction.slot(slot)),
      nextBundleEngineLeaderSlot: this.nextScheduledLeader()?.nextLeaderSlot ?? null,
      tipFloorLamports: this.tipFloor.snapshot().lamports,
      pendingBundles: this.pendingBundles().map((b) => ({
        bundleId: b.bundleId,
        tipLamports: b.tipLamports,
        region: b.region,
        window: b.window,
      })),
      bundlesTracked: this.bundles.size,
    };
  }

  // ---- BundleSource: the chain asks while producing a bundle-engine leader's block ----

  /**
   * The slot's auctions (`auction-model.ts`): the pending bundles of this window and the slot's background bids each
   * enter at the tick they arrived in and compete at every tick from there; a bundle included at a tick is handed to
   * the leader, one that is not keeps competing at the next tick and slot of its window.
   */
  bundlesForSlot(ctx: BlockContext): BundleCandidate[] {
    const eligible: TrackedBundle[] = [];
    for (const bundle of this.bundles.values()) {
      if (bundle.state !== 'pending' || !bundle.window) continue;
      if (ctx.slot < bundle.window.firstSlot || ctx.slot > bundle.window.lastSlot) continue;
      if (this.now() < bundle.arrivesAtMs) {
        // Still being forwarded from the region it was sent to.
        bundle.missedByForwarding = true;
        continue;
      }
      // The engine simulates before forwarding: a bundle whose blockhash died is dropped, not forwarded.
      if (bundle.blockhashes.some((hash) => !this.cluster.isBlockhashValid(hash))) {
        this.fail(bundle, 'blockhash_expired', { dropped: { reason: DroppedReason.BlockhashExpired } });
        continue;
      }
      if (this.failsOnLaggingBank(bundle, ctx.slot)) continue;
      bundle.lastCompetedSlot = ctx.slot;
      if (bundle.faultDropped) {
        // Forwarded, then lost by the leader: accepted once, never included.
        if (bundle.acceptedSlots.length === 0) this.accept(bundle, ctx);
        continue;
      }
      eligible.push(bundle);
    }
    const byId = new Map(eligible.map((bundle) => [bundle.bundleId, bundle]));
    const slotStartMs = this.slotStartMs();
    const realBids: Bid[] = eligible.map((bundle) => ({
      id: bundle.bundleId,
      kind: 'real',
      tipLamports: bundle.tipLamports,
      computeUnits: bundle.computeUnits,
      writeLocks: [...new Set(bundle.transactions.flatMap((tx) => tx.writableStaticKeys))],
      readLocks: [...new Set(bundle.transactions.flatMap((tx) => tx.readonlyStaticKeys))],
      arrivalMs: bundle.arrivesAtMs - slotStartMs,
      ...(this.bundleLifetime === 'auction' ? { oneTick: true } : {}),
    }));
    const resolution = resolveSlot(
      [...realBids, ...this.auction.backgroundBids(ctx.slot).flat()],
      this.auction.ticksPerSlot,
      this.auction.budget(ctx.slot),
      { ...this.auction.rules, maxReal: this.maxBundlesPerSlot },
    );
    const included: TrackedBundle[] = [];
    const background: number[] = [];
    for (const { bid } of resolution.included) {
      const bundle = byId.get(bid.id);
      if (bundle) included.push(bundle);
      else background.push(bid.tipLamports);
    }
    this.backgroundLanded.set(ctx.slot, background);
    for (const bundle of eligible) {
      const loss = resolution.lost.get(bundle.bundleId);
      if (loss && !included.includes(bundle)) bundle.lastLoss = { ...loss, slot: ctx.slot };
    }
    for (const bundle of included) {
      bundle.offeredSlot = ctx.slot;
      this.accept(bundle, ctx);
    }
    return included.map((bundle) => ({
      bundleId: bundle.bundleId,
      transactions: bundle.transactions.map((tx) => tx.wire),
    }));
  }

  /**
   * The compute-unit prices the slot's background traffic paid, for the block's prioritization-fee entry (Agave
   * `runtime/src/prioritization_fee_cache.rs`: per slot the lowest price of any transaction, and per writable
   * account the lowest of the transactions write-locking it; `getRecentPrioritizationFees` answers the higher of the
   * block's and each asked account's). Assumptions of this model: the background always includes transactions
   * paying no priority fee, so the block's lowest is 0; every background transaction writing a hot account in a slot
   * paid at least what the cheapest background bundle that won that account's write lock paid per requested CU
   * (lamports per CU × 10^6 micro-lamports: one price of write access per account and slot, in either currency;
   * Jito's own guidance splits sendTransaction spend 70/30 between priority fee and tip, the same order). A hot
   * account no background bundle won in the slot gets no entry (the block's 0), nor does any other account: only
   * contended accounts carry a price. Real transactions' prices join through the chain's own records.
   */
  backgroundPrioritizationFees(slot: number): PrioritizationFeeEntry | null {
    if (!this.modelPrioritizationFees) return null;
    const auction = this.auction.slot(slot);
    if (!auction) return null;
    const writable = new Map<string, number>();
    for (const [account, perCu] of auction.hotAccountPricePerCu)
      writable.set(account, Math.round(perCu * MICRO_LAMPORTS_PER_LAMPORT));
    return { min: 0, writable };
  }

  onBundleResults(ctx: BlockContext, results: BundleExecution[]): void {
    results.forEach((result, bundleIndex) => {
      const bundle = this.bundles.get(result.bundleId);
      if (!bundle || bundle.state !== 'pending') return;
      bundle.offeredSlot = null;
      if (result.landed) {
        bundle.state = 'landed';
        bundle.landedSlot = result.slot;
        this.realLandedTips.push(bundle.tipLamports);
        this.emitResult(bundle, {
          bundleId: bundle.bundleId,
          processed: { validatorIdentity: ctx.leader.identity, slot: result.slot, bundleIndex },
        });
        return;
      }
      const failedSignature = result.signatures[result.failedIndex] ?? bundle.signatures[0] ?? '';
      if (errorName(result.err) === 'BlockhashNotFound') {
        this.fail(bundle, 'blockhash_expired', { dropped: { reason: DroppedReason.BlockhashExpired } });
      } else if (errorName(result.err) === 'AlreadyProcessed') {
        this.fail(bundle, 'partially_processed', { dropped: { reason: DroppedReason.PartiallyProcessed } });
      } else {
        this.fail(bundle, 'simulation_failure', {
          rejected: {
            simulationFailure: {
              txSignature: failedSignature,
              msg: `transaction ${failedSignature} failed: ${JSON.stringify(result.err)}`,
            },
          },
        });
      }
    });
  }

  // ---- internals ----

  /**
   * The `engineBankLagSlots` fault: the engine simulates on a bank that many slots behind the cluster, where a fee
   * payer created since does not exist yet. Such a bundle fails its simulation with AccountNotFound (the error
   * Agave's bank gives a fee payer it cannot load), reported as a gRPC `simulationFailure` naming that transaction.
   */
  private failsOnLaggingBank(bundle: TrackedBundle, slot: number): boolean {
    const lag = this.faults.current.engineBankLagSlots;
    if (lag <= 0 || !this.cluster.createdAtSlot) return false;
    const index = bundle.transactions.findIndex((tx) => {
      const payer = tx.signers[0];
      const created = payer === undefined ? null : (this.cluster.createdAtSlot?.(payer) ?? null);
      return created !== null && created > slot - lag;
    });
    if (index < 0) return false;
    const signature = bundle.signatures[index] ?? '';
    this.faults.count('engineBankLagFailures');
    this.fail(bundle, 'simulation_failure', {
      rejected: {
        simulationFailure: {
          txSignature: signature,
          msg: `transaction ${signature} failed: "AccountNotFound"`,
        },
      },
    });
    return true;
  }

  /**
   * When the slot being produced started, on the engine's clock: a running clock produces a slot's block at its
   * end, so `slotMs` ago. A manual clock has no time inside a slot: it started now, and every bundle that has
   * arrived came before it (tick 0, ordered by when each arrived).
   */
  private slotStartMs(): number {
    const clock = this.cluster as Cluster & { running?: boolean };
    return this.now() - (clock.running === true ? this.slotMs : 0);
  }

  /** The slot the clock is at (SimCluster's `currentSlot` counts skipped slots; the interface's `slot` does not). */
  private clockSlot(): number {
    const withClock = this.cluster as Cluster & { currentSlot?: number };
    return typeof withClock.currentSlot === 'number'
      ? Math.max(withClock.currentSlot, this.cluster.slot)
      : this.cluster.slot;
  }

  private findWindow(slot: number): TrackedBundle['window'] {
    for (let candidate = slot + 1; candidate <= slot + this.leaderLookaheadSlots; candidate++) {
      const leader = this.cluster.leaderAt(candidate);
      if (!leader?.bundleEngine) continue;
      let lastSlot = candidate;
      while (this.cluster.leaderAt(lastSlot + 1)?.identity === leader.identity && lastSlot - candidate < 3)
        lastSlot++;
      return { firstSlot: candidate, lastSlot, leader };
    }
    return null;
  }

  private accept(bundle: TrackedBundle, ctx: BlockContext): void {
    bundle.acceptedSlots.push(ctx.slot);
    this.emitResult(bundle, {
      bundleId: bundle.bundleId,
      accepted: { slot: ctx.slot, validatorIdentity: ctx.leader.identity },
    });
  }

  private fail(bundle: TrackedBundle, failure: BundleFailure, result: Omit<BundleResult, 'bundleId'>): void {
    if (bundle.state === 'failed') return;
    bundle.state = 'failed';
    bundle.failure = failure;
    this.emitResult(bundle, { bundleId: bundle.bundleId, ...result });
  }

  /** Results go out on the stream of the region the bundle was sent to. */
  private emitResult(bundle: TrackedBundle, result: BundleResult): void {
    this.emit('result', result, bundle.region);
  }

  private handleSlot(event: SlotEvent): void {
    if (event.status === 'processed') this.onProcessed(event.slot);
    else if (event.status === 'finalized') this.onFinalized(event.slot);
    else if (event.status === 'dead') this.onDead(event.slot);
  }

  private onProcessed(slot: number): void {
    const auction = this.auction.slot(slot);
    const leader = this.cluster.leaderAt(slot);
    if (auction && leader?.bundleEngine) {
      // What landed: the background winners of the auction the engine ran for this slot (or, when no block asked,
      // of the background alone) and the real bundles the chain reported.
      const background = this.backgroundLanded.get(slot) ?? auction.competitorLandedTips;
      this.tipFloor.record(slot, [...background, ...this.realLandedTips]);
      this.realLandedTips = [];
    }
    for (const key of this.backgroundLanded.keys()) if (key <= slot) this.backgroundLanded.delete(key);

    for (const bundle of this.bundles.values()) {
      // A bundle offered to this slot's leader waits for the execution report, which follows this event.
      if (bundle.state !== 'pending' || !bundle.window || bundle.offeredSlot !== null) continue;
      const { lastSlot } = bundle.window;
      const hadLastChance =
        slot >= lastSlot && bundle.lastCompetedSlot !== null && bundle.lastCompetedSlot >= lastSlot;
      // One auction: a bundle that competed in this slot and was not offered to the leader lost it, and is dropped.
      const lostItsAuction =
        this.bundleLifetime === 'auction' && !bundle.faultDropped && bundle.lastCompetedSlot === slot;
      if (!hadLastChance && !lostItsAuction && slot <= lastSlot) continue;
      if (bundle.lastCompetedSlot === null && bundle.missedByForwarding && !bundle.faultDropped) {
        // It reached the leader after that leader's slots: forwarded on to the next bundle-engine leader.
        const next = this.findWindow(slot);
        if (next) {
          bundle.window = next;
          bundle.missedByForwarding = false;
          continue;
        }
        this.fail(bundle, 'no_leader', { rejected: { droppedBundle: { msg: NO_LEADER_MESSAGE } } });
        continue;
      }
      if (bundle.faultDropped || bundle.blockhashes.some((hash) => !this.cluster.isBlockhashValid(hash))) {
        this.fail(bundle, bundle.faultDropped ? 'dropped' : 'blockhash_expired', {
          dropped: { reason: DroppedReason.BlockhashExpired },
        });
        continue;
      }
      this.fail(bundle, 'auction_lost', {
        rejected: {
          stateAuctionBidRejected: {
            auctionId: `simnet-${bundle.window.firstSlot}-${lastSlot}`,
            simulatedBidLamports: bundle.tipLamports,
            msg: lossMessage(bundle, `${bundle.window.firstSlot}-${lastSlot}`, {
              lamports: this.auction.fixedClearingTipValue,
              perCu: this.auction.fixedClearingTipPerCuValue,
            }),
          },
        },
      });
    }
    this.prune();
  }

  private onFinalized(slot: number): void {
    for (const bundle of this.bundles.values()) {
      if (
        bundle.state === 'landed' &&
        !bundle.finalized &&
        bundle.landedSlot !== null &&
        bundle.landedSlot <= slot
      ) {
        bundle.finalized = true;
        this.emitResult(bundle, { bundleId: bundle.bundleId, finalized: {} });
      }
    }
  }

  private onDead(slot: number): void {
    for (const bundle of this.bundles.values()) {
      if (bundle.state === 'landed' && bundle.landedSlot === slot) {
        bundle.state = 'failed';
        bundle.failure = 'slot_dead';
        bundle.landedSlot = null;
        this.emitResult(bundle, {
          bundleId: bundle.bundleId,
          dropped: { reason: DroppedReason.NotFinalized },
        });
      }
    }
  }

  private prune(): void {
    const cutoff = this.now() - this.inflightLookbackMs;
    const oldestLanded = this.cluster.slotAt('finalized') - this.statusLookbackSlots;
    for (const [id, bundle] of this.bundles) {
      const inflightVisible = bundle.receivedMs >= cutoff;
      const statusVisible = bundle.state === 'landed' && (bundle.landedSlot ?? -1) >= oldestLanded;
      const unfinished = bundle.state === 'pending' || (bundle.state === 'landed' && !bundle.finalized);
      if (!inflightVisible && !statusVisible && !unfinished) this.bundles.delete(id);
    }
  }
}

const perCu = (value: number) => (value >= 1 ? value.toFixed(2) : value.toPrecision(3));

/** The loss text: the bid, its rank, and what beat it at its last tick. */
function lossMessage(
  bundle: TrackedBundle,
  slots: string,
  pinned: { lamports: number | null; perCu: number | null },
): string {
  const rank = tipPerCu(bundle);
  const bid = `bundle bid of ${bundle.tipLamports} lamports (${perCu(rank)} lamports per requested CU over ${bundle.computeUnits} CU) lost the auction for slots ${slots}`;
  const loss = bundle.lastLoss;
  if (!loss) return bid;
  if (loss.reason === 'pinned') {
    const pins = [
      pinned.lamports === null ? null : `${pinned.lamports} lamports`,
      pinned.perCu === null
        ? null
        : `${perCu(pinned.perCu)} lamports per CU (${pinnedTipFor(pinned.perCu, bundle.computeUnits)} lamports over ${bundle.computeUnits} CU)`,
    ].filter((pin) => pin !== null);
    return `${bid} (clearing tip ${pins.length === 0 ? 'pinned at the time' : pins.join(' and ')})`;
  }
  const winner = loss.winner
    ? `: the winning bid paid ${perCu(tipPerCu(loss.winner))} lamports per CU (${loss.winner.tipLamports} lamports over ${loss.winner.computeUnits} CU)`
    : '';
  return loss.reason === 'block_full'
    ? `${bid}: block space ran out at slot ${loss.slot} tick ${loss.tick}${winner}`
    : `${bid}: outbid on ${loss.account} at slot ${loss.slot} tick ${loss.tick}${winner}`;
}

function summarize(auction: SlotAuction | null) {
  if (!auction) return null;
  return {
    ticks: auction.ticks,
    bundleBlockUnits: auction.bundleBlockUnits,
    lowestWinningTipPerCu: auction.lowestWinningTipPerCu,
  };
}

function errorName(err: TransactionErrorJson): string {
  return typeof err === 'string' ? err : (Object.keys(err)[0] ?? '');
}
