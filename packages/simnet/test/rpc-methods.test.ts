/**
 * Conformance for the methods app backends call (issue #15 item 6): getTransaction, getBlock, getFeeForMessage,
 * getRecentPrioritizationFees, getMultipleAccounts, getSignaturesForAddress, over the wire with the unmodified
 * @solana/web3.js v1 Connection and @solana/kit 8.4.0's RPC.
 */
import {
  ComputeBudgetProgram,
  Keypair,
  LAMPORTS_PER_SOL,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import {
  AccountRole,
  address,
  appendTransactionMessageInstruction,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  createSolanaRpcSubscriptions,
  createTransactionMessage,
  getBase64EncodedWireTransaction,
  getCompiledTransactionMessageEncoder,
  compileTransactionMessage,
  getSignatureFromTransaction,
  pipe,
  sendAndConfirmTransactionFactory,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  type Signature,
} from '@solana/kit';
import { MEMO_PROGRAM_ID } from '../src/chain/bank';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import { rawRpc as raw, useRpcHarness } from './rpc-harness';

describe('getTransaction, getFeeForMessage, getRecentPrioritizationFees, getMultipleAccounts, getSignaturesForAddress', () => {
  const h = useRpcHarness(23);
  const { faults, cluster, payer } = h;
  const web3Payer = payer.toWeb3();

  /** Queue a transfer from the payer to a fresh account (for the next block); returns both. */
  const queueTransferToFreshAccount = () => {
    const watched = TestKeypair.generate().publicKey;
    const wire = createTransferTx({
      from: payer,
      transfers: [{ to: watched, lamports: 1_000_000 }],
      recentBlockhash: cluster.latestBlockhash('confirmed').blockhash,
    });
    expect(cluster.submitTransaction(wire).ok).toBe(true);
    return { watched, wire };
  };

  /** A legacy transaction from web3.js: compute budget, a transfer, a memo. */
  const priorityTransfer = (to: PublicKey, amount: number, price: number, limit: number, memo?: string) => {
    const tx = new Transaction();
    tx.add(ComputeBudgetProgram.setComputeUnitLimit({ units: limit }));
    tx.add(ComputeBudgetProgram.setComputeUnitPrice({ microLamports: price }));
    tx.add(SystemProgram.transfer({ fromPubkey: web3Payer.publicKey, toPubkey: to, lamports: amount }));
    if (memo)
      tx.add(
        new TransactionInstruction({
          programId: new PublicKey(MEMO_PROGRAM_ID),
          keys: [],
          data: Buffer.from(memo),
        }),
      );
    tx.recentBlockhash = cluster.latestBlockhash('confirmed').blockhash;
    tx.feePayer = web3Payer.publicKey;
    tx.sign(web3Payer);
    return tx;
  };

  it('getFeeForMessage: 5,000 per signature plus ceil(price × limit / 10^6); null for an unknown blockhash', async () => {
    const tx = priorityTransfer(Keypair.generate().publicKey, 1_000, 2_500_001, 10_000);
    const fee = await h.connection.getFeeForMessage(tx.compileMessage(), 'confirmed');
    // 2,500,001 µlamports × 10,000 CU = 25,000.01 lamports, rounded up.
    expect(fee.value).toBe(5_000 + 25_001);
    expect(fee.context.slot).toBe(cluster.slotAt('confirmed'));
    // No compute budget: the signature fee alone. Two signers: twice that.
    const plain = new Transaction().add(
      SystemProgram.transfer({
        fromPubkey: web3Payer.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 1,
      }),
    );
    plain.recentBlockhash = cluster.latestBlockhash('confirmed').blockhash;
    plain.feePayer = web3Payer.publicKey;
    expect((await h.connection.getFeeForMessage(plain.compileMessage())).value).toBe(5_000);
    const second = Keypair.generate();
    plain.add(
      SystemProgram.transfer({ fromPubkey: second.publicKey, toPubkey: web3Payer.publicKey, lamports: 1 }),
    );
    expect((await h.connection.getFeeForMessage(plain.compileMessage())).value).toBe(10_000);
    // Default limit without SetComputeUnitLimit: 3,000 per builtin instruction (SIMD-0170): 2 × 3,000 × 1 µlamport.
    const priced = new Transaction()
      .add(ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000_000 }))
      .add(
        SystemProgram.transfer({ fromPubkey: web3Payer.publicKey, toPubkey: second.publicKey, lamports: 1 }),
      );
    priced.recentBlockhash = plain.recentBlockhash;
    priced.feePayer = web3Payer.publicKey;
    expect((await h.connection.getFeeForMessage(priced.compileMessage())).value).toBe(5_000 + 6_000);
    // A blockhash the cluster never issued: null (web3 passes the null through).
    priced.recentBlockhash = Keypair.generate().publicKey.toBase58();
    expect((await h.connection.getFeeForMessage(priced.compileMessage())).value).toBeNull();
    // A fresh blockhash is not yet known to the finalized bank.
    priced.recentBlockhash = cluster.latestBlockhash('processed').blockhash;
    expect((await h.connection.getFeeForMessage(priced.compileMessage(), 'finalized')).value).toBeNull();
    expect(await raw(h.server.url, 'getFeeForMessage', ['AQID'])).toMatchObject({ error: { code: -32602 } });
  });

  it('getTransaction: the meta matches what the bank charged; null until the commitment is reached; processed refused', async () => {
    const recipient = Keypair.generate().publicKey;
    const tx = priorityTransfer(recipient, 7_000_000, 3_000_000, 20_000, 'hello');
    const expectedFee = 5_000 + 60_000;
    const before = cluster.getBalance(payer.publicKey);
    const signature = await h.connection.sendRawTransaction(tx.serialize());
    cluster.advance(1);
    const slot = cluster.slot;
    // Processed only: null at confirmed; processed is refused as Agave does.
    expect(await h.connection.getTransaction(signature, { maxSupportedTransactionVersion: 0 })).toBeNull();
    expect(await raw(h.server.url, 'getTransaction', [signature, { commitment: 'processed' }])).toEqual({
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: 'Method does not support commitment below `confirmed`' },
    });
    cluster.advance(2);
    const drop = before - cluster.getBalance(payer.publicKey);
    const got = await h.connection.getTransaction(signature, { maxSupportedTransactionVersion: 0 });
    expect(got).not.toBeNull();
    expect(got?.slot).toBe(slot);
    expect(got?.version).toBe('legacy');
    expect(got?.blockTime).toBeNull();
    expect(got?.meta?.err).toBeNull();
    expect(got?.meta?.fee).toBe(expectedFee);
    // The payer's balance fell by the fee and the transfer, nothing else.
    expect(drop).toBe(expectedFee + 7_000_000);
    const keys = got?.transaction.message.staticAccountKeys.map((k) => k.toBase58()) ?? [];
    const payerIndex = keys.indexOf(payer.publicKey);
    const recipientIndex = keys.indexOf(recipient.toBase58());
    expect(payerIndex).toBe(0);
    expect(got?.meta?.preBalances[payerIndex]).toBe(before);
    expect(got?.meta?.postBalances[payerIndex]).toBe(before - drop);
    expect(got?.meta?.preBalances[recipientIndex]).toBe(0);
    expect(got?.meta?.postBalances[recipientIndex]).toBe(7_000_000);
    expect(
      got?.meta?.logMessages?.some((l) => l.startsWith('Program 11111111111111111111111111111111 invoke')),
    ).toBe(true);
    expect(got?.meta?.computeUnitsConsumed).toBeGreaterThan(0);
    expect(got?.meta?.loadedAddresses).toEqual({ writable: [], readonly: [] });
    expect(got?.transaction.signatures).toEqual([signature]);
    // Not finalized yet: null at finalized, then found once it is.
    expect(
      await h.connection.getTransaction(signature, {
        commitment: 'finalized',
        maxSupportedTransactionVersion: 0,
      }),
    ).toBeNull();
    cluster.advance(32);
    const finalized = await h.connection.getTransaction(signature, {
      commitment: 'finalized',
      maxSupportedTransactionVersion: 0,
    });
    expect(finalized?.slot).toBe(slot);

    // base64: the exact wire bytes; no version field without maxSupportedTransactionVersion.
    const b64 = (await raw(h.server.url, 'getTransaction', [signature, { encoding: 'base64' }])).result as {
      transaction: [string, string];
      version?: unknown;
      meta: { status: unknown };
    };
    expect(b64.transaction).toEqual([Buffer.from(tx.serialize()).toString('base64'), 'base64']);
    expect(b64).not.toHaveProperty('version');
    expect(b64.meta.status).toEqual({ Ok: null });
    // Unknown signature: null. A bad one: Agave's invalid-param error.
    expect(
      await h.connection.getTransaction(bs58Signature(), { maxSupportedTransactionVersion: 0 }),
    ).toBeNull();
    expect((await raw(h.server.url, 'getTransaction', ['abc'])).error).toEqual({
      code: -32602,
      message: 'Invalid param: WrongSize',
    });
    // getParsedTransaction (jsonParsed) is not served: a precise refusal.
    expect(
      (await raw(h.server.url, 'getTransaction', [signature, { encoding: 'jsonParsed' }])).error?.code,
    ).toBe(-32602);
  });

  it('getTransaction: a failed transaction is recorded with its error and fee; v0 needs maxSupportedTransactionVersion', async () => {
    const blockhash = cluster.latestBlockhash('confirmed').blockhash;
    const poor = TestKeypair.generate();
    cluster.airdrop(poor.publicKey, 1_000_000);
    const overdraft = createTransferTx({
      from: poor,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 5_000_000 }],
      recentBlockhash: blockhash,
    });
    expect(cluster.submitTransaction(overdraft).ok).toBe(true);
    const message = new TransactionMessage({
      payerKey: web3Payer.publicKey,
      recentBlockhash: blockhash,
      instructions: [
        SystemProgram.transfer({
          fromPubkey: web3Payer.publicKey,
          toPubkey: Keypair.generate().publicKey,
          lamports: 1_000_000,
        }),
      ],
    }).compileToV0Message();
    const v0 = new VersionedTransaction(message);
    v0.sign([web3Payer]);
    const v0Signature = await h.connection.sendRawTransaction(v0.serialize());
    cluster.advance(3);

    const failed = await h.connection.getTransaction(signatureOf(overdraft), {
      maxSupportedTransactionVersion: 0,
    });
    expect(failed?.meta?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(failed?.meta?.fee).toBe(5_000);
    expect(failed?.meta?.preBalances[0]).toBe(1_000_000);
    expect(failed?.meta?.postBalances[0]).toBe(995_000);
    expect(cluster.getBalance(poor.publicKey)).toBe(995_000);

    expect(
      await raw(h.server.url, 'getTransaction', [v0Signature, { commitment: 'confirmed' }]),
    ).toMatchObject({
      error: {
        code: -32015,
        message:
          'Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0',
      },
    });
    const got = await h.connection.getTransaction(v0Signature, { maxSupportedTransactionVersion: 0 });
    expect(got?.version).toBe(0);
    expect(got?.meta?.fee).toBe(5_000);
    expect(got?.meta?.loadedAddresses).toEqual({ writable: [], readonly: [] });
    expect(got?.transaction.message.addressTableLookups).toEqual([]);
  });

  it('getRecentPrioritizationFees: per block the lowest price, per written account its lowest; ≤ 128 accounts', async () => {
    const other = TestKeypair.generate();
    cluster.airdrop(other.publicKey, LAMPORTS_PER_SOL);
    const untouched = Keypair.generate().publicKey;
    const priced = priorityTransfer(Keypair.generate().publicKey, 1_000_000, 4_000_000, 5_000);
    await h.connection.sendRawTransaction(priced.serialize());
    const free = createTransferTx({
      from: other,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 }],
      recentBlockhash: cluster.latestBlockhash('confirmed').blockhash,
    });
    expect(cluster.submitTransaction(free).ok).toBe(true);
    cluster.advance(1);
    const slot = cluster.slot;
    const all = await h.connection.getRecentPrioritizationFees();
    const at = (fees: Array<{ slot: number; prioritizationFee: number }>) =>
      fees.find((f) => f.slot === slot)?.prioritizationFee;
    // One transaction paid nothing: the block's lowest is 0.
    expect(at(all)).toBe(0);
    expect(all.map((f) => f.slot)).toEqual([...all.map((f) => f.slot)].sort((a, b) => a - b));
    expect(all.length).toBeLessThanOrEqual(150);
    expect(all.at(-1)?.slot).toBe(slot);
    // Locking the payer's account as writable cost 4,000,000 µlamports per CU.
    expect(
      at(await h.connection.getRecentPrioritizationFees({ lockedWritableAccounts: [web3Payer.publicKey] })),
    ).toBe(4_000_000);
    expect(at(await h.connection.getRecentPrioritizationFees({ lockedWritableAccounts: [untouched] }))).toBe(
      0,
    );
    const many = Array.from({ length: 129 }, () => Keypair.generate().publicKey.toBase58());
    expect((await raw(h.server.url, 'getRecentPrioritizationFees', [many])).error).toEqual({
      code: -32602,
      message: 'Too many inputs provided; max 128',
    });
  });

  it('getMultipleAccountsInfo: same shape as getAccountInfo, null for missing accounts, at most 100', async () => {
    const fresh = Keypair.generate().publicKey;
    const infos = await h.connection.getMultipleAccountsInfo([
      web3Payer.publicKey,
      fresh,
      SystemProgram.programId,
    ]);
    expect(infos).toHaveLength(3);
    expect(infos[0]?.lamports).toBe(cluster.getBalance(payer.publicKey));
    expect(infos[0]?.owner.equals(SystemProgram.programId)).toBe(true);
    expect(infos[1]).toBeNull();
    expect(infos[2]?.executable).toBe(true);
    const single = await h.connection.getAccountInfo(web3Payer.publicKey);
    expect(infos[0]).toEqual(single);
    const many = Array.from({ length: 101 }, () => Keypair.generate().publicKey.toBase58());
    expect((await raw(h.server.url, 'getMultipleAccounts', [many])).error).toEqual({
      code: -32602,
      message: 'Too many inputs provided; max 100',
    });
  });

  it('getSignaturesForAddress: exactly the transactions that touched the address, newest first; limit, before, until, memo', async () => {
    const watched = TestKeypair.generate();
    const signatures: string[] = [];
    for (let i = 0; i < 4; i++) {
      const blockhash = cluster.latestBlockhash('confirmed').blockhash;
      // Traffic that does not touch `watched`.
      expect(
        cluster.submitTransaction(
          createTransferTx({
            from: payer,
            transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 + i }],
            recentBlockhash: blockhash,
          }),
        ).ok,
      ).toBe(true);
      if (i === 2) {
        const withMemo = priorityTransfer(new PublicKey(watched.publicKey), 1_000_000, 1, 1_000, 'paid');
        signatures.push(await h.connection.sendRawTransaction(withMemo.serialize()));
      } else {
        const wire = createTransferTx({
          from: payer,
          transfers: [{ to: watched.publicKey, lamports: 1_000_000 }],
          recentBlockhash: blockhash,
        });
        expect(cluster.submitTransaction(wire).ok).toBe(true);
        signatures.push(signatureOf(wire));
      }
      cluster.advance(1);
    }
    const newestFirst = [...signatures].reverse();
    // The two newest are processed only: not listed at confirmed yet.
    const early = await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey));
    expect(early.map((s) => s.signature)).toEqual(newestFirst.slice(2));
    cluster.advance(2);
    const listed = await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey));
    expect(listed.map((s) => s.signature)).toEqual(newestFirst);
    expect(listed.map((s) => s.slot)).toEqual([...listed.map((s) => s.slot)].sort((a, b) => b - a));
    expect(
      listed.every((s) => s.err === null && s.blockTime === null && s.confirmationStatus === 'confirmed'),
    ).toBe(true);
    expect(listed.map((s) => s.memo)).toEqual([null, '[4] paid', null, null]);
    // limit, before, until.
    const page = await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey), { limit: 2 });
    expect(page.map((s) => s.signature)).toEqual(newestFirst.slice(0, 2));
    const next = await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey), {
      before: page[1]?.signature,
    });
    expect(next.map((s) => s.signature)).toEqual(newestFirst.slice(2));
    const sinceOldest = await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey), {
      until: signatures[0],
    });
    expect(sinceOldest.map((s) => s.signature)).toEqual(newestFirst.slice(0, 3));
    // Agave: an unknown `before` gives nothing.
    expect(
      await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey), {
        before: bs58Signature(),
      }),
    ).toEqual([]);
    // Not finalized yet: nothing at finalized; everything once rooted.
    expect(
      await h.connection.getSignaturesForAddress(new PublicKey(watched.publicKey), {}, 'finalized'),
    ).toEqual([]);
    cluster.advance(32);
    const rooted = await h.connection.getSignaturesForAddress(
      new PublicKey(watched.publicKey),
      {},
      'finalized',
    );
    expect(rooted.map((s) => [s.signature, s.confirmationStatus])).toEqual(
      newestFirst.map((s) => [s, 'finalized']),
    );
    // Agave's errors.
    const address = watched.publicKey;
    expect((await raw(h.server.url, 'getSignaturesForAddress', [address, { limit: 1_001 }])).error).toEqual({
      code: -32602,
      message: 'Invalid limit; max 1000',
    });
    expect(
      (await raw(h.server.url, 'getSignaturesForAddress', [address, { commitment: 'processed' }])).error,
    ).toEqual({
      code: -32602,
      message: 'Method does not support commitment below `confirmed`',
    });
  });

  it('a lagging node answers from its own banks: getTransaction and getSignaturesForAddress do not see past them', async () => {
    const { watched, wire } = queueTransferToFreshAccount();
    cluster.advance(1);
    const landed = cluster.slot;
    cluster.advance(2); // confirmed on the cluster
    const signature = signatureOf(wire);
    faults.set({ rpcLagSlots: 2, rpcLaggingShare: 1 });
    // This node's confirmed bank is 2 slots behind the cluster's: the transaction is not confirmed to it yet.
    expect(await h.connection.getTransaction(signature, { maxSupportedTransactionVersion: 0 })).toBeNull();
    expect(await h.connection.getSignaturesForAddress(new PublicKey(watched))).toEqual([]);
    cluster.advance(2);
    expect((await h.connection.getTransaction(signature, { maxSupportedTransactionVersion: 0 }))?.slot).toBe(
      landed,
    );
    expect(
      (await h.connection.getSignaturesForAddress(new PublicKey(watched))).map((s) => s.signature),
    ).toEqual([signature]);
    // Its getRecentPrioritizationFees ends at its own processed slot.
    expect((await h.connection.getRecentPrioritizationFees()).at(-1)?.slot).toBe(cluster.slot - 2);
  });

  it('a dead block takes its transactions out of getTransaction and getSignaturesForAddress', async () => {
    const { watched, wire } = queueTransferToFreshAccount();
    faults.set({ deadSlotRate: 1 });
    cluster.advance(1);
    faults.reset();
    expect(cluster.transaction(signatureOf(wire))?.slot).toBe(cluster.slot);
    expect(cluster.signaturesForAddress(watched)).toHaveLength(1);
    cluster.advance(3);
    expect(cluster.transaction(signatureOf(wire))).toBeNull();
    expect(cluster.signaturesForAddress(watched)).toEqual([]);
    expect(await h.connection.getSignaturesForAddress(new PublicKey(watched))).toEqual([]);
  });

  it('records and the address index are kept as long as getBlock keeps the block (1,000 slots), then dropped', async () => {
    const { watched, wire } = queueTransferToFreshAccount();
    cluster.advance(1);
    const slot = cluster.slot;
    cluster.advance(990);
    expect(cluster.firstAvailableBlock()).toBeLessThanOrEqual(slot);
    expect(
      (await h.connection.getTransaction(signatureOf(wire), { maxSupportedTransactionVersion: 0 }))?.slot,
    ).toBe(slot);
    expect(await h.connection.getSignaturesForAddress(new PublicKey(watched))).toHaveLength(1);
    cluster.advance(200);
    expect(cluster.firstAvailableBlock()).toBeGreaterThan(slot);
    await expect(h.connection.getBlockSignatures(slot, 'confirmed')).rejects.toMatchObject({ code: -32001 });
    expect(
      await h.connection.getTransaction(signatureOf(wire), { maxSupportedTransactionVersion: 0 }),
    ).toBeNull();
    expect(await h.connection.getSignaturesForAddress(new PublicKey(watched))).toEqual([]);
    // The status itself outlives the block: searchTransactionHistory reaches 20,000 slots.
    expect(cluster.signatureStatus(signatureOf(wire))?.slot).toBe(slot);
  });

  it('@solana/kit 8.4.0 createSolanaRpc: reads, a kit-built transfer sent and confirmed, then found everywhere', async () => {
    cluster.start();
    const rpc = createSolanaRpc(h.server.url);
    const rpcSubscriptions = createSolanaRpcSubscriptions(h.server.wsUrl);
    const signer = await createKeyPairSignerFromBytes(
      new Uint8Array([...payer.seed, ...payer.publicKeyBytes]),
    );
    expect(signer.address).toBe(payer.publicKey);
    const recipient = address(TestKeypair.generate().publicKey);

    expect(Number(await rpc.getSlot({ commitment: 'processed' }).send())).toBeGreaterThanOrEqual(
      cluster.slotAt('confirmed'),
    );
    const balance = await rpc.getBalance(signer.address, { commitment: 'confirmed' }).send();
    expect(balance.value).toBe(BigInt(cluster.getBalance(payer.publicKey)));
    const account = await rpc.getAccountInfo(signer.address, { encoding: 'base64' }).send();
    expect(account.value?.owner).toBe('11111111111111111111111111111111');
    const { value: latestBlockhash } = await rpc.getLatestBlockhash({ commitment: 'confirmed' }).send();
    expect(typeof latestBlockhash.lastValidBlockHeight).toBe('bigint');

    // A transfer built and signed with kit alone (System Program Transfer: u32 2, u64 lamports).
    const data = new Uint8Array(12);
    new DataView(data.buffer).setUint32(0, 2, true);
    new DataView(data.buffer).setBigUint64(4, 2_500_000n, true);
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(signer, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(latestBlockhash, m),
      (m) =>
        appendTransactionMessageInstruction(
          {
            programAddress: address('11111111111111111111111111111111'),
            accounts: [
              { address: signer.address, role: AccountRole.WRITABLE_SIGNER, signer },
              { address: recipient, role: AccountRole.WRITABLE },
            ],
            data,
          },
          m,
        ),
    );
    const fee = await rpc
      .getFeeForMessage(
        Buffer.from(
          getCompiledTransactionMessageEncoder().encode(compileTransactionMessage(message)),
        ).toString('base64') as Parameters<typeof rpc.getFeeForMessage>[0],
        { commitment: 'confirmed' },
      )
      .send();
    expect(fee.value).toBe(5_000n);
    const signed = await signTransactionMessageWithSigners(message);
    const signature = getSignatureFromTransaction(signed);
    const before = cluster.getBalance(payer.publicKey);
    // sendTransaction through kit's RPC, then kit's own confirmation (WebSocket signature + slot notifications).
    const sendAndConfirm = sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions });
    await sendAndConfirm(signed as Parameters<typeof sendAndConfirm>[0], { commitment: 'confirmed' });
    expect(cluster.getBalance(recipient)).toBe(2_500_000);
    expect(before - cluster.getBalance(payer.publicKey)).toBe(2_500_000 + 5_000);
    cluster.stop();

    const statuses = await rpc.getSignatureStatuses([signature]).send();
    expect(statuses.value[0]?.err).toBeNull();
    const tx = await rpc
      .getTransaction(signature, {
        commitment: 'confirmed',
        encoding: 'json',
        maxSupportedTransactionVersion: 0,
      })
      .send();
    expect(tx?.version).toBe(0);
    expect(tx?.meta?.fee).toBe(5_000n);
    expect(tx?.meta?.postBalances[1]).toBe(2_500_000n);
    const b64 = await rpc
      .getTransaction(signature, {
        commitment: 'confirmed',
        encoding: 'base64',
        maxSupportedTransactionVersion: 0,
      })
      .send();
    expect(b64?.transaction[0]).toBe(getBase64EncodedWireTransaction(signed));
    const slot = tx?.slot as bigint;
    const block = await rpc
      .getBlock(slot, { commitment: 'confirmed', transactionDetails: 'signatures', rewards: false })
      .send();
    expect(block?.signatures).toContain(signature);
    const fullBlock = await rpc
      .getBlock(slot, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 })
      .send();
    expect(fullBlock?.transactions.map((t) => t.transaction.signatures[0])).toContain(signature);
    const accounts = await rpc
      .getMultipleAccounts([signer.address, recipient], { encoding: 'base64' })
      .send();
    expect(accounts.value.map((a) => a?.lamports)).toEqual([
      BigInt(cluster.getBalance(payer.publicKey)),
      2_500_000n,
    ]);
    const history = await rpc.getSignaturesForAddress(recipient, { commitment: 'confirmed' }).send();
    expect(history.map((h) => h.signature)).toEqual([signature as Signature]);
    const fees = await rpc.getRecentPrioritizationFees([recipient]).send();
    expect(fees.find((f) => f.slot === slot)?.prioritizationFee).toBe(0n);
  });
});

/** A random 64-byte signature, base58. */
function bs58Signature(): string {
  const wire = new Uint8Array(65);
  wire.set(Keypair.generate().secretKey, 1);
  return signatureOf(wire);
}
