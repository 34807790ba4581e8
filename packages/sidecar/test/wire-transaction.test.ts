import {
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import bs58 from 'bs58';
import {
  PACKET_DATA_SIZE,
  WireFormatError,
  decodeTransactionString,
  durableNonceAccount,
  firstInvalidSignature,
  isWritableIndex,
  parseTransaction,
} from '../src/wire/transaction';

const payer = Keypair.generate();
const other = Keypair.generate();
const recipient = Keypair.generate().publicKey;
const blockhash = bs58.encode(Buffer.alloc(32, 7));

function legacyTransfer(signers: Keypair[] = [payer]): Uint8Array {
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
  tx.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 5000 }));
  if (signers.length > 1) {
    tx.add(SystemProgram.transfer({ fromPubkey: other.publicKey, toPubkey: recipient, lamports: 1 }));
  }
  tx.sign(...signers);
  return tx.serialize();
}

function v0Transfer(): VersionedTransaction {
  const message = new TransactionMessage({
    payerKey: payer.publicKey,
    recentBlockhash: blockhash,
    instructions: [
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 42 }),
    ],
  }).compileToV0Message();
  const tx = new VersionedTransaction(message);
  tx.sign([payer]);
  return tx;
}

describe('parseTransaction', () => {
  test('reads a signed legacy transfer exactly as web3.js wrote it', () => {
    const wire = legacyTransfer();
    const parsed = parseTransaction(wire);
    const reference = Transaction.from(wire);
    expect(parsed.version).toBe('legacy');
    expect(parsed.signatures).toEqual([bs58.encode(reference.signature!)]);
    expect(parsed.accountKeys[0]).toBe(payer.publicKey.toBase58());
    expect(parsed.accountKeys).toContain(recipient.toBase58());
    expect(parsed.recentBlockhash).toBe(blockhash);
    expect(parsed.instructions).toHaveLength(1);
    expect(parsed.numRequiredSignatures).toBe(1);
    expect(firstInvalidSignature(parsed)).toBeNull();
  });

  test('reads a v0 transaction and verifies its signature', () => {
    const tx = v0Transfer();
    const parsed = parseTransaction(tx.serialize());
    expect(parsed.version).toBe(0);
    expect(parsed.signatures[0]).toBe(bs58.encode(tx.signatures[0]!));
    expect(parsed.addressTableLookups).toBe(0);
    expect(firstInvalidSignature(parsed)).toBeNull();
  });

  test('a transaction with two signers verifies both', () => {
    const parsed = parseTransaction(legacyTransfer([payer, other]));
    expect(parsed.signatures).toHaveLength(2);
    expect(firstInvalidSignature(parsed)).toBeNull();
  });

  test('a corrupted signature is reported as invalid, with its index', () => {
    const wire = Uint8Array.from(legacyTransfer([payer, other]));
    wire[1 + 64 + 10] = wire[1 + 64 + 10]! ^ 0xff; // inside the second signature
    expect(firstInvalidSignature(parseTransaction(wire))).toEqual({ index: 1, reason: 'invalid' });
  });

  test('a tampered message fails verification', () => {
    const wire = Uint8Array.from(legacyTransfer());
    wire[wire.length - 1] = wire[wire.length - 1]! ^ 0x01; // the lamports amount
    expect(firstInvalidSignature(parseTransaction(wire))).toEqual({ index: 0, reason: 'invalid' });
  });

  test('an all-zero signature is reported as missing', () => {
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
    tx.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 1 }));
    const wire = tx.serialize({ requireAllSignatures: false, verifySignatures: false });
    expect(firstInvalidSignature(parseTransaction(wire))).toEqual({ index: 0, reason: 'missing' });
  });

  test.each([
    ['empty', new Uint8Array()],
    ['truncated', legacyTransfer().subarray(0, 80)],
    ['trailing bytes', Uint8Array.from([...legacyTransfer(), 0])],
    ['no signatures', Uint8Array.from([0, 1, 0, 0])],
    ['oversize', new Uint8Array(PACKET_DATA_SIZE + 1)],
    ['random bytes', Uint8Array.from({ length: 200 }, (_, i) => (i * 37) % 251)],
  ])('rejects %s input with a WireFormatError', (_label, bytes) => {
    expect(() => parseTransaction(bytes)).toThrow(WireFormatError);
  });

  test('writability follows the message header', () => {
    const parsed = parseTransaction(legacyTransfer());
    expect(isWritableIndex(parsed, 0)).toBe(true); // fee payer
    const systemIndex = parsed.accountKeys.indexOf(SystemProgram.programId.toBase58());
    expect(isWritableIndex(parsed, systemIndex)).toBe(false);
    expect(isWritableIndex(parsed, parsed.accountKeys.indexOf(recipient.toBase58()))).toBe(true);
  });
});

describe('durableNonceAccount', () => {
  test('finds the nonce account of an AdvanceNonceAccount-first transaction', () => {
    const nonce = Keypair.generate().publicKey;
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
    tx.add(SystemProgram.nonceAdvance({ noncePubkey: nonce, authorizedPubkey: payer.publicKey }));
    tx.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 1 }));
    tx.sign(payer);
    expect(durableNonceAccount(parseTransaction(tx.serialize()))).toBe(nonce.toBase58());
  });

  test('is null for an ordinary transfer', () => {
    expect(durableNonceAccount(parseTransaction(legacyTransfer()))).toBeNull();
  });

  test('is null when the nonce instruction is not first', () => {
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
    tx.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 1 }));
    tx.add(
      SystemProgram.nonceAdvance({
        noncePubkey: new PublicKey(recipient),
        authorizedPubkey: payer.publicKey,
      }),
    );
    tx.sign(payer);
    expect(durableNonceAccount(parseTransaction(tx.serialize()))).toBeNull();
  });
});

describe('decodeTransactionString', () => {
  test('round-trips base64 and base58', () => {
    const wire = legacyTransfer();
    expect(decodeTransactionString(Buffer.from(wire).toString('base64'), 'base64')).toEqual(wire);
    expect(decodeTransactionString(bs58.encode(wire), 'base58')).toEqual(wire);
  });

  test.each([
    ['base64', 'not base64!'],
    ['base64', 'abcde'],
    ['base58', '0OIl'],
  ] as const)('refuses bad %s', (encoding, input) => {
    expect(() => decodeTransactionString(input, encoding)).toThrow(WireFormatError);
  });
});
