import { createHash, createPrivateKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { PublicKey, type Keypair } from '@solana/web3.js';

/**
 * Wire helpers for the crash trials: SystemProgram transfers assembled byte by byte and signed with node:crypto
 * (the load generator shares two cores with the sidecar and the simnet, so it must be cheap), base58 for the
 * signatures read back from those bytes, and Jito's bundle id.
 */

const ED25519_PKCS8_HEADER = Buffer.from('302e020100300506032b657004220420', 'hex');
const SYSTEM_PROGRAM_ID = Buffer.alloc(32);
const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** Base58 (Bitcoin alphabet), as Solana writes signatures and keys. */
export function base58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i] as number;
    for (let j = 0; j < digits.length; j++) {
      carry += (digits[j] as number) << 8;
      digits[j] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = Math.floor(carry / 58);
    }
  }
  let out = '1'.repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) out += BASE58_ALPHABET[digits[i] as number];
  return out;
}

/** Jito's bundle id: lowercase hex SHA-256 of the bundle's first signatures joined with ",". */
export function bundleIdOf(signatures: string[]): string {
  return createHash('sha256').update(signatures.join(',')).digest('hex');
}

export interface SignedTransfer {
  /** base64 wire bytes, as POST /tx/enqueue takes them. */
  wire: string;
  /** The first (only) signature, base58: the transaction's id on chain. */
  signature: string;
  blockhash: string;
}

/** One payer's transfers to fresh random recipients, each unique, on the blockhash `blockhash()` gives. */
export class TransferSigner {
  private readonly key: KeyObject;
  private readonly payer: Buffer;
  private hash: { text: string; bytes: Buffer } | null = null;

  constructor(
    payer: Keypair,
    private readonly blockhash: () => string,
  ) {
    this.payer = Buffer.from(payer.publicKey.toBytes());
    this.key = createPrivateKey({
      key: Buffer.concat([ED25519_PKCS8_HEADER, Buffer.from(payer.secretKey.subarray(0, 32))]),
      format: 'der',
      type: 'pkcs8',
    });
  }

  /** A transfer of `lamports` (above the rent-exempt minimum of a new account). */
  transfer(lamports = 1_000_000): SignedTransfer {
    const text = this.blockhash();
    if (this.hash?.text !== text) this.hash = { text, bytes: Buffer.from(new PublicKey(text).toBytes()) };
    const data = Buffer.alloc(12);
    data.writeUInt32LE(2, 0); // SystemInstruction::Transfer
    data.writeBigUInt64LE(BigInt(lamports), 4);
    const message = Buffer.concat([
      // Header: one signer, no read-only signed account, one read-only unsigned account (the system program).
      Buffer.from([1, 0, 1]),
      Buffer.from([3]), // three account keys: payer, recipient, system program
      this.payer,
      randomBytes(32),
      SYSTEM_PROGRAM_ID,
      this.hash.bytes,
      // One instruction: program index 2, accounts [0, 1], 12 bytes of data.
      Buffer.from([1, 2, 2, 0, 1, 12]),
      data,
    ]);
    const signature = sign(null, message, this.key);
    return {
      wire: Buffer.concat([Buffer.from([1]), signature, message]).toString('base64'),
      signature: base58(signature),
      blockhash: text,
    };
  }
}
