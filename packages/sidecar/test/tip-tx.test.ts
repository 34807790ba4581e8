import { createPrivateKey, sign } from 'node:crypto';
import {
  ComputeBudgetInstruction,
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
} from '@solana/web3.js';
import bs58 from 'bs58';
import { TipSigner } from '../src/engine/tip-tx';

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** The same tip built the general way, through web3.js: the byte-by-byte builder must match it exactly. */
function throughWeb3(
  tipper: Keypair,
  input: { tipAccount: string; lamports: number; blockhash: string },
  units: number,
): Buffer {
  const tx = new Transaction({ feePayer: tipper.publicKey, recentBlockhash: input.blockhash });
  tx.add(
    ComputeBudgetProgram.setComputeUnitLimit({ units }),
    SystemProgram.transfer({
      fromPubkey: tipper.publicKey,
      toPubkey: new PublicKey(input.tipAccount),
      lamports: input.lamports,
    }),
  );
  const key = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(tipper.secretKey.subarray(0, 32))]),
    format: 'der',
    type: 'pkcs8',
  });
  tx.addSignature(tipper.publicKey, sign(null, tx.serializeMessage(), key));
  return tx.serialize();
}

test('the hand-built tip transaction is byte for byte what web3.js compiles, and verifies', () => {
  const tipper = Keypair.generate();
  const signer = new TipSigner(tipper);
  const cases = [
    {
      tipAccount: Keypair.generate().publicKey.toBase58(),
      lamports: 1_000,
      blockhash: bs58.encode(Buffer.alloc(32, 3)),
    },
    {
      tipAccount: Keypair.generate().publicKey.toBase58(),
      lamports: 2_000_000_000_123,
      blockhash: Keypair.generate().publicKey.toBase58(),
    },
    {
      tipAccount: Keypair.generate().publicKey.toBase58(),
      lamports: 0,
      blockhash: Keypair.generate().publicKey.toBase58(),
    },
  ];
  for (const input of cases) {
    const built = signer.build(input);
    const parsed = Transaction.from(built.wire);
    const units = parsed.instructions[0]!.data.readUInt32LE(1);
    expect(Buffer.from(built.wire).equals(throughWeb3(tipper, input, units))).toBe(true);
    expect(parsed.verifySignatures()).toBe(true);
    expect(bs58.encode(parsed.signature!)).toBe(built.signature);
    expect(parsed.instructions[1]!.programId.equals(SystemProgram.programId)).toBe(true);
    expect(parsed.instructions[1]!.keys.map((k) => k.pubkey.toBase58())).toEqual([
      tipper.publicKey.toBase58(),
      input.tipAccount,
    ]);
    expect(parsed.instructions[1]!.data.readBigUInt64LE(4)).toBe(BigInt(input.lamports));
  }
});

test('a tip transaction requests at most 1,400 compute units, and enough for its two instructions', () => {
  // The engine ranks bundles by tip per requested CU: a large limit would dilute the tip (issue #16 item 1).
  const signer = new TipSigner(Keypair.generate());
  const input = {
    tipAccount: Keypair.generate().publicKey.toBase58(),
    lamports: 5_000,
    blockhash: bs58.encode(Buffer.alloc(32, 2)),
  };
  const limits = Array.from({ length: 2_000 }, () => {
    const parsed = Transaction.from(signer.build(input).wire);
    const instruction = parsed.instructions[0]!;
    expect(ComputeBudgetInstruction.decodeInstructionType(instruction)).toBe('SetComputeUnitLimit');
    return ComputeBudgetInstruction.decodeSetComputeUnitLimit(instruction).units;
  });
  expect(Math.max(...limits)).toBeLessThanOrEqual(1_400);
  expect(Math.min(...limits)).toBeGreaterThanOrEqual(300);
  expect(new Set(limits).size).toBe(950); // every value of the span, in turn
});

test('consecutive tips on the same inputs differ (their compute-unit limits do)', () => {
  const signer = new TipSigner(Keypair.generate());
  const input = {
    tipAccount: Keypair.generate().publicKey.toBase58(),
    lamports: 5_000,
    blockhash: bs58.encode(Buffer.alloc(32, 1)),
  };
  const signatures = new Set(Array.from({ length: 950 }, () => signer.build(input).signature));
  expect(signatures.size).toBe(950);
});

test('a tip to the tipper itself is refused (the layout would list one key twice, an invalid transaction)', () => {
  const keypair = Keypair.generate();
  const signer = new TipSigner(keypair);
  expect(() =>
    signer.build({
      tipAccount: keypair.publicKey.toBase58(),
      lamports: 1,
      blockhash: bs58.encode(Buffer.alloc(32, 1)),
    }),
  ).toThrow(/tipper itself/);
});
