import bs58 from 'bs58';
import type { Rng } from '../rng';
import { MAINNET_TIP_ACCOUNTS } from '../tip-accounts';
import {
  AUCTION_TICK_MS,
  DEFAULT_BLOCK_LIMITS,
  MAX_COMPUTE_UNIT_LIMIT,
  SlotBudget,
  pinnedTipFor,
  resolveSlot,
  ticksPerSlot,
  tipPerCu,
  type AuctionRules,
  type Bid,
  type BlockLimits,
} from './auction-model';

export type Regime = 'calm' | 'busy' | 'spike';
export const REGIMES: readonly Regime[] = ['calm', 'busy', 'spike'];

/** Jito's minimum tip; no clearing tip or synthetic bid goes below it. */
export const MIN_TIP_LAMPORTS = 1_000;

/**
 * Tip quantiles (lamports) the synthetic background bids are drawn from (they are bids, not the clearing price: what
 * lands is decided by the auction), a blend of the public tip-floor snapshots in agent-sdk.md §4 (Jito docs 2024-09,
 * QuickNode 2025-04, a 2026 fixture): p25 ≈ 5k, p50 = 10k (the wallet/bot
 * default), p75 ≈ 36k, then the heavy MEV tail (p95 ≈ 1.4M, p99 ≈ 8M). Between points the quantile function is
 * log-linear, so the tail stays heavy.
 */
export const TIP_QUANTILES: ReadonlyArray<readonly [number, number]> = [
  [0, MIN_TIP_LAMPORTS],
  [0.25, 5_000],
  [0.5, 10_000],
  [0.75, 36_000],
  [0.95, 1_400_000],
  [0.99, 8_000_000],
  [1, 20_000_000],
];

/** Lamports at quantile q of {@link TIP_QUANTILES}, log-linear between the points. */
export function tipQuantile(q: number): number {
  const clamped = Math.min(1, Math.max(0, q));
  for (let i = 1; i < TIP_QUANTILES.length; i++) {
    const [q1, v1] = TIP_QUANTILES[i] as readonly [number, number];
    if (clamped <= q1) {
      const [q0, v0] = TIP_QUANTILES[i - 1] as readonly [number, number];
      const t = q1 === q0 ? 0 : (clamped - q0) / (q1 - q0);
      return Math.exp(Math.log(v0) + t * (Math.log(v1) - Math.log(v0)));
    }
  }
  return TIP_QUANTILES[TIP_QUANTILES.length - 1]?.[1] ?? MIN_TIP_LAMPORTS;
}

export interface RegimeParams {
  /** Scales every background tip of the regime. */
  multiplier: number;
  /**
   * Background bundles on hot accounts arriving per 50 ms tick (Poisson mean; a slot's total is the sum over its
   * ticks, each bundle's arrival time uniform over the slot), spread over the hot accounts by popularity.
   */
  hotBundlesPerTick: number;
  /** Background bundles on accounts nobody else touches arriving per tick (Poisson mean, spread likewise). */
  plainBundlesPerTick: number;
  /** Share of the block's CU taken by non-bundle transactions, drawn per slot uniformly in [min, max]. */
  nonBundleLoad: readonly [number, number];
  /**
   * Share of the most popular hot account's 12M write-CU limit taken by non-bundle transactions (swaps sent with
   * priority fees); account i gets this × (popularity_i / popularity_0)^0.2.
   */
  hotAccountLoad: number;
  /** Log-normal spread (sigma) of the per-slot "heat" that scales the hot bids of a whole slot together. */
  heatSigma: number;
  /** Probability of moving to each regime at the next slot (a Markov chain; rows sum to 1). */
  transitions: Readonly<Record<Regime, number>>;
}

