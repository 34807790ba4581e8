import { RelayError } from '@solrelay/core';
import { waitUntil } from '@solrelay/testkit';
import {
  RelayAgent,
  SsePresence,
  type DecisionModel,
  type ModelResult,
  type RelayAgentOptions,
} from '../src';
import {
  FakePresence,
  FakeRelay,
  memoryLog,
  startAgent as startAgentOnFakes,
  txRecord,
} from './helpers/fakes';

// The agent under stress and races (a hanging or busy model, missed policy changes, events racing the watchdog,
// decisions outliving their transaction, a refused token), against fakes of the sidecar and the model.
const agents: RelayAgent[] = [];
afterEach(() => {
  for (const agent of agents.splice(0)) agent.stop();
});

const hangingModel: DecisionModel = {
  model: 'hang',
  provider: 'test',
  decide: () => new Promise<ModelResult>(() => undefined),
};

function startAgent(relay: FakeRelay, options: Partial<RelayAgentOptions> = {}) {
  return startAgentOnFakes(agents, relay, options);
}

test('with a hanging model, every decision falls back within its deadline, even when model calls are queued', async () => {
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  await startAgent(relay, { model: hangingModel, cortexDeadlineMs: 1_000, maxConcurrentModelCalls: 1 });
  const started = Date.now();
  relay.enqueue('tx_1');
  relay.enqueue('tx_2');
  relay.enqueue('tx_3');
  await waitUntil(() => relay.submits.length === 3, 10_000, 'three fallback submits');
  const latest = Math.max(...relay.submits.map((s) => s.at - started));
  // Each decision ends at its own deadline (1 s + the agent's 250 ms grace), queued or not: about 1.25 s for all
  // three. Deadlines that started only when a queued call got its turn would take at least 3 s. The bound sits
  // between, far enough from both that a loaded machine cannot cross it by chance.
  expect(latest).toBeLessThan(2_500);
}, 10_000);

test('after a resync (sidecar restarted) the agent re-reads the policy before deciding', async () => {
  const relay = new FakeRelay();
  const { presence } = await startAgent(relay);
  presence.register('reflex');
  // The sidecar restarted with an edited policy file: no policy_changed reaches this agent, only resync.
  relay.policyValues = { ...relay.policyValues, 'max-tip': 20_000 };
  relay.emit('resync', { reason: 'unknown_boot', boot_id: 'b2', last_id: null } as never);
  presence.register('reflex');
  await new Promise((r) => setTimeout(r, 50));
  relay.enqueue('tx_a');
  await waitUntil(() => relay.submits.length === 1, 1_000, 'the submit');
  expect(relay.submits[0]!.tip_lamports).toBeLessThanOrEqual(20_000);
});

test('a 422 naming a policy key makes the agent refresh its policy, not repeat the refused tip', async () => {
  const relay = new FakeRelay();
  await startAgent(relay, { refusedCooldownSlots: 2 });
  relay.policyValues = { ...relay.policyValues, 'max-tip': 20_000 }; // changed; the event was missed
  relay.submitError = new RelayError('RELAY_E_POLICY_MAX_TIP_EXCEEDED', {
    key: 'max-tip',
    limit: 20_000,
    actual: 40_000,
  } as never);
  relay.enqueue('tx_a');
  await waitUntil(() => relay.submits.length === 1, 1_000, 'the refused submit');
  relay.submitError = null;
  for (let s = 101; s <= 106; s++) relay.advance(s, s);
  await waitUntil(() => relay.submits.length >= 2, 2_000, 'a second submit');
  expect(relay.submits[1]!.tip_lamports).toBeLessThanOrEqual(20_000);
});

