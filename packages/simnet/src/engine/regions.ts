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
 * Extra time a bundle takes to reach a leader connected to another region than the one it was sent to (Jito
 * forwards it; sending to the leader's own region is faster). Jito publishes no figure: 100 ms is one-way
 * intercontinental latency plus a hop, an assumption of this model, tunable per simnet.
 */
export const DEFAULT_CROSS_REGION_DELAY_MS = 100;

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

/**
 * Which region each bundle-engine validator is connected to. Each validator draws one region, uniformly, from the
 * seeded generator in the cluster's validator order, so a seed always gives the same map. (Mainnet's real spread
 * leans to Europe and New York; uniform is the model's stated simplification.)
 */
export function assignRegions(
  identities: readonly string[],
  regions: readonly string[],
  rng: Rng,
): Map<string, string> {
  const out = new Map<string, string>();
  for (const identity of identities) out.set(identity, rng.pick(regions));
  return out;
}
