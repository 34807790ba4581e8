import { RelayClient } from '@solrelay/client';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { startInProcessStack, waitUntil, type Stack } from '@solrelay/testkit';
import { baseEnv, freePort, runRelay } from '../helpers/relay-bin';

// One bypass sidecar on simnet, on a pinned port the binary finds through API_PORT. Two transfers are enqueued and
// finalized first, so lifecycle and bundle have real entries to show.
let stack: Stack<Sidecar>;
let env: Record<string, string>;
let bundleIds: string[] = [];

beforeAll(async () => {
  const port = await freePort();
  stack = await startInProcessStack(
    { configFromEnv, startSidecar },
    { tippers: 2, env: { BYPASS_AGENT: '1', API_PORT: String(port) } },
  );
  env = baseEnv({ API_PORT: String(port), RELAY_POLICY_FILE: stack.env.RELAY_POLICY_FILE as string });
  const client = new RelayClient({ baseUrl: stack.sidecar.url });
  try {
    for (let i = 0; i < 2; i++) {
      const handle = await client.enqueue(stack.transfer(1000 + i));
      await handle.waitFor('finalized', { timeoutMs: 20_000 });
    }
    bundleIds = (await client.lifecycle({ last: 10 })).entries.map((e) => e.bundle_id);
  } finally {
    client.close();
  }
}, 40_000);

afterAll(async () => {
  await stack?.close();
});

test('status: a boxed table of the spec fields; --json is GET /status', async () => {
  const text = await runRelay(['status'], { env });
  expect(text.code).toBe(0);
  for (const label of [
    'slot',
    'leader',
    'bundle-engine leader',
    'tip p50',
    'tip p75',
    'stale',
    'decision mode',
    'queue',
    'spend, rolling hour',
  ]) {
    expect(text.stdout).toContain(label);
  }
  // The default policy's spend-limit (0.5 SOL an hour) is shown against what was spent.
  expect(text.stdout).toMatch(/spend, rolling hour \(lamports\)\s*│\s*[\d,_]+ of 500[,_]000[,_]000/);
  expect(text.stdout).toMatch(/^┌/);
  expect(text.stdout).toContain('bypass on');
  // Every tipper of the pool, with its balance and what its tips in flight reserve.
  for (const tipper of stack.tippers)
    expect(text.stdout).toMatch(
      new RegExp(
        `tipper ${tipper.publicKey.toBase58()}\\s*│\\s*[\\d,]+ lamports \\([\\d,]+ reserved, \\d+ in flight\\)`,
      ),
    );

  const json = await runRelay(['status', '--json'], { env });
  expect(json.code).toBe(0);
  const status = JSON.parse(json.stdout);
  expect(status).toMatchObject({ bypass: true, decision_mode: 'reflex', queue: 0 });
  expect(status.slot).toBeGreaterThan(0);
  expect(status.tipper.pubkey).toBe(stack.tipper.publicKey.toBase58());
  expect(status.tippers.map((t: { pubkey: string }) => t.pubkey)).toEqual(
    stack.tippers.map((k) => k.publicKey.toBase58()),
  );
  expect(status.spend).toEqual({ window_lamports: expect.any(Number), limit_lamports: 500_000_000 });
});

test('tip: p25..p99, ema and stale, boxed; --json is GET /tip', async () => {
  const json = await runRelay(['tip', '--json'], { env });
  expect(json.code).toBe(0);
  const tip = JSON.parse(json.stdout);
  expect(tip.p75).toBeGreaterThan(0);
  expect(Object.keys(tip)).toEqual(
    expect.arrayContaining(['p25', 'p50', 'p75', 'p95', 'p99', 'ema', 'stale']),
  );

  const text = await runRelay(['tip'], { env });
  expect(text.code).toBe(0);
  for (const label of ['p25', 'p50', 'p75', 'p95', 'p99', 'ema', 'stale'])
    expect(text.stdout).toContain(label);
  // The floor moves between the two calls, so the text is checked for its shape: lamports with separators.
  for (const stat of ['p25', 'p50', 'p75', 'p95', 'p99', 'ema']) {
    expect(text.stdout).toMatch(new RegExp(`│ ${stat} \\(lamports\\) +│ \\d{1,3}(,\\d{3})* +│`));
  }
  expect(text.stdout).toMatch(/│ stale +│ (yes|no) +│/);
});

