import { RelayError } from '@solrelay/core';
import { waitUntil } from '@solrelay/testkit';
import type { DecisionModel, ModelResult, RelayAgent, RelayAgentOptions } from '../src';
import { FakeRelay, startAgent as startAgentOnFakes, txRecord } from './helpers/fakes';

// The agent's own logic against fakes of the sidecar and the model (the e2e tests use the real ones).
const agents: RelayAgent[] = [];
afterEach(() => {
  for (const agent of agents.splice(0)) agent.stop();
});

/** A model whose answer the test chooses per transaction; `hang` never settles (the agent's guard must act). */
class ScriptedModel implements DecisionModel {
  readonly model = 'scripted';
  readonly provider = 'test';
  readonly calls: string[] = [];
  constructor(private readonly answer: (txId: string) => ModelResult | 'hang') {}
  decide({ snapshot }: { snapshot: { tx_id: string } }): Promise<ModelResult> {
    this.calls.push(snapshot.tx_id);
    const answer = this.answer(snapshot.tx_id);
    return answer === 'hang' ? new Promise(() => undefined) : Promise.resolve(answer);
  }
}

const ok = (input: unknown): ModelResult => ({
  ok: true,
  tool_input: input,
  request_id: 'req_1',
  latency_ms: 5,
  usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 8, cache_creation_input_tokens: 0 },
  stop_reason: 'tool_use',
});

function startAgent(relay: FakeRelay, options: Partial<RelayAgentOptions> = {}) {
  return startAgentOnFakes(agents, relay, options);
}

test('holds while no bundle-engine leader is within 2 slots, and submits on the slot_update that brings one', async () => {
  const relay = new FakeRelay();
  relay.nextBundleEngineSlot = 110;
  const { log } = await startAgent(relay);
  relay.enqueue('tx_a');
  await waitUntil(() => log.lines.some((l) => l.startsWith('hold tx_a tier=reflex')), 5_000, 'a hold');
  relay.advance(101, 110);
  relay.advance(102, 110);
  await new Promise((r) => setTimeout(r, 50));
  expect(relay.submits).toHaveLength(0);
  expect(log.lines.filter((l) => l.startsWith('hold tx_a'))).toHaveLength(1); // said once, not every slot
  relay.advance(108, 110);
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the submit');
  expect(relay.submits[0]).toMatchObject({ tx_id: 'tx_a', tip_lamports: 40_000, escalated: false });
  expect(relay.submits[0]!.trace).toMatchObject({ decision_mode: 'reflex', fallback_reason: null });
  expect(log.lines.find((l) => l.startsWith('submit tx_a'))).toMatch(
    /^submit tx_a tip=40000 tier=reflex escalated=false latency_ms=\d+ bundle=\d{12} reason=first attempt at p75/,
  );
});

