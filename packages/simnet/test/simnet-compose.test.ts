import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Connection } from '@solana/web3.js';
import { startSimnet, type Simnet } from '../src/simnet';

let sim: Simnet;

beforeAll(async () => {
  sim = await startSimnet({ seed: 3, clock: 'manual', rateLimit: false, xToken: 'tok' });
});

afterAll(async () => {
  await sim.stop();
});

async function admin(method: 'GET' | 'POST', path: string, body?: unknown) {
  const response = await fetch(`${sim.endpoints.adminUrl}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('startSimnet', () => {
  test('env() gives a sidecar every endpoint, each reachable', async () => {
    const env = sim.env();
    expect(Object.keys(env)).toEqual([
      'STREAM_ENDPOINT',
      'STREAM_X_TOKEN',
      'RPC_URL',
      'BUNDLE_ENGINE_URL',
      'BUNDLE_ENGINE_GRPC_URL',
      'TIP_FLOOR_URL',
      'ANTHROPIC_BASE_URL',
      'ANTHROPIC_API_KEY',
    ]);
    expect(env.STREAM_X_TOKEN).toBe('tok');
    // One address per region (eight by default), comma-separated.
    expect(env.BUNDLE_ENGINE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+(,http:\/\/127\.0\.0\.1:\d+){7}$/);
    expect(env.BUNDLE_ENGINE_GRPC_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+(,http:\/\/127\.0\.0\.1:\d+){7}$/);
    const tipFloor = await (await fetch(env.TIP_FLOOR_URL as string)).json();
    expect(tipFloor).toHaveLength(1);
    const tips = await fetch(`${sim.endpoints.engineUrl}/api/v1/bundles`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getTipAccounts', params: [] }),
    });
    expect(((await tips.json()) as { result: string[] }).result).toHaveLength(8);
    const slot = await new Connection(env.RPC_URL as string).getSlot('processed');
    expect(slot).toBe(sim.cluster.slot);
  });

  test('fundedKeypair is credited on the cluster', async () => {
    const keypair = sim.fundedKeypair(5_000_000_000);
    expect(sim.cluster.getBalance(keypair.publicKey.toBase58())).toBe(5_000_000_000);
  });

  test('admin: faults round-trip, unknown fault is a 400 with a message, reset clears', async () => {
    const set = await admin('POST', '/faults', { engineLatencyMs: 5, staleTipFloor: true });
    expect(set.status).toBe(200);
    expect(sim.faults.current.staleTipFloor).toBe(true);
    const unknown = await admin('POST', '/faults', { engineMeltdown: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ error: { message: 'unknown fault "engineMeltdown"' } });
    const outOfRange = await admin('POST', '/faults', { bundleDropRate: 2 });
    expect(outOfRange.status).toBe(400);
    await admin('POST', '/faults/reset');
    expect(sim.faults.current.staleTipFloor).toBe(false);
  });

  test('admin: auction pins show up in /admin/state; bad values are refused', async () => {
    expect((await admin('POST', '/auction', { fixedClearingTip: 777_000, regime: 'spike' })).status).toBe(
      200,
    );
    const state = await admin('GET', '/state');
    expect(state.body).toMatchObject({
      slot: sim.cluster.slot,
      clearingTip: 777_000,
      regime: 'spike',
      pendingBundles: [],
      auction: { ticks: sim.engine.auction.ticksPerSlot },
    });
    expect(Object.keys((state.body as { auction: object }).auction)).toContain('lowestWinningTipPerCu');
    expect((await admin('POST', '/auction', { regime: 'storm' })).status).toBe(400);
    expect((await admin('POST', '/auction', { clearing: 1 })).status).toBe(400);
    await admin('POST', '/auction', { fixedClearingTip: null, regime: null });
    expect(sim.engine.auction.fixedClearingTipValue).toBeNull();
  });

  test('admin: a clearing tip per CU is validated, pinned, reported in /admin/state and cleared', async () => {
    const perCu = 5_000 / 201_400;
    const set = await admin('POST', '/auction', { fixedClearingTipPerCu: perCu });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ fixedClearingTip: null, fixedClearingTipPerCu: perCu });
    expect(sim.engine.auction.fixedClearingTipPerCuValue).toBe(perCu);
    expect((await admin('GET', '/state')).body).toMatchObject({
      fixedClearingTip: null,
      fixedClearingTipPerCu: perCu,
      clearingTip: 5_000, // the pin priced over the 201,400-CU reference bundle
    });
    for (const bad of [-1, 'cheap', true, {}, [0.1]]) {
      const refused = await admin('POST', '/auction', { fixedClearingTipPerCu: bad });
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual({
        error: { message: 'fixedClearingTipPerCu must be a non-negative number of lamports per CU or null' },
      });
    }
    // A request refused for one key sets none of the others.
    expect((await admin('POST', '/auction', { fixedClearingTipPerCu: 1, regime: 'storm' })).status).toBe(400);
    expect(sim.engine.auction.fixedClearingTipPerCuValue).toBe(perCu);
    expect((await admin('POST', '/auction', { fixedClearingTipPerCu: 0 })).body).toMatchObject({
      fixedClearingTipPerCu: 0,
    });
    await admin('POST', '/auction', { fixedClearingTipPerCu: null });
    expect(sim.engine.auction.fixedClearingTipPerCuValue).toBeNull();
    expect((await admin('GET', '/state')).body).toMatchObject({ fixedClearingTipPerCu: null });
  });

  test('admin: actions, LLM script and rate limit', async () => {
    let expired = 0;
    sim.faults.once('expireBlockhashes', () => expired++);
    expect((await admin('POST', '/actions/expireBlockhashes')).status).toBe(200);
    expect(expired).toBe(1);
    expect((await admin('POST', '/actions/meltdown')).status).toBe(404);
    const scripted = await admin('POST', '/llm', { latencyMs: 10, script: [{ kind: 'overloaded' }] });
    expect(scripted.body).toEqual({ latencyMs: 10, pendingScript: [{ kind: 'overloaded' }] });
    expect((await admin('POST', '/llm', { script: [{ kind: 'explode' }] })).status).toBe(400);
    await admin('POST', '/llm/reset');
    expect(sim.llm.pendingScript).toEqual([]);
    expect((await admin('POST', '/rate-limit', { enabled: true, rps: 2 })).body).toEqual({
      enabled: true,
      rps: 2,
      uuidRps: 10,
      penaltyMs: 1_606,
    });
    expect((await admin('POST', '/rate-limit', { penaltyMs: -5 })).status).toBe(400);
    await admin('POST', '/rate-limit', { enabled: false });
  });

  test('same seed, same auctions across whole simnets', async () => {
    const other = await startSimnet({ seed: 3, clock: 'manual', rateLimit: false });
    try {
      sim.cluster.advance(30);
      other.cluster.advance(sim.cluster.slot - other.cluster.slot);
      // The per-slot summary of the background auction: regime, lowest winning tip per CU, what landed.
      const tips = (s: Simnet) =>
        s.engine.auction
          .recent(60)
          .map((slot) => [
            slot.slot,
            slot.regime,
            slot.lowestWinningTipPerCu,
            slot.drawnClearingTip,
            slot.competitorLandedTips,
          ]);
      expect(tips(other)).toEqual(tips(sim));
    } finally {
      await other.stop();
    }
  });

  test('TLS: env points jito-ts at https://localhost and the test certificate', async () => {
    const secure = await startSimnet({ tls: true, clock: 'manual' });
    try {
      const env = secure.env();
      const grpcUrls = (env.BUNDLE_ENGINE_GRPC_URL as string).split(',');
      expect(grpcUrls).toHaveLength(8);
      for (const url of grpcUrls) expect(url).toBe(`https://localhost:${new URL(url).port}`);
      expect(env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).toMatch(/solrelay-simnet-ca-[0-9a-f]+\.pem$/);
    } finally {
      await secure.stop();
    }
  });
});

