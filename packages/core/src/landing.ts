import type { ContentionClass } from './pricing';

/**
 * What became of the bundles relay sent, by the regional block engine that took each one and by the contention class
 * its tip was priced for (issue 30: no peer publishes per-route landing figures). A bundle is counted once an engine
 * took it (an id back), once when it landed (confirmed: a processed block can still be orphaned) with the tip it
 * paid, or once when it ended without landing.
 */
export interface LandingStat {
  /** Bundles an engine took (an id back). */
  submitted: number;
  /** Bundles that landed, counted at `confirmed`. */
  landed: number;
  /** Bundles an engine took that ended without landing (lost the auction, dropped, expired, refused later). */
  lost: number;
  /** Tips of the landed bundles, lamports. */
  tips_paid_lamports: number;
  /** landed / (landed + lost): the share of settled bundles that landed; null while none settled. */
  landed_share: number | null;
  /** tips_paid_lamports / landed; null while none landed. */
  lamports_per_landed: number | null;
}

/** A bundle whose tip relay did not price per CU (a caller's own tip, `"tip":"included"`, older attempts). */
export const UNPRICED = 'unpriced';
/** A bundle whose engine is not known (an attempt built before relay recorded it, or adopted from such a host). */
export const UNKNOWN_REGION = 'unknown';

export type LandingContention = ContentionClass | typeof UNPRICED;

export interface RegionLanding extends LandingStat {
  region: string;
}

export interface ContentionLanding extends LandingStat {
  contention: LandingContention;
}

/** `GET /status`'s `landing`: since this sidecar started. */
export interface LandingView {
  by_region: RegionLanding[];
  by_contention: ContentionLanding[];
}

interface Counts {
  submitted: number;
  landed: number;
  lost: number;
  tips: number;
}

const zero = (): Counts => ({ submitted: 0, landed: 0, lost: 0, tips: 0 });

function stat(c: Counts): LandingStat {
  const settled = c.landed + c.lost;
  return {
    submitted: c.submitted,
    landed: c.landed,
    lost: c.lost,
    tips_paid_lamports: c.tips,
    landed_share: settled > 0 ? c.landed / settled : null,
    lamports_per_landed: c.landed > 0 ? Math.round(c.tips / c.landed) : null,
  };
}

/** The bundle a count is about: the engine that took it and the class its tip was priced for. */
export interface LandingRoute {
  /** The regional engine's name; null when not known. */
  region: string | null;
  /** The contention class its tip was priced for; null when not priced per CU. */
  contention: ContentionClass | null;
}

/**
 * Counts of {@link LandingStat} by region and by contention class. The caller says when a bundle was taken, landed
 * or lost, each once per bundle.
 */
export class LandingTally {
  private readonly regions = new Map<string, Counts>();
  private readonly classes = new Map<LandingContention, Counts>();

  submitted(route: LandingRoute): void {
    for (const c of this.countsOf(route)) c.submitted++;
  }

  landed(route: LandingRoute, tipLamports: number): void {
    for (const c of this.countsOf(route)) {
      c.landed++;
      c.tips += tipLamports;
    }
  }

  lost(route: LandingRoute): void {
    for (const c of this.countsOf(route)) c.lost++;
  }

  /** A bundle counted lost was found landed after all (its landing is counted by {@link landed}): not lost. */
  notLost(route: LandingRoute): void {
    for (const c of this.countsOf(route)) c.lost = Math.max(0, c.lost - 1);
  }

  /** The figures; `configured` regions first, in their order (at zero when nothing went there), then the others. */
  view(configured: readonly string[] = []): LandingView {
    const regions = [...new Set([...configured, ...this.regions.keys()])];
    return {
      by_region: regions.map((region) => ({ region, ...stat(this.regions.get(region) ?? zero()) })),
      by_contention: [...this.classes].map(([contention, c]) => ({ contention, ...stat(c) })),
    };
  }

  private countsOf(route: LandingRoute): [Counts, Counts] {
    const region = route.region ?? UNKNOWN_REGION;
    const contention: LandingContention = route.contention ?? UNPRICED;
    let r = this.regions.get(region);
    if (!r) this.regions.set(region, (r = zero()));
    let k = this.classes.get(contention);
    if (!k) this.classes.set(contention, (k = zero()));
    return [r, k];
  }
}

/** Weight of each settled bundle in {@link LandedShare}: about the last 16 count. */
const LANDED_SHARE_WEIGHT = 1 / 16;
/** Settlements this far apart are a steady flow, not idleness: the share does not fade between them. */
const LANDED_SHARE_IDLE_MS = 10_000;
/** Once idle, every this long two thirds of what the share lost comes back (a market's state goes stale). */
const LANDED_SHARE_FADE_MS = 30_000;
/**
 * The least share admission counts on. A lost bundle's transaction goes out again at an escalated tip, so the share
 * of later attempts is higher than that of first ones; below this the recent losses say more about the market's last
 * seconds than about what a backlog will need.
 */
export const LANDED_SHARE_FLOOR = 0.25;

/**
 * The share of settled bundles that landed, recently (issue 30, point 5): what relay can sell is what lands, not what
 * the engines take, since each lost bundle's transaction spends another send token on its retry. An exponential
 * moving average over settled bundles (the caller counts a loss only when a retry follows it), starting at 1 (nothing
 * known: each bundle lands), fading back towards 1 once nothing settled for {@link LANDED_SHARE_IDLE_MS}, and never
 * below {@link LANDED_SHARE_FLOOR}. Time is an input.
 */
export class LandedShare {
  private share = 1;
  private at = Number.NEGATIVE_INFINITY;

  /** A bundle an engine took settled: it landed, or it was lost. */
  observe(landed: boolean, now: number): void {
    const current = this.raw(now);
    this.share = current + ((landed ? 1 : 0) - current) * LANDED_SHARE_WEIGHT;
    this.at = now;
  }

  /** The share admission counts on at `now`. */
  value(now: number): number {
    return Math.max(LANDED_SHARE_FLOOR, this.raw(now));
  }

  private raw(now: number): number {
    const idle = Math.max(0, now - this.at - LANDED_SHARE_IDLE_MS);
    return 1 - (1 - this.share) * Math.exp(-idle / LANDED_SHARE_FADE_MS);
  }
}
