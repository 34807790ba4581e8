import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { encodeBase58 } from '@solrelay/core';
import bs58 from 'bs58';

/**
 * Solana wire-format parsing and signature checks, done by hand so enqueue stays cheap: node:crypto verifies
 * ed25519 in native code (~30k/s per core), where web3.js's JS ed25519 manages under 1k/s.
 */

/** Largest serialized transaction a Solana packet carries. */
export const PACKET_DATA_SIZE = 1232;

const SYSTEM_PROGRAM = '11111111111111111111111111111111';
/** SystemInstruction::AdvanceNonceAccount, u32 LE discriminant. */
const ADVANCE_NONCE_ACCOUNT = 4;
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

export interface ParsedInstruction {
  programIdIndex: number;
  accountIndexes: number[];
  data: Uint8Array;
}

export interface ParsedTransaction {
  /** Serialized bytes as received. */
  wire: Uint8Array;
  version: 'legacy' | 0;
  /** Every signature, base58, in order; the first one is the transaction's id. */
  signatures: string[];
  /** Raw signature bytes, in order. */
  signatureBytes: Uint8Array[];
  /** The signed message bytes. */
  message: Uint8Array;
  numRequiredSignatures: number;
  numReadonlySigned: number;
  numReadonlyUnsigned: number;
  /** Static account keys, base58; the fee payer is the first. */
  accountKeys: string[];
  /** Where the static account keys start in `wire` (32 bytes each, in order): the signers' keys as bytes. */
  accountKeysOffset: number;
  recentBlockhash: string;
  instructions: ParsedInstruction[];
  /** Number of address-table lookups (v0 only). */
  addressTableLookups: number;
}

export class WireFormatError extends Error {
  override readonly name = 'WireFormatError';
}

class Reader {
  offset = 0;
  constructor(private readonly bytes: Uint8Array) {}

  get remaining(): number {
    return this.bytes.length - this.offset;
  }

  u8(): number {
    if (this.offset >= this.bytes.length) throw new WireFormatError('transaction is truncated');
    return this.bytes[this.offset++] as number;
  }

  /** Solana's compact-u16 ("shortvec") length prefix. */
  shortVec(): number {
    let value = 0;
    for (let shift = 0; shift < 21; shift += 7) {
      const byte = this.u8();
      value |= (byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) {
        if (value > 0xffff) throw new WireFormatError('compact-u16 length out of range');
        return value;
      }
    }
    throw new WireFormatError('compact-u16 length is too long');
  }

  take(n: number): Uint8Array {
    if (n > this.remaining) throw new WireFormatError('transaction is truncated');
    const out = this.bytes.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }
}

/** Parse one serialized transaction (legacy or v0). Throws WireFormatError on anything malformed. */
export function parseTransaction(wire: Uint8Array): ParsedTransaction {
  if (wire.length === 0) throw new WireFormatError('transaction is empty');
  if (wire.length > PACKET_DATA_SIZE) {
    throw new WireFormatError(`transaction is ${wire.length} bytes; the limit is ${PACKET_DATA_SIZE}`);
  }
  const reader = new Reader(wire);
  const signatureCount = reader.shortVec();
  if (signatureCount === 0) throw new WireFormatError('transaction has no signatures');
  const signatureBytes: Uint8Array[] = [];
  for (let i = 0; i < signatureCount; i++) signatureBytes.push(reader.take(64));

  const messageStart = reader.offset;
  let version: ParsedTransaction['version'] = 'legacy';
  const first = reader.u8();
  let numRequiredSignatures: number;
  if (first & 0x80) {
    const v = first & 0x7f;
    if (v !== 0) throw new WireFormatError(`transaction version ${v} is not supported`);
    version = 0;
    numRequiredSignatures = reader.u8();
  } else {
    numRequiredSignatures = first;
  }
  const numReadonlySigned = reader.u8();
  const numReadonlyUnsigned = reader.u8();

  const keyCount = reader.shortVec();
  const accountKeysOffset = reader.offset;
  const accountKeys: string[] = [];
  for (let i = 0; i < keyCount; i++) accountKeys.push(encodeBase58(reader.take(32)));
  const recentBlockhash = encodeBase58(reader.take(32));

  const instructionCount = reader.shortVec();
  const instructions: ParsedInstruction[] = [];
  for (let i = 0; i < instructionCount; i++) {
    const programIdIndex = reader.u8();
    const accountCount = reader.shortVec();
    const accountIndexes = Array.from(reader.take(accountCount));
    const dataLength = reader.shortVec();
    const data = reader.take(dataLength);
    instructions.push({ programIdIndex, accountIndexes, data });
  }

  let addressTableLookups = 0;
  if (version === 0) {
    addressTableLookups = reader.shortVec();
    for (let i = 0; i < addressTableLookups; i++) {
      reader.take(32);
      reader.take(reader.shortVec());
      reader.take(reader.shortVec());
    }
  }
  if (reader.remaining !== 0)
    throw new WireFormatError(`${reader.remaining} trailing bytes after the message`);

  if (numRequiredSignatures !== signatureCount) {
    throw new WireFormatError(
      `message requires ${numRequiredSignatures} signatures but the transaction carries ${signatureCount}`,
    );
  }
  if (numRequiredSignatures > keyCount) throw new WireFormatError('more signers than account keys');
  if (numReadonlySigned >= numRequiredSignatures) throw new WireFormatError('the fee payer must be writable');
  for (const ix of instructions) {
    if (ix.programIdIndex >= keyCount) throw new WireFormatError('instruction program index out of range');
  }

  return {
    wire,
    version,
    signatures: signatureBytes.map((s) => encodeBase58(s)),
    signatureBytes,
    message: wire.subarray(messageStart),
    numRequiredSignatures,
    numReadonlySigned,
    numReadonlyUnsigned,
    accountKeys,
    accountKeysOffset,
    recentBlockhash,
    instructions,
    addressTableLookups,
  };
}