test('a spend-limit refusal cools down without re-reading the policy (the budget is spent, not unknown)', async () => {
  const relay = new FakeRelay();
  await startAgent(relay, { refusedCooldownSlots: 2 });
  let policyReads = 0;
  const realPolicy = relay.policy.bind(relay);
  relay.policy = async () => {
    policyReads += 1;
    return realPolicy();
  };
  relay.submitError = new RelayError('RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED', {
    key: 'spend-limit',
    limit: 500_000_000,
    actual: 500_060_000,
  } as never);
  relay.enqueue('tx_a');
  await waitUntil(() => relay.submits.length === 1, 1_000, 'the refused submit');
  relay.advance(101, 101); // inside the cooldown: no second try
  await new Promise((r) => setTimeout(r, 50));
  expect(relay.submits).toHaveLength(1);
  relay.submitError = null;
  for (let s = 102; s <= 104; s++) relay.advance(s, s);
  await waitUntil(() => relay.submits.length === 2, 2_000, 'the submit after the cooldown');
  expect(policyReads).toBe(0);
});

test('the watchdog does not re-submit a transaction the event path submitted while it read /tx/{id}', async () => {
  const relay = new FakeRelay();
  relay.queueEntries = [{ tx_id: 'tx_a', state: 'pending', age_slots: 0, priority: 'normal', retries: 0 }];
  relay.records.set('tx_a', txRecord('tx_a', { enqueued_slot: 100, expires_at_slot: 250 }));
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const realTx = relay.tx.bind(relay);
  let reads = 0;
  relay.tx = async (id: string) => {
    reads += 1;
    const rec = await realTx(id); // a snapshot taken now (pending, no attempt)...
    await gate; // ...delivered late
    return rec;
  };
  const log = memoryLog();
  const agent = new RelayAgent({ client: relay, presence: new FakePresence(), model: null, log });
  agents.push(agent);
  const starting = agent.start(); // the first sweep reads /tx/tx_a and waits on the gate
  await waitUntil(() => reads === 1, 1_000, 'the watchdog read');
  relay.enqueue('tx_a'); // the event arrives meanwhile; the event path submits
  await waitUntil(() => relay.submits.length === 1, 1_000, 'the event-path submit');
  release();
  await starting;
  await new Promise((r) => setTimeout(r, 100));
  expect(relay.submits).toHaveLength(1);
});

test('no submit for a transaction that went terminal while its decision was reading the tip floor', async () => {
  const relay = new FakeRelay();
  await startAgent(relay, { floorMaxAgeMs: 0 });
  const realTip = relay.tip.bind(relay);
  relay.tip = async () => {
    await new Promise((r) => setTimeout(r, 100));
    return realTip();
  };
  relay.enqueue('tx_a');
  await new Promise((r) => setTimeout(r, 20));
  relay.emit('tx_status_changed', {
    tx_id: 'tx_a',
    state: 'expired',
    bundle_id: null,
    tx_signatures: [],
    failure: null,
  });
  await new Promise((r) => setTimeout(r, 300));
  expect(relay.submits).toHaveLength(0);
});

test('no submit after stop() for a decision that was in flight', async () => {
  const relay = new FakeRelay();
  const { agent } = await startAgent(relay, { floorMaxAgeMs: 0 });
  const realTip = relay.tip.bind(relay);
  relay.tip = async () => {
    await new Promise((r) => setTimeout(r, 100));
    return realTip();
  };
  relay.enqueue('tx_a');
  await new Promise((r) => setTimeout(r, 20));
  agent.stop();
  await new Promise((r) => setTimeout(r, 300));
  expect(relay.submits).toHaveLength(0);
});

test('presence stops on 401 (like the client) instead of re-registering forever', async () => {
  let calls = 0;
  const presence = new SsePresence({
    baseUrl: 'http://relay.test',
    token: 'wrong',
    model: 'm',
    provider: 'p',
    fetch: (async () => {
      calls += 1;
      return new Response(
        JSON.stringify({ error: { code: 'RELAY_E_AUTH_INVALID_TOKEN', message: 'bad token', details: {} } }),
        { status: 401, headers: { 'content-type': 'application/json' } },
      );
    }) as typeof fetch,
  });
  const lost: unknown[] = [];
  presence.open({ registered: () => undefined, modeChanged: () => undefined, lost: (i) => lost.push(i) });
  await new Promise((r) => setTimeout(r, 1_800));
  presence.close();
  expect(calls).toBe(1);
}, 10_000);

