import { RelayClient, type LifecycleEntry } from '@solrelay/client';
import { MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT } from '@solrelay/core';
import type { Sidecar } from '@solrelay/sidecar';
import { waitUntil, type Stack } from '@solrelay/testkit';
import { agentFor, startAgentStack, type TestAgent } from '../helpers/agent';

// One real stack (simnet with 60 ms slots + the real sidecar, booting in reflex mode) and one agent using the real
// Anthropic SDK against the simnet's Messages endpoint. Transactions go one at a time so the LLM script applies to
// the decision under test.
let stack: Stack<Sidecar>;
let relay: RelayClient;
let agent: TestAgent;

beforeAll(async () => {
  stack = await startAgentStack({ AGENT_DECISION_MODE: 'reflex' });
  relay = new RelayClient({ baseUrl: stack.sidecar.url });
  agent = agentFor(stack, { cortexDeadlineMs: 1_500 });
  await agent.agent.start();
}, 30_000);

afterAll(async () => {
  agent?.close();
  relay?.close();
  await stack?.close();
});

/**
 * Enqueue one transfer and wait for it to finalize. Returns the lifecycle entry of the agent's first attempt (the
 * decision under test; a slow first decision can miss its leader window, and a later attempt then lands) and the
 * entry of the bundle that finalized.
 */
async function landOne(): Promise<{ txId: string; entry: LifecycleEntry; final: LifecycleEntry }> {
  const handle = await relay.enqueue(stack.transfer());
  const status = await handle.waitFor('finalized', { timeoutMs: 15_000 });
  const final = await relay.bundle(status.bundle_id as string);
  const first = agent.submits.find((s) => s.tx_id === handle.tx_id);
  if (!first) throw new Error(`the agent made no submit for ${handle.tx_id}`);
  const entry = await relay.bundle(first.bundle_id);
  return { txId: handle.tx_id, entry, final };
}

/** LLM requests made for a transaction's first decision (a snapshot without a previous attempt). */
function firstDecisionRequests(txId: string) {
  return stack.simnet.llm.requests.filter((r) => {
    const messages = r.body.messages as Array<{ content: string }>;
    const snapshot = JSON.parse(messages[messages.length - 1]!.content) as {
      tx_id: string;
      previous_attempt?: unknown;
    };
    return snapshot.tx_id === txId && snapshot.previous_attempt === undefined;
  });
}

type Trace = Record<string, unknown> & { usage?: Record<string, number>; inputs?: Record<string, unknown> };

test('registers on the presence stream: /internal/agent/info shows the model and provider', async () => {
  await waitUntil(() => agent.lines.some((l) => l.startsWith('registered ')), 5_000, 'registration');
  const info = await relay.agentInfo();
  expect(info).toMatchObject({ model: 'claude-haiku-4-5', provider: 'anthropic' });
  expect(agent.agent.mode).toBe('reflex');
  expect(agent.lines).toContain('registered model=claude-haiku-4-5 provider=anthropic mode=reflex');
});

test('reflex mode: the transaction finalizes with decision_mode reflex and a reflex trace, no model call', async () => {
  const { txId, entry, final } = await landOne();
  expect(entry).toMatchObject({ tx_id: txId, decision_mode: 'reflex', escalated: false });
  expect(final.stage).toBe('finalized');
  const trace = entry.ai_decision_trace as Trace;
  expect(trace).toMatchObject({ decision_mode: 'reflex', escalated: false, fallback_reason: null });
  expect(trace.model).toBeUndefined();
  expect((trace.inputs as { tx_id: string }).tx_id).toBe(txId);
  // The tip is the policy's p75 floor at decision time, within the policy.
  expect(entry.tip_lamports).toBeGreaterThanOrEqual(1_000);
  expect(entry.tip_lamports).toBeLessThanOrEqual(2_000_000);
  expect(firstDecisionRequests(txId)).toEqual([]);
  const submit = agent.submits.find((s) => s.tx_id === txId);
  expect(submit).toMatchObject({ tier: 'reflex', escalated: false, fallback_reason: null });
}, 20_000);

