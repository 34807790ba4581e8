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
    stack?.simnet.faults.set({ slotStall: false, rpcLagSlots: 0, rpcLaggingShare: 0 });
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

  /**
   * The pack attempt of `carrierId` ended with no retry counted (the rider's doing); the test then decides for the
   * carrier until it lands alone. Returns the carrier's record.
   */
  const packEndedFreeThenAlone = async (carrierId: string) => {
    await waitUntil(
      async () => {
        const record = (await get(url, `/tx/${carrierId}`)).body;
        return record.state === 'pending' && record.attempts[0]?.stage === 'failed';
      },
      60_000,
      'the pack attempt ended',
    );
    expect((await get(url, `/tx/${carrierId}`)).body.retries).toBe(0);
    await decideUntilFinalized(carrierId);
    const record = (await get(url, `/tx/${carrierId}`)).body;
    expect(record.attempts[0].stage).toBe('failed');
    const landed = record.attempts.find((a: { stage: string }) => a.stage === 'finalized');
    expect(stack.simnet.engine.getBundle(landed.bundle_id)?.signatures).toHaveLength(2);
    return record;
  };

  /**
   * The test decides for `txId` as an agent would: each time it waits for a decision (pending, every attempt ended),
   * another attempt, until it finalizes (an attempt alone can lose an auction to the seeded background).
   */
  const decideUntilFinalized = (txId: string) =>
    waitUntil(
      async () => {
        const record = (await get(url, `/tx/${txId}`)).body;
        if (record.state === 'finalized') return true;
        if (
          record.state === 'pending' &&
          record.attempts.every((a: { stage: string }) => a.stage === 'failed')
        )
          await submit(txId);
        return false;
      },
      90_000,
      `${txId} finalized`,
    );

  /**
   * A bundle ranked above any pack (a 1,000,000-lamport tip), sent straight to the engine, that takes `wallet` down to
   * `keep` lamports: relay's simulation (the bank as it stands) still passes, the block runs this bundle first.
   * Returns its bundle id.
   */
  const drainStraightToEngine = async (wallet: Keypair, keep: number): Promise<string> => {
    const { blockhash } = stack.simnet.cluster.latestBlockhash('confirmed');
    const balance = stack.simnet.cluster.getBalance(wallet.publicKey.toBase58());
    const drain = new Transaction({ feePayer: wallet.publicKey, recentBlockhash: blockhash });
    drain.add(
      SystemProgram.transfer({
        fromPubkey: wallet.publicKey,
        toPubkey: new PublicKey(MAINNET_TIP_ACCOUNTS[0] as string),
        lamports: 1_000_000,
      }),
      SystemProgram.transfer({
        fromPubkey: wallet.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: balance - 1_000_000 - 5_000 - keep,
      }),
    );
    drain.sign(wallet);
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
    return drainId;
  };

  /** Wait for the pack of `carrierId` carrying `riderId` at the engine, then let the stalled chain move again. */
  const packAtEngineThenResume = async (carrierId: string, riderId: string, packs: number) => {
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
    const pack = stack.simnet.engine.pendingBundles().find((b) => b.signatures[1] === riderSignature);
    expect(pack?.signatures[0]).toBe(carrierSignature);
    expect(await counterValue(url, 'relay_packed_bundles_total')).toBe(packs);
    stack.simnet.faults.set({ slotStall: false });
  };

  /**
   * Decide for `firstId` and wait until the engine took its bundle: it has spent the region's one token before the
   * pack's members are decided. Decided together, the three would go as one pack (a ready bundle waits briefly for
   * decisions still to come when requests are scarce).
   */
  const sentAloneFirst = async (firstId: string) => {
    expect((await submit(firstId)).status).toBe(202);
    // The region is recorded once the engine took the bundle (the view shows an attempt not yet sent as submitted).
    await waitUntil(
      async () => Boolean((await get(url, `/tx/${firstId}`)).body.attempts[0]?.region),
      15_000,
      'the engine to take the first transaction alone',
    );
  };

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
    await sentAloneFirst(alone.body.tx_id as string);
    for (const id of [carrierId, riderId]) expect((await submit(id)).status).toBe(202);

    // Before the pack goes out, a bundle that will empty the passenger's fee payer reaches the engine.
    const drainId = await drainStraightToEngine(riderPayer, 0);
    await packAtEngineThenResume(carrierId, riderId, 1);

    await waitUntil(
      () => stack.simnet.engine.getBundle(drainId)?.state === 'landed',
      30_000,
      'the draining bundle landed',
    );
    // The pack's attempt ends counting no retry (the passenger's fault); the carrier then goes alone and lands.
    await packEndedFreeThenAlone(carrierId);
    await waitUntil(
      async () => ['failed', 'expired'].includes((await get(url, `/tx/${riderId}`)).body.state),
      60_000,
      'the passenger ended',
    );
    const riderRecord = (await get(url, `/tx/${riderId}`)).body;
    expect(riderRecord.state).toBe('failed');
    // Named by the engine (gRPC: its simulation failed) or by relay's diagnosis (JSON-RPC: its payer cannot pay).
    expect(['insufficient_funds', 'simulation_failed']).toContain(riderRecord.failure);
    // Only one pack was ever made: the passenger never rode again.
    expect(await counterValue(url, 'relay_packed_bundles_total')).toBe(1);
  }, 120_000);
  test("a rider the engine refuses the pack for (already processed) leaves the carrier's retries alone", async () => {
    const first = stack.simnet.fundedKeypair(100_000_000);
    const carrierPayer = stack.simnet.fundedKeypair(100_000_000);
    const riderPayer = stack.simnet.fundedKeypair(100_000_000);
    const packsBefore = await counterValue(url, 'relay_packed_bundles_total');
    // On a blockhash the lagging node below knows: it simulates on its own bank (40 slots behind), where a fresh
    // blockhash is BlockhashNotFound and nothing could be packed (as on a real node that far behind).
    const { cluster } = stack.simnet;
    const builtAt = cluster.slot;
    const old = cluster.latestBlockhash('finalized').blockhash;
    const alone = await post(url, '/tx/enqueue', { transaction: stack.transfer(110, first, old) });
    const carrier = await post(url, '/tx/enqueue', { transaction: stack.transfer(210, carrierPayer, old) });
    const riderWire = stack.transfer(310, riderPayer, old);
    const rider = await post(url, '/tx/enqueue', { transaction: riderWire });
    for (const r of [alone, carrier, rider]) expect(r.status).toBe(202);
    const carrierId = carrier.body.tx_id as string;
    const riderId = rider.body.tx_id as string;

    // The rider's own bytes land outside relay (its owner sent them elsewhere too), before relay has sent anything of
    // it: relay follows a transaction's signatures once it has an attempt.
    const { blockhash } = stack.simnet.cluster.latestBlockhash('confirmed');
    const tipper = stack.simnet.fundedKeypair(10_000_000);
    const tip = new Transaction({ feePayer: tipper.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({
        fromPubkey: tipper.publicKey,
        toPubkey: new PublicKey(MAINNET_TIP_ACCOUNTS[0] as string),
        lamports: 1_000_000,
      }),
    );
    tip.sign(tipper);
    const engineUrl = stack.simnet.endpoints.regions[0]?.engineUrl as string;
    const sent = await fetch(`${engineUrl}/api/v1/bundles`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'sendBundle',
        params: [[bs58.encode(Buffer.from(riderWire, 'base64')), bs58.encode(tip.serialize())]],
      }),
    });
    const outside = ((await sent.json()) as { result?: string }).result as string;
    expect(outside).toBeDefined();
    await waitUntil(
      () => stack.simnet.engine.getBundle(outside)?.state === 'landed',
      15_000,
      "the rider's own bytes landed outside relay",
    );
    // relay's RPC lags (a node behind a load balancer): for a while it still shows the rider unprocessed, so the rider
    // passes relay's checks and rides; the engine, at the tip of the chain, refuses the pack. Its bank (40 slots
    // behind) must have reached the finalized block of `builtAt` (32 behind it) to know the blockhash.
    await waitUntil(() => cluster.slot >= builtAt + 8, 15_000, 'the lagging bank to reach the blockhash');
    stack.simnet.faults.set({ rpcLagSlots: 40, rpcLaggingShare: 1 });
    const rejectedBefore = await rejectedSends(url);
    await sentAloneFirst(alone.body.tx_id as string);
    for (const id of [carrierId, riderId]) expect((await submit(id)).status).toBe(202);
    await waitUntil(
      async () => (await counterValue(url, 'relay_packed_bundles_total')) > packsBefore,
      15_000,
      'the pack',
    );
    await waitUntil(
      async () => (await rejectedSends(url)) > rejectedBefore,
      15_000,
      'the engine refusing the pack',
    );
    stack.simnet.faults.set({ rpcLagSlots: 0, rpcLaggingShare: 0 });
    const packed = (await get(url, `/tx/${carrierId}`)).body.attempts[0] as { bundle_id: string };
    expect(stack.simnet.engine.getBundle(packed.bundle_id)).toBeUndefined();

    // The refused pack's attempt ends counting no retry (the rider's doing); the carrier then goes alone and lands.
    await packEndedFreeThenAlone(carrierId);
  }, 150_000);

  test('a same-payer pack whose second member cannot pay when it runs: the carrier loses nothing, the member fails alone', async () => {
    const first = stack.simnet.fundedKeypair(100_000_000);
    // One wallet pays both: riders sharing only their fee payer ride when the payer can pay them all in bundle order.
    const wallet = stack.simnet.fundedKeypair(10_000_000);
    const packsBefore = await counterValue(url, 'relay_packed_bundles_total');
    stack.simnet.faults.set({ slotStall: true });
    const alone = await post(url, '/tx/enqueue', { transaction: stack.transfer(120, first) });
    const carrier = await post(url, '/tx/enqueue', { transaction: stack.transfer(220, wallet) });
    const member = await post(url, '/tx/enqueue', { transaction: stack.transfer(2_000_000, wallet) });
    for (const r of [alone, carrier, member]) expect(r.status).toBe(202);
    const carrierId = carrier.body.tx_id as string;
    const memberId = member.body.tx_id as string;
    await sentAloneFirst(alone.body.tx_id as string);
    for (const id of [carrierId, memberId]) expect((await submit(id)).status).toBe(202);

    // Before the pack goes out, a bundle ranked above it takes the wallet down to what the carrier alone needs (its
    // transfer and fee, above the rent-exempt minimum) and 100,000 more: relay's checks saw the wallet as it stood;
    // in the block the carrier still runs, the member's transfer (2,000,000 more) cannot. (The stack's transfers send
    // 890,880 more than asked: the new recipient's rent-exempt minimum.)
    const rentExempt = await stack.connection().getMinimumBalanceForRentExemption(0);
    const drainId = await drainStraightToEngine(wallet, rentExempt + 890_880 + 220 + 5_000 + 100_000);
    await packAtEngineThenResume(carrierId, memberId, packsBefore + 1);
    await waitUntil(
      () => stack.simnet.engine.getBundle(drainId)?.state === 'landed',
      30_000,
      'the draining bundle landed',
    );

    // The pack's attempt ends counting no retry (the member's fault); the carrier lands alone, paid from the wallet.
    await packEndedFreeThenAlone(carrierId).catch(async (error: Error) => {
      const records = [carrierId, memberId].map(async (id) =>
        JSON.stringify((await get(url, `/tx/${id}`)).body),
      );
      throw new Error(`${error.message}\ncarrier: ${await records[0]}\nmember: ${await records[1]}`);
    });
    await waitUntil(
      async () => ['failed', 'expired'].includes((await get(url, `/tx/${memberId}`)).body.state),
      60_000,
      'the member ended',
    );
    const memberRecord = (await get(url, `/tx/${memberId}`)).body;
    expect(memberRecord.state).toBe('failed');
    expect(['insufficient_funds', 'simulation_failed']).toContain(memberRecord.failure);
    // The member never rode again, and nothing of it landed: the wallet kept what the carrier left it.
    expect(await counterValue(url, 'relay_packed_bundles_total')).toBe(packsBefore + 1);
    expect(stack.simnet.cluster.getBalance(wallet.publicKey.toBase58())).toBe(rentExempt + 100_000);
  }, 150_000);
});

/** sendBundle requests the engine answered with a verdict on the bundle (a refusal), per relay's metrics. */
async function rejectedSends(url: string): Promise<number> {
  const text = (await get(url, '/metrics')).body as string;
  return text
    .split('\n')
    .filter((l) => l.startsWith('relay_engine_requests_total{') && l.includes('result="rejected"'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}
