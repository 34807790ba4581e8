import { RelayClient, isRelayError } from '@solrelay/client';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { startStack, waitUntil, type Stack, freePort } from '@solrelay/testkit';
import pino from 'pino';
import { spawnAgent, type RunningAgent } from '../process';

// The built agent process against a real sidecar on simnet (reflex mode, the sidecar's own fallback off): killed
// with SIGKILL and started again, it re-registers and its watchdog decides what was enqueued while it was gone.
let stack: Stack<Sidecar>;
let relay: RelayClient;
const running: RunningAgent[] = [];

beforeAll(async () => {
  stack = await startStack({
    env: { API_PORT: String(await freePort()), RELAY_AGENT_GRACE_S: '0', AGENT_DECISION_MODE: 'reflex' },
    start: (env, dir) =>
      startSidecar(configFromEnv(env, dir), {
        logger: pino({ level: 'silent' }),
        intervals: { tipFloorMs: 300, balanceMs: 300, leadersMs: 1000, rpcSlotMs: 100, blockHeightMs: 200 },
      }),
  });
  relay = new RelayClient({ baseUrl: stack.sidecar.url });
}, 30_000);

afterAll(async () => {
  for (const agent of running)
    if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
  relay?.close();
  await stack?.close();
});

function start(env: Record<string, string> = {}): RunningAgent {
  // Only the API port: RELAY_URL defaults to http://127.0.0.1:${API_PORT}; no model env, so cortex is unavailable.
  const agent = spawnAgent({ API_PORT: new URL(stack.sidecar.url).port, AGENT_WATCHDOG_MS: '30000', ...env });
  running.push(agent);
  return agent;
}

test('killed and restarted, the agent process re-registers and its watchdog picks up what it missed', async () => {
  const first = start();
  expect(await first.waitForLine(/^cortex unavailable: /)).toBe(
    'cortex unavailable: neither ANTHROPIC_API_KEY nor ANTHROPIC_BASE_URL is set; deciding with reflex only',
  );
  expect(await first.waitForLine(/^registered /)).toBe(
    'registered model=reflex-only provider=none mode=reflex',
  );
  const landed = await relay.enqueue(stack.transfer());
  await expect(landed.waitFor('finalized', { timeoutMs: 15_000 })).resolves.toMatchObject({
    state: 'finalized',
  });
  expect(await first.waitForLine(new RegExp(`^submit ${landed.tx_id} tip=\\d+ tier=reflex `))).toMatch(
    // The agent prices per requested CU (issue 30): the contention and the bid per CU it priced at are in the line.
    / escalated=false latency_ms=\d+ contention=\w+ bid_per_cu=[0-9.]+ bundle=[0-9a-f]{12} reason=first attempt at [0-9.]+ lamports\/CU x \d+ CU/,
  );

  first.child.kill('SIGKILL');
  expect(await first.exited).toBe('SIGKILL');
  await waitUntil(
    () =>
      relay.agentInfo().then(
        () => false,
        (e: unknown) => isRelayError(e, 'RELAY_E_AGENT_NOT_CONNECTED'),
      ),
    5_000,
    'the sidecar to see the agent gone',
  );
  const missed = await relay.enqueue(stack.transfer());
  await new Promise((r) => setTimeout(r, 300));
  expect((await missed.record()).attempts).toEqual([]);

  const second = start();
  await second.waitForLine(/^registered model=reflex-only provider=none mode=reflex$/);
  await second.waitForLine(new RegExp(`^watchdog redecide ${missed.tx_id} \\(pending with no decision\\)$`));
  await expect(missed.waitFor('finalized', { timeoutMs: 15_000 })).resolves.toMatchObject({
    state: 'finalized',
  });
  expect(await relay.agentInfo()).toMatchObject({ model: 'reflex-only', provider: 'none' });
  expect(second.stderr()).toBe('');

  second.child.kill('SIGTERM');
  expect(await second.exited).toBe(0);
  expect(second.stdout()).toMatch(/stopping \(SIGTERM\)\n$/);
}, 30_000);