/**
 * Calibration, measured (seed 7, 400 ms slots = 8 ticks, 120 windows of 4 slots; test/engine-auction.test.ts checks
 * the bands): a reference swap bundle (201,400 CU: a 200k swap plus its tip) bidding 10,000 lamports (0.05 per CU),
 * there before the window starts, on the most popular hot account lands within its window in ≈ 63 % of calm, 12 %
 * of busy and 2.5 % of spike windows; on the 2nd most popular in ≈ 99 % / 67 % / 33 %, from the 10th on in all of
 * them; on a pool picked by popularity in ≈ 88 % / 71 % / 61 %. These rates are lower than the anchors the
 * parameters below were first set to (93 % / 47 % / 22 % on the top pool, after the earlier toy model's ≈ 0.95 /
 * 0.53 / 0.18 per window) because background bids now stay in the auction from their arrival until included or the
 * slot ends instead of one tick (the parameters, and the arrivals per slot, are unchanged; on the top pool the
 * within-tick exclusion changes nothing, its write-CU limit already let about one swap in per tick). A
 * 1,000-lamport bundle that contends with nobody lands in every calm and busy window. The background's landed tips
 * read, over 600 slots: calm p25/p50/p75/p95/p99 ≈ 4k / 10k / 32k / 1.4M / 8.9M (close to the snapshots), busy ≈
 * 2x, spike ≈ 4-5x (see the simnet README for before/after). These numbers were set by the parameters below, not
 * fitted to relay's results. Mean stay: calm ≈ 200 slots (80 s at 400 ms), busy ≈ 67, spike ≈ 25.
 *
 * Those figures are the `'light'` compute profile's. The default `'mainnet'` profile draws every background
 * bundle's requested CU from 150k–1.4M (mean ≈ 559,600) and scales the arrival rates below so the CU asked of the
 * block and of each hot account stays the same ({@link COMPUTE_DEMAND_SCALE}); the tip table is unchanged, so the
 * tip floor is too. Measured then (seed 7, 120 windows, test/engine-auction.test.ts): a 10,000-lamport swap of the
 * mean requested CU (561,000 with its tip transaction) on the most popular hot account lands in ≈ 97 % of calm,
 * 57 % of busy and 28 % of spike windows; the same tip over 201,400 CU in ≈ 100 % / 98 % / 88 %. The lamports of
 * the snapshots now buy less per CU, so a light bundle ranks higher than it did: a consequence of the profile, not
 * a retuning.
 */
export const DEFAULT_REGIMES: Readonly<Record<Regime, RegimeParams>> = {
  calm: {
    multiplier: 1,
    hotBundlesPerTick: 14,
    plainBundlesPerTick: 4,
    nonBundleLoad: [0.2, 0.4],
    hotAccountLoad: 0.88,
    heatSigma: 0.6,
    transitions: { calm: 0.995, busy: 0.004, spike: 0.001 },
  },
  busy: {
    multiplier: 1.5,
    hotBundlesPerTick: 24,
    plainBundlesPerTick: 6,
    nonBundleLoad: [0.35, 0.55],
    hotAccountLoad: 0.9,
    heatSigma: 0.6,
    transitions: { calm: 0.01, busy: 0.985, spike: 0.005 },
  },
  spike: {
    multiplier: 3,
    hotBundlesPerTick: 24,
    plainBundlesPerTick: 8,
    nonBundleLoad: [0.4, 0.6],
    hotAccountLoad: 0.88,
    heatSigma: 0.6,
    transitions: { calm: 0.01, busy: 0.03, spike: 0.96 },
  },
};

/** Hot accounts (AMM-pool-like) of the background flow. */
export const DEFAULT_HOT_ACCOUNTS = 20;
/** Requested CU of the reference bundle that `clearingTip` prices: a 200k-CU swap plus a 1,400-CU tip transaction. */
export const REFERENCE_BUNDLE_CU = 201_400;

export interface BackgroundBid extends Bid {
  kind: 'background';
  /** Ms after the slot's start it reached the engine (uniform over the slot's ticks). */
  arrivalMs: number;
  /** The hot account it writes, or null for an uncontended bundle. */
  hot: string | null;
}

export interface SlotAuction {
  slot: number;
  regime: Regime;
  /** Auction ticks in the slot (one per 50 ms). */
  ticks: number;
  /** CU the slot leaves for bundles after non-bundle transactions. */
  bundleBlockUnits: number;
  /** Write CU non-bundle transactions took on each hot account (one shared map per regime). */
  hotAccountUnits: ReadonlyMap<string, number>;
  /**
   * Lowest tip per requested CU that won a tick when only the background competed, over contended auctions (hot
   * accounts) and uncontended ones; null when none won.
   */
  lowestWinningTipPerCu: { contended: number | null; uncontended: number | null };
  /**
   * `lowestWinningTipPerCu.contended` priced for a {@link REFERENCE_BUNDLE_CU}-CU bundle, lamports (at least the
   * minimum tip): what a typical swap on a hot account needed at the slot's easiest tick. A summary, not a rule.
   */
  drawnClearingTip: number;
  /** Tips of the background bundles that won with only the background competing (the engine records what landed). */
  competitorLandedTips: number[];
  /**
   * Per hot account, the lowest tip per requested CU (lamports) among the background bundles that won a write lock
   * on it in the slot (background alone); absent when none did. What write access to that account cost in the
   * slot: the engine turns it into the account's prioritization fee (`BlockEngine.backgroundPrioritizationFees`).
   */
  hotAccountPricePerCu: ReadonlyMap<string, number>;
}

