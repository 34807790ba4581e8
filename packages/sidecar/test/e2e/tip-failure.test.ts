import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { RENT_EXEMPT_MINIMUM, drainTipper, startBypassStack, testIntervals } from '../helpers/relay-stack';

/**
 * An operator fault is never the user's: when relay's own tip transaction cannot execute (the tipper cannot pay),
 * the user's transaction does not fail and no retry is counted; submission pauses until the tipper is funded, then
 * the transaction lands.
 *
 * relay reserves every tip in flight against the tipper's balance, so with a balance it knows it never builds a tip
 * the tipper cannot pay (tipper-funds.test.ts). What is left is a balance that drops behind relay's back between two
 * reads (another program sharing the key, an operator's withdrawal): here the balance is read once at start, then
 * drained on chain. How the failure is attributed depends on the transport:
 * - gRPC: the engine's `simulationFailure.txSignature` names relay's tip transaction (before #16, the failure was
 *   classed from its message and failed the user's transaction as simulation_failed);
 * - JSON-RPC: no result stream; when the targeted window passes, relay reads the tipper's balance and finds it
 *   cannot pay this tip (before, the attempt counted a retry as fee_too_low / dropped, and with `max-retries` 0
 *   the transaction stopped and expired).
 */
const TIP = 50_000;

describe.each(['grpc', 'jsonrpc'] as const)('%s transport', (transport) => {
  let stack: Stack<Sidecar>;
  let url: string;

  beforeAll(async () => {
    stack = await startBypassStack(TIP, {
      env: { BUNDLE_ENGINE_TRANSPORT: transport },
      // No retry allowed: a lost attempt counted against the user would stop the transaction.
      policy: { 'min-tip': 1_000, 'max-retries': 0 },
      // The balance is read at start and then only when relay has reason to (it is short, or a tip failed).
      sidecar: { intervals: { ...testIntervals, balanceMs: 3_600_000 } },
    });
    url = stack.sidecar.url;
  }, 30_000);

  afterAll(async () => {
    await stack?.close();
  });

  test("relay's tip transaction failing pauses submission and fails nothing of the user's", async () => {
    const tipper = stack.tipper.publicKey.toBase58();
    await waitUntil(
      async () => (await get(url, '/status')).body.tipper.balance_lamports > 1_000_000_000,
      10_000,
      'relay to read the funded balance',
    );
    // Behind relay's back: the tipper keeps less than rent-exempt + this tip, so its tip transaction cannot execute.
    await drainTipper(stack, RENT_EXEMPT_MINIMUM + 10_000);

    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(31) });
    expect(enqueued.status).toBe(202);
    const txId: string = enqueued.body.tx_id;
    await waitUntil(
      async () =>
        /relay's tip transaction/.test(
          (await get(url, `/tx/${txId}`)).body.last_error?.details?.reason ?? '',
        ),
      20_000,
      "the transaction's record to name relay's failed tip",
    );
    const paused = (await get(url, `/tx/${txId}`)).body;
    // Not failed: waiting (an attempt sent before the pause took hold may still be out).
    expect(['pending', 'submitted']).toContain(paused.state);
    expect(paused.failure).toBeNull();
    expect(paused.retries).toBe(0);
    expect(paused.attempts[0].outcome).toBe('dropped');
    // /status and /readyz say which tipper and why.
    await waitUntil(
      async () => ((await get(url, '/status')).body.paused_reason ?? '').includes(tipper),
      10_000,
      '/status to name the tipper',
    );
    expect((await get(url, '/readyz')).status).toBe(503);
    expect((await get(url, '/metrics')).body).toMatch(
      new RegExp(`relay_tipper_tip_failures_total\\{tipper="${tipper}"\\} [1-9]`),
    );

    stack.simnet.cluster.airdrop(tipper, 1_000_000_000);
    await waitUntil(async () => (await get(url, '/status')).body.paused_reason === null, 10_000, 'resumed');
    await waitUntil(
      async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
      30_000,
      'finalized',
    ).catch(async (error: unknown) => {
      // What relay did instead, for the post-mortem.
      console.log('record', JSON.stringify((await get(url, `/tx/${txId}`)).body, null, 1));
      console.log('status', JSON.stringify((await get(url, '/status')).body, null, 1));
      throw error;
    });
    const landed = (await get(url, `/tx/${txId}`)).body;
    expect(landed.retries).toBe(0);
    expect(landed.failure).toBeNull();
  }, 60_000);
});
