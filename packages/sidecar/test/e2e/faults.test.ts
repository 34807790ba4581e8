import { SseReader, get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/** Upstream faults: transport errors are not attempts, expiry waits for proof, a stream cut heals itself. */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { RELAY_AGENT_GRACE_S: '0' },
    policy: { 'max-retries': 0, 'expiry-slots': 20 },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/status')).body.upstream.stream.ok, 10_000, 'stream up');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

afterEach(() => {
  stack.simnet.faults.reset();
  stack.resetAuction();
});

test('a 429 storm consumes no retry: the same bytes are resent until the engine takes them', async () => {
  stack.simnet.faults.set({ engineRateLimitRate: 1 });
  const { tx_id } = (await post(url, '/tx/enqueue', { transaction: stack.transfer(1) })).body;
  const submit = await post(url, '/internal/submit', { tx_id, tip_lamports: 300_000, reason: 'storm' });
  expect(submit.status).toBe(202);
  await waitUntil(
    async () => (await get(url, `/tx/${tx_id}`)).body.last_error?.message?.match(/rate limited/),
    10_000,
    'a rate-limit error',
  );
  const during = (await get(url, `/tx/${tx_id}`)).body;
  expect(during.state).toBe('pending');
  expect(during.retries).toBe(0);
  const metrics = (await get(url, '/metrics')).body as string;
  expect(metrics).toMatch(/relay_transport_errors_total\{status="429"\} [1-9]/);
  stack.simnet.faults.reset();
  await waitUntil(
    async () => (await get(url, `/tx/${tx_id}`)).body.state === 'finalized',
    30_000,
    'finalized',
  );
  const after = (await get(url, `/tx/${tx_id}`)).body;
  expect(after.retries).toBe(0);
  expect(after.attempts).toHaveLength(1);
  expect(after.attempts[0].bundle_id).toBe(submit.body.bundle_id);
}, 60_000);

test('expired only once the blockhash is dead, not when attempts stop', async () => {
  stack.simnet.engine.auction.setFixedClearingTip(10_000_000_000);
  const { tx_id } = (await post(url, '/tx/enqueue', { transaction: stack.transfer(2) })).body;
  expect(
    (await post(url, '/internal/submit', { tx_id, tip_lamports: 50_000, reason: 'will lose' })).status,
  ).toBe(202);
  // max-retries 0: the lost attempt stops further attempts, and expiry-slots passes; the blockhash still lives.
  await waitUntil(
    async () => {
      const record = (await get(url, `/tx/${tx_id}`)).body;
      return record.attempts[0]?.outcome !== null && record.attempts[0]?.outcome !== undefined;
    },
    20_000,
    'the attempt to settle',
  );
  const enqueuedSlot = (await get(url, `/tx/${tx_id}`)).body.enqueued_slot;
  await waitUntil(
    async () => (await get(url, '/status')).body.slot > enqueuedSlot + 25,
    10_000,
    'expiry-slots to pass',
  );
  const stopped = (await get(url, `/tx/${tx_id}`)).body;
  expect(stopped.state).toBe('pending');
  const retry = await post(url, '/internal/submit', { tx_id, tip_lamports: 50_000, reason: 'again' });
  expect(retry.status).toBe(409);
  const reader = await SseReader.open(`${url}/tx/events/${tx_id}`);
  stack.simnet.faults.expireBlockhashes();
  await reader.waitFor((r) => r.ended, 15_000);
  const states = reader.events('tx_status_changed').map((m) => JSON.parse(m.data).state);
  expect(states[0]).toBe('pending');
  expect(states[states.length - 1]).toBe('expired');
  const final = (await get(url, `/tx/${tx_id}`)).body;
  expect(final.state).toBe('expired');
  const queue = (await get(url, '/queue')).body;
  expect(queue.evicted_total).toBeGreaterThanOrEqual(1);
}, 60_000);

test('a geyser stream cut is noticed, healed, and transactions still land', async () => {
  const events = await SseReader.open(`${url}/internal/events`);
  stack.simnet.faults.cutStreams();
  await waitUntil(
    async () => !(await get(url, '/status')).body.upstream.stream.ok,
    5000,
    'the cut to show in /status',
  );
  await waitUntil(
    async () => (await get(url, '/status')).body.upstream.stream.ok,
    10_000,
    'the stream to reconnect',
  );
  const slotBefore = (await get(url, '/status')).body.slot;
  // 40 slots (~2.4 s): past the previous test's expireBlockhashes, the tip blockhash cache (2 s) has turned over.
  await waitUntil(
    async () => (await get(url, '/status')).body.slot > slotBefore + 40,
    10_000,
    'slots after the reconnect',
  );
  const { tx_id } = (await post(url, '/tx/enqueue', { transaction: stack.transfer(3) })).body;
  expect(
    (await post(url, '/internal/submit', { tx_id, tip_lamports: 300_000, reason: 'after cut' })).status,
  ).toBe(202);
  await waitUntil(
    async () => (await get(url, `/tx/${tx_id}`)).body.state === 'finalized',
    30_000,
    'finalized',
  ).catch(async (error: Error) => {
    const record = (await get(url, `/tx/${tx_id}`)).body;
    throw new Error(`${error.message}; the record: ${JSON.stringify(record).slice(0, 3000)}`);
  });
  // slot_update stays monotonic across the cut: once per new highest slot.
  const slots = events.events('slot_update').map((m) => JSON.parse(m.data).slot);
  for (let i = 1; i < slots.length; i++) expect(slots[i]).toBeGreaterThan(slots[i - 1]);
  events.close();
}, 60_000);
