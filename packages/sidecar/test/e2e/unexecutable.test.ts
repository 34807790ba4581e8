import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startBypassStack } from '../helpers/relay-stack';

/**
 * A transaction that cannot execute (here: it leaves a new account below the rent-exempt minimum, so the bank
 * refuses it with InsufficientFundsForRent) ends `failed` with `simulation_failed`, on either transport, and is
 * never reported `expired` after its attempts ran out: over gRPC the engine's result names it; over JSON-RPC relay
 * simulates it when its window passes without a landing.
 */
describe.each(['jsonrpc', 'grpc'] as const)('over %s', (transport) => {
  let stack: Stack<Sidecar>;

  beforeAll(async () => {
    stack = await startBypassStack(20_000, { env: { BUNDLE_ENGINE_TRANSPORT: transport } });
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('an unexecutable transaction fails as simulation_failed; it does not expire', async () => {
    const { blockhash } = stack.simnet.cluster.latestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: stack.payer.publicKey, recentBlockhash: blockhash });
    tx.add(
      SystemProgram.transfer({
        fromPubkey: stack.payer.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 1,
      }),
    );
    tx.sign(stack.payer);
    const enqueued = await post(stack.sidecar.url, '/tx/enqueue', {
      transaction: tx.serialize().toString('base64'),
    });
    expect(enqueued.status).toBe(202);
    const id = enqueued.body.tx_id as string;
    await waitUntil(
      async () =>
        ['failed', 'expired', 'finalized'].includes((await get(stack.sidecar.url, `/tx/${id}`)).body.state),
      60_000,
      'a terminal state',
    );
    const record = (await get(stack.sidecar.url, `/tx/${id}`)).body;
    expect(record.state).toBe('failed');
    expect(record.failure).toBe('simulation_failed');
    // Found on its first attempt's verdict, not by running out of attempts.
    expect(record.attempts).toHaveLength(1);
    expect(JSON.stringify(record.last_error)).toMatch(
      /InsufficientFundsForRent|insufficient funds for rent/i,
    );
  }, 90_000);
});