test('fee_too_low: reflex escalates to the model (escalated: true) and the answer is bounded by escalation-step', async () => {
  const relay = new FakeRelay();
  const model = new ScriptedModel(() => ok({ action: 'submit', tip_lamports: 75_000, rationale: 'outbid' }));
  const { agent } = await startAgent(relay, { model });
  relay.enqueue('tx_b');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'first submit');
  expect(model.calls).toEqual([]); // an easy first attempt: no model
  relay.emit('bundle_settled', {
    bundle_id: 'b1',
    stage: 'failed',
    failure_type: 'fee_too_low',
    tx_id: 'tx_b',
    tip_lamports: 40_000,
    retries: 1,
  });
  await waitUntil(() => relay.submits.length === 2, 5_000, 'the retry');
  expect(model.calls).toEqual(['tx_b']);
  expect(relay.submits[1]).toMatchObject({ tip_lamports: 75_000, escalated: true });
  expect(relay.submits[1]!.trace).toMatchObject({
    decision_mode: 'reflex',
    escalated: true,
    fallback_reason: null,
    cache_hit: true,
    inputs: {
      previous_attempt: { tip_lamports: 40_000, outcome: 'fee_too_low' },
      allowed_tip: { min: 1_000, max: 90_000 },
    },
  });
  expect(agent.tracked('tx_b')).toMatchObject({ status: 'submitted', retries: 1 });

  // A second fee_too_low where the model overshoots the step: refused, reflex's stepped tip is used.
  const overshoot = new ScriptedModel(() =>
    ok({ action: 'submit', tip_lamports: 500_000, rationale: 'all in' }),
  );
  const relay2 = new FakeRelay();
  await startAgent(relay2, { model: overshoot });
  relay2.enqueue('tx_c');
  await waitUntil(() => relay2.submits.length === 1, 5_000, 'first submit');
  relay2.emit('bundle_settled', {
    bundle_id: 'b',
    stage: 'failed',
    failure_type: 'fee_too_low',
    tx_id: 'tx_c',
    tip_lamports: 40_000,
    retries: 1,
  });
  await waitUntil(() => relay2.submits.length === 2, 5_000, 'the retry');
  expect(relay2.submits[1]).toMatchObject({ tip_lamports: 40_000, escalated: true });
  expect(relay2.submits[1]!.trace).toMatchObject({ fallback_reason: 'invalid_answer: tip_above_max' });
});

test("a pack's lead retries from its own tip, not the pack's raised one (attempt_own_tip_lamports)", async () => {
  const relay = new FakeRelay();
  await startAgent(relay);
  relay.enqueue('tx_p');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'first submit');
  expect(relay.submits[0]).toMatchObject({ tip_lamports: 40_000 });
  // Its bundle carried riders under a tip raised to 80,000 and was dropped: the retry goes at its own 40,000.
  relay.emit('bundle_settled', {
    bundle_id: 'b-pack',
    stage: 'failed',
    failure_type: 'dropped',
    tx_id: 'tx_p',
    tip_lamports: 80_000,
    attempt_own_tip_lamports: 40_000,
    retries: 1,
  });
  await waitUntil(() => relay.submits.length === 2, 5_000, 'the retry');
  expect(relay.submits[1]).toMatchObject({ tx_id: 'tx_p', tip_lamports: 40_000 });
});

test('a hanging model call does not block other transactions; it falls back at its deadline', async () => {
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  const model = new ScriptedModel((txId) =>
    txId === 'tx_slow' ? 'hang' : ok({ action: 'submit', tip_lamports: 42_000, rationale: 'fine' }),
  );
  // A deadline far beyond the fast answer (which comes at once), so the order below cannot flip on a slow machine.
  await startAgent(relay, { model, cortexDeadlineMs: 2_000 });
  const started = Date.now();
  relay.enqueue('tx_slow');
  relay.enqueue('tx_fast');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the fast submit');
  // Order, not time, proves it: had the hang held the queue, tx_fast would come after tx_slow's fallback.
  expect(relay.submits[0]).toMatchObject({ tx_id: 'tx_fast', tip_lamports: 42_000 });
  await waitUntil(() => relay.submits.length === 2, 10_000, 'the slow one falls back');
  const slow = relay.submits[1]!;
  expect(slow).toMatchObject({ tx_id: 'tx_slow', tip_lamports: 40_000 });
  expect((slow.trace as { fallback_reason: string }).fallback_reason).toMatch(/^timeout/);
  expect(slow.at - started).toBeGreaterThanOrEqual(2_000);
  // Cut at its deadline (2 s + the 250 ms grace), not left hanging; the slack is for a loaded machine.
  expect(slow.at - started).toBeLessThan(2_000 + 250 + 3_000);
}, 20_000);

