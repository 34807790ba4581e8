import { JITO_MAINNET_REGIONS } from '@solrelay/simnet';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { counterValue, startRelayStack } from '../helpers/relay-stack';

/**
 * Regional block engines over the wire: the simulated cluster's eight regions, each with its own address, its own
 * 1 request/s budget and its own connected leaders; the sidecar given all eight (comma-separated, as `relay sim`
 * prints them).
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '20000', BUNDLE_ENGINE_RPS: '1' },
    simnet: { slotMs: 100, rateLimit: true },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/readyz')).status === 200, 15_000, 'ready');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('every region is known by the name its engine gives (GetRegions)', async () => {
  await waitUntil(
    async () =>
      (await get(url, '/status')).body.block_engine_regions
        ?.map((r: { region: string }) => r.region)
        .join(',') === JITO_MAINNET_REGIONS.join(','),
    10_000,
    'the region names',
  );
  const regions = (await get(url, '/status')).body.block_engine_regions as Array<{ url: string }>;
  expect(regions.map((r) => r.url)).toEqual(stack.simnet.endpoints.regions.map((r) => r.engineUrl));
});

/**
 * Step the stopped clock to a slot whose next bundle-engine leader is connected to another region than the first
 * address's, and wait for relay to name that slot: answered from one region's GetConnectedLeaders alone, relay
 * would name a later slot.
 */
async function expectEveryRegionsLeader(stack: Stack<Sidecar>, url: string): Promise<void> {
  const { cluster, engine } = stack.simnet;
  const home = engine.homeRegion;
  /** The first slot from the current one (as /status counts) led by a bundle-engine validator of `region` (null: any). */
  const firstEngineSlot = (region: string | null): number | null => {
    for (let slot = cluster.slot; slot < cluster.slot + 64; slot++) {
      const leader = cluster.leaderAt(slot);
      const connected = leader?.bundleEngine ? engine.regionOf(leader.identity) : null;
      if (connected !== null && (region === null || connected === region)) return slot;
    }
    return null;
  };
  cluster.stop();
  try {
    for (let i = 0; i < 2000; i++) {
      const any = firstEngineSlot(null);
      const ofHome = firstEngineSlot(home);
      if (any !== null && (ofHome === null || ofHome > any)) break;
      cluster.advance(1);
    }
    const expected = firstEngineSlot(null);
    const leader = expected === null ? null : cluster.leaderAt(expected);
    expect(leader && engine.regionOf(leader.identity)).not.toBe(home);
    await waitUntil(
      async () => {
        const status = (await get(url, '/status')).body;
        return status.slot === cluster.slot && status.next_bundle_engine_leader_slot === expected;
      },
      10_000,
      `relay to name slot ${expected} (a ${leader && engine.regionOf(leader.identity)} leader) as the next bundle-engine slot`,
    );
  } finally {
    cluster.start();
  }
}

test("the next bundle-engine leader is every region's, not only the first address's", async () => {
  await expectEveryRegionsLeader(stack, url);
});

test("configured with one region, relay still reads every region's leaders (GetRegions lists them)", async () => {
  const first = stack.simnet.endpoints.regions[0];
  const one = await startRelayStack({
    env: { BUNDLE_ENGINE_URL: first!.engineUrl, BUNDLE_ENGINE_GRPC_URL: first!.engineGrpcUrl },
    simnet: { slotMs: 100 },
  });
  try {
    const oneUrl = one.sidecar.url;
    await waitUntil(async () => (await get(oneUrl, '/readyz')).status === 200, 15_000, 'ready');
    expect((await get(oneUrl, '/status')).body.block_engine_regions).toHaveLength(1);
    await expectEveryRegionsLeader(one, oneUrl);
  } finally {
    await one.close();
  }
}, 40_000);

