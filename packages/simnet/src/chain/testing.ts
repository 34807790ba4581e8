import { createPrivateKey, createPublicKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { Keypair } from '@solana/web3.js';
import bs58 from 'bs58';
import type { Rng } from '../rng';
import type { Cluster } from './types';

/** DER prefix of an Ed25519 PKCS#8 private key; append the 32-byte seed. */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SYSTEM_PROGRAM_BYTES = new Uint8Array(32);

/**
 * An Ed25519 keypair that signs with node:crypto (about 20x faster than web3.js's JS signer; same signatures).
 * `toWeb3()` gives the equivalent web3.js Keypair for code that wants one.
 */
export class TestKeypair {
  readonly publicKeyBytes: Uint8Array;
  /** Base58 address. */
  readonly publicKey: string;
  private readonly privateKey: KeyObject;

  private constructor(readonly seed: Uint8Array) {
    this.privateKey = createPrivateKey({
      key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]),
      format: 'der',
      type: 'pkcs8',
    });
    const spki = createPublicKey(this.privateKey).export({ format: 'der', type: 'spki' });
    this.publicKeyBytes = new Uint8Array(spki.subarray(spki.length - 32));
    this.publicKey = bs58.encode(this.publicKeyBytes);
  }

  /** A fresh keypair; seeded from `rng` when given (reproducible), else from the OS. */
  static generate(rng?: Rng): TestKeypair {
    const seed = new Uint8Array(32);
    if (rng) for (let i = 0; i < 32; i++) seed[i] = rng.int(0, 255);
    else seed.set(randomBytes(32));
    return new TestKeypair(seed);
  }

  static fromSeed(seed: Uint8Array): TestKeypair {
    if (seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes');
    return new TestKeypair(Uint8Array.from(seed));
  }

  sign(message: Uint8Array): Uint8Array {
    return new Uint8Array(sign(null, message, this.privateKey));
  }

  toWeb3(): Keypair {
    return Keypair.fromSeed(this.seed);
  }
}

export interface Transfer {
  /** Recipient address, base58. */
  to: string;
  lamports: number | bigint;
}

export interface TransferTxOptions {
  from: TestKeypair;
  /** One or more System Program transfers, all paid by `from` (e.g. a payment plus a tip). */
  transfers: Transfer[];
  recentBlockhash: string;
}

function compactU16(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  for (;;) {
    const byte = rest & 0x7f;
    rest >>= 7;
    if (rest === 0) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

/**
 * Wire bytes of a signed legacy transaction holding System Program transfers, built without web3.js. Accounts:
 * [payer (signer, writable), each distinct recipient (writable), System Program (read-only)].
 */
export function createTransferTx({ from, transfers, recentBlockhash }: TransferTxOptions): Uint8Array {
  if (transfers.length === 0) throw new Error('at least one transfer');
  const recipients = [...new Set(transfers.map((t) => t.to))];
  if (recipients.includes(from.publicKey))
    throw new Error('transfer to self is not supported by this helper');
  const keys = [from.publicKeyBytes, ...recipients.map((r) => bs58.decode(r)), SYSTEM_PROGRAM_BYTES];
  const systemIndex = keys.length - 1;
  const message: number[] = [1, 0, 1, ...compactU16(keys.length)];
  for (const key of keys) message.push(...key);
  message.push(...bs58.decode(recentBlockhash));
  message.push(...compactU16(transfers.length));
  for (const transfer of transfers) {
    const data = Buffer.alloc(12);
    data.writeUInt32LE(2, 0); // SystemInstruction::Transfer
    data.writeBigUInt64LE(BigInt(transfer.lamports), 4);
    message.push(systemIndex, ...compactU16(2), 0, 1 + recipients.indexOf(transfer.to));
    message.push(...compactU16(data.length), ...data);
  }
  const messageBytes = Uint8Array.from(message);
  const signature = from.sign(messageBytes);
  const wire = new Uint8Array(1 + 64 + messageBytes.length);
  wire[0] = 1;
  wire.set(signature, 1);
  wire.set(messageBytes, 65);
  return wire;
}

/** The first signature of a wire transaction, base58 (its id). */
export function signatureOf(wire: Uint8Array): string {
  return bs58.encode(wire.subarray(1, 65));
}

/** A new keypair funded by the cluster's faucet (credited at once; the airdrop lands in the next block). */
export function fundedKeypair(cluster: Pick<Cluster, 'airdrop'>, lamports: number, rng?: Rng): TestKeypair {
  const keypair = TestKeypair.generate(rng);
  cluster.airdrop(keypair.publicKey, lamports);
  return keypair;
}
