import { RelayClient } from '@solrelay/client';
import type { Sidecar } from '@solrelay/sidecar';
import { waitUntil, type Stack } from '@solrelay/testkit';
import { agentFor, startAgentStack, type TestAgent } from '../helpers/agent';

// Real simnet + sidecar: the sidecar is in cortex mode but the agent has no model, so every decision is a
// reflex one (the agent's trace says decision_mode "reflex", fallback "cortex_unavailable"). The lifecycle entry's
// decision_mode must tell the truth about which tier decided.
let stack: Stack<Sidecar>;
let relay: RelayClient;
let agent: TestAgent;

beforeAll(async () => {
  stack = await startAgentStack({ AGENT_DECISION_MODE: 'cortex' });
  relay = new RelayClient({ baseUrl: stack.sidecar.url });
  agent = agentFor(stack, { withModel: false });
  await agent.agent.start();
}, 30_000);

afterAll(async () => {
  agent?.close();
  relay?.close();
  await stack?.close();
});

test('cortex mode without a model: the lifecycle entry records the tier that decided (reflex)', async () => {
  await waitUntil(() => agent.lines.some((l) => l.startsWith('registered ')), 5_000, 'registration');
  const handle = await relay.enqueue(stack.transfer());
  await handle.waitFor('finalized', { timeoutMs: 15_000 });
  const first = agent.submits.find((s) => s.tx_id === handle.tx_id)!;
  expect(first.tier).toBe('reflex');
  const entry = await relay.bundle(first.bundle_id);
  expect((entry.ai_decision_trace as { decision_mode?: string }).decision_mode).toBe('reflex');
  expect(entry.decision_mode).toBe('reflex');
}, 25_000);
