import { join } from 'node:path';
import { get, post, quietLogger, TEST_INTERVALS, waitUntil, type Stack } from '@solrelay/testkit';
import { configFromEnv } from '../../src/config';
import { startSidecar, type Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * Two sidecars on one machine, each with its own RELAY_ENGINE_LOCAL_ADDRESS (127.0.0.2 and 127.0.0.3), against the
 * simulated cluster with its rate limit on: the engine keys its limiter by the connection's remote address
 * (`req.socket.remoteAddress`, gRPC's peer), one bucket per IP and region, as Jito's is (jito.md §1.7). Every
 * request the engine sees comes from one of the two addresses, never from 127.0.0.1 (JSON-RPC sends, and the gRPC
 * leader and region queries too), and with one host's budget spent the other's sends still go through. Without the
 * binding both would come from 127.0.0.1: one address, one budget. The limiter's clock is the test's to stop, so
 * the spent budget stays spent for as long as the test needs, whatever the machine's speed.
 */
const A = '127.0.0.2';
const B = '127.0.0.3';

interface Admitted {
  ip: string;
  /** Whether the request spends a token (every JSON-RPC call; gRPC's SendBundle only). */
  limited: boolean;
}

interface RegionView {
  accepted: number;
  transport_errors: number;
}

async function regionTotals(url: string): Promise<RegionView> {
  const regions = (await get(url, '/status')).body.block_engine_regions as RegionView[];
  return {
    accepted: regions.reduce((sum, r) => sum + r.accepted, 0),
    transport_errors: regions.reduce((sum, r) => sum + r.transport_errors, 0),
  };
}

async function stateOf(url: string, id: string): Promise<string> {
  return (await get(url, `/tx/${id}`)).body.state as string;
}

async function waitConfirmed(url: string, id: string, what: string): Promise<void> {
  await waitUntil(
    async () => ['confirmed', 'finalized'].includes(await stateOf(url, id)),
    60_000,
    `${what} confirmed`,
  );
}

describe.each(['jsonrpc', 'grpc'] as const)('bundles over %s', (transport) => {
  let stack: Stack<Sidecar>;
  let b: Sidecar;
  /** The limiter's clock: the wall clock until the test stops it. */
  let stoppedAt: number | null = null;
  const admitted: Admitted[] = [];

  beforeAll(async () => {
    stoppedAt = null;
    const env = {
      BYPASS_AGENT: '1',
      BYPASS_TIP_LAMPORTS: '20000',
      BUNDLE_ENGINE_RPS: '1',
      BUNDLE_ENGINE_TRANSPORT: transport,
    };
    stack = await startRelayStack({
      env: { ...env, RELAY_ENGINE_LOCAL_ADDRESS: A },
      // One region: one budget per address. Rate limits on, 1 request/s per IP, the limiter on the test's clock.
      simnet: { slotMs: 100, regions: 1, rateLimit: { now: () => stoppedAt ?? Date.now() } },
    });
    const { engine } = stack.simnet;
    // The engine's own view of every request it admits: which address it came from.
    const admit = engine.admit.bind(engine);
    engine.admit = (ip, uuid, limit, region) => {
      admitted.push({ ip, limited: limit ?? true });
      return admit(ip, uuid, limit, region);
    };
    b = await startSidecar(
      configFromEnv(
        {
          ...stack.env,
          RELAY_ENGINE_LOCAL_ADDRESS: B,
          RELAY_DATA_DIR: join(stack.dir, 'data-b'),
          LIFECYCLE_PATH: join(stack.dir, 'lifecycle-b.jsonl'),
        },
        stack.dir,
      ),
      { logger: quietLogger, intervals: TEST_INTERVALS },
    );
    for (const url of [stack.sidecar.url, b.url])
      await waitUntil(async () => (await get(url, '/readyz')).status === 200, 20_000, `${url} ready`);
    // The tip accounts, read once and cached (over JSON-RPC a request that spends budget): read before the tests.
    for (const sidecar of [stack.sidecar, b]) await sidecar.relay.ensureTipAccounts();
  }, 60_000);

  afterAll(async () => {
    stoppedAt = null;
    await b?.close();
    await stack?.close();
  });

  test('every request the engine sees comes from the two bound addresses, each host from its own', async () => {
    const a = stack.sidecar;
    const spent = (from: number) =>
      admitted
        .slice(from)
        .filter((r) => r.limited)
        .map((r) => r.ip);
    // Host A alone sends first: every request that spends budget meanwhile is its own (B has nothing to send).
    const start = admitted.length;
    const onA = await post(a.url, '/tx/enqueue', { transaction: stack.transfer(101) });
    expect(onA.status).toBe(202);
    await waitConfirmed(a.url, onA.body.tx_id, "host A's transaction");
    expect(spent(start).length).toBeGreaterThan(0);
    expect(new Set(spent(start))).toEqual(new Set([A]));

    const next = admitted.length;
    const onB = await post(b.url, '/tx/enqueue', { transaction: stack.transfer(102) });
    expect(onB.status).toBe(202);
    await waitConfirmed(b.url, onB.body.tx_id, "host B's transaction");
    expect(new Set(spent(next))).toContain(B);
    // Nothing reached the engine from any other address: not the sends, not the gRPC leader and region queries.
    expect(new Set(admitted.map((r) => r.ip))).toEqual(new Set([A, B]));
  }, 90_000);

  test("with host A's budget spent, host B's sends still go through: each address has its own", async () => {
    const a = stack.sidecar;
    const { engine } = stack.simnet;
    const region = engine.homeRegion;
    // Stop the limiter's clock (no refill, a penalty never ends) and start every bucket afresh: one token each.
    stoppedAt = Date.now();
    engine.rateLimiter.reset();
    // Spend all of A's budget from here, as a burst of A's own requests would.
    while (engine.rateLimiter.take(A, undefined, region).allowed);
    const before = { a: await regionTotals(a.url), b: await regionTotals(b.url) };
    const admittedBefore = admitted.length;

    const onA = await post(a.url, '/tx/enqueue', { transaction: stack.transfer(201) });
    const onB = await post(b.url, '/tx/enqueue', { transaction: stack.transfer(202) });
    expect([onA.status, onB.status]).toEqual([202, 202]);
    // B's send is taken on B's own token...
    await waitUntil(
      async () => (await regionTotals(b.url)).accepted > before.b.accepted,
      30_000,
      "the engine to accept host B's bundle",
    );
    // ...while A's is refused (429 / RESOURCE_EXHAUSTED: a transport failure, sent again later), A's budget spent.
    await waitUntil(
      async () => (await regionTotals(a.url)).transport_errors > before.a.transport_errors,
      30_000,
      "the engine to refuse host A's bundle",
    );
    expect((await regionTotals(a.url)).accepted).toBe(before.a.accepted);
    expect(await stateOf(a.url, onA.body.tx_id)).toBe('pending');
    const sends = admitted.slice(admittedBefore).filter((r) => r.limited);
    expect(new Set(sends.map((r) => r.ip))).toEqual(new Set([A, B]));

    // The clock runs again: A's penalty ends, its budget refills, and its transaction goes out and lands too.
    stoppedAt = null;
    await waitConfirmed(b.url, onB.body.tx_id, "host B's transaction");
    await waitConfirmed(a.url, onA.body.tx_id, "host A's transaction");
  }, 120_000);
});