test('a decision queued behind a busy model falls back with model_busy at its deadline, without calling the model', async () => {
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  let calls = 0;
  const model: DecisionModel = { ...hangingModel, decide: (r) => ((calls += 1), hangingModel.decide(r)) };
  await startAgent(relay, { model, cortexDeadlineMs: 300, maxConcurrentModelCalls: 1 });
  const started = Date.now();
  relay.enqueue('tx_1');
  relay.enqueue('tx_2');
  await waitUntil(() => relay.submits.length === 2, 5_000, 'both fallbacks');
  const [queued, hung] = relay.submits;
  expect(queued).toMatchObject({ tx_id: 'tx_2', tip_lamports: 40_000, decision_mode: 'reflex' });
  expect((queued!.trace as { fallback_reason: string }).fallback_reason).toMatch(/^model_busy: /);
  expect(queued!.at - started).toBeGreaterThanOrEqual(280);
  // It came before the hung call's own fallback (deadline + 250 ms grace): the order above proves it; this only
  // bounds it loosely, with room for a loaded machine.
  expect(queued!.at - started).toBeLessThan(300 + 1_500);
  expect((hung!.trace as { fallback_reason: string }).fallback_reason).toMatch(/^timeout: /);
  expect(calls).toBe(1);
});

test("the submit's decision_mode is the tier that produced the tip: cortex for a model answer, reflex for any fallback", async () => {
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  const answers: Record<string, unknown> = {
    tx_model: { action: 'submit', tip_lamports: 42_000, rationale: 'fine' },
    tx_bad: { action: 'submit', tip_lamports: 99_000_000, rationale: 'too much' },
  };
  const model: DecisionModel = {
    model: 'scripted',
    provider: 'test',
    decide: async ({ snapshot }) => ({
      ok: true,
      tool_input: answers[snapshot.tx_id],
      request_id: 'req_1',
      latency_ms: 1,
      usage: null,
      stop_reason: 'tool_use',
    }),
  };
  const submitted: string[] = [];
  await startAgent(relay, {
    model,
    onSubmit: (r) => submitted.push(`${r.tx_id}:${r.tier}:${r.decision_mode}`),
  });
  relay.enqueue('tx_model');
  relay.enqueue('tx_bad');
  await waitUntil(() => relay.submits.length === 2, 1_000, 'two submits');
  const byId = new Map(relay.submits.map((s) => [s.tx_id, s]));
  expect(byId.get('tx_model')).toMatchObject({ tip_lamports: 42_000, decision_mode: 'cortex' });
  // The trace keeps what was attempted (cortex) and why it fell back; the tip is reflex's.
  expect(byId.get('tx_bad')).toMatchObject({ tip_lamports: 40_000, decision_mode: 'reflex' });
  expect(byId.get('tx_bad')!.trace).toMatchObject({
    decision_mode: 'cortex',
    fallback_reason: 'invalid_answer: tip_above_max',
  });
  expect(submitted.sort()).toEqual(['tx_bad:cortex:reflex', 'tx_model:cortex:cortex']);
});

test('a presence re-registration alone makes the agent re-read the policy before deciding', async () => {
  const relay = new FakeRelay();
  const { presence, log } = await startAgent(relay);
  presence.register('reflex');
  relay.policyValues = { ...relay.policyValues, 'max-tip': 20_000 };
  presence.register('reflex'); // reconnected after a gap: the sidecar may have restarted with another policy
  // The sweep after the re-read sees it queued (as the sidecar would list it), so it stays tracked.
  relay.queueEntries = [{ tx_id: 'tx_a', state: 'pending', age_slots: 0, priority: 'normal', retries: 0 }];
  relay.enqueue('tx_a');
  await waitUntil(() => relay.submits.length === 1, 1_000, 'the submit');
  expect(relay.submits[0]!.tip_lamports).toBeLessThanOrEqual(20_000);
  expect(log.lines).toContainEqual(
    expect.stringMatching(/^re-read sidecar state \(re-registered\) .*max-tip=20000/),
  );
});

