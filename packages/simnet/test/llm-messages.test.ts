import Anthropic, {
  OverloadedError,
  RateLimitError,
  InternalServerError,
  AuthenticationError,
} from '@anthropic-ai/sdk';
import { SimLlm } from '../src/llm/llm';
import { decideSubmission, sampleFromSchema } from '../src/llm/heuristic';
import { startHttpServer, type StartedHttpServer } from '../src/http';

let llm: SimLlm;
let http: StartedHttpServer;
let client: Anthropic;

const decisionTool = {
  name: 'decide_submission',
  description: 'Decide whether and at what tip to submit.',
  strict: true,
  input_schema: {
    type: 'object' as const,
    additionalProperties: false,
    required: ['action', 'tip_lamports', 'rationale'],
    properties: {
      action: { type: 'string', enum: ['submit', 'hold'] },
      tip_lamports: { type: 'integer' },
      rationale: { type: 'string' },
    },
  },
};

const policy = { 'tip-percentile': 'p75', 'min-tip': 1_000, 'max-tip': 2_000_000, 'escalation-step': 50_000 };
const tipFloor = {
  p25: 6_000,
  p50: 10_000,
  p75: 36_000,
  p95: 1_400_000,
  p99: 8_000_000,
  ema: 10_500,
  stale: false,
};

function snapshot(extra: Record<string, unknown> = {}) {
  return JSON.stringify({
    tx_id: 'tx_01',
    priority: 'normal',
    tip_floor: tipFloor,
    policy,
    slot: 100,
    ...extra,
  });
}

function decide(
  extra: Record<string, unknown> = {},
  options: { maxRetries?: number; signal?: AbortSignal } = {},
) {
  return client.messages.create(
    {
      model: 'simnet-haiku',
      max_tokens: 256,
      system: [
        { type: 'text', text: 'You decide Jito tips within policy.', cache_control: { type: 'ephemeral' } },
      ],
      tools: [decisionTool],
      tool_choice: { type: 'tool', name: 'decide_submission', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: snapshot(extra) }],
    },
    { maxRetries: options.maxRetries ?? 0, ...(options.signal ? { signal: options.signal } : {}) },
  );
}

beforeAll(async () => {
  llm = new SimLlm();
  http = await startHttpServer([llm.routes()]);
  client = new Anthropic({ apiKey: 'sk-simnet', baseURL: http.url, maxRetries: 0 });
});

afterAll(async () => {
  llm.releaseHanging();
  await http.close();
});

afterEach(() => llm.reset());

