import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * A transaction bypass cannot tip (the spend limit is reached) waits, retried each slot, until its expiry slot; then
 * it must end `expired` once its blockhash is provably dead, not stay `pending` for good. (A fleet trial found the
 * bypass sweep still retrying it every slot long past its expiry: each refused submit held the transaction's lock,
 * and the expiry pass skips a transaction whose lock is busy.)
 */
const TIP = 60_000;
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(TIP) },
    // Room for one tip and its fee (65,000), not two.
    policy: { 'max-tip': 100_000, 'spend-limit': 100_000 },
  });
  await waitUntil(async () => (await get(stack.sidecar.url, '/status')).body.slot > 0, 10_000);
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('bypass at the spend limit: the transaction refused a tip expires, the first one finalizes', async () => {
  const { url } = stack.sidecar;
  const first = (await post(url, '/tx/enqueue', { transaction: stack.transfer(1) })).body.tx_id as string;
  await waitUntil(
    async () => (await get(url, `/tx/${first}`)).body.attempts?.length === 1,
    10_000,
    'the first transaction tipped',
  );
  // Only the second expires soon: the first keeps the policy's expiry, so a retry of a lost first attempt still
  // fits (its reservation released, the limit has room for it again) on a loaded machine.
  const second = (await post(url, '/tx/enqueue', { transaction: stack.transfer(2), expiry_slots: 40 })).body
    .tx_id as string;
  const waiting = await get(url, `/tx/${second}`);
  expect(waiting.body.state).toBe('pending');
  // Past its expiry slot and its blockhash's life (150 slots of 60 ms): expired, with no attempt ever made.
  await waitUntil(
    async () => (await get(url, `/tx/${second}`)).body.state === 'expired',
    30_000,
    'the transaction refused a tip to expire',
  ).catch(async (error: unknown) => {
    throw new Error(`${(error as Error).message}: ${JSON.stringify((await get(url, `/tx/${second}`)).body)}`);
  });
  const ended = (await get(url, `/tx/${second}`)).body;
  expect(ended.attempts).toEqual([]);
  expect(ended.last_error?.code).toBe('RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED');
  await waitUntil(
    async () => (await get(url, `/tx/${first}`)).body.state === 'finalized',
    30_000,
    'the first transaction finalized',
  );
  const status = (await get(url, '/status')).body;
  expect(status.spend.window_lamports).toBe(TIP + 5_000);
}, 90_000);