export interface AuctionOptions {
  startRegime?: Regime;
  regimes?: Partial<Record<Regime, RegimeParams>>;
  /** How many generated slots' summaries to remember. */
  retainSlots?: number;
  /** Slot length, for the number of 50 ms ticks (default 400). */
  slotMs?: number;
  /** Number of hot accounts (default 20). */
  hotAccounts?: number;
  /**
   * State-contended accounts: within one tick a bundle writing one that a higher-ranked included bundle writes is
   * excluded (`auction-model.ts`). Default: the hot accounts.
   */
  contendedAccounts?: readonly string[];
  tipAccounts?: readonly string[];
  /** CU per block (default 60M, Agave's SIMD-0256 limit; SIMD-0286 proposes 100M). */
  blockUnits?: number;
  /** CU per writable account per block (default 12M, Agave's MAX_WRITABLE_ACCOUNT_UNITS; SIMD-0306: 40 % of the block). */
  accountUnits?: number;
  /**
   * Requested CU of the background's bundles: `'mainnet'` (default) draws each from {@link drawMainnetComputeUnits}
   * (150k–1.4M); `'light'` is the earlier model's 100k–400k swaps and 1k–300k plain bundles.
   */
  computeProfile?: ComputeProfile;
}

export type ComputeProfile = 'mainnet' | 'light';

/** Lowest requested CU of a mainnet-profile transaction: a swap that sets a tight SetComputeUnitLimit. */
export const MAINNET_MIN_REQUESTED_CU = 150_000;

/** Mean of {@link drawMainnetComputeUnits}: (1.4M − 150k) / ln(1.4M / 150k) ≈ 559,600. */
export const MAINNET_MEAN_REQUESTED_CU =
  (MAX_COMPUTE_UNIT_LIMIT - MAINNET_MIN_REQUESTED_CU) /
  Math.log(MAX_COMPUTE_UNIT_LIMIT / MAINNET_MIN_REQUESTED_CU);

/**
 * The regimes' arrival rates were set with the light profile (hot bundles 100k–400k + 1,400 CU, mean 251,400;
 * plain ones 1k–300k, mean 150,500). The mainnet profile scales them by (light mean / mainnet mean) so the
 * background asks the block and each hot account for the same compute as before: heavier bundles, fewer of them.
 * An assumption of this model (it keeps the block-space calibration; the tip table, and so the tip floor, are
 * unchanged).
 */
export const COMPUTE_DEMAND_SCALE = {
  hot: 251_400 / MAINNET_MEAN_REQUESTED_CU,
  plain: 150_500 / MAINNET_MEAN_REQUESTED_CU,
} as const;

/**
 * Requested compute units of one mainnet-profile transaction, log-uniform over 150k–1.4M. The range is issue 30's
 * reviewer's mainnet figure (not a published distribution); its top is Agave's MAX_COMPUTE_UNIT_LIMIT, which a
 * transaction of seven or more non-builtin instructions without SetComputeUnitLimit requests by default (200,000
 * each, capped). Log-uniform is this model's assumption: as many requests between 150k and 450k as between 450k and
 * 1.4M. For user-side transactions in tests and benchmarks as for the background market.
 */
export function drawMainnetComputeUnits(rng: Rng): number {
  const low = Math.log(MAINNET_MIN_REQUESTED_CU);
  const high = Math.log(MAX_COMPUTE_UNIT_LIMIT);
  return Math.round(Math.exp(low + rng.next() * (high - low)));
}

/**
 * Non-bundle traffic never takes more than this share of a hot account's write CU: Jito-Solana executes bundles
 * ahead of the scheduler's other transactions, so some of every account's budget stays reachable by a high bid.
 */
