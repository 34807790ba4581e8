import {
  Keypair,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import bs58 from 'bs58';
import { SignatureVerifier } from '../src/wire/signature-verifier';
import { firstInvalidSignature, parseTransaction } from '../src/wire/transaction';

const payer = Keypair.generate();
const cosigner = Keypair.generate();
const blockhash = bs58.encode(Buffer.alloc(32, 9));

function transfer(lamports: number, signers: Keypair[]): Uint8Array {
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
  tx.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: cosigner.publicKey, lamports }));
  tx.add(SystemProgram.transfer({ fromPubkey: cosigner.publicKey, toPubkey: payer.publicKey, lamports: 1 }));
  tx.sign(...signers);
  return tx.serialize({ requireAllSignatures: false, verifySignatures: false });
}

/** Valid, a flipped bit in either signature, a missing second signature: the worker must agree with inline checks. */
function cases(count: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const wire = transfer(1000 + i, i % 4 === 3 ? [payer] : [payer, cosigner]);
    if (i % 4 === 1) wire[1 + (i % 64)]! ^= 0x01; // first signature
    if (i % 4 === 2) wire[65 + (i % 64)]! ^= 0x80; // second signature
    out.push(wire);
  }
  return out;
}

test.each([0, 1, 2])('with %i worker threads the answers equal the inline checks', async (threads) => {
  const verifier = new SignatureVerifier(threads);
  try {
    const parsed = cases(200).map((wire) => parseTransaction(wire));
    const answers = await Promise.all(parsed.map((tx) => verifier.verify(tx)));
    expect(answers).toEqual(parsed.map((tx) => firstInvalidSignature(tx)));
    expect(answers.filter((a) => a === null)).toHaveLength(50);
    expect(answers.filter((a) => a?.reason === 'missing')).toHaveLength(50);
    expect(answers.filter((a) => a?.reason === 'invalid').map((a) => a!.index)).toEqual(
      expect.arrayContaining([0, 1]),
    );
  } finally {
    await verifier.close();
  }
});

test('after close, checks run inline and still answer', async () => {
  const verifier = new SignatureVerifier(1);
  await verifier.close();
  const [valid, bad] = cases(2).map((wire) => parseTransaction(wire));
  expect(await verifier.verify(valid!)).toBeNull();
  expect(await verifier.verify(bad!)).toEqual({ index: 0, reason: 'invalid' });
});

test('v0 transactions: the worker reads the signers keys where the versioned message puts them', async () => {
  const verifier = new SignatureVerifier(1);
  try {
    const wires = [0, 1].map((flip) => {
      const message = new TransactionMessage({
        payerKey: payer.publicKey,
        recentBlockhash: blockhash,
        instructions: [
          SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: cosigner.publicKey, lamports: 5 }),
        ],
      }).compileToV0Message();
      const tx = new VersionedTransaction(message);
      tx.sign([payer]);
      const wire = tx.serialize();
      if (flip) wire[10]! ^= 0x01;
      return wire;
    });
    const parsed = wires.map((wire) => parseTransaction(wire));
    expect(parsed.map((tx) => tx.version)).toEqual([0, 0]);
    const answers = await Promise.all(parsed.map((tx) => verifier.verify(tx)));
    expect(answers).toEqual([null, { index: 0, reason: 'invalid' }]);
  } finally {
    await verifier.close();
  }
});

test('checks arriving turn after turn while batches are out all get their own answers', async () => {
  const verifier = new SignatureVerifier(1);
  try {
    const parsed = cases(120).map((wire) => parseTransaction(wire));
    const answers: Promise<unknown>[] = [];
    for (const tx of parsed) {
      answers.push(verifier.verify(tx));
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await Promise.all(answers)).toEqual(parsed.map((tx) => firstInvalidSignature(tx)));
  } finally {
    await verifier.close();
  }
});