describe('@anthropic-ai/sdk 1.12 messages.create against the simulated endpoint', () => {
  test('a forced decide_submission call: tool_use only, policy percentile, [simnet] rationale, request id', async () => {
    const { data, request_id, response } = await decide().withResponse();
    expect(data).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'simnet-haiku',
      stop_reason: 'tool_use',
    });
    expect(data.content).toHaveLength(1);
    const call = data.content[0];
    if (call?.type !== 'tool_use') throw new Error('expected a tool_use block');
    expect(call.name).toBe('decide_submission');
    expect(call.input).toEqual({
      action: 'submit',
      tip_lamports: 36_000,
      rationale: expect.stringMatching(/^\[simnet\] /),
    });
    expect(request_id).toMatch(/^req_simnet_/);
    expect(response.headers.get('x-simnet')).toBe('simulated');
    expect(llm.requests[0]?.headers).toEqual({
      authorization: true,
      apiKey: false,
      anthropicVersion: '2026-10-21',
    });
  });

  test('prompt caching: the second call with a cache_control system block reads the cache', async () => {
    const first = await decide();
    const second = await decide({ tx_id: 'tx_02' });
    expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(0);
    expect(first.usage.cache_read_input_tokens).toBe(0);
    expect(second.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
    expect(second.usage.input_tokens).toBeGreaterThan(0);
  });

  test('after fee_too_low the tip rises by the escalation step, capped by max-tip', async () => {
    const raised = await decide({ previous_attempt: { tip_lamports: 40_000, outcome: 'fee_too_low' } });
    expect(raised.content[0]).toMatchObject({ input: { action: 'submit', tip_lamports: 90_000 } });
    const capped = await decide({ previous_attempt: { tip_lamports: 1_990_000, outcome: 'fee_too_low' } });
    expect(capped.content[0]).toMatchObject({ input: { tip_lamports: 2_000_000 } });
  });

  test('holds while no bundle-engine leader is within two slots', async () => {
    const answer = await decide({ leader: { bundle_engine: false, next_bundle_engine_leader_slot: 104 } });
    expect(answer.content[0]).toMatchObject({ input: { action: 'hold' } });
    const soon = await decide({ leader: { bundle_engine: false, next_bundle_engine_leader_slot: 102 } });
    expect(soon.content[0]).toMatchObject({ input: { action: 'submit' } });
  });

  test('SDK 0.x style headers (x-api-key + 2023-06-01) are accepted; no key is a 401', async () => {
    const legacy = await fetch(`${http.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: snapshot() }] }),
    });
    expect(legacy.status).toBe(200);
    const anonymous = await fetch(`${http.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2026-10-21' },
      body: JSON.stringify({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  });

  test('a configured key is enforced: another key is AuthenticationError', async () => {
    const strict = new SimLlm({ apiKey: 'right-key' });
    const server = await startHttpServer([strict.routes()]);
    try {
      const wrong = new Anthropic({ apiKey: 'wrong-key', baseURL: server.url, maxRetries: 0 });
      await expect(
        wrong.messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      ).rejects.toBeInstanceOf(AuthenticationError);
    } finally {
      await server.close();
    }
  });

  test('another tool gets its required fields filled from its schema', async () => {
    const answer = await client.messages.create({
      model: 'm',
      max_tokens: 64,
      tools: [
        {
          name: 'set_tip',
          input_schema: {
            type: 'object',
            required: ['tipLamports', 'mode'],
            properties: {
              tipLamports: { type: 'integer', minimum: 1000 },
              mode: { type: 'string', enum: ['fast', 'slow'] },
            },
          },
        },
      ],
      messages: [{ role: 'user', content: 'tip?' }],
    });
    expect(answer.content[0]).toMatchObject({
      type: 'tool_use',
      name: 'set_tip',
      input: { tipLamports: 1000, mode: 'fast' },
    });
  });

  test('GET /v1/models/{id}', async () => {
    const model = await client.models.retrieve('simnet-haiku');
    expect(model).toMatchObject({ id: 'simnet-haiku', type: 'model' });
  });
});

describe('scripted faults map onto the SDK error classes (maxRetries: 0)', () => {
  test('529 is OverloadedError, 429 is RateLimitError with retry-after, 500 is InternalServerError', async () => {
    llm.script({ kind: 'overloaded' }, { kind: 'rate_limit', retryAfterS: 3 }, { kind: 'server_error' });
    await expect(decide()).rejects.toBeInstanceOf(OverloadedError);
    const limited = await decide().catch((error: unknown) => error);
    expect(limited).toBeInstanceOf(RateLimitError);
    expect((limited as RateLimitError).headers?.get('retry-after')).toBe('3');
    await expect(decide()).rejects.toBeInstanceOf(InternalServerError);
    // The script is spent: the next call answers normally.
    await expect(decide()).resolves.toMatchObject({ stop_reason: 'tool_use' });
  });

  test('a hang is cut by the caller deadline; added latency delays the answer', async () => {
    llm.script({ kind: 'hang' });
    // A hang that the deadline failed to cut would never settle: jest's own timeout fails the test then, so no
    // upper bound on the elapsed time is asserted (a loaded machine could break one).
    await expect(decide({}, { signal: AbortSignal.timeout(200) })).rejects.toThrow();
    llm.setLatency(150);
    const slowStart = Date.now();
    await decide();
    expect(Date.now() - slowStart).toBeGreaterThanOrEqual(140);
  });

  test('refusal, no tool call and each malformed tool input', async () => {
    llm.script(
      { kind: 'refusal' },
      { kind: 'no_tool' },
      { kind: 'malformed', variant: 'tip_above_cap' },
      { kind: 'malformed', variant: 'negative_tip' },
      { kind: 'malformed', variant: 'non_integer_tip' },
      { kind: 'malformed', variant: 'wrong_action' },
    );
    expect((await decide()).stop_reason).toBe('refusal');
    const noTool = await decide();
    expect(noTool.stop_reason).toBe('end_turn');
    expect(noTool.content.every((b) => b.type === 'text')).toBe(true);
    const inputs = [];
    for (let i = 0; i < 4; i++) {
      const block = (await decide()).content[0];
      inputs.push(
        block?.type === 'tool_use' ? (block.input as { action: string; tip_lamports: number }) : null,
      );
    }
    expect(inputs[0]?.tip_lamports).toBeGreaterThan(2_000_000);
    expect(inputs[1]?.tip_lamports).toBeLessThan(0);
    expect(Number.isInteger(inputs[2]?.tip_lamports)).toBe(false);
    expect(inputs[3]?.action).not.toMatch(/^(submit|hold)$/);
  });

  test('unknown script steps are refused', () => {
    expect(() => llm.script({ kind: 'explode' } as never)).toThrow(/unknown script step kind/);
    expect(() => llm.script({ kind: 'malformed', variant: 'x' } as never)).toThrow(/variant/);
  });
});

describe('heuristic (pure)', () => {
  test('dropped keeps the tip; stale data keeps the floor; unparseable holds', () => {
    expect(
      decideSubmission({
        tip_floor: tipFloor,
        policy,
        previous_attempt: { tip_lamports: 55_000, outcome: 'dropped' },
      }),
    ).toMatchObject({ action: 'submit', tip_lamports: 55_000 });
    expect(decideSubmission({ tip_floor: { ...tipFloor, stale: true }, policy }).rationale).toMatch(/stale/);
    expect(decideSubmission(null)).toMatchObject({ action: 'hold' });
    expect(
      decideSubmission({ tip_floor: tipFloor, policy: { ...policy, 'tip-percentile': 'p99' } }).tip_lamports,
    ).toBe(2_000_000);
  });

  test('sampleFromSchema', () => {
    expect(
      sampleFromSchema({
        type: 'object',
        required: ['a', 'b'],
        properties: { a: { type: 'boolean' }, b: { type: 'number', minimum: 2 } },
      }),
    ).toEqual({
      a: false,
      b: 2,
    });
  });
});