describe('solrelay-simnet bin', () => {
  test('prints endpoints and env lines, then stops cleanly on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(__dirname, '../src/bin.ts'),
        '--no-rate-limit',
        '--slot-ms',
        '100',
        '--seed',
        '4',
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const deadline = Date.now() + 15_000;
    while (!out.includes('ANTHROPIC_API_KEY=') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const lines = out.trim().split('\n');
    const envLines = lines.filter((line) => !line.startsWith('#'));
    expect(envLines.map((line) => line.split('=')[0])).toEqual([
      'STREAM_ENDPOINT',
      'RPC_URL',
      'BUNDLE_ENGINE_URL',
      'BUNDLE_ENGINE_GRPC_URL',
      'TIP_FLOOR_URL',
      'ANTHROPIC_BASE_URL',
      'ANTHROPIC_API_KEY',
    ]);
    const engineUrl = envLines
      .find((line) => line.startsWith('BUNDLE_ENGINE_URL='))
      ?.split('=')[1]
      ?.split(',')[0];
    const state = (await (await fetch(`${engineUrl}/admin/state`)).json()) as { slot: number };
    expect(state.slot).toBeGreaterThanOrEqual(0);
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
  }, 20_000);

  test('an unknown flag is a usage error', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../src/bin.ts'), '--bogus'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(2);
    expect(err).toMatch(/unknown option --bogus/);
  }, 20_000);
});
