import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * DESIGN §5 `spend-limit`: "tip + fee reserved at submit, released when the attempt provably fails" over a rolling
 * hour. A tip that LANDED was spent: it must keep counting against the hour's limit after finalization.
 */
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { RELAY_AGENT_GRACE_S: '0' },
    policy: { 'max-tip': 400_000, 'spend-limit': 400_000 },
  });
  await waitUntil(async () => (await get(stack.sidecar.url, '/status')).body.upstream.stream.ok, 10_000);
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('a finalized tip still counts against spend-limit within the rolling hour', async () => {
  const { url } = stack.sidecar;
  stack.simnet.engine.auction.setFixedClearingTip(1000);
  const first = (await post(url, '/tx/enqueue', { transaction: stack.transfer(11) })).body.tx_id;
  expect(
    (await post(url, '/internal/submit', { tx_id: first, tip_lamports: 300_000, reason: 'r' })).status,
  ).toBe(202);
  await waitUntil(
    async () => (await get(url, `/tx/${first}`)).body.state === 'finalized',
    20_000,
    'finalized',
  );

  // 300,000 + fee already spent this hour; another 300,000 would pass the 400,000 limit.
  const second = (await post(url, '/tx/enqueue', { transaction: stack.transfer(12) })).body.tx_id;
  const answer = await post(url, '/internal/submit', { tx_id: second, tip_lamports: 300_000, reason: 'r' });
  expect(answer.status).toBe(422);
  expect(answer.body.error.details.key).toBe('spend-limit');
  // /status says why: the hour's spend against the limit.
  const { spend } = (await get(url, '/status')).body;
  expect(spend.limit_lamports).toBe(400_000);
  expect(spend.window_lamports).toBeGreaterThanOrEqual(300_000);
  expect(spend.window_lamports + 300_000).toBeGreaterThan(400_000);
}, 30_000);
