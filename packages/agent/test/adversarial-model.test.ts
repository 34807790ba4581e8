import { startSimnet, type LlmScriptStep, type Simnet } from '@solrelay/simnet';
import { waitUntil } from '@solrelay/testkit';
import { AnthropicDecisionModel, RelayAgent, violationOf, type TrackedTx } from '../src';
import { FakePresence, FakeRelay, memoryLog } from './helpers/fakes';

// The real Anthropic SDK against the simnet's Messages endpoint, scripted with every kind of bad answer. The
// sidecar side is a fake (this is about what the agent does with the model's answer); the e2e tests cover the real
// sidecar. Every case must end in a submit of the reflex decision, inside the policy, within the deadline.
const DEADLINE_MS = 1_000;
let simnet: Simnet;

beforeAll(async () => {
  simnet = await startSimnet({ slotMs: 60, rateLimit: false });
}, 20_000);

afterAll(async () => {
  await simnet?.stop();
});

beforeEach(() => simnet.llm.reset());

async function decideWith(script: LlmScriptStep[], deadlineMs = DEADLINE_MS) {
  simnet.llm.script(...script);
  const relay = new FakeRelay();
  relay.decisionMode = 'cortex';
  const env = simnet.env();
  const model = new AnthropicDecisionModel({
    apiKey: env.ANTHROPIC_API_KEY!,
    baseURL: env.ANTHROPIC_BASE_URL!,
  });
  const log = memoryLog();
  const agent = new RelayAgent({
    client: relay,
    presence: new FakePresence(),
    model,
    log,
    cortexDeadlineMs: deadlineMs,
  });
  await agent.start();
  const started = Date.now();
  relay.enqueue('tx_adversarial');
  await waitUntil(() => relay.submits.length > 0, deadlineMs + 5_000, 'a submit');
  const elapsed = Date.now() - started;
  agent.stop();
  const submit = relay.submits[0]!;
  return { submit, elapsed, relay, log };
}

// The reflex decision for the fake's floor: p75 = 40,000 lamports, a bundle-engine leader now.
const REFLEX_TIP = 40_000;

const cases: Array<[string, LlmScriptStep[], RegExp]> = [
  [
    'a tip 10x above max-tip',
    [{ kind: 'malformed', variant: 'tip_above_cap' }],
    /^invalid_answer: tip_above_max$/,
  ],
  ['a negative tip', [{ kind: 'malformed', variant: 'negative_tip' }], /^invalid_answer: tip_negative$/],
  [
    'a non-integer tip',
    [{ kind: 'malformed', variant: 'non_integer_tip' }],
    /^invalid_answer: tip_not_an_integer$/,
  ],
  ['a wrong action', [{ kind: 'malformed', variant: 'wrong_action' }], /^invalid_answer: invalid_action$/],
  ['no tool call', [{ kind: 'no_tool' }], /^no_tool_call/],
  ['a refusal', [{ kind: 'refusal' }], /^refusal/],
  [
    '529 overloaded twice (the one retry too)',
    [{ kind: 'overloaded' }, { kind: 'overloaded' }],
    /^overloaded/,
  ],
  ['500 twice', [{ kind: 'server_error' }, { kind: 'server_error' }], /^server_error/],
  ['429 with retry-after 30 s', [{ kind: 'rate_limit', retryAfterS: 30 }], /^timeout/],
  ['a hang', [{ kind: 'hang' }], /^timeout/],
];

test.each(cases)(
  '%s: falls back to reflex inside the policy and the deadline',
  async (_name, script, reason) => {
    const { submit, elapsed, relay } = await decideWith(script);
    const trace = submit.trace as Record<string, unknown>;
    expect(String(trace.fallback_reason)).toMatch(reason);
    expect(submit.tip_lamports).toBe(REFLEX_TIP);
    expect(trace).toMatchObject({
      decision_mode: 'cortex',
      model: 'claude-haiku-4-5',
      provider: 'anthropic',
    });
    const tx = {
      tip: 'auto',
      max_tip: null,
      previous: null,
      retries: 0,
      expires_at_slot: 250,
    } as unknown as TrackedTx;
    const world = { slot: relay.slot, policy: relay.policyValues } as Parameters<typeof violationOf>[2];
    expect(violationOf(submit.tip_lamports, tx, world)).toBeNull();
    // Near the deadline, not after a 30 s retry-after or never (the slack is for a loaded machine).
    expect(elapsed).toBeLessThan(DEADLINE_MS + 2_000);
    expect(relay.submits).toHaveLength(1);
  },
);

test('one 529 then a good answer: the single retry succeeds inside the deadline, no fallback', async () => {
  // The retry's backoff plus a second request must fit the deadline on a loaded machine too: a roomier one here.
  const deadlineMs = 5_000;
  const { submit, elapsed } = await decideWith([{ kind: 'overloaded' }], deadlineMs);
  const trace = submit.trace as Record<string, unknown>;
  expect(trace.fallback_reason).toBeNull();
  expect(trace.tool_input).toMatchObject({ action: 'submit', tip_lamports: REFLEX_TIP });
  expect(simnet.llm.requests.map((r) => r.scripted)).toEqual(['overloaded', null]);
  // No fallback (asserted above) already means the retry beat the deadline; this bounds the whole decision.
  expect(elapsed).toBeLessThan(deadlineMs + 2_000);
}, 20_000);
