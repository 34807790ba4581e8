import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/** An RPC outage: enqueue still accepts (the blockhash check cannot say), nothing crashes, work resumes after. */
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({ env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' } });
  await waitUntil(async () => (await get(stack.sidecar.url, '/status')).body.slot > 0, 10_000);
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('RPC down: enqueue 202, /readyz 503 naming rpc, then the transaction finalizes once RPC is back', async () => {
  const { url } = stack.sidecar;
  const body = { transaction: stack.transfer(9) };
  stack.simnet.faults.set({ rpcDown: true });
  await waitUntil(async () => (await get(url, '/readyz')).status === 503, 5000, 'not ready');
  expect((await get(url, '/readyz')).body.error.details.reasons.join(' ')).toMatch(/rpc/);
  const enq = await post(url, '/tx/enqueue', body);
  expect(enq.status).toBe(202);
  await new Promise((r) => setTimeout(r, 1500));
  expect(['pending', 'submitted', 'landed', 'processed', 'confirmed', 'finalized']).toContain(
    (await get(url, `/tx/${enq.body.tx_id}`)).body.state,
  );
  stack.simnet.faults.reset();
  await waitUntil(
    async () => (await get(url, `/tx/${enq.body.tx_id}`)).body.state === 'finalized',
    20_000,
    'finalized after RPC recovers',
  ).catch(async (error: Error) => {
    const r = (await get(url, `/tx/${enq.body.tx_id}`)).body;
    throw new Error(`${error.message}; record: state=${r.state} attempts=${r.attempts.length}`);
  });
}, 45_000);