test('queue: the size, the count in each state and evicted_total on one line; --json is GET /queue', async () => {
  const text = await runRelay(['queue'], { env });
  expect(text.code).toBe(0);
  expect(text.stdout.trim()).toBe(
    'queue 0  pending 0  submitted 0  landed 0  processed 0  confirmed 0  evicted_total 0',
  );
  const json = await runRelay(['queue', '--json'], { env });
  expect(JSON.parse(json.stdout)).toEqual({
    pending: 0,
    by_state: { pending: 0, submitted: 0, landed: 0, processed: 0, confirmed: 0 },
    evicted_total: 0,
    entries: [],
  });
});

test('lifecycle: columns bundle_id, stage, slot, failure, tip, tier, escalated; --last / -l; most recent last', async () => {
  const text = await runRelay(['lifecycle'], { env });
  expect(text.code).toBe(0);
  for (const head of ['bundle_id', 'stage', 'slot', 'failure', 'tip', 'tier', 'escalated'])
    expect(text.stdout).toContain(head);
  const [first, second] = bundleIds as [string, string];
  expect(text.stdout.indexOf(first)).toBeGreaterThan(0);
  expect(text.stdout.indexOf(second)).toBeGreaterThan(text.stdout.indexOf(first));
  expect(text.stdout).toMatch(/finalized\s*│\s*\d+\s*│\s*-\s*│\s*10,000\s*│\s*reflex \(bypass\)\s*│\s*no/);

  const last1 = await runRelay(['lifecycle', '-l', '1'], { env });
  expect(last1.stdout).toContain(second);
  expect(last1.stdout).not.toContain(first);

  const json = await runRelay(['lifecycle', '--last', '1', '--json'], { env });
  const body = JSON.parse(json.stdout);
  expect(body.entries).toHaveLength(1);
  expect(body.entries[0]).toMatchObject({ bundle_id: second, stage: 'finalized', tip_lamports: 10_000 });
});

test('bundle <id>: the full JSON entry, text and --json alike; an unknown id exits 1 with the server code', async () => {
  const id = bundleIds[0] as string;
  const text = await runRelay(['bundle', id], { env });
  expect(text.code).toBe(0);
  const entry = JSON.parse(text.stdout);
  expect(entry).toMatchObject({ bundle_id: id, stage: 'finalized' });
  expect(entry.timeline.finalized).not.toBeNull();
  expect(entry.tip_floor_at_submit).toHaveProperty('p75');
  expect(entry.transactions).toHaveLength(2);

  const json = await runRelay(['bundle', id, '--json'], { env });
  expect(JSON.parse(json.stdout)).toEqual(entry);

  const missing = await runRelay(['bundle', 'f'.repeat(64), '--json'], { env });
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/RELAY_E_\w+/);
  expect(JSON.parse(missing.stdout).error.exit_code).toBe(1);
});

test('policy set on the running sidecar’s file: the watcher reloads it (GET /policy)', async () => {
  const set = await runRelay(['policy', 'set', 'max-tip', '1_500_000'], { env });
  expect(set.code).toBe(0);
  const client = new RelayClient({ baseUrl: stack.sidecar.url });
  try {
    await waitUntil(async () => (await client.policy()).values['max-tip'] === 1_500_000, 5000, 'the reload');
    expect((await client.policy()).overridden).toEqual(['max-tip']);
  } finally {
    client.close();
  }
  const cleared = await runRelay(['policy', 'clear'], { env });
  expect(cleared.code).toBe(0);
});

test('an unreachable sidecar exits 3 naming the address tried, with a hint', async () => {
  const port = await freePort();
  for (const command of [['status'], ['tip'], ['queue'], ['lifecycle'], ['bundle', 'a'.repeat(64)]]) {
    const run = await runRelay(command, { env: baseEnv({ API_PORT: String(port) }) });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`http://localhost:${port}`);
    expect(run.stderr).toMatch(/hint: .*relay (up|start)/);
    expect(run.stdout).toBe('');
  }
  const json = await runRelay(['status', '--json'], { env: baseEnv({ API_PORT: String(port) }) });
  expect(json.code).toBe(3);
  expect(JSON.parse(json.stdout).error).toMatchObject({ exit_code: 3 });
});

test('an unreachable sidecar names the reason: the system error, or what fetch refused (not "fetch failed")', async () => {
  const refused = await runRelay(['status'], { env: baseEnv({ API_PORT: String(await freePort()) }) });
  expect(refused.stderr).toMatch(/\(ECONNREFUSED\)/);
  // fetch refuses these ports itself (its "bad port" list), so there is no system error code under it.
  for (const port of [1, 6000]) {
    const run = await runRelay(['status'], { env: baseEnv({ API_PORT: String(port) }) });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`http://localhost:${port} (bad port)`);
    expect(run.stderr).not.toContain('fetch failed');
  }
});
