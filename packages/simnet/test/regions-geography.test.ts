// Regions with mainnet's stake geography and pairwise latency instead of a uniform spread and a flat 100 ms hop.
import { Rng } from '../src/rng';
import {
  JITO_MAINNET_REGIONS,
  MAINNET_STAKE_SHARE_BY_REGION,
  assignRegions,
  regionDistanceKm,
  regionLatencyMs,
} from '../src/engine/regions';
import { startHarness, tipTx } from './engine-harness';

describe('the latency matrix', () => {
  test('symmetric, zero within a region, ordered by distance', () => {
    for (const a of JITO_MAINNET_REGIONS) {
      expect(regionLatencyMs(a, a)).toBe(0);
      for (const b of JITO_MAINNET_REGIONS) expect(regionLatencyMs(a, b)).toBe(regionLatencyMs(b, a));
    }
    // Within Europe a few ms; across the Atlantic ~40-50; Europe to Asia and New York to Singapore the most.
    expect(regionLatencyMs('amsterdam', 'frankfurt')).toBeLessThanOrEqual(10);
    expect(regionLatencyMs('london', 'ny')).toBeGreaterThan(35);
    expect(regionLatencyMs('london', 'ny')).toBeLessThan(55);
    expect(regionLatencyMs('ny', 'singapore')).toBeGreaterThan(regionLatencyMs('ny', 'tokyo'));
    expect(regionLatencyMs('frankfurt', 'tokyo')).toBeGreaterThan(regionLatencyMs('frankfurt', 'ny'));
  });

  test('2 ms + 1.5 x great-circle km / 200 km per ms, checked against a published ping', () => {
    const km = regionDistanceKm('ny', 'london') as number;
    expect(km).toBeGreaterThan(5_500);
    expect(km).toBeLessThan(5_600);
    expect(regionLatencyMs('ny', 'london')).toBe(Math.round(2 + (1.5 * km) / 200));
    // A region the table has no place for falls back to the flat 100 ms.
    expect(regionLatencyMs('ny', 'mars')).toBe(100);
  });
});

describe('stake geography', () => {
  test('the table sums to 100 and leans to Europe (68 %) and North America (20 %)', () => {
    const shares = MAINNET_STAKE_SHARE_BY_REGION;
    const total = Object.values(shares).reduce((a, b) => a + b, 0);
    expect(total).toBeCloseTo(100, 6);
    const europe = ['amsterdam', 'dublin', 'frankfurt', 'london'].reduce(
      (sum, r) => sum + (shares[r] ?? 0),
      0,
    );
    expect(europe).toBeCloseTo(68, 6);
    expect((shares.ny ?? 0) + (shares.slc ?? 0)).toBe(20);
  });

  test('validators spread so each region leads about its share of stake; uniform keeps the seeded draw', () => {
    const rng = new Rng(4);
    const validators = Array.from({ length: 300 }, (_, i) => ({
      identity: `v${i}`,
      stake: Math.round(1_000 * Math.exp(2 * rng.next())),
    }));
    const total = validators.reduce((sum, v) => sum + v.stake, 0);
    const map = assignRegions(validators, JITO_MAINNET_REGIONS, new Rng(1), 'mainnet');
    for (const region of JITO_MAINNET_REGIONS) {
      const stake = validators.filter((v) => map.get(v.identity) === region).reduce((s, v) => s + v.stake, 0);
      expect(Math.abs((100 * stake) / total - (MAINNET_STAKE_SHARE_BY_REGION[region] ?? 0))).toBeLessThan(1);
    }
    const uniform = assignRegions(validators, JITO_MAINNET_REGIONS, new Rng(1));
    const draws = new Rng(1);
    for (const v of validators) expect(uniform.get(v.identity)).toBe(draws.pick(JITO_MAINNET_REGIONS));
    // A subset of regions renormalizes the shares over the regions served.
    const two = assignRegions(validators, ['amsterdam', 'tokyo'], new Rng(1), 'mainnet');
    const tokyo = validators.filter((v) => two.get(v.identity) === 'tokyo').reduce((s, v) => s + v.stake, 0);
    expect((100 * tokyo) / total).toBeGreaterThan(20);
    expect((100 * tokyo) / total).toBeLessThan(25);
  });
});

test('the engine: a bundle sent to a far region reaches its leader after the pair latency (manual engine clock)', async () => {
  const nowMs = 5_000_000;
  const h = await startHarness({
    seed: 5,
    bundleEngineShare: 0.5,
    engine: { crossRegionDelayMs: undefined, now: () => nowMs },
  });
  try {
    expect(h.engine.crossRegionDelayMs).toBeNull();
    let leaderRegion: string | null = null;
    for (let i = 0; i < 4000 && leaderRegion === null; i++) {
      const next = h.cluster.leaderAt(h.cluster.slot + 1);
      if (next?.bundleEngine) leaderRegion = h.engine.regionOf(next.identity);
      else h.cluster.advance(1);
    }
    expect(leaderRegion).not.toBeNull();
    const far = JITO_MAINNET_REGIONS.reduce((best, r) =>
      regionLatencyMs(r, leaderRegion as string) > regionLatencyMs(best, leaderRegion as string) ? r : best,
    );
    const sent = h.engine.submitBundle([tipTx(h, 5_000_000)], 'base58', far);
    if (!sent.ok) throw new Error(sent.error.message);
    expect(h.engine.getBundle(sent.bundleId)?.arrivesAtMs).toBe(
      nowMs + regionLatencyMs(far, leaderRegion as string),
    );
    const home = h.engine.submitBundle([tipTx(h, 5_000_000)], 'base58', leaderRegion as string);
    if (!home.ok) throw new Error(home.error.message);
    expect(h.engine.getBundle(home.bundleId)?.arrivesAtMs).toBe(nowMs);
    expect(h.engine.forwardingDelayMs('london', 'ny')).toBe(regionLatencyMs('london', 'ny'));
    h.engine.crossRegionDelayMs = 100;
    expect(h.engine.forwardingDelayMs('london', 'ny')).toBe(100);
  } finally {
    await h.close();
  }
});

test("the engine's default spread is uniform; regionStake 'mainnet' follows the stake table", async () => {
  const uniform = await startHarness({ seed: 8 });
  const mainnet = await startHarness({ seed: 8, engine: { regionStake: 'mainnet' } });
  try {
    const validators = uniform.cluster.validators().filter((v) => v.bundleEngine);
    expect(validators.length).toBeGreaterThan(8);
    const stakeIn = (h: typeof uniform, region: string) =>
      validators.filter((v) => h.engine.regionOf(v.identity) === region).reduce((s, v) => s + v.stake, 0);
    const total = validators.reduce((s, v) => s + v.stake, 0);
    const europe = ['amsterdam', 'dublin', 'frankfurt', 'london'];
    const europeShare = (h: typeof uniform) => europe.reduce((s, r) => s + stakeIn(h, r), 0) / total;
    expect(uniform.engine.validatorRegions.size).toBe(validators.length);
    // Europe leads about two thirds of the stake under the mainnet spread.
    expect(europeShare(mainnet)).toBeGreaterThan(0.55);
    expect(europeShare(mainnet)).toBeLessThan(0.8);
  } finally {
    await uniform.close();
    await mainnet.close();
  }
});
