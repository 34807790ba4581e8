import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import { VersionedTransaction } from '@solana/web3.js';
import bs58 from 'bs58';
import { COMPUTE_BUDGET_PROGRAM, requestedComputeUnits } from './auction-model';

/** What the block engine needs to know about one transaction of a bundle, read from its wire bytes. */
export interface ParsedTransaction {
  wire: Uint8Array;
  /** Every signature, base58, in order; the first is the transaction's id. */
  signatures: string[];
  /** The raw signatures, in order. */
  signatureBytes: Uint8Array[];
  /** The signers' public keys (the first `numRequiredSignatures` static keys), base58. */
  signers: string[];
  /** The serialized message: what each signature signs. */
  messageBytes: Uint8Array;
  recentBlockhash: string;
  /** Static account keys the message write-locks (lookup-table accounts are not included: Jito ignores them). */
  writableStaticKeys: string[];
  /** Static account keys it only reads (programs included). */
  readonlyStaticKeys: string[];
  /** Compute units it requests: its SetComputeUnitLimit, else Agave's default for its instructions. */
  requestedComputeUnits: number;
  /** Account locks the transaction takes: static keys plus every lookup-table index. */
  accountLockCount: number;
  /** Lamports moved to each tip account by top-level SystemProgram transfers in this transaction. */
  tipTransfers: Array<{ account: string; lamports: number }>;
  /** First instruction is SystemProgram AdvanceNonceAccount: the blockhash is a nonce value, not a recent blockhash. */
  usesDurableNonce: boolean;
}

const SYSTEM_PROGRAM = '11111111111111111111111111111111';
const SYSTEM_TRANSFER = 2;
const SYSTEM_ADVANCE_NONCE = 4;
/** ComputeBudgetInstruction::SetComputeUnitLimit(u32). */
const SET_COMPUTE_UNIT_LIMIT = 2;
/** DER prefix that turns a raw 32-byte ed25519 public key into SPKI, which node:crypto accepts. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Jito's bundle id: lowercase hex SHA-256 of the transactions' first signatures (base58) joined with ",". */
export function deriveBundleId(firstSignatures: readonly string[]): string {
  return createHash('sha256').update(firstSignatures.join(',')).digest('hex');
}

export type WireEncoding = 'base58' | 'base64';

/** Decode one encoded transaction; null when the text is not valid in that encoding. */
export function decodeWire(text: string, encoding: WireEncoding): Uint8Array | null {
  if (encoding === 'base58') {
    try {
      return bs58.decode(text);
    } catch {
      return null;
    }
  }
  // Buffer.from(base64) silently skips junk, so check the alphabet first.
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 === 1) return null;
  return new Uint8Array(Buffer.from(text, 'base64'));
}

/** Length prefix of Solana's compact-u16 encoding: [value, bytes used]. */
function readShortVec(bytes: Uint8Array, offset: number): [number, number] {
  let value = 0;
  for (let i = 0; i < 3; i++) {
    const byte = bytes[offset + i];
    if (byte === undefined) throw new Error('truncated length prefix');
    value |= (byte & 0x7f) << (7 * i);
    if ((byte & 0x80) === 0) return [value, i + 1];
  }
  throw new Error('length prefix too long');
}

/** Parse a transaction's wire bytes (legacy or v0); throws when they are not a transaction. */
export function parseTransaction(wire: Uint8Array, tipAccounts: ReadonlySet<string>): ParsedTransaction {
  const tx = VersionedTransaction.deserialize(wire);
  const [signatureCount, prefixLength] = readShortVec(wire, 0);
  const messageBytes = wire.subarray(prefixLength + 64 * signatureCount);
  const message = tx.message;
  const keys = message.staticAccountKeys.map((k) => k.toBase58());
  if (tx.signatures.length !== message.header.numRequiredSignatures || tx.signatures.length === 0) {
    throw new Error('signature count does not match the message header');
  }
  const writableStaticKeys = keys.filter((_key, index) => message.isAccountWritable(index));
  const readonlyStaticKeys = keys.filter((_key, index) => !message.isAccountWritable(index));
  const programs: string[] = [];
  let unitLimit: number | null = null;
  const lookupLocks = message.addressTableLookups.reduce(
    (sum, lookup) => sum + lookup.writableIndexes.length + lookup.readonlyIndexes.length,
    0,
  );
  const tipTransfers: ParsedTransaction['tipTransfers'] = [];
  let usesDurableNonce = false;
  message.compiledInstructions.forEach((ix, position) => {
    const program = keys[ix.programIdIndex] ?? '';
    programs.push(program);
    if (program === COMPUTE_BUDGET_PROGRAM && ix.data[0] === SET_COMPUTE_UNIT_LIMIT && ix.data.length >= 5) {
      unitLimit = Buffer.from(ix.data).readUInt32LE(1);
    }
    if (program !== SYSTEM_PROGRAM || ix.data.length < 4) return;
    const data = Buffer.from(ix.data);
    const kind = data.readUInt32LE(0);
    if (position === 0 && kind === SYSTEM_ADVANCE_NONCE) usesDurableNonce = true;
    if (kind !== SYSTEM_TRANSFER || data.length < 12) return;
    const destination = keys[ix.accountKeyIndexes[1] ?? -1];
    if (destination !== undefined && tipAccounts.has(destination)) {
      tipTransfers.push({ account: destination, lamports: Number(data.readBigUInt64LE(4)) });
    }
  });
  return {
    wire,
    signatures: tx.signatures.map((s) => bs58.encode(s)),
    signatureBytes: tx.signatures,
    signers: keys.slice(0, message.header.numRequiredSignatures),
    messageBytes,
    recentBlockhash: message.recentBlockhash,
    writableStaticKeys,
    readonlyStaticKeys,
    requestedComputeUnits: requestedComputeUnits(programs, unitLimit),
    accountLockCount: keys.length + lookupLocks,
    tipTransfers,
    usesDurableNonce,
  };
}

const keyCache = new Map<string, KeyObject>();

function publicKeyObject(base58Key: string): KeyObject {
  let key = keyCache.get(base58Key);
  if (!key) {
    key = createPublicKey({
      key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(bs58.decode(base58Key))]),
      format: 'der',
      type: 'spki',
    });
    if (keyCache.size > 10_000) keyCache.clear();
    keyCache.set(base58Key, key);
  }
  return key;
}

/** Index of the first signature that is all zeros or does not verify, or -1 when every one is valid. */
export function firstInvalidSignature(tx: ParsedTransaction): number {
  for (let i = 0; i < tx.signatureBytes.length; i++) {
    const signature = tx.signatureBytes[i] as Uint8Array;
    const signer = tx.signers[i] as string;
    if (signature.every((byte) => byte === 0)) return i;
    if (!verifySignature(null, tx.messageBytes, publicKeyObject(signer), signature)) return i;
  }
  return -1;
}
