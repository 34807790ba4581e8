import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import bs58 from 'bs58';

/** DER prefix of an Ed25519 SubjectPublicKeyInfo; append the raw 32-byte key. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/**
 * Solana's compact-u16 length prefix: returns [value, bytes used]. Strict, as the validator's (and LiteSVM's)
 * bincode decoder is: no redundant continuation byte ("alias encoding") and nothing above 0xffff. A laxer reading
 * would let bytes through that LiteSVM cannot decode, and its napi binding aborts the process on those.
 */
export function readCompactU16(bytes: Uint8Array, offset: number): [number, number] {
  let value = 0;
  for (let i = 0; i < 3; i++) {
    const byte = bytes[offset + i];
    if (byte === undefined) throw new Error('truncated compact-u16');
    if (i > 0 && byte === 0) throw new Error('compact-u16 alias encoding');
    if (i === 2 && byte > 0x03) throw new Error('compact-u16 overflow');
    value |= (byte & 0x7f) << (7 * i);
    if ((byte & 0x80) === 0) return [value, i + 1];
  }
  throw new Error('compact-u16 too long');
}

/** Skip a compact-u16-prefixed byte array (account indexes, instruction data); returns the offset after it. */
function skipByteArray(wire: Uint8Array, offset: number): number {
  const [length, prefix] = readCompactU16(wire, offset);
  const end = offset + prefix + length;
  if (end > wire.length) throw new Error('truncated message');
  return end;
}

/**
 * A transaction parsed once from its wire bytes (legacy or v0), with what the chain needs to route, check and
 * execute it. Parsed by hand rather than through web3.js: the bank takes the wire bytes as they are, so nothing is
 * deserialized into objects and serialized back on the hot path. Base58 forms are computed on first use.
 */
export class ParsedTransaction {
  readonly signatures: Uint8Array[];
  readonly messageBytes: Uint8Array;
  readonly numRequiredSignatures: number;
  /** Static account keys, raw, in message order. */
  readonly keyBytes: Uint8Array[];
  /** Where the recent blockhash sits in `wire` (simulation may replace it). */
  readonly blockhashOffset: number;
  private readonly writableFlags: boolean[];
  private cachedSignature?: string;
  private cachedKeys?: string[];
  private cachedBlockhash?: string;

  constructor(readonly wire: Uint8Array) {
    const [signatureCount, prefix] = readCompactU16(wire, 0);
    if (signatureCount === 0) throw new Error('transaction has no signature');
    this.signatures = [];
    for (let i = 0; i < signatureCount; i++)
      this.signatures.push(wire.subarray(prefix + 64 * i, prefix + 64 * (i + 1)));
    const messageStart = prefix + 64 * signatureCount;
    if (messageStart + 4 > wire.length) throw new Error('truncated transaction');
    let offset = messageStart;
    // A v0 message starts with 0x80 | version; a legacy one with its header.
    const versioned = ((wire[offset] ?? 0) & 0x80) !== 0;
    if (versioned) {
      if (((wire[offset] as number) & 0x7f) !== 0) throw new Error('unsupported transaction version');
      offset += 1;
    }
    const numRequired = wire[offset] as number;
    const numReadonlySigned = wire[offset + 1] as number;
    const numReadonlyUnsigned = wire[offset + 2] as number;
    offset += 3;
    const [keyCount, keyPrefix] = readCompactU16(wire, offset);
    offset += keyPrefix;
    if (offset + 32 * keyCount + 32 > wire.length) throw new Error('truncated message');
    if (numRequired === 0 || numRequired > keyCount || numRequired !== signatureCount) {
      throw new Error('signature count does not match the message header');
    }
    this.numRequiredSignatures = numRequired;
    this.keyBytes = [];
    this.writableFlags = [];
    for (let i = 0; i < keyCount; i++) {
      this.keyBytes.push(wire.subarray(offset + 32 * i, offset + 32 * (i + 1)));
      this.writableFlags.push(
        i < numRequired ? i < numRequired - numReadonlySigned : i < keyCount - numReadonlyUnsigned,
      );
    }
    this.blockhashOffset = offset + 32 * keyCount;
    // Walk the instructions (and a v0 message's lookup tables) to the end of the message: LiteSVM is handed these
    // bytes as they are, and a truncated or non-canonical message must be refused here rather than reach it.
    offset = this.blockhashOffset + 32;
    const [instructionCount, instructionPrefix] = readCompactU16(wire, offset);
    offset += instructionPrefix;
    for (let i = 0; i < instructionCount; i++) {
      if (offset >= wire.length) throw new Error('truncated message');
      offset = skipByteArray(wire, offset + 1); // program id index, then account indexes
      offset = skipByteArray(wire, offset); // data
    }
    if (versioned) {
      const [lookupCount, lookupPrefix] = readCompactU16(wire, offset);
      offset += lookupPrefix;
      for (let i = 0; i < lookupCount; i++) {
        if (offset + 32 > wire.length) throw new Error('truncated message');
        offset = skipByteArray(wire, offset + 32); // writable indexes
        offset = skipByteArray(wire, offset); // readonly indexes
      }
    }
    // Trailing bytes are tolerated (as Agave's decoder does) but are not part of what the signatures sign.
    this.messageBytes = wire.subarray(messageStart, offset);
  }

  /** First signature, base58 (the transaction id). */
  get signature(): string {
    return (this.cachedSignature ??= bs58.encode(this.signatures[0] as Uint8Array));
  }

  get signatureBytes(): Uint8Array {
    return this.signatures[0] as Uint8Array;
  }

  get recentBlockhash(): string {
    return (this.cachedBlockhash ??= bs58.encode(
      this.wire.subarray(this.blockhashOffset, this.blockhashOffset + 32),
    ));
  }

  /** Static account keys in message order, base58. */
  get accountKeys(): string[] {
    return (this.cachedKeys ??= this.keyBytes.map((key) => bs58.encode(key)));
  }

  /**
   * The static keys the message marks writable. Writable keys loaded through address lookup tables (v0) are not
   * resolved, so a bundle or dead-slot rollback does not restore them.
   */
  get writableKeys(): string[] {
    return this.accountKeys.filter((_, index) => this.writableFlags[index]);
  }
}

/** Parse wire bytes; throws on malformed input (the caller maps that to SanitizeFailure). */
export function parseTransaction(wire: Uint8Array): ParsedTransaction {
  return new ParsedTransaction(wire);
}

// Building a KeyObject from raw bytes costs about as much as a verification, and the same payers sign again and
// again, so keep recent ones. Bounded so a long run with many fresh payers does not grow without limit.
const publicKeyCache = new Map<string, KeyObject>();
const PUBLIC_KEY_CACHE_LIMIT = 10_000;

function publicKeyObject(raw: Uint8Array): KeyObject {
  const id = Buffer.from(raw).toString('latin1');
  let key = publicKeyCache.get(id);
  if (!key) {
    key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
    if (publicKeyCache.size >= PUBLIC_KEY_CACHE_LIMIT) publicKeyCache.clear();
    publicKeyCache.set(id, key);
  }
  return key;
}

/** Verify every required signature with node:crypto (Ed25519), as a leader's sigverify stage does. */
export function verifySignatures(parsed: ParsedTransaction): boolean {
  for (let i = 0; i < parsed.numRequiredSignatures; i++) {
    const signature = parsed.signatures[i];
    const key = parsed.keyBytes[i];
    if (!signature || !key) return false;
    if (!verify(null, parsed.messageBytes, publicKeyObject(key), signature)) return false;
  }
  return true;
}
