import { RelayClient, isRelayError } from '@solrelay/client';
import type { Sidecar } from '@solrelay/sidecar';
import { freePort, waitUntil, type Stack } from '@solrelay/testkit';
import { agentFor, startAgentStack, type TestAgent } from '../helpers/agent';

// A real stack on a pinned port (so a restarted sidecar is at the same URL), reflex mode, no sidecar fallback: a
// transaction only moves when an agent decides it.
let stack: Stack<Sidecar>;
let relay: RelayClient;
const agents: TestAgent[] = [];

function newAgent(): TestAgent {
  const agent = agentFor(stack, { withModel: false });
  agents.push(agent);
  return agent;
}

beforeAll(async () => {
  stack = await startAgentStack({ API_PORT: String(await freePort()) });
  relay = new RelayClient({ baseUrl: stack.sidecar.url });
}, 30_000);

afterEach(() => {
  for (const agent of agents.splice(0)) agent.close();
});

afterAll(async () => {
  relay?.close();
  await stack?.close();
});

test('an agent stopped and started again re-registers, and its watchdog decides what was enqueued meanwhile', async () => {
  const first = newAgent();
  await first.agent.start();
  expect(first.lines[0]).toBe(
    'cortex unavailable: neither ANTHROPIC_API_KEY nor ANTHROPIC_BASE_URL is set; deciding with reflex only',
  );
  await waitUntil(
    async () => (await relay.agentInfo().catch(() => null))?.model === 'reflex-only',
    5_000,
    'agent',
  );
  first.close();
  await waitUntil(
    () =>
      relay.agentInfo().then(
        () => false,
        (e: unknown) => isRelayError(e, 'RELAY_E_AGENT_NOT_CONNECTED'),
      ),
    5_000,
    'the agent gone',
  );

  // Enqueued with no agent: nobody decides (the sidecar's fallback is off), it waits pending.
  const handle = await relay.enqueue(stack.transfer());
  await new Promise((r) => setTimeout(r, 500));
  expect((await handle.record()).state).toBe('pending');
  expect((await handle.record()).attempts).toEqual([]);

  const second = newAgent();
  await second.agent.start();
  expect(second.lines).toContain(`watchdog redecide ${handle.tx_id} (pending with no decision)`);
  await expect(handle.waitFor('finalized', { timeoutMs: 15_000 })).resolves.toMatchObject({
    state: 'finalized',
  });
  expect(second.submits.map((s) => s.tx_id)).toContain(handle.tx_id);
  expect(await relay.agentInfo()).toMatchObject({ model: 'reflex-only', provider: 'none' });
}, 30_000);

test('a sidecar restart: the agent re-registers on the presence stream and keeps deciding', async () => {
  const agent = newAgent();
  await agent.agent.start();
  await waitUntil(() => agent.lines.some((l) => l.startsWith('registered ')), 5_000, 'registration');
  await stack.restart();
  await waitUntil(
    () => agent.lines.filter((l) => l.startsWith('registered ')).length >= 2,
    10_000,
    're-registration',
  );
  expect(agent.errors.some((l) => /^presence lost .*; reconnecting in \d+ ms \(attempt 1\)$/.test(l))).toBe(
    true,
  );
  await waitUntil(
    async () => (await relay.agentInfo().catch(() => null))?.provider === 'none',
    5_000,
    'agent info',
  );

  const handle = await relay.enqueue(stack.transfer());
  await expect(handle.waitFor('finalized', { timeoutMs: 15_000 })).resolves.toMatchObject({
    state: 'finalized',
  });
  expect(agent.submits.map((s) => s.tx_id)).toContain(handle.tx_id);
}, 30_000);