const MAX_HOT_ACCOUNT_PREFILL = 0.9;

/** How many slots keep their background bids (the engine needs the current ones). */
const RETAIN_BIDS_SLOTS = 64;

/**
 * The background market of each slot: a Markov regime, background bundles arriving over the slot's 50 ms ticks on
 * hot accounts (skewed popularity) and on uncontended accounts, and the block space non-bundle traffic leaves. Slots
 * are generated strictly in order from the first one asked for (the regime chain is one stream), each slot's market
 * from a random stream of its own: unpinned, forked by the slot number; pinned, by (regime, slots since the pin), so
 * a run that pins a regime meets the same draws at the same offset from the pin, whatever slot it pinned at. The
 * same seed always yields the same background, whoever asks and when. What lands is decided by the auction
 * (`auction-model.ts`) the engine runs with the real bundles; `slot()` also resolves the background alone for a
 * per-slot summary.
 */
export class Auction {
  /** The hot accounts, most popular first (base58 keys a scenario can write-lock to contend). */
  readonly hotAccounts: readonly string[];
  /** Popularity weights of {@link hotAccounts} (Zipf, s = 1), summing to 1. */
  readonly hotPopularity: readonly number[];
  readonly ticksPerSlot: number;
  /** Accounts whose second writer in a tick is excluded (default: the hot accounts). */
  readonly contendedAccounts: ReadonlySet<string>;
  private readonly regimeRng: Rng;
  /** Roots of the per-slot market streams: by slot number, and by (regime, offset) while pinned. */
  private readonly flowRoot: Rng;
  private readonly pinnedRoot: Rng;
  private readonly params: Record<Regime, RegimeParams>;
  private readonly retainSlots: number;
  private readonly tipAccounts: readonly string[];
  private readonly tipAccountSet: ReadonlySet<string>;
  private readonly slots = new Map<number, SlotAuction>();
  private readonly bids = new Map<number, BackgroundBid[][]>();
  private readonly hotLoads = new Map<Regime, ReadonlyMap<string, number>>();
  private nextSlot: number | null = null;
  /** Regime of the latest generated slot (pinned or not). */
  private currentRegime: Regime;
  /** Where the unpinned Markov chain is. */
  private chainRegime: Regime;
  private pinnedRegime: Regime | null = null;
  /** First slot generated under the current pin (null until one is generated). */
  private pinStart: number | null = null;
  private fixedClearingTip: number | null = null;
  private fixedClearingTipPerCu: number | null = null;
  /** The block's CU limits this market's auctions enforce. */
  readonly limits: Readonly<BlockLimits>;
  readonly computeProfile: ComputeProfile;

  constructor(rng: Rng, options: AuctionOptions = {}) {
    this.regimeRng = rng.fork('auction-regime');
    this.flowRoot = rng.fork('auction-flow');
    this.pinnedRoot = rng.fork('auction-pinned-flow');
    const hotRng = rng.fork('auction-hot-accounts');
    this.params = { ...DEFAULT_REGIMES, ...options.regimes };
    this.retainSlots = options.retainSlots ?? 4096;
    this.ticksPerSlot = ticksPerSlot(options.slotMs ?? 400);
    this.tipAccounts = options.tipAccounts ?? MAINNET_TIP_ACCOUNTS;
    this.tipAccountSet = new Set(this.tipAccounts);
    const count = options.hotAccounts ?? DEFAULT_HOT_ACCOUNTS;
    this.hotAccounts = Array.from({ length: count }, () =>
      bs58.encode(Uint8Array.from({ length: 32 }, () => hotRng.int(0, 255))),
    );
    const weights = this.hotAccounts.map((_, i) => 1 / (i + 1));
    const total = weights.reduce((a, b) => a + b, 0);
    this.hotPopularity = weights.map((w) => w / total);
    this.contendedAccounts = new Set(options.contendedAccounts ?? this.hotAccounts);
    this.currentRegime = this.chainRegime = options.startRegime ?? 'calm';
    this.limits = {
      blockUnits: positiveUnits('blockUnits', options.blockUnits ?? DEFAULT_BLOCK_LIMITS.blockUnits),
      accountUnits: positiveUnits('accountUnits', options.accountUnits ?? DEFAULT_BLOCK_LIMITS.accountUnits),
    };
    this.computeProfile = options.computeProfile ?? 'mainnet';
    if (this.computeProfile !== 'mainnet' && this.computeProfile !== 'light')
      throw new Error(`unknown computeProfile "${String(this.computeProfile)}"`);
  }