test('issue 30: the agent prices per requested CU: tx_enqueued tells the CU, the submit carries the pricing', async () => {
  const { txId, entry } = await landOne();
  // One System transfer requests 3,000 CU (SIMD-0170's builtin default); the bundle reflex prices adds relay's tip
  // transaction at most (the sidecar's TIP_TX_MAX_COMPUTE_UNITS, 1,399), as the sidecar's fallback counts it.
  const priced = MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT + 1_399;
  expect(agent.lines).toContainEqual(expect.stringMatching(new RegExp(`^enqueued ${txId} .* cu=${priced} `)));
  const trace = entry.ai_decision_trace as Trace;
  const inputs = trace.inputs as { compute_units?: number; contention?: { class: string } };
  expect(inputs.compute_units).toBe(priced);
  expect(['contended', 'uncontended', 'unknown']).toContain(inputs.contention?.class);
  expect(entry).toMatchObject({ tx_id: txId, decision_mode: 'reflex' });
  // The sidecar counted the bundle as sent: the same transfer plus the tip transaction it built (450..1,399 CU).
  expect(entry.compute_units).toBeGreaterThanOrEqual(MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT + 450);
  expect(entry.compute_units).toBeLessThanOrEqual(priced);
  // The submit's pricing reached the lifecycle: the contention the agent priced with and reflex's per-CU signal.
  // Without it the sidecar records contention null and "agent: a tip not priced per CU".
  expect(entry.contention).toBe(inputs.contention?.class);
  expect(entry.priced_by).not.toMatch(/not priced per CU/);
  const record = await relay.tx(txId);
  const attempt = record.attempts.find((a) => a.bundle_id === entry.bundle_id);
  // Reflex's bid per CU (the submit's pricing.bid_per_cu), not the tip over the sidecar's own count.
  expect(attempt?.bid_per_cu).toBeDefined();
  expect(attempt?.bid_per_cu).not.toBe(attempt?.tip_per_cu);
}, 20_000);

