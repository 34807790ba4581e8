// Regional block engines: each region on its own JSON-RPC and gRPC address with its own per-IP budget, its own
// connected leaders and its own result stream, as jito-ts's generated SearcherServiceClient and a plain JSON-RPC
// caller see them. The clock is manual, so every slot is produced by the test.
import { credentials, type ServiceError } from '@grpc/grpc-js';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle';
import { SearcherServiceClient } from 'jito-ts/dist/gen/block-engine/searcher';
import { JITO_MAINNET_REGIONS } from '../src/engine/regions';
import { createTransferTx, fundedKeypair } from '../src/chain';
import { startSimnet, type Simnet } from '../src/simnet';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';

let sim: Simnet;
const clients = new Map<string, SearcherServiceClient>();

function client(region: string): SearcherServiceClient {
  let c = clients.get(region);
  if (!c) {
    const endpoint = sim.endpoints.regions.find((r) => r.region === region);
    if (!endpoint) throw new Error(`no region ${region}`);
    c = new SearcherServiceClient(endpoint.engineGrpcAddress, credentials.createInsecure());
    clients.set(region, c);
  }
  return c;
}

function call<Res>(fn: (cb: (error: ServiceError | null, response: Res) => void) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn((error, response) => (error ? reject(error) : resolve(response)));
  });
}

/** A one-transaction bundle that pays its tip itself, from a fresh funded payer. */
function bundleWires(tipLamports = 50_000): Uint8Array[] {
  return [
    createTransferTx({
      from: fundedKeypair(sim.cluster, 10_000_000_000),
      transfers: [{ to: MAINNET_TIP_ACCOUNTS[1] as string, lamports: tipLamports }],
      recentBlockhash: sim.cluster.latestBlockhash().blockhash,
    }),
  ];
}

beforeAll(async () => {
  // The limiter's clock stands still (no token comes back while a test runs, however slow the machine); it is on
  // only in the test of the budgets.
  sim = await startSimnet({
    seed: 11,
    clock: 'manual',
    validatorCount: 40,
    rateLimit: { enabled: false, now: () => 0 },
  });
  sim.cluster.advance(2);
});

afterAll(async () => {
  for (const c of clients.values()) c.close();
  await sim?.stop();
});

test('eight regional engines by default, each its own address, listed comma-separated in env()', () => {
  const names = sim.endpoints.regions.map((r) => r.region);
  expect(names).toEqual([...JITO_MAINNET_REGIONS]);
  const http = new Set(sim.endpoints.regions.map((r) => r.engineUrl));
  const grpc = new Set(sim.endpoints.regions.map((r) => r.engineGrpcUrl));
  expect(http.size).toBe(8);
  expect(grpc.size).toBe(8);
  expect(sim.env().BUNDLE_ENGINE_URL?.split(',')).toEqual(sim.endpoints.regions.map((r) => r.engineUrl));
  expect(sim.env().BUNDLE_ENGINE_GRPC_URL?.split(',')).toEqual(
    sim.endpoints.regions.map((r) => r.engineGrpcUrl),
  );
  expect(sim.endpoints.engineUrl).toBe(sim.endpoints.regions[0]?.engineUrl);
});

test('GetRegions names the region connected to and every region online', async () => {
  for (const region of ['amsterdam', 'tokyo']) {
    const answer = await call<{ currentRegion: string; availableRegions: string[] }>((cb) =>
      client(region).getRegions({}, cb),
    );
    expect(answer.currentRegion).toBe(region);
    expect(answer.availableRegions).toEqual([...JITO_MAINNET_REGIONS]);
  }
});

test('GetConnectedLeaders answers for its own region only; GetConnectedLeadersRegioned for the regions asked', async () => {
  const engineValidators = sim.cluster
    .validators()
    .filter((v) => v.bundleEngine)
    .map((v) => v.identity)
    .sort();
  const perRegion = new Map<string, string[]>();
  for (const region of JITO_MAINNET_REGIONS) {
    const answer = await call<{ connectedValidators: Record<string, { slots: number[] }> }>((cb) =>
      client(region).getConnectedLeaders({}, cb),
    );
    perRegion.set(region, Object.keys(answer.connectedValidators));
    for (const identity of Object.keys(answer.connectedValidators))
      expect(sim.engine.regionOf(identity)).toBe(region);
  }
  // The regions partition the bundle-engine validators: none is missing, none is in two regions.
  const union = [...perRegion.values()].flat().sort();
  expect(union).toEqual(engineValidators);
  expect([...perRegion.values()].filter((ids) => ids.length > 0).length).toBeGreaterThan(1);

  const regioned = await call<{
    connectedValidators: Record<string, { connectedValidators: Record<string, { slots: number[] }> }>;
  }>((cb) => client('london').getConnectedLeadersRegioned({ regions: [...JITO_MAINNET_REGIONS] }, cb));
  expect(Object.keys(regioned.connectedValidators).sort()).toEqual([...JITO_MAINNET_REGIONS].sort());
  for (const region of JITO_MAINNET_REGIONS) {
    expect(Object.keys(regioned.connectedValidators[region]?.connectedValidators ?? {}).sort()).toEqual(
      [...(perRegion.get(region) ?? [])].sort(),
    );
  }
  // No region asked: the connected one (searcher.proto).
  const own = await call<{ connectedValidators: Record<string, unknown> }>((cb) =>
    client('london').getConnectedLeadersRegioned({ regions: [] }, cb),
  );
  expect(Object.keys(own.connectedValidators)).toEqual(['london']);
});