test('a transaction reflex stopped is not re-decided (and stopped again) by every watchdog run', async () => {
  const relay = new FakeRelay();
  // Past its expiry slot but still queued until the sidecar expires it.
  relay.queueEntries = [{ tx_id: 'tx_old', state: 'pending', age_slots: 60, priority: 'normal', retries: 0 }];
  relay.records.set('tx_old', txRecord('tx_old', { enqueued_slot: 40, expires_at_slot: 99 }));
  const { agent, log } = await startAgent(relay);
  expect(log.lines.filter((l) => l.startsWith('stop tx_old'))).toHaveLength(1);
  await expect(agent.sweep('interval')).resolves.toEqual({ checked: 0, redecided: 0 });
  await agent.sweep('interval');
  expect(log.lines.filter((l) => l.startsWith('stop tx_old'))).toHaveLength(1);
  expect(relay.submits).toHaveLength(0);
});

test('a sweep asked for while one runs gets a fresh sweep after it (its /queue read may predate the request)', async () => {
  const relay = new FakeRelay();
  const { agent } = await startAgent(relay);
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const realQueue = relay.queue.bind(relay);
  let reads = 0;
  relay.queue = async () => {
    reads += 1;
    const queue = await realQueue(); // read now...
    if (reads === 1) await gate; // ...answered late
    return queue;
  };
  const running = agent.sweep('interval');
  // Enqueued after the running sweep read /queue: only a later read can see it.
  relay.queueEntries = [{ tx_id: 'tx_late', state: 'pending', age_slots: 0, priority: 'normal', retries: 0 }];
  relay.records.set('tx_late', txRecord('tx_late', { enqueued_slot: 100, expires_at_slot: 250 }));
  const askedA = agent.sweep('events reconnected');
  const askedB = agent.sweep('resync');
  expect(askedB).toBe(askedA); // requests during one run share the one follow-up
  release();
  await expect(running).resolves.toEqual({ checked: 0, redecided: 0 });
  await expect(askedA).resolves.toEqual({ checked: 1, redecided: 1 });
  expect(reads).toBe(2);
  await waitUntil(() => relay.submits.length === 1, 1_000, 'the late one decided');
});

test('a refused token during start-up rejects start() instead of retrying forever', async () => {
  const relay = new FakeRelay();
  let reads = 0;
  relay.policy = async () => {
    reads += 1;
    throw new RelayError('RELAY_E_AUTH_INVALID_TOKEN');
  };
  const presence = new FakePresence();
  const agent = new RelayAgent({ client: relay, presence, model: null, log: memoryLog() });
  agents.push(agent);
  await expect(agent.start()).rejects.toMatchObject({ code: 'RELAY_E_AUTH_INVALID_TOKEN', status: 401 });
  expect(reads).toBe(1);
  expect(presence.handlers).toBeNull(); // never registered
});

test('a refused token after start-up (event stream or presence) stops the agent and is reported once', async () => {
  for (const refusedBy of ['events', 'presence'] as const) {
    const relay = new FakeRelay();
    const refusals: string[] = [];
    const { agent, presence } = await startAgent(relay, { onUnauthorized: (e) => refusals.push(e.code) });
    const error = new RelayError('RELAY_E_AUTH_INVALID_TOKEN');
    if (refusedBy === 'events') {
      relay.emit(
        'connection' as never,
        { state: 'unauthorized', attempt: 1, delay_ms: null, error } as never,
      );
      relay.emit(
        'connection' as never,
        { state: 'unauthorized', attempt: 1, delay_ms: null, error } as never,
      );
    } else {
      presence.handlers!.unauthorized!(error);
    }
    expect(refusals).toEqual(['RELAY_E_AUTH_INVALID_TOKEN']);
    expect(presence.closed).toBe(true);
    relay.enqueue('tx_a');
    await new Promise((r) => setTimeout(r, 50));
    expect(relay.submits).toHaveLength(0);
    expect(agent.tracked('tx_a')).toBeNull();
  }
});