  /** Regime of the latest generated slot (or the pinned one). */
  get regime(): Regime {
    return this.pinnedRegime ?? this.currentRegime;
  }

  /**
   * Pin the regime for every slot generated from now on; null resumes the Markov chain. A pinned slot's market is a
   * function of (seed, regime, slots since the pin): the first slot generated under a new pin is offset 0. Pinning
   * the regime already pinned changes nothing (the offsets run on).
   */
  setRegime(regime: Regime | null): void {
    if (regime !== null && !REGIMES.includes(regime)) throw new Error(`unknown regime "${String(regime)}"`);
    if (regime === this.pinnedRegime) return;
    this.pinnedRegime = regime;
    this.pinStart = null;
  }

  /** The first slot generated under the current pin: the pinned market's offset 0 (null before one, or unpinned). */
  get pinnedFromSlot(): number | null {
    return this.pinnedRegime === null ? null : (this.pinStart ?? this.nextSlot);
  }

  get pinnedRegimeValue(): Regime | null {
    return this.pinnedRegime;
  }

  /**
   * Pin a clearing tip (lamports) until cleared with null: a competitor bidding that many lamports, at the same
   * requested CU as whatever it meets, sits in every auction, so any bundle (real or background, contended or not)
   * tipping less loses every tick, and one tipping at least that much competes as usual. Tests use it to make a bid
   * lose or win regardless of the background.
   */
  setFixedClearingTip(lamports: number | null): void {
    if (lamports !== null && (!Number.isFinite(lamports) || lamports < 0)) {
      throw new Error('fixed clearing tip must be a non-negative number of lamports');
    }
    this.fixedClearingTip = lamports === null ? null : Math.round(lamports);
  }

  get fixedClearingTipValue(): number | null {
    return this.fixedClearingTip;
  }

  /**
   * Pin a clearing tip per requested CU (lamports per CU, fractional) until cleared with null: a competitor at that
   * rank sits in every auction, so any bundle (real or background) tipping less than ceil(lamportsPerCu × its own
   * requested CU) loses every tick, and one tipping at least that competes as usual. Unlike the flat
   * {@link setFixedClearingTip}, a light bundle clears it with fewer lamports than a heavy one, as Jito ranks bids
   * by tip per requested CU. Both pins may be set; a bid then has to meet both.
   */
  setFixedClearingTipPerCu(lamportsPerCu: number | null): void {
    if (lamportsPerCu !== null && (!Number.isFinite(lamportsPerCu) || lamportsPerCu < 0)) {
      throw new Error('fixed clearing tip per CU must be a non-negative number of lamports per CU');
    }
    this.fixedClearingTipPerCu = lamportsPerCu;
  }

  get fixedClearingTipPerCuValue(): number | null {
    return this.fixedClearingTipPerCu;
  }

  /** The slot's summary, generating every slot up to it first. Null for slots older than the retained history. */
  slot(slot: number): SlotAuction | null {
    if (this.nextSlot === null) this.nextSlot = slot;
    while (this.nextSlot <= slot) this.generate(this.nextSlot++);
    return this.slots.get(slot) ?? null;
  }

  /**
   * Background bids of a recent slot by the tick they arrive at, each tick's in arrival order (generating the slot
   * first); empty when no longer retained. Each competes from its arrival tick until included or the slot ends.
   */
  backgroundBids(slot: number): BackgroundBid[][] {
    this.slot(slot);
    return this.bids.get(slot) ?? [];
  }

  /**
   * What a {@link REFERENCE_BUNDLE_CU}-CU bundle must tip: the pinned clearing tip, the per-CU pin priced over that
   * bundle, the higher of the two when both are set; else the slot's summary {@link SlotAuction.drawnClearingTip}.
   */
  clearingTip(slot: number): number {
    const perCu =
      this.fixedClearingTipPerCu === null
        ? null
        : pinnedTipFor(this.fixedClearingTipPerCu, REFERENCE_BUNDLE_CU);
    if (this.fixedClearingTip !== null || perCu !== null)
      return Math.max(this.fixedClearingTip ?? 0, perCu ?? 0);
    return this.slot(slot)?.drawnClearingTip ?? MIN_TIP_LAMPORTS;
  }

