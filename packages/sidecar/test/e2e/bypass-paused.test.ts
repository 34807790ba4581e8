import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * DESIGN §2: "a low tipper balance pauses submission (/readyz 503, /status says why) and resumes when funded", and
 * "Operator faults never fail a user's transaction". In bypass mode a transaction enqueued while paused must be
 * submitted once the tipper is funded again.
 */
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({ env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' } });
  await waitUntil(async () => (await get(stack.sidecar.url, '/status')).body.slot > 0, 10_000);
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('bypass: a transaction enqueued while the tipper is unfunded lands once it is funded', async () => {
  const { url } = stack.sidecar;
  const tipper = stack.tipper;
  const balance = stack.simnet.cluster.getBalance(tipper.publicKey.toBase58());
  // Empty the tipper completely (fee 5000).
  const { blockhash } = stack.simnet.cluster.latestBlockhash('confirmed');
  const drain = new Transaction({ feePayer: tipper.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({
      fromPubkey: tipper.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: balance - 5000,
    }),
  );
  drain.sign(tipper);
  await stack.connection().sendRawTransaction(drain.serialize(), { skipPreflight: true });
  await waitUntil(async () => (await get(url, '/status')).body.paused_reason, 10_000, 'paused');
  const ready = await get(url, '/readyz');
  expect(ready.status).toBe(503);
  expect(ready.body.error.code).toBe('RELAY_E_NOT_READY');

  const enq = await post(url, '/tx/enqueue', { transaction: stack.transfer(7) });
  expect(enq.status).toBe(202);
  const txId = enq.body.tx_id;
  await new Promise((r) => setTimeout(r, 1000));
  expect((await get(url, `/tx/${txId}`)).body.state).toBe('pending'); // paused, not failed

  stack.simnet.cluster.airdrop(tipper.publicKey.toBase58(), 10_000_000_000);
  await waitUntil(async () => (await get(url, '/status')).body.paused_reason === null, 10_000, 'resumed');
  await waitUntil(
    async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
    15_000,
    'the paused transaction to be submitted and finalize after funding',
  );
}, 45_000);
