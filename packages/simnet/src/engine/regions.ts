import type { Rng } from '../rng';

/**
 * Jito's regional mainnet block engines (jito.md §1.1, the docs' current table), in the order the simulated cluster
 * serves them. `mainnet.block-engine.jito.wtf` is not a region of its own: it routes to one of these.
 */
export const JITO_MAINNET_REGIONS: readonly string[] = [
  'amsterdam',
  'dublin',
  'frankfurt',
  'london',
  'ny',
  'slc',
  'singapore',
  'tokyo',
];

/**
 * A flat extra time for a bundle sent to another region than its leader's, when `crossRegionDelayMs` is given (the
 * earlier model; 100 ms was one-way intercontinental latency plus a hop). By default the pairwise
 * {@link regionLatencyMs} applies instead.
 */
export const DEFAULT_CROSS_REGION_DELAY_MS = 100;

/**
 * Share of mainnet stake near each region: Helius, "Measuring Solana's Decentralization: Facts and Figures"
 * (epoch 685, late 2024): United States 18.3 %, Netherlands 13.7 %, United Kingdom 13.7 %, Germany 13.2 %; 68 % of
 * stake in Europe, 20 % in North America. Mapped onto Jito's regions by this model (assumptions): the Netherlands to
 * amsterdam, the UK to london, Germany to frankfurt; the rest of Europe (27.4 %) split evenly over the four European
 * regions (dublin has only that share); North America 3:1 between ny and slc (most US stake sits east of the
 * Rockies); the remaining 12 % (Asia and elsewhere) evenly between singapore and tokyo. Sums to 100.
 */
export const MAINNET_STAKE_SHARE_BY_REGION: Readonly<Record<string, number>> = {
  amsterdam: 13.7 + 6.85,
  dublin: 6.85,
  frankfurt: 13.2 + 6.85,
  london: 13.7 + 6.85,
  ny: 15,
  slc: 5,
  singapore: 6,
  tokyo: 6,
};

/** Where each region's engine is (city centre, degrees), for {@link regionLatencyMs}. */
export const REGION_COORDINATES: Readonly<Record<string, readonly [number, number]>> = {
  amsterdam: [52.37, 4.9],
  dublin: [53.35, -6.26],
  frankfurt: [50.11, 8.68],
  london: [51.51, -0.13],
  ny: [40.71, -74.01],
  slc: [40.76, -111.89],
  singapore: [1.35, 103.82],
  tokyo: [35.68, 139.69],
};

/** Light in fibre covers about 200 km per ms (refractive index ≈ 1.5). */
const FIBRE_KM_PER_MS = 200;
/**
 * Cables do not follow great circles: path length ≈ 1.5 × the great-circle distance. With a 2 ms fixed cost this
 * reproduces published city-pair pings to within ~20 %: WonderProxy's "Miles per Millisecond" table (New York–Paris
 * 78 ms round trip, model 92; Brisbane–Fremont 174, model 176; Milan–Zurich 11, model 7). Routes with detours
 * (Europe–Asia over Suez or the US) are underestimated: an assumption of this model.
 */
const ROUTE_INFLATION = 1.5;
const FIXED_HOP_MS = 2;
const EARTH_RADIUS_KM = 6_371;

/** Great-circle distance between two regions, km (haversine); null when either has no coordinates. */
export function regionDistanceKm(from: string, to: string): number | null {
  const a = REGION_COORDINATES[from];
  const b = REGION_COORDINATES[to];
  if (!a || !b) return null;
  const rad = (deg: number) => (deg * Math.PI) / 180;
  const dLat = rad(b[0] - a[0]);
  const dLon = rad(b[1] - a[1]);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a[0])) * Math.cos(rad(b[0])) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/**
 * One-way latency (ms, rounded) a bundle forwarded from one regional engine to another takes: 0 within a region,
 * else 2 ms + 1.5 × great-circle distance / 200 km per ms. Jito publishes no forwarding figures: a physical model,
 * stated above. Regions without coordinates (custom names) fall back to {@link DEFAULT_CROSS_REGION_DELAY_MS}.
 */
export function regionLatencyMs(from: string, to: string): number {
  if (from === to) return 0;
  const km = regionDistanceKm(from, to);
  if (km === null) return DEFAULT_CROSS_REGION_DELAY_MS;
  return Math.round(FIXED_HOP_MS + (ROUTE_INFLATION * km) / FIBRE_KM_PER_MS);
}

/** Region names for `regions`: a count takes that many of Jito's, in order; a list is used as given. */
export function regionNames(regions: number | readonly string[] | undefined): string[] {
  if (regions === undefined) return [...JITO_MAINNET_REGIONS];
  if (typeof regions === 'number') {
    if (!Number.isInteger(regions) || regions < 1 || regions > JITO_MAINNET_REGIONS.length)
      throw new Error(`regions must be an integer from 1 to ${JITO_MAINNET_REGIONS.length}`);
    return JITO_MAINNET_REGIONS.slice(0, regions);
  }
  const names = [...regions];
  if (names.length === 0) throw new Error('regions must name at least one region');
  if (new Set(names).size !== names.length) throw new Error('regions must not repeat a name');
  for (const name of names)
    if (!/^[a-z0-9-]+$/.test(name))
      throw new Error(`region name "${name}" must be lowercase letters, digits or -`);
  return names;
}

/** How bundle-engine validators are spread over regions: by mainnet's stake geography, or uniformly (earlier model). */
export type RegionStake = 'mainnet' | 'uniform';

/**
 * Which region each bundle-engine validator is connected to. `'mainnet'`: validators, largest stake first,
 * each go to the region furthest below its target stake ({@link MAINNET_STAKE_SHARE_BY_REGION}, renormalized over
 * the regions served; a region the table does not name gets the mean share), so the stake each region leads follows
 * mainnet's geography as closely as the few validators allow. `'uniform'` (default, see the README for why): each draws
 * one region uniformly from the seeded generator (the earlier model). Either way a seed always gives the same map.
 */
export function assignRegions(
  validators: ReadonlyArray<{ identity: string; stake: number }>,
  regions: readonly string[],
  rng: Rng,
  spread: RegionStake = 'uniform',
): Map<string, string> {
  const out = new Map<string, string>();
  if (spread === 'uniform') {
    for (const { identity } of validators) out.set(identity, rng.pick(regions));
    return out;
  }
  const known = regions
    .map((r) => MAINNET_STAKE_SHARE_BY_REGION[r])
    .filter((s): s is number => s !== undefined);
  const fallback = known.length ? known.reduce((a, b) => a + b, 0) / known.length : 1;
  const shares = regions.map((r) => MAINNET_STAKE_SHARE_BY_REGION[r] ?? fallback);
  const shareTotal = shares.reduce((a, b) => a + b, 0);
  const stakeTotal = validators.reduce((sum, v) => sum + v.stake, 0);
  const assigned = regions.map(() => 0);
  const order = validators
    .map((v, index) => ({ ...v, index }))
    .sort((a, b) => b.stake - a.stake || a.index - b.index);
  for (const validator of order) {
    let best = 0;
    let bestDeficit = Number.NEGATIVE_INFINITY;
    regions.forEach((_, i) => {
      const deficit = ((shares[i] as number) / shareTotal) * stakeTotal - (assigned[i] as number);
      if (deficit > bestDeficit) {
        bestDeficit = deficit;
        best = i;
      }
    });
    assigned[best] = (assigned[best] as number) + validator.stake;
    out.set(validator.identity, regions[best] as string);
  }
  return out;
}