  /** A fresh CU budget for the slot (what non-bundle traffic leaves, spread over its ticks). */
  budget(slot: number): SlotBudget {
    const summary = this.slot(slot);
    return new SlotBudget(
      summary?.bundleBlockUnits ?? this.limits.blockUnits,
      this.ticksPerSlot,
      this.limits.accountUnits,
      summary?.hotAccountUnits,
    );
  }

  get tipAccountKeys(): ReadonlySet<string> {
    return this.tipAccountSet;
  }

  /** The rules every auction of this market applies: tip accounts ignored, contended accounts, the pinned tips. */
  get rules(): AuctionRules {
    return {
      ignored: this.tipAccountSet,
      contended: this.contendedAccounts,
      pinnedTip: this.fixedClearingTip,
      pinnedTipPerCu: this.fixedClearingTipPerCu,
    };
  }

  /** Most recent generated slots, oldest first (for /admin/state and determinism checks). */
  recent(count: number): SlotAuction[] {
    if (this.nextSlot === null) return [];
    const out: SlotAuction[] = [];
    for (let s = Math.max(0, this.nextSlot - count); s < this.nextSlot; s++) {
      const entry = this.slots.get(s);
      if (entry) out.push(entry);
    }
    return out;
  }

  private generate(slot: number): void {
    // The Markov chain always runs underneath a pin, so pinning for a while does not change the later path.
    const roll = this.regimeRng.next();
    if (this.slots.size > 0) {
      const row = this.params[this.chainRegime].transitions;
      let acc = 0;
      for (const regime of REGIMES) {
        acc += row[regime];
        if (roll < acc) {
          this.chainRegime = regime;
          break;
        }
      }
    }
    this.currentRegime = this.pinnedRegime ?? this.chainRegime;
    const params = this.params[this.currentRegime];
    let market: Rng;
    if (this.pinnedRegime !== null) {
      this.pinStart ??= slot;
      market = this.pinnedRoot.fork(`${this.pinnedRegime}:${slot - this.pinStart}`);
    } else {
      market = this.flowRoot.fork(`slot:${slot}`);
    }
    const clearingRng = market.fork('clearing');
    const rng = market.fork('competitors');
    const [loadMin, loadMax] = params.nonBundleLoad;
    const load = loadMin + clearingRng.next() * (loadMax - loadMin);
    const heat = Math.exp(params.heatSigma * normal(clearingRng));
    const bundleBlockUnits = Math.round(this.limits.blockUnits * (1 - load));
    const hotAccountUnits = this.hotAccountLoad(this.currentRegime);

    // The slot's arrivals: as many as the per-tick rates give over its ticks, each at a uniform time in the slot.
    const span = this.ticksPerSlot * AUCTION_TICK_MS;
    let hot = 0;
    let plain = 0;
    // The mainnet profile keeps the background's CU demand: fewer, heavier bundles (see COMPUTE_DEMAND_SCALE).
    const scale = this.computeProfile === 'mainnet' ? COMPUTE_DEMAND_SCALE : { hot: 1, plain: 1 };
    for (let tick = 0; tick < this.ticksPerSlot; tick++) {
      hot += poisson(rng, params.hotBundlesPerTick * scale.hot);
      plain += poisson(rng, params.plainBundlesPerTick * scale.plain);
    }
    const bids: BackgroundBid[] = [];
    for (let i = 0; i < hot; i++) {
      const account = this.pickHot(rng.next());
      // A swap/arb plus its tip transaction, tipping from the heavy-tailed table, the slot's heat on top.
      const arrivalMs = rng.next() * span;
      bids.push(
        this.bid(
          slot,
          bids.length,
          arrivalMs,
          account,
          this.computeProfile === 'mainnet'
            ? drawMainnetComputeUnits(rng)
            : rng.int(100_000, 400_000) + 1_400,
          params.multiplier * heat,
          rng.next(),
        ),
      );
    }
    for (let i = 0; i < plain; i++) {
      // Mints and one-off swaps on quiet pools (light profile: also transfers), mostly wallet-default tips (the
      // lower table).
      const arrivalMs = rng.next() * span;
      bids.push(
        this.bid(
          slot,
          bids.length,
          arrivalMs,
          null,
          this.computeProfile === 'mainnet' ? drawMainnetComputeUnits(rng) : rng.int(1_000, 300_000),
          params.multiplier,
          rng.next() * 0.75,
        ),
      );
    }
    bids.sort((a, b) => a.arrivalMs - b.arrivalMs);
    const ticks: BackgroundBid[][] = Array.from({ length: this.ticksPerSlot }, () => []);
    for (const bid of bids)
      ticks[Math.min(this.ticksPerSlot - 1, Math.floor(bid.arrivalMs / AUCTION_TICK_MS))]?.push(bid);

    const resolution = resolveSlot(
      bids,
      this.ticksPerSlot,
      new SlotBudget(bundleBlockUnits, this.ticksPerSlot, this.limits.accountUnits, hotAccountUnits),
      this.rules,
    );
    const contended = resolution.lowestWinning.contended;
    const hotAccountPricePerCu = new Map<string, number>();
    for (const { bid } of resolution.included) {
      if (bid.hot === null) continue;
      const price = tipPerCu(bid);
      hotAccountPricePerCu.set(bid.hot, Math.min(price, hotAccountPricePerCu.get(bid.hot) ?? price));
    }
    this.slots.set(slot, {
      slot,
      regime: this.currentRegime,
      ticks: this.ticksPerSlot,
      bundleBlockUnits,
      hotAccountUnits,
      lowestWinningTipPerCu: resolution.lowestWinning,
      drawnClearingTip: Math.max(
        MIN_TIP_LAMPORTS,
        contended === null ? MIN_TIP_LAMPORTS : Math.round(contended * REFERENCE_BUNDLE_CU),
      ),
      competitorLandedTips: resolution.included.map((entry) => entry.bid.tipLamports),
      hotAccountPricePerCu,
    });
    this.bids.set(slot, ticks);
    this.bids.delete(slot - RETAIN_BIDS_SLOTS);
    this.slots.delete(slot - this.retainSlots);
  }

