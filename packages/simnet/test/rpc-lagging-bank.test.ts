/**
 * A lagging RPC node (`rpcLagSlots`, `Cluster.behind`) answers account reads and simulations from its own, older
 * bank, as a real node behind the tip does (Agave rpc/src/rpc.rs: `get_balance`, `get_account_info`,
 * `simulate_transaction` read `meta.get_bank_with_config(config)`, the node's bank at the asked commitment, and
 * refuse a `min_context_slot` above it with -32016 "Minimum context slot has not been reached").
 */
import { LAMPORTS_PER_SOL } from '@solana/web3.js';
import { TestKeypair, createTransferTx } from '../src/chain/testing';
import { rawRpc as raw, useRpcHarness } from './rpc-harness';

const base64 = (wire: Uint8Array) => Buffer.from(wire).toString('base64');

describe('a lagging RPC node answers from its own bank', () => {
  const h = useRpcHarness(31);
  const { faults, cluster, payer } = h;

  /** Every request answered by a node `lag` slots behind (recording of the undo logs starts with the fault). */
  const lagging = (lag: number) => faults.set({ rpcLagSlots: lag, rpcLaggingShare: 1 });
  /** The fault stays set (the chain keeps recording), but every request goes to an up-to-date node. */
  const upToDate = (lag: number) => faults.set({ rpcLagSlots: lag, rpcLaggingShare: 0 });

  const balance = async (address: string, commitment = 'processed', minContextSlot?: number) =>
    raw(h.server.url, 'getBalance', [
      address,
      { commitment, ...(minContextSlot === undefined ? {} : { minContextSlot }) },
    ]);

  it('balances, accounts and simulation before an airdrop and a transfer it has not seen; -32016 above its slot', async () => {
    upToDate(3);
    const funded = TestKeypair.generate(); // airdropped at s, recorded in block s + 1
    const late = TestKeypair.generate(); // funded by a transfer in block s + 2
    const oldBlockhash = cluster.latestBlockhash('processed').blockhash;
    cluster.airdrop(funded.publicKey, LAMPORTS_PER_SOL);
    cluster.advance(1);
    const airdropSlot = cluster.slot;
    const payerBefore = cluster.getBalance(payer.publicKey);
    const transfer = createTransferTx({
      from: payer,
      transfers: [{ to: late.publicKey, lamports: LAMPORTS_PER_SOL / 2 }],
      recentBlockhash: oldBlockhash,
    });
    expect(cluster.submitTransaction(transfer).ok).toBe(true);
    cluster.advance(1);
    const transferSlot = cluster.slot;
    expect(cluster.transaction(cluster.block(transferSlot)?.signatures[0] as string)?.err).toBeNull();
    cluster.advance(2);
    const tip = cluster.slot;
    expect(tip - 3).toBe(airdropSlot); // no skipped slots on this seed

    // A spend by `late` (to an existing account), on a blockhash every bank here knows.
    const spend = createTransferTx({
      from: late,
      transfers: [{ to: payer.publicKey, lamports: 1_000 }],
      recentBlockhash: oldBlockhash,
    });
    const simulate = (config: Record<string, unknown> = {}) =>
      raw(h.server.url, 'simulateTransaction', [
        base64(spend),
        { encoding: 'base64', commitment: 'processed', ...config },
      ]);

    // An up-to-date node sees both.
    expect((await balance(late.publicKey)).result).toMatchObject({
      context: { slot: tip },
      value: LAMPORTS_PER_SOL / 2,
    });
    expect((await simulate()).result).toMatchObject({ context: { slot: tip }, value: { err: null } });

    // A node 3 slots behind: its processed bank is the airdrop's block, before the transfer.
    lagging(3);
    expect((await balance(funded.publicKey)).result).toMatchObject({
      context: { slot: airdropSlot },
      value: LAMPORTS_PER_SOL,
    });
    expect((await balance(late.publicKey)).result).toMatchObject({
      context: { slot: airdropSlot },
      value: 0,
    });
    expect((await balance(payer.publicKey)).result).toMatchObject({ value: payerBefore });
    expect(
      (await raw(h.server.url, 'getAccountInfo', [late.publicKey, { commitment: 'processed' }])).result,
    ).toEqual({ context: { slot: airdropSlot, apiVersion: expect.any(String) }, value: null });
    const accounts = (
      await raw(h.server.url, 'getMultipleAccounts', [
        [funded.publicKey, late.publicKey],
        { commitment: 'processed' },
      ])
    ).result as { value: Array<{ lamports: number } | null> };
    expect(accounts.value.map((a) => a?.lamports ?? null)).toEqual([LAMPORTS_PER_SOL, null]);
    // Its confirmed bank is two slots older still: before the airdrop's block too.
    expect((await balance(funded.publicKey, 'confirmed')).result).toMatchObject({
      context: { slot: airdropSlot - 2 },
      value: 0,
    });
    // Simulation runs on that bank: `late` does not exist there.
    expect((await simulate()).result).toMatchObject({
      context: { slot: airdropSlot },
      value: { err: 'AccountNotFound' },
    });
    // Its block height and latest blockhash are its bank's.
    expect((await raw(h.server.url, 'getBlockHeight', [{ commitment: 'processed' }])).result).toBe(
      cluster.block(airdropSlot)?.blockHeight,
    );
    expect(
      (await raw(h.server.url, 'getLatestBlockhash', [{ commitment: 'processed' }])).result,
    ).toMatchObject({
      context: { slot: airdropSlot },
      value: { blockhash: cluster.block(airdropSlot)?.blockhash },
    });

    // Asked for a slot it has not reached, it refuses rather than answer from that bank (-32016).
    const behindError = {
      code: -32016,
      message: 'Minimum context slot has not been reached',
      data: { contextSlot: airdropSlot },
    };
    expect((await balance(late.publicKey, 'processed', transferSlot)).error).toEqual(behindError);
    expect((await simulate({ minContextSlot: transferSlot })).error).toEqual(behindError);

    // The simulation left the bank as it was.
    expect(cluster.getBalance(late.publicKey)).toBe(LAMPORTS_PER_SOL / 2);
    expect(cluster.getAccount(late.publicKey)?.lamports).toBe(LAMPORTS_PER_SOL / 2);

    // Once the node's bank reaches the transfer, it sees it.
    cluster.advance(1);
    expect((await balance(late.publicKey, 'processed', transferSlot)).result).toMatchObject({
      context: { slot: transferSlot },
      value: LAMPORTS_PER_SOL / 2,
    });
    expect((await simulate({ minContextSlot: transferSlot })).result).toMatchObject({
      value: { err: null },
    });
  });

  it('an airdrop not yet in a block, and one folded into a block that then dies, are seen from the right slot', async () => {
    upToDate(2);
    const target = TestKeypair.generate();
    const spent = TestKeypair.generate();
    cluster.advance(1);
    // Airdrops credit at once but are recorded in the next block: a node behind has not seen one yet.
    cluster.airdrop(spent.publicKey, LAMPORTS_PER_SOL);
    lagging(2);
    expect((await balance(spent.publicKey)).result).toMatchObject({ value: 0 });
    upToDate(2);
    expect((await balance(spent.publicKey)).result).toMatchObject({ value: LAMPORTS_PER_SOL });

    // A block that dies: a transfer into it is undone; an airdrop credited while it was the tip survives it.
    const parentSlot = cluster.slot;
    faults.set({ deadSlotRate: 1 });
    const transfer = createTransferTx({
      from: payer,
      transfers: [{ to: target.publicKey, lamports: 1_000_000 }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
    expect(cluster.submitTransaction(transfer).ok).toBe(true);
    cluster.advance(1);
    faults.set({ deadSlotRate: 0 });
    expect(cluster.getBalance(target.publicKey)).toBe(1_000_000);
    cluster.airdrop(target.publicKey, 5_000_000);
    cluster.advance(1); // the doomed block dies; the airdrop is recorded in this one
    const airdropSlot = cluster.slot;
    expect(cluster.getBalance(target.publicKey)).toBe(5_000_000);
    cluster.advance(2);
    lagging(2);
    expect((await balance(target.publicKey)).result).toMatchObject({
      context: { slot: airdropSlot },
      value: 5_000_000,
    });
    // The first airdrop was recorded in the dead block, then handed on to this one.
    expect((await balance(spent.publicKey)).result).toMatchObject({ value: LAMPORTS_PER_SOL });
    lagging(3); // its bank: the dead block's parent
    expect((await balance(target.publicKey)).result).toMatchObject({
      context: { slot: parentSlot },
      value: 0,
    });
    expect((await balance(spent.publicKey)).result).toMatchObject({ value: 0 });
  });
});