test('the mode follows the presence stream and mode_changed; the next decision uses it', async () => {
  const relay = new FakeRelay();
  const model = new ScriptedModel(() => ok({ action: 'submit', tip_lamports: 41_000, rationale: 'model' }));
  const { agent, presence, log } = await startAgent(relay, { model });
  presence.register('reflex');
  relay.enqueue('tx_1');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'reflex submit');
  expect(relay.submits[0]!.tip_lamports).toBe(40_000);
  presence.handlers!.modeChanged('cortex');
  expect(agent.mode).toBe('cortex');
  expect(log.lines).toContain('mode cortex (was reflex)');
  relay.enqueue('tx_2');
  await waitUntil(() => relay.submits.length === 2, 5_000, 'cortex submit');
  expect(relay.submits[1]).toMatchObject({ tx_id: 'tx_2', tip_lamports: 41_000 });
  expect(relay.submits[1]!.trace).toMatchObject({
    decision_mode: 'cortex',
    model: 'scripted',
    request_id: 'req_1',
  });
  relay.emit('mode_changed', { decision_mode: 'reflex', previous: 'cortex' });
  relay.enqueue('tx_3');
  await waitUntil(() => relay.submits.length === 3, 5_000, 'reflex again');
  expect(relay.submits[2]!.tip_lamports).toBe(40_000);
  expect(model.calls).toEqual(['tx_2']);
});

test('the model saying hold is respected, and it is not asked again before the cooldown ends', async () => {
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  let answer: unknown = { action: 'hold', tip_lamports: 0, rationale: 'too crowded' };
  const model = new ScriptedModel(() => ok(answer));
  const { log } = await startAgent(relay, { model, holdCooldownSlots: 4 });
  relay.enqueue('tx_h');
  await waitUntil(() => log.lines.some((l) => l.startsWith('hold tx_h tier=cortex')), 5_000, 'model hold');
  relay.advance(101, 101);
  relay.advance(102, 102);
  relay.advance(103, 103);
  await new Promise((r) => setTimeout(r, 50));
  expect(model.calls).toEqual(['tx_h']);
  answer = { action: 'submit', tip_lamports: 45_000, rationale: 'now' };
  relay.advance(104, 104);
  await waitUntil(() => relay.submits.length === 1, 5_000, 'submit after the cooldown');
  expect(model.calls).toEqual(['tx_h', 'tx_h']);
  expect(relay.submits[0]!.tip_lamports).toBe(45_000);
});

test('the watchdog decides what it finds pending without a decision, with the state rebuilt from /tx', async () => {
  const relay = new FakeRelay();
  relay.queueEntries = [
    { tx_id: 'tx_missed', state: 'pending', age_slots: 10, priority: 'normal', retries: 1 },
    { tx_id: 'tx_flying', state: 'submitted', age_slots: 5, priority: 'normal', retries: 0 },
  ];
  relay.records.set(
    'tx_missed',
    txRecord('tx_missed', {
      retries: 1,
      attempts: [
        {
          attempt: 1,
          bundle_id: 'b1',
          tip_lamports: 30_000,
          slot_submitted: 95,
          stage: 'failed',
          outcome: 'dropped',
        },
      ],
    }),
  );
  relay.records.set(
    'tx_flying',
    txRecord('tx_flying', {
      state: 'submitted',
      attempts: [
        {
          attempt: 1,
          bundle_id: 'b2',
          tip_lamports: 30_000,
          slot_submitted: 99,
          stage: 'submitted',
          outcome: null,
        },
      ],
    }),
  );
  const { log, agent } = await startAgent(relay, { watchdogMs: 200 });
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the missed one');
  expect(relay.submits[0]).toMatchObject({ tx_id: 'tx_missed', tip_lamports: 30_000 }); // dropped: same tip
  expect(log.lines).toContain('watchdog redecide tx_missed (pending with no decision)');
  expect(agent.tracked('tx_flying')).toMatchObject({ status: 'submitted' });

  // Later the in-flight attempt settles while the agent misses the event: the periodic sweep finds it.
  relay.records.set(
    'tx_flying',
    txRecord('tx_flying', {
      retries: 1,
      attempts: [
        {
          attempt: 1,
          bundle_id: 'b2',
          tip_lamports: 30_000,
          slot_submitted: 99,
          stage: 'failed',
          outcome: 'fee_too_low',
        },
      ],
    }),
  );
  // As the sidecar would after the first submit: tx_missed has an attempt in flight now.
  relay.records.set(
    'tx_missed',
    txRecord('tx_missed', {
      state: 'submitted',
      attempts: [
        {
          attempt: 2,
          bundle_id: 'b3',
          tip_lamports: 30_000,
          slot_submitted: 100,
          stage: 'submitted',
          outcome: null,
        },
      ],
    }),
  );
  const flying = await waitUntil(
    () => relay.submits.find((s) => s.tx_id === 'tx_flying'),
    2_000,
    'the sweep',
  );
  expect(flying).toMatchObject({ tip_lamports: 40_000 });
  expect(relay.submits.filter((s) => s.tx_id === 'tx_missed')).toHaveLength(1);
});

