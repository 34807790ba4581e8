import { SseReader, get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

describe('with no agent for RELAY_AGENT_GRACE_S the sidecar decides with its own reflex', () => {
  let stack: Stack<Sidecar>;

  beforeAll(async () => {
    // The stack's default competitor, pinned per requested CU (5,000 lamports over a 201,400-CU swap): the reflex
    // prices a light, uncontended transfer per CU, at min-tip, which ranks above it.
    stack = await startRelayStack({ env: { RELAY_AGENT_GRACE_S: '1', AGENT_DECISION_MODE: 'cortex' } });
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('a transaction reaches finalized and its entry records fallback_reason agent_absent', async () => {
    const { url } = stack.sidecar;
    await waitUntil(async () => (await get(url, '/tip')).body.source !== 'none', 10_000, 'tip data');
    const { tx_id } = (await post(url, '/tx/enqueue', { transaction: stack.transfer(5) })).body;
    await waitUntil(
      async () => (await get(url, `/tx/${tx_id}`)).body.state === 'finalized',
      30_000,
      'finalized',
    );
    const record = (await get(url, `/tx/${tx_id}`)).body;
    const landed = record.attempts.find((a: { stage: string }) => a.stage === 'finalized');
    const entry = (await get(url, `/bundle/${landed.bundle_id}`)).body;
    expect(entry.decision_mode).toBe('reflex');
    expect(entry.bypass).toBe(false);
    expect(entry.ai_decision_trace).toMatchObject({ fallback_reason: 'agent_absent' });
    const tip = (await get(url, '/tip')).body;
    expect(entry.tip_lamports).toBeGreaterThanOrEqual(1000);
    expect(entry.tip_lamports).toBeLessThanOrEqual(Math.max(tip.p99, 2_000_000));
    // Priced per requested CU: the entry shows the bundle's CU, its tip per CU and the signal.
    expect(entry.compute_units).toBeGreaterThan(0);
    expect(entry.tip_per_cu).toBeCloseTo(entry.tip_lamports / entry.compute_units, 9);
    expect(entry.priced_by).toMatch(/write set|contention unknown/);
    expect((await get(url, '/readyz')).status).toBe(200);
  }, 45_000);

  test('an agent connecting through presence takes over: registered, info, then absent again on disconnect', async () => {
    const { url } = stack.sidecar;
    const presence = await SseReader.open(`${url}/internal/agent/presence?model=test-model&provider=test`);
    await presence.waitFor((r) => r.messages.length > 0);
    expect(presence.messages[0]!.event).toBe('registered');
    expect(JSON.parse(presence.messages[0]!.data)).toMatchObject({
      decision_mode: 'cortex',
      model: 'test-model',
    });
    const info = await get(url, '/internal/agent/info');
    expect(info.body).toMatchObject({ model: 'test-model', provider: 'test' });
    expect(stack.sidecar.relay.fallbackActive).toBe(false);
    // The agent hears mode changes on its presence stream.
    expect((await post(url, '/internal/mode', { decision_mode: 'reflex' })).body.decision_mode).toBe(
      'reflex',
    );
    await presence.waitFor((r) => r.events('mode_changed').length === 1);
    expect((await get(url, '/internal/mode')).body.decision_mode).toBe('reflex');
    presence.close();
    await waitUntil(
      async () => (await get(url, '/internal/agent/info')).status === 404,
      5000,
      'the agent to be gone',
    );
  }, 20_000);
});

describe('RELAY_API_TOKEN guards every route but /healthz', () => {
  let stack: Stack<Sidecar>;
  const token = 'sekret-token-for-tests-0123456789';

  beforeAll(async () => {
    stack = await startRelayStack({ env: { RELAY_API_TOKEN: token, BYPASS_AGENT: '1' } });
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  test.each([
    '/status',
    '/tip',
    '/queue',
    '/lifecycle',
    '/policy',
    '/metrics',
    '/readyz',
    '/internal/mode',
    '/internal/events',
    '/openapi.json',
  ])('GET %s: 401 without a token, 401 with a wrong one, 200 with the right one', async (path) => {
    const { url } = stack.sidecar;
    const none = await get(url, path);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('RELAY_E_AUTH_MISSING_TOKEN');
    const wrong = await get(url, path, { authorization: 'Bearer not-it' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('RELAY_E_AUTH_INVALID_TOKEN');
    if (path === '/internal/events' || path === '/readyz') return; // a stream / readiness: checked below
    const right = await get(url, path, { authorization: `Bearer ${token}` });
    expect(right.status).toBe(200);
  });

  test('enqueue, SSE and /healthz', async () => {
    const { url } = stack.sidecar;
    expect((await post(url, '/tx/enqueue', { transaction: stack.transfer() })).status).toBe(401);
    const accepted = await post(
      url,
      '/tx/enqueue',
      { transaction: stack.transfer() },
      { authorization: `Bearer ${token}` },
    );
    expect(accepted.status).toBe(202);
    const stream = await SseReader.open(`${url}/internal/events`, { authorization: `Bearer ${token}` });
    expect(stream.status).toBe(200);
    stream.close();
    const refused = await SseReader.open(`${url}/tx/events/${accepted.body.tx_id}`);
    expect(refused.status).toBe(401);
    expect((await get(url, '/healthz')).status).toBe(200);
    // The token never appears in what the API says about itself.
    const status = await get(url, '/status', { authorization: `Bearer ${token}` });
    expect(JSON.stringify(status.body)).not.toContain(token);
  });
});

describe('the lifecycle records the tier that decided', () => {
  let stack: Stack<Sidecar>;

  beforeAll(async () => {
    stack = await startRelayStack({ env: { RELAY_AGENT_GRACE_S: '0', AGENT_DECISION_MODE: 'cortex' } });
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('a submit saying decision_mode reflex is recorded as reflex while the sidecar is in cortex mode', async () => {
    const { url } = stack.sidecar;
    const { tx_id } = (await post(url, '/tx/enqueue', { transaction: stack.transfer(9) })).body;
    const submit = await post(url, '/internal/submit', {
      tx_id,
      tip_lamports: 20_000,
      reason: 'model timed out; reflex decision',
      decision_mode: 'reflex',
      trace: { fallback_reason: 'timeout' },
    });
    expect(submit.status).toBe(202);
    const entry = await waitUntil(async () => {
      const answer = await get(url, `/bundle/${submit.body.bundle_id}`);
      return answer.status === 200 ? answer.body : null;
    }, 10_000);
    expect(entry.decision_mode).toBe('reflex');
    const other = (await post(url, '/tx/enqueue', { transaction: stack.transfer(10) })).body.tx_id;
    const implicit = await post(url, '/internal/submit', { tx_id: other, tip_lamports: 20_000, reason: 'x' });
    const implicitEntry = await waitUntil(async () => {
      const answer = await get(url, `/bundle/${implicit.body.bundle_id}`);
      return answer.status === 200 ? answer.body : null;
    }, 10_000);
    expect(implicitEntry.decision_mode).toBe('cortex');
    const bad = await post(url, '/internal/submit', {
      tx_id: other,
      tip_lamports: 20_000,
      reason: 'x',
      decision_mode: 'bypass',
    });
    expect(bad.status).toBe(400);
  }, 30_000);
});