test('GetNextScheduledLeader searches the regions asked and names the leader region', async () => {
  const all = await call<{
    currentSlot: number;
    nextLeaderSlot: number;
    nextLeaderIdentity: string;
    nextLeaderRegion: string;
  }>((cb) => client('amsterdam').getNextScheduledLeader({ regions: [...JITO_MAINNET_REGIONS] }, cb));
  expect(all.nextLeaderRegion).toBe(sim.engine.regionOf(all.nextLeaderIdentity));
  for (let slot = all.currentSlot + 1; slot < all.nextLeaderSlot; slot++)
    expect(sim.cluster.leaderAt(slot)?.bundleEngine).toBe(false);
  // Asking one region skips the others' leaders.
  const region = all.nextLeaderRegion === 'tokyo' ? 'dublin' : 'tokyo';
  const own = await call<{ nextLeaderSlot: number; nextLeaderIdentity: string; nextLeaderRegion: string }>(
    (cb) => client(region).getNextScheduledLeader({ regions: [] }, cb),
  );
  expect(own.nextLeaderRegion).toBe(region);
  expect(Number(own.nextLeaderSlot)).toBeGreaterThan(Number(all.nextLeaderSlot));
});

test('each region has its own per-IP budget of one request a second', async () => {
  sim.engine.rateLimiter.enabled = true;
  sim.engine.rateLimiter.reset();
  try {
    const post = (url: string) =>
      fetch(`${url}/api/v1/bundles`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getTipAccounts', params: [] }),
      });
    const [first, second] = sim.endpoints.regions;
    expect((await post(first!.engineUrl)).status).toBe(200);
    const limited = await post(first!.engineUrl);
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: number } }).error.code).toBe(-32097);
    // Another region has its own bucket.
    expect((await post(second!.engineUrl)).status).toBe(200);
  } finally {
    sim.engine.rateLimiter.enabled = false;
  }
});

test("a bundle's results go to the stream of the region it was sent to", async () => {
  const streams = new Map<string, BundleResult[]>();
  const cancels: Array<() => void> = [];
  for (const region of ['frankfurt', 'singapore']) {
    const got: BundleResult[] = [];
    streams.set(region, got);
    const stream = client(region).subscribeBundleResults({});
    stream.on('data', (r: BundleResult) => got.push(r));
    stream.on('error', () => undefined);
    cancels.push(() => stream.cancel());
  }
  const send = async (region: string) => {
    const packets = bundleWires().map((data) => ({ data, meta: undefined }));
    return (
      await call<{ uuid: string }>((cb) =>
        client(region).sendBundle({ bundle: { header: undefined, packets } }, cb),
      )
    ).uuid;
  };
  /** Advance slots until `region`'s stream has a message about `bundleId` (results of a stream keep their order). */
  const heardOn = async (region: string, bundleId: string) => {
    for (let i = 0; i < 400; i++) {
      if ((streams.get(region) ?? []).some((r) => r.bundleId === bundleId)) return;
      sim.cluster.advance(1);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`${region}'s stream never reported ${bundleId}`);
  };
  // Each stream is live once it reports a bundle sent to its own region.
  await heardOn('frankfurt', await send('frankfurt'));
  await heardOn('singapore', await send('singapore'));
  const sent = await send('frankfurt');
  await heardOn('frankfurt', sent);
  // Anything singapore's stream were given about it would come before the result of a later singapore bundle.
  await heardOn('singapore', await send('singapore'));
  for (const cancel of cancels) cancel();
  expect((streams.get('singapore') ?? []).some((r) => r.bundleId === sent)).toBe(false);
});
