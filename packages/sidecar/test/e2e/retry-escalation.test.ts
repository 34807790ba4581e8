import { SseReader, get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * A tip below the auction's clearing price loses (fee_too_low); the agent's retry at a higher tip, within
 * escalation-step, lands. Run on both transports: JSON-RPC infers fee_too_low from the passed window and the tip
 * floor, gRPC hears the auction rejection directly.
 */
describe.each(['jsonrpc', 'grpc'] as const)('fee_too_low then an escalated retry lands (%s)', (transport) => {
  let stack: Stack<Sidecar>;

  beforeAll(async () => {
    stack = await startRelayStack({
      env: { BUNDLE_ENGINE_TRANSPORT: transport, RELAY_AGENT_GRACE_S: '0' },
      policy: { 'escalation-step': 100_000, 'max-retries': 3 },
    });
    await waitUntil(
      async () => (await get(stack.sidecar.url, '/status')).body.tip.p50 > 0,
      15_000,
      'tip data',
    );
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('the first attempt loses the auction, the second lands', async () => {
    const { url } = stack.sidecar;
    stack.simnet.engine.auction.setFixedClearingTip(150_000);
    // JSON-RPC has no push channel: fee_too_low is inferred from a passed window and a tip below the floor's p50,
    // so let the floor (fed by the auction's landed tips) catch up with the new clearing price first.
    await waitUntil(
      async () => (await get(url, '/tip')).body.p50 >= 150_000,
      30_000,
      'the tip floor to follow the auction',
    );
    const events = await SseReader.open(`${url}/internal/events`);
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer() });
    expect(enqueued.status).toBe(202);
    const txId = enqueued.body.tx_id;

    const first = await post(url, '/internal/submit', {
      tx_id: txId,
      tip_lamports: 60_000,
      reason: 'test: below clearing',
    });
    expect(first.status).toBe(202);
    await events.waitFor(
      (r) => r.events('bundle_settled').some((m) => JSON.parse(m.data).bundle_id === first.body.bundle_id),
      20_000,
    );
    const settled = events
      .events('bundle_settled')
      .map((m) => JSON.parse(m.data))
      .find((d) => d.bundle_id === first.body.bundle_id);
    expect(settled).toMatchObject({ stage: 'failed', failure_type: 'fee_too_low', tx_id: txId, retries: 1 });
    // Issue 30: what the agent prices the retry on. One System transfer requests 3,000 CU; the bundle reflex prices
    // adds relay's tip transaction at most (1,399), as tx_enqueued said; the settled attempt's CU is as it was sent
    // (its tip transaction requests 450..1,399).
    const told = events
      .events('tx_enqueued')
      .map((m) => JSON.parse(m.data))
      .find((d) => d.tx_id === txId);
    expect(told.compute_units).toBe(3_000 + 1_399);
    expect(settled.compute_units).toBe(3_000 + 1_399);
    expect(settled.attempt_compute_units).toBeGreaterThanOrEqual(3_000 + 450);
    expect(settled.attempt_compute_units).toBeLessThanOrEqual(3_000 + 1_399);
    for (const d of [told, settled]) {
      if (d.contention === undefined) continue; // no reading cached when the event was built: never awaited
      expect(['contended', 'uncontended', 'unknown']).toContain(d.contention.class);
    }
    const afterFirst = await get(url, `/tx/${txId}`);
    expect(afterFirst.body.state).toBe('pending');
    expect(afterFirst.body.retries).toBe(1);
    // The lost attempt is the record's last error, under its own code, with a message filled from its details.
    expect(afterFirst.body.last_error).toMatchObject({
      code: 'RELAY_E_ATTEMPT_LOST',
      details: { outcome: 'fee_too_low', bundle_id: first.body.bundle_id },
    });
    expect(afterFirst.body.last_error.message).toContain(first.body.bundle_id);
    expect(afterFirst.body.last_error.message).not.toMatch(/\$[A-Za-z_]/);

    // Above previous + escalation-step is refused, naming the key; nothing is clamped.
    const tooHigh = await post(url, '/internal/submit', {
      tx_id: txId,
      tip_lamports: 60_000 + 100_001,
      reason: 'too much',
    });
    expect(tooHigh.status).toBe(422);
    expect(tooHigh.body.error.code).toBe('RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED');
    expect(tooHigh.body.error.details.key).toBe('escalation-step');

    const second = await post(url, '/internal/submit', {
      tx_id: txId,
      tip_lamports: 160_000,
      reason: 'test: escalate',
    });
    expect(second.status).toBe(202);
    expect(second.body.bundle_id).not.toBe(first.body.bundle_id);
    await waitUntil(
      async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
      30_000,
      'finalized',
    );
    const record = (await get(url, `/tx/${txId}`)).body;
    expect(record.attempts.map((a: { outcome: string | null }) => a.outcome)).toEqual(['fee_too_low', null]);
    expect(record.attempts[1].stage).toBe('finalized');

    const entry = (await get(url, `/bundle/${second.body.bundle_id}`)).body;
    expect(entry).toMatchObject({ stage: 'finalized', attempt: 2, tip_lamports: 160_000 });
    const lost = (await get(url, `/bundle/${first.body.bundle_id}`)).body;
    expect(lost).toMatchObject({ stage: 'failed', failure: 'fee_too_low', attempt: 1 });
    events.close();
  }, 60_000);
});
