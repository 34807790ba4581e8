import type { Rng } from '../rng';

export type Regime = 'calm' | 'busy' | 'spike';
export const REGIMES: readonly Regime[] = ['calm', 'busy', 'spike'];

/** Jito's minimum tip; no clearing tip or synthetic bid goes below it. */
export const MIN_TIP_LAMPORTS = 1_000;

/**
 * Landed-tip quantiles (lamports) the synthetic market is built on, a blend of the public tip-floor snapshots in
 * agent-sdk.md §4 (Jito docs 2024-09, QuickNode 2025-04, a 2026 fixture): p25 ≈ 5k, p50 = 10k (the wallet/bot
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
  /** Scales every clearing tip and synthetic bid of the regime. */
  multiplier: number;
  /** The clearing tip is Q(u × contention), u uniform: higher contention reaches further into the tail. */
  contention: number;
  /** Synthetic competing bundles bidding per slot: [min, max]. */
  competitors: readonly [number, number];
  /** Probability of moving to each regime at the next slot (a Markov chain; rows sum to 1). */
  transitions: Readonly<Record<Regime, number>>;
}

/**
 * Calibration: with these numbers a fixed 10,000-lamport bid clears about 83% of calm slots, 44% of busy ones and
 * 20% of spike slots, which over a few leader windows reproduces the landing rates of the toy run in agent-sdk.md §4
 * (≈0.95 / 0.53 / 0.18). Mean stay: calm ≈ 200 slots (80 s at 400 ms), busy ≈ 67, spike ≈ 25.
 */
export const DEFAULT_REGIMES: Readonly<Record<Regime, RegimeParams>> = {
  calm: {
    multiplier: 1,
    contention: 0.6,
    competitors: [2, 6],
    transitions: { calm: 0.995, busy: 0.004, spike: 0.001 },
  },
  busy: {
    multiplier: 1.5,
    contention: 0.8,
    competitors: [4, 10],
    transitions: { calm: 0.01, busy: 0.985, spike: 0.005 },
  },
  spike: {
    multiplier: 3,
    contention: 0.95,
    competitors: [6, 14],
    transitions: { calm: 0.01, busy: 0.03, spike: 0.96 },
  },
};

export interface SlotAuction {
  slot: number;
  regime: Regime;
  /** Lowest bid that wins this slot's auction (lamports), as drawn; see {@link Auction.clearingTip} for pins. */
  drawnClearingTip: number;
  /** Tips of the synthetic competing bundles that landed in this slot (they feed the tip floor). */
  competitorLandedTips: number[];
}

export interface AuctionOptions {
  startRegime?: Regime;
  regimes?: Partial<Record<Regime, RegimeParams>>;
  /** How many generated slots to remember. */
  retainSlots?: number;
}

/**
 * The sealed-bid auction of each slot: a Markov regime, a clearing tip drawn from the calibrated distribution, and
 * the bids of synthetic competitors. Slots are generated strictly in order from the first one asked for, each from
 * its own forked random streams, so the same seed always yields the same sequence, whoever asks and when.
 */
export class Auction {
  private readonly regimeRng: Rng;
  private readonly clearingRng: Rng;
  private readonly competitorRng: Rng;
  private readonly params: Record<Regime, RegimeParams>;
  private readonly retainSlots: number;
  private readonly slots = new Map<number, SlotAuction>();
  private nextSlot: number | null = null;
  /** Regime of the latest generated slot (pinned or not). */
  private currentRegime: Regime;
  /** Where the unpinned Markov chain is. */
  private chainRegime: Regime;
  private pinnedRegime: Regime | null = null;
  private fixedClearingTip: number | null = null;

  constructor(rng: Rng, options: AuctionOptions = {}) {
    this.regimeRng = rng.fork('auction-regime');
    this.clearingRng = rng.fork('auction-clearing');
    this.competitorRng = rng.fork('auction-competitors');
    this.params = { ...DEFAULT_REGIMES, ...options.regimes };
    this.retainSlots = options.retainSlots ?? 4096;
    this.currentRegime = this.chainRegime = options.startRegime ?? 'calm';
  }

  /** Regime of the latest generated slot (or the pinned one). */
  get regime(): Regime {
    return this.pinnedRegime ?? this.currentRegime;
  }

  /** Pin the regime for every slot generated from now on; null resumes the Markov chain. */
  setRegime(regime: Regime | null): void {
    if (regime !== null && !REGIMES.includes(regime)) throw new Error(`unknown regime "${String(regime)}"`);
    this.pinnedRegime = regime;
  }

  get pinnedRegimeValue(): Regime | null {
    return this.pinnedRegime;
  }

  /** Force every slot's clearing tip (lamports) until cleared with null, e.g. to make a test's bid lose. */
  setFixedClearingTip(lamports: number | null): void {
    if (lamports !== null && (!Number.isFinite(lamports) || lamports < 0)) {
      throw new Error('fixed clearing tip must be a non-negative number of lamports');
    }
    this.fixedClearingTip = lamports === null ? null : Math.round(lamports);
  }

  get fixedClearingTipValue(): number | null {
    return this.fixedClearingTip;
  }

  /** The slot's auction, generating every slot up to it first. Null for slots older than the retained history. */
  slot(slot: number): SlotAuction | null {
    if (this.nextSlot === null) this.nextSlot = slot;
    while (this.nextSlot <= slot) this.generate(this.nextSlot++);
    return this.slots.get(slot) ?? null;
  }

  /** The lowest winning bid of a slot: the pinned value if set, else the drawn one. */
  clearingTip(slot: number): number {
    return this.fixedClearingTip ?? this.slot(slot)?.drawnClearingTip ?? MIN_TIP_LAMPORTS;
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
    const clearing = Math.max(
      MIN_TIP_LAMPORTS,
      Math.round(params.multiplier * tipQuantile(this.clearingRng.next() * params.contention)),
    );
    const competitors = this.competitorRng.int(params.competitors[0], params.competitors[1]);
    // Competitors that win pay at least the clearing tip; many bid just enough (bots tip the floor), so the tips
    // bunch at the clearing price and the landed-tip percentiles land near the snapshots in calm (p50 ≈ 10k).
    // A pinned clearing tip binds the competitors too, so the published tip floor follows it as it would on mainnet.
    const floor = this.fixedClearingTip ?? clearing;
    const landed: number[] = [];
    for (let i = 0; i < competitors; i++) {
      landed.push(Math.max(floor, Math.round(params.multiplier * tipQuantile(this.competitorRng.next()))));
    }
    this.slots.set(slot, {
      slot,
      regime: this.currentRegime,
      drawnClearingTip: clearing,
      competitorLandedTips: landed,
    });
    this.slots.delete(slot - this.retainSlots);
  }
}
