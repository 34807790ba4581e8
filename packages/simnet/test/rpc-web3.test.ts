/**
 * Conformance: the unmodified @solana/web3.js v1 Connection against the simnet's JSON-RPC + WebSocket server.
 */
import {
  Keypair,
  LAMPORTS_PER_SOL,
  PublicKey,
  SystemProgram,
  Transaction,
  SendTransactionError,
} from '@solana/web3.js';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import { rawRpc, useRpcHarness } from './rpc-harness';

describe('JSON-RPC server with @solana/web3.js Connection', () => {
  const h = useRpcHarness(11);
  const { faults, cluster, payer } = h;

  it('listens for WebSocket on port + 1', () => {
    expect(h.server.wsUrl).toBe(`ws://127.0.0.1:${h.server.port + 1}`);
  });

  it('getVersion, getSlot, getBlockHeight, getEpochInfo, getEpochSchedule at each commitment', async () => {
    expect((await h.connection.getVersion())['solana-core']).toMatch(/^\d+\.\d+\.\d+$/);
    expect(await h.connection.getSlot('processed')).toBe(cluster.slot);
    expect(await h.connection.getSlot('confirmed')).toBe(cluster.slotAt('confirmed'));
    expect(await h.connection.getSlot('finalized')).toBe(cluster.slotAt('finalized'));
    expect(cluster.slotAt('confirmed')).toBe(cluster.slot - 2);
    expect(await h.connection.getBlockHeight('processed')).toBe(cluster.blockHeight);
    const info = await h.connection.getEpochInfo('processed');
    expect(info).toMatchObject({
      epoch: 0,
      slotIndex: cluster.slot,
      slotsInEpoch: 64,
      absoluteSlot: cluster.slot,
    });
    const schedule = await h.connection.getEpochSchedule();
    expect(schedule.slotsPerEpoch).toBe(64);
    expect(schedule.getEpoch(130)).toBe(2);
  });

  it('getLeaderSchedule and getSlotLeaders agree with the cluster, in 4-slot windows', async () => {
    const schedule = await h.connection.getLeaderSchedule();
    expect(schedule).not.toBeNull();
    const indexes = Object.values(schedule as Record<string, number[]>)
      .flat()
      .sort((a, b) => a - b);
    expect(indexes).toEqual(Array.from({ length: 64 }, (_, i) => i));
    const leaders = await h.connection.getSlotLeaders(0, 64);
    expect(leaders).toHaveLength(64);
    for (let slot = 0; slot < 64; slot++) {
      expect(leaders[slot]?.toBase58()).toBe(cluster.leaderAt(slot)?.identity);
      expect(leaders[slot]?.equals(leaders[slot - (slot % 4)] as PublicKey)).toBe(true);
      expect((schedule as Record<string, number[]>)[leaders[slot]?.toBase58() as string]).toContain(slot);
    }
    // Beyond the next epoch the schedule is unknown.
    await expect(h.connection.getSlotLeaders(64 * 5, 4)).rejects.toThrow(
      /leader schedule for epoch 5 is unavailable/,
    );
  });

  it('getLatestBlockhash and isBlockhashValid', async () => {
    const latest = await h.connection.getLatestBlockhash('confirmed');
    expect(latest.blockhash).toBe(cluster.latestBlockhash('confirmed').blockhash);
    expect(latest.lastValidBlockHeight).toBe(cluster.blockHeightAt('confirmed') + 150);
    expect((await h.connection.isBlockhashValid(latest.blockhash)).value).toBe(true);
    expect((await h.connection.isBlockhashValid(Keypair.generate().publicKey.toBase58())).value).toBe(false);
  });

  it('requestAirdrop + confirmTransaction, then getBalance', async () => {
    cluster.start();
    const owner = Keypair.generate();
    const latest = await h.connection.getLatestBlockhash();
    const signature = await h.connection.requestAirdrop(owner.publicKey, 2 * LAMPORTS_PER_SOL);
    const confirmed = await h.connection.confirmTransaction({ signature, ...latest }, 'confirmed');
    expect(confirmed.value.err).toBeNull();
    expect(await h.connection.getBalance(owner.publicKey)).toBe(2 * LAMPORTS_PER_SOL);
    const account = await h.connection.getAccountInfo(owner.publicKey);
    expect(account?.lamports).toBe(2 * LAMPORTS_PER_SOL);
    expect(account?.owner.equals(SystemProgram.programId)).toBe(true);
  });

  it('simulateTransaction runs the transaction in the bank without committing', async () => {
    const web3Payer = payer.toWeb3();
    const recipient = Keypair.generate().publicKey;
    const tx = new Transaction().add(
      SystemProgram.transfer({
        fromPubkey: web3Payer.publicKey,
        toPubkey: recipient,
        lamports: LAMPORTS_PER_SOL,
      }),
    );
    const ok = await h.connection.simulateTransaction(tx, [web3Payer]);
    expect(ok.value.err).toBeNull();
    expect(ok.value.logs?.[0]).toMatch(/^Program 11111111111111111111111111111111 invoke/);
    expect(ok.value.unitsConsumed).toBeGreaterThan(0);
    expect(await h.connection.getBalance(recipient)).toBe(0);

    const overdraft = new Transaction().add(
      SystemProgram.transfer({
        fromPubkey: web3Payer.publicKey,
        toPubkey: recipient,
        lamports: 10_000 * LAMPORTS_PER_SOL,
      }),
    );
    const failed = await h.connection.simulateTransaction(overdraft, [web3Payer]);
    expect(failed.value.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
  });

  it('sendRawTransaction + confirmTransaction (block-height strategy over WebSocket), then getSignatureStatuses', async () => {
    cluster.start();
    const recipient = TestKeypair.generate();
    const latest = await h.connection.getLatestBlockhash('confirmed');
    const wire = createTransferTx({
      from: payer,
      transfers: [{ to: recipient.publicKey, lamports: 3_000_000 }],
      recentBlockhash: latest.blockhash,
    });
    const signature = await h.connection.sendRawTransaction(wire);
    expect(signature).toBe(signatureOf(wire));
    const result = await h.connection.confirmTransaction({ signature, ...latest }, 'confirmed');
    expect(result.value.err).toBeNull();
    const statuses = await h.connection.getSignatureStatuses([
      signature,
      TestKeypair.generate().publicKey + 'x',
    ]);
    expect(statuses.value[0]?.confirmationStatus).toMatch(/confirmed|finalized/);
    expect(statuses.value[0]?.err).toBeNull();
    expect(statuses.value[1]).toBeNull();
    expect(await h.connection.getBalance(new PublicKey(recipient.publicKey))).toBe(3_000_000);
  });

  it('onSignature and onSlotChange deliver WebSocket notifications', async () => {
    const latest = cluster.latestBlockhash('confirmed');
    const wire = createTransferTx({
      from: payer,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 }],
      recentBlockhash: latest.blockhash,
    });
    const signature = await h.connection.sendRawTransaction(wire);
    const slots: number[] = [];
    const slotSubscription = h.connection.onSlotChange((info) => slots.push(info.slot));
    const notified = new Promise<{ err: unknown; slot: number }>((resolve) => {
      h.connection.onSignature(
        signature,
        (result, context) => resolve({ err: result.err, slot: context.slot }),
        'processed',
      );
    });
    // Move slots one at a time until the slot subscription answers: then it is live on the server (a fixed sleep
    // was a guess a loaded machine could beat). The signature subscription needs no wait: the server notifies at
    // once a signature that is already processed.
    const until = async (done: () => boolean, what: string) => {
      const deadline = Date.now() + 10_000;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const deadline = Date.now() + 10_000;
    while (slots.length === 0 && Date.now() < deadline) {
      cluster.advance(1);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    cluster.advance(3);
    const result = await notified;
    expect(result.err).toBeNull();
    expect(cluster.signatureStatus(signature)?.slot).toBeGreaterThan(0);
    await until(() => slots[slots.length - 1] === cluster.slot, 'the last slot notification');
    expect(slots.slice(-3)).toEqual([cluster.slot - 2, cluster.slot - 1, cluster.slot]);
    await h.connection.removeSlotChangeListener(slotSubscription);
  });

  it('refuses a failing transaction at preflight with -32002 and its logs', async () => {
    const latest = cluster.latestBlockhash('confirmed');
    const wire = createTransferTx({
      from: payer,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 10_000 * LAMPORTS_PER_SOL }],
      recentBlockhash: latest.blockhash,
    });
    const error = await h.connection.sendRawTransaction(wire).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SendTransactionError);
    expect(String((error as Error).message)).toMatch(/custom program error: 0x1/);
    expect((error as SendTransactionError).logs?.length).toBeGreaterThan(0);
    // Without preflight the transaction is accepted, lands and fails on chain (fee charged).
    const before = cluster.getBalance(payer.publicKey);
    const signature = await h.connection.sendRawTransaction(wire, { skipPreflight: true });
    cluster.advance(1);
    expect(cluster.signatureStatus(signature)?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(cluster.getBalance(payer.publicKey)).toBe(before - 5_000);
  });

  it('answers batch requests (JSON array bodies) in order', async () => {
    const body = [
      { jsonrpc: '2.0', id: 'a', method: 'getSlot', params: [{ commitment: 'processed' }] },
      {
        jsonrpc: '2.0',
        id: 'b',
        method: 'getSignatureStatuses',
        params: [['1111111111111111111111111111111111111111111111111111111111111111']],
      },
      { jsonrpc: '2.0', id: 'c', method: 'noSuchMethod', params: [] },
    ];
    const response = await fetch(h.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answers = (await response.json()) as Array<{
      id: string;
      result?: unknown;
      error?: { code: number };
    }>;
    expect(answers.map((a) => a.id)).toEqual(['a', 'b', 'c']);
    expect(answers[0]?.result).toBe(cluster.slot);
    expect(answers[1]?.result).toMatchObject({ value: [null] });
    expect(answers[2]?.error?.code).toBe(-32601);
  });

  it('getBlock: signatures in block order once confirmed; full and accounts details; Agave errors for processed, future, abandoned, skipped', async () => {
    const raw = (params: unknown[]) => rawRpc(h.server.url, 'getBlock', params);
    const blockhash = cluster.latestBlockhash('confirmed').blockhash;
    const wires = [1_000, 2_000, 3_000].map((lamports) =>
      createTransferTx({
        from: payer,
        transfers: [{ to: TestKeypair.generate().publicKey, lamports }],
        recentBlockhash: blockhash,
      }),
    );
    for (const wire of wires) expect(cluster.submitTransaction(wire).ok).toBe(true);
    cluster.advance(1);
    const slot = cluster.slot;
    // Processed only: the blockstore has nothing to serve at `confirmed` yet.
    await expect(h.connection.getBlockSignatures(slot, 'confirmed')).rejects.toMatchObject({ code: -32004 });
    expect((await raw([slot, { commitment: 'processed' }])).error).toEqual({
      code: -32602,
      message: 'Method does not support commitment below `confirmed`',
    });
    cluster.advance(2);
    const block = await h.connection.getBlockSignatures(slot, 'confirmed');
    expect(block.signatures).toEqual(wires.map(signatureOf));
    expect(block.blockhash).toBe(cluster.block(slot)?.blockhash);
    expect(block.parentSlot).toBe(slot - 1);
    expect(block.previousBlockhash).toBe(cluster.block(slot - 1)?.blockhash);
    // Not finalized yet.
    await expect(h.connection.getBlockSignatures(slot, 'finalized')).rejects.toMatchObject({ code: -32004 });
    const none = await h.connection.getBlock(slot, {
      commitment: 'confirmed',
      transactionDetails: 'none',
      rewards: false,
      maxSupportedTransactionVersion: 0,
    });
    expect(none).toMatchObject({ blockhash: block.blockhash, blockHeight: cluster.block(slot)?.blockHeight });
    expect(none).not.toHaveProperty('signatures');
    // Full transactions (web3's default): each with its meta, in block order.
    const full = await h.connection.getBlock(slot, {
      commitment: 'confirmed',
      maxSupportedTransactionVersion: 0,
    });
    expect(full?.transactions.map((t) => t.transaction.signatures[0])).toEqual(wires.map(signatureOf));
    expect(full?.transactions.map((t) => t.meta?.fee)).toEqual([5_000, 5_000, 5_000]);
    expect(full?.transactions.map((t) => t.version)).toEqual(['legacy', 'legacy', 'legacy']);
    const accounts = (await raw([slot, { commitment: 'confirmed', transactionDetails: 'accounts' }]))
      .result as {
      transactions: Array<{ transaction: { accountKeys: Array<{ pubkey: string; signer: boolean }> } }>;
    };
    expect(accounts.transactions[0]?.transaction.accountKeys[0]).toMatchObject({
      pubkey: payer.publicKey,
      signer: true,
      writable: true,
    });

    // A dead slot is skipped for getBlock, like one no leader produced.
    faults.set({ deadSlotRate: 1 });
    cluster.advance(1);
    const dead = cluster.slot;
    faults.reset();
    cluster.advance(3);
    expect(cluster.block(dead)?.status).toBe('dead');
    // Above the root: not available (Agave: the fork could still change); at or below it: skipped.
    await expect(h.connection.getBlockSignatures(dead, 'confirmed')).rejects.toMatchObject({ code: -32004 });
    cluster.advance(32);
    await expect(h.connection.getBlockSignatures(dead, 'confirmed')).rejects.toMatchObject({
      code: -32007,
      message: expect.stringContaining(`Slot ${dead} was skipped`),
    });
  });

  it('isBlockhashValid is evaluated at the bank of the asked commitment: a fresh blockhash is not valid at finalized', async () => {
    cluster.advance(1);
    const fresh = cluster.latestBlockhash('processed').blockhash;
    const valid = async (commitment: 'processed' | 'confirmed' | 'finalized') =>
      (await h.connection.isBlockhashValid(fresh, { commitment })).value;
    expect(await valid('processed')).toBe(true);
    expect(await valid('confirmed')).toBe(false); // newer than the confirmed bank
    expect(await valid('finalized')).toBe(false); // newer than the root
    cluster.advance(32);
    expect([await valid('processed'), await valid('confirmed'), await valid('finalized')]).toEqual([
      true,
      true,
      true,
    ]);
  });

  it('a lagging node behind the load balancer: lower context slot, recent signatures null, minContextSlot -32016', async () => {
    const recipient = TestKeypair.generate().publicKey;
    const wire = createTransferTx({
      from: payer,
      transfers: [{ to: recipient, lamports: 4_000 }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
    expect(cluster.submitTransaction(wire).ok).toBe(true);
    cluster.advance(1);
    const landed = cluster.slot;
    cluster.advance(2);
    const lagBefore = faults.injected.rpcLagged;
    faults.set({ rpcLagSlots: 3, rpcLaggingShare: 1 });
    const tip = cluster.slot;
    expect(await h.connection.getSlot('processed')).toBe(tip - 3);
    const statuses = await h.connection.getSignatureStatuses([signatureOf(wire)]);
    expect(statuses.context.slot).toBe(tip - 3);
    expect(statuses.value[0]).toBeNull(); // landed at `landed`, after this node's tip
    // A blockhash this node has not seen is invalid to it.
    expect(
      (
        await h.connection.isBlockhashValid(cluster.latestBlockhash('processed').blockhash, {
          commitment: 'processed',
        })
      ).value,
    ).toBe(false);
    await expect(h.connection.getSlot({ commitment: 'processed', minContextSlot: tip })).rejects.toThrow(
      /Minimum context slot has not been reached/,
    );
    // web3.js wraps this one in its own Error; the node's message is inside.
    await expect(
      h.connection.getLatestBlockhash({ commitment: 'processed', minContextSlot: tip }),
    ).rejects.toThrow(/Minimum context slot has not been reached/);
    expect(faults.injected.rpcLagged - lagBefore).toBe(5);
    faults.reset();
    expect((await h.connection.getSignatureStatuses([signatureOf(wire)])).value[0]?.slot).toBe(landed);
  });

  it('without searchTransactionHistory only the status cache answers: ~300 rooted slots', async () => {
    const wire = createTransferTx({
      from: payer,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 5_000 }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
    expect(cluster.submitTransaction(wire).ok).toBe(true);
    cluster.advance(1);
    const landed = cluster.slot;
    cluster.advance(32 + 290); // finalized, and 290 rooted slots on: still cached
    expect((await h.connection.getSignatureStatuses([signatureOf(wire)])).value[0]?.slot).toBe(landed);
    cluster.advance(20); // past 300 rooted slots
    expect((await h.connection.getSignatureStatuses([signatureOf(wire)])).value[0]).toBeNull();
    const searched = await h.connection.getSignatureStatuses([signatureOf(wire)], {
      searchTransactionHistory: true,
    });
    expect(searched.value[0]).toMatchObject({ slot: landed, confirmationStatus: 'finalized' });
  });

  it('getSignatureStatuses refuses more than 256 signatures', async () => {
    const signatures = Array.from({ length: 257 }, () => signatureOf(new Uint8Array(65)));
    await expect(h.connection.getSignatureStatuses(signatures)).rejects.toThrow(/max 256/);
  });

  it('honours rpcDown (503, -32005) and rpc5xxRate', async () => {
    faults.set({ rpcDown: true });
    const down = await fetch(h.server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getHealth' }),
    });
    expect(down.status).toBe(503);
    expect(((await down.json()) as { error: { code: number } }).error.code).toBe(-32005);
    await expect(h.connection.getSlot()).rejects.toThrow(/503/);
    faults.set({ rpcDown: false, rpc5xxRate: 1 });
    await expect(h.connection.getSlot()).rejects.toThrow(/50\d/);
    faults.reset();
    expect(await h.connection.getSlot('processed')).toBe(cluster.slot);
  });
});
