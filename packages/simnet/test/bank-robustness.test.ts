import { Connection, PublicKey, Transaction, TransactionInstruction } from '@solana/web3.js';
import { SimCluster } from '../src/chain/cluster';
import { MEMO_PROGRAM_ID } from '../src/chain/bank';
import { TestKeypair, createTransferTx } from '../src/chain/testing';
import type { BlockContext, BundleCandidate, BundleExecution, BundleSource } from '../src/chain/types';
import { startSimnet } from '../src/simnet';

// LiteSVM's napi binding aborts the whole process (no JS exception) on two kinds of input: the SPL Memo v3 program
// (std::bad_alloc after a few runs) and wire bytes its bincode decoder rejects (a Rust panic). A regression here does
// not fail an assertion, it kills the jest worker, which fails the file just the same.

const SOL = 1_000_000_000;
const MEMO = new PublicKey(MEMO_PROGRAM_ID);

function memoTx(payer: TestKeypair, blockhash: string, data: Uint8Array): Uint8Array {
  const signer = payer.toWeb3();
  const tx = new Transaction({ feePayer: signer.publicKey, recentBlockhash: blockhash });
  tx.add(
    new TransactionInstruction({
      programId: MEMO,
      keys: [{ pubkey: signer.publicKey, isSigner: true, isWritable: false }],
      data: Buffer.from(data),
    }),
  );
  tx.sign(signer);
  return tx.serialize();
}

/** Re-sign `message` (however malformed) with `payer` as a one-signature transaction. */
function signedWire(payer: TestKeypair, message: Uint8Array): Uint8Array {
  return Uint8Array.from([1, ...payer.sign(message), ...message]);
}

class OneBundle implements BundleSource {
  queue: BundleCandidate[] = [];
  results: BundleExecution[] = [];
  bundlesForSlot(): BundleCandidate[] {
    return this.queue.splice(0);
  }
  onBundleResults(_ctx: BlockContext, results: BundleExecution[]): void {
    this.results.push(...results);
  }
}

describe('the bank survives any user input', () => {
  it('executes SPL Memo v3 transactions (many, simulated and landed) and refuses invalid UTF-8 on chain', () => {
    const cluster = new SimCluster({ seed: 3 });
    const payer = TestKeypair.generate();
    cluster.airdrop(payer.publicKey, 10 * SOL);
    cluster.advance(1);
    const blockhash = cluster.latestBlockhash('processed').blockhash;
    const signatures: string[] = [];
    for (let i = 0; i < 25; i++) {
      const wire = memoTx(payer, blockhash, new TextEncoder().encode(`memo number ${i}`));
      expect(cluster.simulateTransaction(wire, { sigVerify: true }).err).toBeNull();
      const submitted = cluster.submitTransaction(wire);
      expect(submitted.ok).toBe(true);
      signatures.push(submitted.signature);
    }
    const invalid = memoTx(payer, blockhash, Uint8Array.from([0xff, 0xfe, 0xfd]));
    const invalidSignature = cluster.submitTransaction(invalid).signature;
    const before = cluster.getBalance(payer.publicKey);
    cluster.advance(1);
    for (const signature of signatures) expect(cluster.signatureStatus(signature)?.err).toBeNull();
    expect(cluster.signatureStatus(invalidSignature)?.err).toEqual({
      InstructionError: [0, 'InvalidInstructionData'],
    });
    // 26 one-signature transactions, each charged the 5,000-lamport base fee (the failed one too).
    expect(before - cluster.getBalance(payer.publicKey)).toBe(26 * 5000);
  });

  it('refuses malformed but validly signed wire bytes as SanitizeFailure, by every path, without crashing', () => {
    const cluster = new SimCluster({ seed: 4, slotsPerEpoch: 32 });
    const source = new OneBundle();
    cluster.setBundleSource(source);
    const payer = TestKeypair.generate();
    cluster.airdrop(payer.publicKey, 10 * SOL);
    cluster.advance(1);
    const good = createTransferTx({
      from: payer,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
    const message = good.subarray(65);
    // legacy message: header (3) + key count (1) + 3 keys + blockhash, then the instruction count
    const instructionCountAt = 3 + 1 + 32 * 3 + 32;
    const malformed: Record<string, Uint8Array> = {
      truncated: message.subarray(0, message.length - 3),
      // 0x81 0x00 encodes 1 in two bytes: web3.js reads it, bincode (and so LiteSVM) rejects it
      aliasEncodedCount: Uint8Array.from([
        ...message.subarray(0, instructionCountAt),
        0x81,
        0x00,
        ...message.subarray(instructionCountAt + 1),
      ]),
      hugeDataLength: Uint8Array.from([...message.subarray(0, message.length - 13), 0xff, 0xff, 0x03]),
      noInstructions: message.subarray(0, instructionCountAt),
    };
    for (const [name, bytes] of Object.entries(malformed)) {
      const wire = signedWire(payer, bytes);
      const submitted = cluster.submitTransaction(wire);
      expect([name, submitted.ok ? 'accepted' : submitted.err]).toEqual([name, 'SanitizeFailure']);
      expect([name, cluster.simulateTransaction(wire).err]).toEqual([name, 'SanitizeFailure']);
    }
    // Trailing bytes after a whole message are tolerated (as Agave's decoder does) and not signed.
    const trailing = Uint8Array.from([...good, 1, 2, 3]);
    expect(cluster.simulateTransaction(trailing, { sigVerify: true }).err).toBeNull();

    while (!cluster.leaderAt(cluster.currentSlot + 1)?.bundleEngine) cluster.advance(1);
    source.queue.push({
      bundleId: 'malformed',
      transactions: [good, signedWire(payer, malformed.aliasEncodedCount as Uint8Array)],
    });
    const balance = cluster.getBalance(payer.publicKey);
    cluster.advance(1);
    expect(source.results).toEqual([
      expect.objectContaining({ landed: false, failedIndex: 1, err: 'SanitizeFailure' }),
    ]);
    expect(cluster.getBalance(payer.publicKey)).toBe(balance);
  });

  it('lands a memo sent through web3.js Connection with preflight, and refuses garbage over JSON-RPC', async () => {
    const sim = await startSimnet({ seed: 9, clock: 'manual', rateLimit: false });
    try {
      const connection = new Connection(sim.endpoints.rpcUrl, 'processed');
      const payer = TestKeypair.generate();
      sim.cluster.airdrop(payer.publicKey, SOL);
      sim.cluster.advance(1);
      const { blockhash } = await connection.getLatestBlockhash('processed');
      const signature = await connection.sendRawTransaction(
        memoTx(payer, blockhash, new TextEncoder().encode('paid invoice 42')),
      );
      sim.cluster.advance(1);
      const status = await connection.getSignatureStatus(signature);
      expect(status.value).toMatchObject({ err: null, confirmationStatus: 'processed' });

      const truncated = signedWire(payer, memoTx(payer, blockhash, Uint8Array.from([1])).subarray(65, -2));
      await expect(connection.sendRawTransaction(truncated)).rejects.toThrow(/failed to deserialize/);
      await expect(connection.sendRawTransaction(truncated, { skipPreflight: true })).rejects.toThrow(
        /failed to deserialize/,
      );
      sim.cluster.advance(1);
      expect(sim.cluster.slot).toBe(3);
    } finally {
      await sim.stop();
    }
  });
});