test('a burst is spread over the regions, each bundle first to its leader region, and everything lands', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) {
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(100 + i) });
    expect(enqueued.status).toBe(202);
    ids.push(enqueued.body.tx_id);
  }
  await waitUntil(
    async () => {
      for (const id of ids) {
        const state = (await get(url, `/tx/${id}`)).body.state;
        if (!['confirmed', 'finalized'].includes(state)) return false;
      }
      return true;
    },
    60_000,
    'all twelve confirmed',
  );
  const { engine } = stack.simnet;
  const sentTo = new Set<string>();
  let direct = 0;
  for (const id of ids) {
    const record = (await get(url, `/tx/${id}`)).body;
    for (const attempt of record.attempts as Array<{ bundle_id: string }>) {
      const bundle = engine.getBundle(attempt.bundle_id);
      if (!bundle) continue;
      sentTo.add(bundle.region);
      if (bundle.window && engine.regionOf(bundle.window.leader.identity) === bundle.region) direct++;
    }
  }
  // One region alone takes one bundle a second; twelve went out through several.
  expect(sentTo.size).toBeGreaterThan(1);
  expect(direct).toBeGreaterThan(0);
  // Every transaction went out in a bundle the engine accepted: its own, or one it rode in (the twelve share the
  // stack's fee payer, so some ride together: same-payer packs).
  const regions = (await get(url, '/status')).body.block_engine_regions as Array<{ accepted: number }>;
  const accepted = regions.reduce((sum, r) => sum + r.accepted, 0);
  expect(accepted + (await counterValue(url, 'relay_packed_passengers_total'))).toBeGreaterThanOrEqual(12);

  // Landing per region (issue 30): each attempt names the region the engine itself says took it; /status and
  // /metrics count the landed bundles by that region, and what they paid.
  const landedByRegion = new Map<string, { landed: number; tips: number }>();
  for (const id of ids) {
    const record = (await get(url, `/tx/${id}`)).body;
    for (const attempt of record.attempts as Array<{
      bundle_id: string;
      stage: string;
      region: string | null;
      tip_lamports: number;
    }>) {
      const bundle = engine.getBundle(attempt.bundle_id);
      if (bundle)
        expect({ bundle: attempt.bundle_id, region: attempt.region }).toEqual({
          bundle: attempt.bundle_id,
          region: bundle.region,
        });
      if (!['confirmed', 'finalized'].includes(attempt.stage)) continue;
      const entry = (await get(url, `/bundle/${attempt.bundle_id}`)).body;
      expect(entry.region).toBe(attempt.region);
      const tally = landedByRegion.get(attempt.region as string) ?? { landed: 0, tips: 0 };
      tally.landed++;
      tally.tips += attempt.tip_lamports;
      landedByRegion.set(attempt.region as string, tally);
    }
  }
  expect([...landedByRegion.values()].reduce((n, t) => n + t.landed, 0)).toBeGreaterThan(0);
  const landing = (await get(url, '/status')).body.landing as {
    by_region: Array<{
      region: string;
      landed: number;
      tips_paid_lamports: number;
      lamports_per_landed: number | null;
    }>;
    by_contention: Array<{ contention: string; landed: number }>;
  };
  // The configured regions first, in their order.
  expect(landing.by_region.slice(0, JITO_MAINNET_REGIONS.length).map((r) => r.region)).toEqual([
    ...JITO_MAINNET_REGIONS,
  ]);
  const metrics = (await get(url, '/metrics')).body as string;
  for (const row of landing.by_region) {
    const expected = landedByRegion.get(row.region) ?? { landed: 0, tips: 0 };
    expect({ region: row.region, landed: row.landed, tips: row.tips_paid_lamports }).toEqual({
      region: row.region,
      landed: expected.landed,
      tips: expected.tips,
    });
    if (expected.landed > 0) {
      expect(row.lamports_per_landed).toBe(Math.round(expected.tips / expected.landed));
      expect(metrics).toContain(
        `relay_bundles_landed_total{region="${row.region}",contention="unpriced"} ${expected.landed}`,
      );
    }
  }
  // Bypass tips are a fixed BYPASS_TIP_LAMPORTS, not priced per CU: every landed bundle is `unpriced`.
  expect(landing.by_contention).toEqual([
    expect.objectContaining({
      contention: 'unpriced',
      landed: [...landedByRegion.values()].reduce((n, t) => n + t.landed, 0),
    }),
  ]);
}, 90_000);
