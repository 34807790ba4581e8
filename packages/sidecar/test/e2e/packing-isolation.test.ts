import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { MAINNET_TIP_ACCOUNTS } from '@solrelay/simnet';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import bs58 from 'bs58';
import type { Sidecar } from '../../src/service';
import { counterValue, startRelayStack } from '../helpers/relay-stack';

/**
 * Packing's failure isolation (#17): a passenger that passed relay's simulation but cannot execute when its pack
 * does (here a bundle ranked above the pack, sent straight to the engine, empties the passenger's fee payer in the
 * same slot: the state race a real market has) sinks the pack. The carrier loses no retry and lands on its own;
 * the passenger never rides again, goes alone, and fails on its own verdict. Over gRPC the engine's result names the
 * passenger; over JSON-RPC relay finds it by checking the passengers when the window passes.
 */
describe.each(['grpc', 'jsonrpc'] as const)('over %s', (transport) => {
  let stack: Stack<Sidecar>;
  let url: string;

  beforeAll(async () => {
    stack = await startRelayStack({
      // No engine rate limit (the test's own bundle must not take relay's token); relay paces itself at 1 a second.
      simnet: { slotMs: 150, rateLimit: false, regions: 1 },
      env: {
        // No decider of its own (no fallback, no bypass): the test submits each attempt, priced per CU as an agent
        // would (a fixed bypass tip has no per-CU bid, so nothing would ride under it).
        RELAY_AGENT_GRACE_S: '0',
        BUNDLE_ENGINE_RPS: '1',
        BUNDLE_PACK_MAX: '4',
        BUNDLE_ENGINE_TRANSPORT: transport,
      },
    });
    url = stack.sidecar.url;
    // Ready but for a decider (the test is the decider).
    await waitUntil(
      async () => {
        const { body } = await get(url, '/readyz');
        const reasons =
          (body as { error?: { details?: { reasons?: string[] } } }).error?.details?.reasons ?? [];
        return reasons.length === 1 && reasons[0]?.startsWith('no decider') === true;
      },
      15_000,
      'ready but for a decider',
    );
  }, 30_000);

  afterAll(async () => {
    stack?.simnet.faults.set({ slotStall: false });
    await stack?.close();
  });

  /** An attempt at 20,000 lamports, bidding 0.05 lamports per requested CU (room for light riders). */
  const submit = (txId: string) =>
    post(url, '/internal/submit', {
      tx_id: txId,
      tip_lamports: 20_000,
      reason: 'test',
      pricing: { bid_per_cu: 0.05, contention: 'uncontended', signal: 'test: a fixed bid per CU' },
    });

  test('a passenger that sinks its pack costs the carrier nothing; it fails alone', async () => {
    const first = stack.simnet.fundedKeypair(100_000_000);
    const carrierPayer = stack.simnet.fundedKeypair(100_000_000);
    const riderPayer = stack.simnet.fundedKeypair(10_000_000);
    // The first transaction takes the one token; the next two wait for the next one and go as one pack, the earlier
    // enqueued carrying the later. The chain stands still meanwhile.
    stack.simnet.faults.set({ slotStall: true });
    const alone = await post(url, '/tx/enqueue', { transaction: stack.transfer(100, first) });
    expect(alone.status).toBe(202);
    const carrier = await post(url, '/tx/enqueue', { transaction: stack.transfer(200, carrierPayer) });
    const rider = await post(url, '/tx/enqueue', { transaction: stack.transfer(300, riderPayer) });
    expect(carrier.status).toBe(202);
    expect(rider.status).toBe(202);
    const carrierId = carrier.body.tx_id as string;
    const riderId = rider.body.tx_id as string;
    for (const id of [alone.body.tx_id as string, carrierId, riderId])
      expect((await submit(id)).status).toBe(202);

    // Before the pack goes out, a bundle that will empty the passenger's fee payer reaches the engine: relay's
    // simulation (the bank as it stands) still passes, the block runs the earlier bundle first.
    const { blockhash } = stack.simnet.cluster.latestBlockhash('confirmed');
    const balance = stack.simnet.cluster.getBalance(riderPayer.publicKey.toBase58());
    const drain = new Transaction({ feePayer: riderPayer.publicKey, recentBlockhash: blockhash });
    drain.add(
      SystemProgram.transfer({
        fromPubkey: riderPayer.publicKey,
        toPubkey: new PublicKey(MAINNET_TIP_ACCOUNTS[0] as string),
        lamports: 1_000_000,
      }),
      SystemProgram.transfer({
        fromPubkey: riderPayer.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: balance - 1_000_000 - 5_000,
      }),
    );
    drain.sign(riderPayer);
    const engineUrl = stack.simnet.endpoints.regions[0]?.engineUrl as string;
    const sent = await fetch(`${engineUrl}/api/v1/bundles`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'sendBundle',
        params: [[bs58.encode(drain.serialize())]],
      }),
    });
    const drainId = ((await sent.json()) as { result?: string }).result as string;
    expect(drainId).toBeDefined();

    const riderSignature = (await get(url, `/tx/${riderId}`)).body.tx_signatures[0] as string;
    const carrierSignature = (await get(url, `/tx/${carrierId}`)).body.tx_signatures[0] as string;
    await waitUntil(
      () =>
        stack.simnet.engine
          .pendingBundles()
          .some((b) => b.signatures.length === 3 && b.signatures[1] === riderSignature),
      15_000,
      'the pack at the engine',
    );
    const pack = stack.simnet.engine.pendingBundles().find((b) => b.signatures.length === 3);
    expect(pack?.signatures[0]).toBe(carrierSignature);
    expect(await counterValue(url, 'relay_packed_bundles_total')).toBe(1);
    stack.simnet.faults.set({ slotStall: false });

    await waitUntil(
      () => stack.simnet.engine.getBundle(drainId)?.state === 'landed',
      30_000,
      'the draining bundle landed',
    );
    // The pack's attempt ends; the carrier waits for a decision again, and goes alone.
    await waitUntil(
      async () => {
        const record = (await get(url, `/tx/${carrierId}`)).body;
        return record.state === 'pending' && record.attempts[0]?.stage === 'failed';
      },
      60_000,
      'the pack attempt failed',
    );
    expect((await submit(carrierId)).status).toBe(202);
    await waitUntil(
      async () => (await get(url, `/tx/${carrierId}`)).body.state === 'finalized',
      60_000,
      'the carrier finalized on its own',
    );
    await waitUntil(
      async () => ['failed', 'expired'].includes((await get(url, `/tx/${riderId}`)).body.state),
      60_000,
      'the passenger ended',
    );
    const carrierRecord = (await get(url, `/tx/${carrierId}`)).body;
    // The pack's attempt ended without a retry counted, blaming the passenger; the next went alone and landed.
    expect(carrierRecord.retries).toBe(0);
    expect(carrierRecord.attempts.length).toBe(2);
    expect(carrierRecord.attempts[0].stage).toBe('failed');
    expect(carrierRecord.attempts[1].stage).toBe('finalized');
    expect(stack.simnet.engine.getBundle(carrierRecord.attempts[1].bundle_id)?.signatures).toHaveLength(2);
    const riderRecord = (await get(url, `/tx/${riderId}`)).body;
    expect(riderRecord.state).toBe('failed');
    // Named by the engine (gRPC: its simulation failed) or by relay's diagnosis (JSON-RPC: its payer cannot pay).
    expect(['insufficient_funds', 'simulation_failed']).toContain(riderRecord.failure);
    // Only one pack was ever made: the passenger never rode again.
    expect(await counterValue(url, 'relay_packed_bundles_total')).toBe(1);
  }, 120_000);
});