const keyCache = new Map<string, KeyObject>();

function publicKeyObject(base58Key: string): KeyObject {
  let key = keyCache.get(base58Key);
  if (!key) {
    const raw = bs58.decode(base58Key);
    key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
    // Fee payers repeat; a small cache saves the DER parse. Bounded so a flood of new keys cannot grow it.
    if (keyCache.size >= 4096) keyCache.clear();
    keyCache.set(base58Key, key);
  }
  return key;
}

/**
 * Index of the first signature that is all zeros (unsigned) or does not verify, or -1 when every required
 * signature is valid.
 */
export function firstInvalidSignature(
  tx: ParsedTransaction,
): { index: number; reason: 'missing' | 'invalid' } | null {
  for (let i = 0; i < tx.numRequiredSignatures; i++) {
    const signature = tx.signatureBytes[i] as Uint8Array;
    if (signature.every((b) => b === 0)) return { index: i, reason: 'missing' };
    const ok = verify(null, tx.message, publicKeyObject(tx.accountKeys[i] as string), signature);
    if (!ok) return { index: i, reason: 'invalid' };
  }
  return null;
}

/** Whether the account at `index` is writable under the message header rules (static keys only). */
export function isWritableIndex(tx: ParsedTransaction, index: number): boolean {
  if (index < tx.numRequiredSignatures) return index < tx.numRequiredSignatures - tx.numReadonlySigned;
  return index < tx.accountKeys.length - tx.numReadonlyUnsigned;
}

/**
 * A durable-nonce transaction starts with SystemProgram.AdvanceNonceAccount; its "blockhash" is the nonce value
 * and it never expires by block height, only when the nonce account advances without it.
 */
export function durableNonceAccount(tx: ParsedTransaction): string | null {
  const first = tx.instructions[0];
  if (!first) return null;
  if (tx.accountKeys[first.programIdIndex] !== SYSTEM_PROGRAM) return null;
  if (first.data.length < 4) return null;
  const discriminant =
    first.data[0]! | (first.data[1]! << 8) | (first.data[2]! << 16) | (first.data[3]! << 24);
  if (discriminant !== ADVANCE_NONCE_ACCOUNT) return null;
  const nonceIndex = first.accountIndexes[0];
  return nonceIndex === undefined ? null : (tx.accountKeys[nonceIndex] ?? null);
}

/** Decode a transaction string in the given encoding; throws WireFormatError on bad characters. */
export function decodeTransactionString(encoded: string, encoding: 'base64' | 'base58'): Uint8Array {
  if (encoding === 'base58') {
    try {
      return bs58.decode(encoded);
    } catch {
      throw new WireFormatError('not valid base58');
    }
  }
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded) || encoded.length % 4 === 1) {
    throw new WireFormatError('not valid base64');
  }
  return new Uint8Array(Buffer.from(encoded, 'base64'));
}