test('cortex unavailable: said once at start, reflex decides and the trace says why', async () => {
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  const { log } = await startAgent(relay, { modelUnavailableReason: 'no key' });
  expect(log.lines[0]).toBe('cortex unavailable: no key; deciding with reflex only');
  relay.enqueue('tx_u1');
  relay.enqueue('tx_u2');
  await waitUntil(() => relay.submits.length === 2, 5_000, 'submits');
  for (const submit of relay.submits) {
    expect(submit.trace).toMatchObject({ decision_mode: 'reflex', fallback_reason: 'cortex_unavailable' });
  }
  expect(log.lines.filter((l) => l.startsWith('cortex unavailable'))).toHaveLength(1);
});

test('a 409 from the sidecar does not loop: the transaction waits for events or the watchdog', async () => {
  const relay = new FakeRelay();
  relay.submitError = new RelayError('RELAY_E_TX_WRONG_STATE', {
    tx_id: 'tx_w',
    state: 'submitted',
    expected: 'pending',
  });
  const { agent, log } = await startAgent(relay);
  relay.enqueue('tx_w');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'one submit');
  relay.advance(101, 101);
  relay.advance(102, 102);
  await new Promise((r) => setTimeout(r, 50));
  expect(relay.submits).toHaveLength(1);
  expect(agent.tracked('tx_w')?.status).toBe('submitted');
  expect(log.lines.some((l) => l.startsWith('skip tx_w reason='))).toBe(true);
});

test('tx_adopted (a fleet took over a dead host’s work): pending is decided at once; in flight waits for its bundle_settled', async () => {
  const relay = new FakeRelay();
  relay.nextBundleEngineSlot = 100;
  const { log } = await startAgent(relay);
  const adopted = (txId: string, state: 'pending' | 'submitted', retries: number) =>
    relay.emit('tx_adopted', {
      tx_id: txId,
      host_id: 'relay-b',
      from_host_id: 'relay-a',
      from_epoch: 7,
      state,
      priority: 'normal',
      enqueued_slot: relay.slot,
      expires_at_slot: relay.slot + 150,
      max_tip: null,
      tip: 'auto',
      retries,
    });
  adopted('tx_pending', 'pending', 1);
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the adopted pending transaction decided');
  expect(relay.submits[0]).toMatchObject({ tx_id: 'tx_pending' });
  expect(log.lines).toContain('adopted tx_pending from=relay-a state=pending retries=1');

  // In flight: the inherited attempt's bytes are the sidecar's to resend; no decision until it settles.
  adopted('tx_flying', 'submitted', 0);
  await new Promise((r) => setTimeout(r, 50));
  expect(relay.submits.map((s) => s.tx_id)).toEqual(['tx_pending']);
  relay.emit('bundle_settled', {
    bundle_id: 'b-old',
    stage: 'failed',
    failure_type: 'dropped',
    tx_id: 'tx_flying',
    tip_lamports: 40_000,
    retries: 1,
  });
  await waitUntil(() => relay.submits.length === 2, 5_000, 'the retry after the inherited attempt settled');
  expect(relay.submits[1]).toMatchObject({ tx_id: 'tx_flying' });
});