  private bid(
    slot: number,
    index: number,
    arrivalMs: number,
    hot: string | null,
    computeUnits: number,
    scale: number,
    quantile: number,
  ): BackgroundBid {
    const id = `bg-${slot}-${index}`;
    const tipAccount = this.tipAccounts[index % this.tipAccounts.length] as string;
    return {
      id,
      kind: 'background',
      arrivalMs,
      hot,
      tipLamports: Math.max(MIN_TIP_LAMPORTS, Math.round(scale * tipQuantile(quantile))),
      computeUnits,
      // Its own payer (a searcher or user of its own), the tip account, and the pool it trades on if any.
      writeLocks:
        hot === null ? [`${id}-payer`, `${id}-state`, tipAccount] : [`${id}-payer`, hot, tipAccount],
      readLocks: [],
    };
  }

  /** Write CU non-bundle traffic takes on each hot account in a regime (computed once per regime). */
  private hotAccountLoad(regime: Regime): ReadonlyMap<string, number> {
    let loads = this.hotLoads.get(regime);
    if (!loads) {
      const params = this.params[regime];
      const top = this.hotPopularity[0] as number;
      loads = new Map(
        this.hotAccounts.map((account, i) => [
          account,
          Math.round(
            Math.min(
              MAX_HOT_ACCOUNT_PREFILL,
              params.hotAccountLoad * ((this.hotPopularity[i] as number) / top) ** 0.2,
            ) * this.limits.accountUnits,
          ),
        ]),
      );
      this.hotLoads.set(regime, loads);
    }
    return loads;
  }

  private pickHot(u: number): string {
    let acc = 0;
    for (let i = 0; i < this.hotAccounts.length; i++) {
      acc += this.hotPopularity[i] as number;
      if (u < acc) return this.hotAccounts[i] as string;
    }
    return this.hotAccounts[this.hotAccounts.length - 1] as string;
  }
}

function positiveUnits(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0)
    throw new Error(`${name} must be a positive integer of compute units`);
  return value;
}

/** Standard normal draw (Box–Muller, one value). */
function normal(rng: Rng): number {
  return Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
}

/** Poisson draw (Knuth; means here are small). */
function poisson(rng: Rng, mean: number): number {
  if (mean <= 0) return 0;
  const limit = Math.exp(-mean);
  let k = 0;
  let p = rng.next();
  while (p > limit) {
    k++;
    p *= rng.next();
  }
  return k;
}