test('a runtime switch to cortex takes effect on the next decision: the model decides, the trace is complete', async () => {
  await relay.setMode('cortex');
  await waitUntil(() => agent.agent.mode === 'cortex', 3_000, 'mode cortex at the agent');
  const before = stack.simnet.llm.requests.length;
  const first = await landOne();
  const second = await landOne();
  for (const { txId, entry, final } of [first, second]) {
    expect(final).toMatchObject({ tx_id: txId, stage: 'finalized', decision_mode: 'cortex' });
    expect(entry).toMatchObject({ tx_id: txId, decision_mode: 'cortex', escalated: false });
    const trace = entry.ai_decision_trace as Trace;
    expect(trace).toMatchObject({
      decision_mode: 'cortex',
      model: 'claude-haiku-4-5',
      provider: 'anthropic',
      fallback_reason: null,
      tool_input: { action: 'submit', tip_lamports: entry.tip_lamports },
    });
    expect(trace.request_id).toMatch(/^req_simnet_/);
    expect(String(trace.rationale)).toMatch(/^\[simnet\]/);
    expect(trace.latency_ms).toEqual(expect.any(Number));
    expect(trace.usage?.input_tokens).toBeGreaterThan(0);
    expect(trace.usage?.output_tokens).toBeGreaterThan(0);
  }
  // The static prompt is marked for caching: the first call writes the cache, the second reads it.
  const firstUsage = (first.entry.ai_decision_trace as Trace).usage!;
  const secondTrace = second.entry.ai_decision_trace as Trace;
  expect(firstUsage.cache_creation_input_tokens! + firstUsage.cache_read_input_tokens!).toBeGreaterThan(0);
  expect(secondTrace.usage?.cache_read_input_tokens).toBeGreaterThan(0);
  expect(secondTrace.cache_hit).toBe(true);
  // What the SDK sent: one strict decide_submission tool, a cache-marked system prompt, the snapshot as JSON.
  expect(firstDecisionRequests(first.txId)).toHaveLength(1);
  expect(firstDecisionRequests(second.txId)).toHaveLength(1);
  const sent = stack.simnet.llm.requests.slice(before);
  const body = sent[0]!.body as {
    tools: Array<{ name: string; strict: boolean }>;
    system: Array<{ cache_control?: unknown }>;
    messages: Array<{ content: string }>;
  };
  expect(body.tools).toEqual([expect.objectContaining({ name: 'decide_submission', strict: true })]);
  expect(body.system[0]?.cache_control).toEqual({ type: 'ephemeral' });
  expect(JSON.parse(body.messages[0]!.content)).toMatchObject({
    tx_id: first.txId,
    policy: { 'max-tip': 2_000_000 },
    // Issue 30: the model reads the bundle's requested CU, its contention and reflex's per-CU suggestion.
    compute_units: MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT + 1_399,
    contention: { class: expect.stringMatching(/^(contended|uncontended|unknown)$/) },
    reflex: { pricing: { bid_per_cu: expect.any(Number), tip_per_cu: expect.any(Number) } },
  });
  // The model's tip went out priced per CU: the lifecycle shows the contention and the cortex signal.
  expect(first.entry.contention).toEqual(expect.stringMatching(/^(contended|uncontended|unknown)$/));
  expect(first.entry.priced_by).toMatch(/^cortex: the model's tip over \d+ CU/);
  expect(sent[0]!.headers.authorization).toBe(true);
}, 30_000);

test('cortex with adversarial answers: a tip above the cap and a hang fall back to reflex within the deadline', async () => {
  expect(agent.agent.mode).toBe('cortex');
  stack.simnet.llm.script({ kind: 'malformed', variant: 'tip_above_cap' });
  const capped = await landOne();
  const cappedTrace = capped.entry.ai_decision_trace as Trace;
  expect(capped.final.stage).toBe('finalized');
  // Cortex was attempted (the trace says so) but reflex's tip was sent, so the lifecycle records reflex as the
  // tier that decided (the submit's decision_mode).
  expect(cappedTrace.decision_mode).toBe('cortex');
  expect(capped.entry.decision_mode).toBe('reflex');
  expect(cappedTrace.fallback_reason).toBe('invalid_answer: tip_above_max');
  expect((cappedTrace.tool_input as { tip_lamports: number }).tip_lamports).toBe(20_000_000);
  expect(capped.entry.tip_lamports).toBeLessThanOrEqual(2_000_000);
  expect(capped.entry.tip_lamports).toBe((cappedTrace.reflex as { tip_lamports: number }).tip_lamports);

  // A hang is cut by the 1.5 s deadline (AbortSignal), then reflex decides.
  stack.simnet.llm.script({ kind: 'hang' });
  const hung = await landOne();
  expect(hung.final.stage).toBe('finalized');
  const hungTrace = hung.entry.ai_decision_trace as Trace;
  expect(String(hungTrace.fallback_reason)).toMatch(/^timeout/);
  expect(hungTrace.latency_ms as number).toBeGreaterThanOrEqual(1_400);
  // Cut near the deadline, not by the SDK's own 10-minute timeout (the slack is for a loaded machine).
  expect(hungTrace.latency_ms as number).toBeLessThan(1_500 + 2_000);
  const submit = agent.submits.find((s) => s.tx_id === hung.txId)!;
  expect(submit.fallback_reason).toMatch(/^timeout/);
  expect(submit.latency_ms).toBeLessThan(1_500 + 3_000);
}, 30_000);

test('switching back to reflex: the next decision makes no model call', async () => {
  await relay.setMode('reflex');
  await waitUntil(() => agent.agent.mode === 'reflex', 3_000, 'mode reflex at the agent');
  const { txId, entry, final } = await landOne();
  expect(final.stage).toBe('finalized');
  expect(entry.decision_mode).toBe('reflex');
  expect((entry.ai_decision_trace as Trace).decision_mode).toBe('reflex');
  expect(firstDecisionRequests(txId)).toEqual([]);
  expect(agent.lines).toContain('mode reflex (was cortex)');
  expect(agent.errors).toEqual([]);
}, 20_000);
