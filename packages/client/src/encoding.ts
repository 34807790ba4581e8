import type { TxEncoding } from '@solrelay/core';

/**
 * Anything with a `serialize()` that returns the signed wire bytes: web3.js `Transaction` (returns a Buffer, a
 * Uint8Array subclass) and `VersionedTransaction`. Detected structurally so web3.js is never loaded at run time.
 */
export interface SerializableTransaction {
  serialize(): Uint8Array;
}

/**
 * @solana/kit's `Transaction`: the compiled message's bytes and one signature (or null, not yet signed) per signer
 * address. Detected by shape so kit is never imported.
 */
export interface KitTransaction {
  readonly messageBytes: ReadonlyBytes;
  readonly signatures: Readonly<Record<string, ReadonlyBytes | null>>;
}

/** A Uint8Array, possibly typed read-only (kit types its message bytes so). */
export type ReadonlyBytes = Omit<Uint8Array, 'copyWithin' | 'fill' | 'reverse' | 'set' | 'sort'> & {
  readonly [index: number]: number;
};

/**
 * One user transaction as the caller has it: a web3.js transaction, a kit transaction, raw wire bytes, or an
 * encoded string.
 */
export type TransactionInput = SerializableTransaction | KitTransaction | Uint8Array | ArrayBuffer | string;

const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE58_CHAR = /^[1-9A-HJ-NP-Za-km-z]+$/;

/**
 * The encoding of a transaction string when the caller did not say. Base64 of a signed transaction (100+ bytes)
 * practically always contains one of `+ / = 0 O I l`, none of which base58 uses; a string made only of base58
 * characters is therefore base58. Pass `encoding` explicitly to skip the guess.
 */
export function detectEncoding(encoded: string): TxEncoding {
  return BASE58_CHAR.test(encoded) ? 'base58' : 'base64';
}

/** Bytes to base64 with `btoa` (browsers and Node 20 both have it), never Buffer. */
export function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  // Chunked so String.fromCharCode never gets more arguments than an engine allows.
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** Base58 (Bitcoin alphabet) to bytes; throws a TypeError on a character outside the alphabet. */
export function base58ToBytes(encoded: string): Uint8Array {
  const bytes: number[] = [];
  for (const char of encoded) {
    let carry = BASE58_ALPHABET.indexOf(char);
    if (carry < 0) throw new TypeError(`not base58: ${JSON.stringify(char)}`);
    for (let i = 0; i < bytes.length; i++) {
      carry += (bytes[i] as number) * 58;
      bytes[i] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  // Each leading '1' is a leading zero byte.
  for (let i = 0; i < encoded.length && encoded[i] === '1'; i++) bytes.push(0);
  return Uint8Array.from(bytes.reverse());
}

function isSerializable(value: unknown): value is SerializableTransaction {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { serialize?: unknown }).serialize === 'function'
  );
}

function isKitTransaction(value: unknown): value is KitTransaction {
  if (typeof value !== 'object' || value === null) return false;
  const { messageBytes, signatures } = value as Partial<KitTransaction>;
  return messageBytes instanceof Uint8Array && typeof signatures === 'object' && signatures !== null;
}

/** A compact-u16 ("shortvec") at `offset`: its value and the offset after it. */
function readShortVec(bytes: ReadonlyBytes, offset: number): [value: number, next: number] {
  let value = 0;
  for (let i = 0; i < 3; i++) {
    const byte = bytes[offset + i];
    if (byte === undefined) throw new RangeError('message ends inside a length');
    value |= (byte & 0x7f) << (7 * i);
    if ((byte & 0x80) === 0) return [value, offset + i + 1];
  }
  throw new RangeError('length longer than 3 bytes');
}

function writeShortVec(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  for (;;) {
    const low = rest & 0x7f;
    rest >>= 7;
    if (rest === 0) return [...out, low];
    out.push(low | 0x80);
  }
}

/** The signer addresses of a compiled message (legacy or v0), as raw 32-byte keys in signature order. */
function messageSigners(message: ReadonlyBytes): ReadonlyBytes[] {
  const first = message[0];
  if (first === undefined) throw new RangeError('empty message');
  // A set high bit is a version prefix (v0 messages); legacy messages start directly with the header.
  const headerAt = first & 0x80 ? 1 : 0;
  const required = message[headerAt];
  if (required === undefined) throw new RangeError('message ends inside its header');
  const [keyCount, keysAt] = readShortVec(message, headerAt + 3);
  if (keyCount < required) throw new RangeError('message names fewer accounts than signers');
  if (keysAt + required * 32 > message.length) throw new RangeError('message ends inside its account keys');
  return Array.from({ length: required }, (_, i) => message.subarray(keysAt + i * 32, keysAt + (i + 1) * 32));
}

function sameBytes(a: ReadonlyBytes, b: ReadonlyBytes): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

/**
 * The wire bytes of a kit transaction: its signatures in the order of the message's signer keys (not the
 * record's key order, which a caller may have built by hand), then the message. Refuses a transaction that is not
 * fully signed, as relay would, but naming the missing signer.
 */
function kitWireBytes(tx: KitTransaction, index: number): Uint8Array {
  let signers: ReadonlyBytes[];
  try {
    signers = messageSigners(tx.messageBytes);
  } catch (error) {
    throw new TypeError(
      `transaction #${index}: messageBytes is not a Solana message (${(error as Error).message})`,
      { cause: error },
    );
  }
  const entries = Object.entries(tx.signatures).map(([address, signature]) => {
    let key: Uint8Array;
    try {
      key = base58ToBytes(address);
    } catch {
      throw new TypeError(`transaction #${index}: signatures has a key that is not an address: ${address}`);
    }
    return { address, key, signature };
  });
  if (entries.length !== signers.length) {
    throw new TypeError(
      `transaction #${index}: the message has ${signers.length} signer(s) but signatures has ${entries.length}`,
    );
  }
  const ordered = signers.map((signer, position) => {
    const entry = entries.find((e) => sameBytes(e.key, signer));
    if (!entry) throw new TypeError(`transaction #${index}: signatures has no entry for signer #${position}`);
    if (entry.signature === null) {
      throw new TypeError(`transaction #${index} is not fully signed: no signature for ${entry.address}`);
    }
    if (!(entry.signature instanceof Uint8Array) || entry.signature.length !== 64) {
      throw new TypeError(`transaction #${index}: the signature for ${entry.address} is not 64 bytes`);
    }
    return entry.signature;
  });
  const prefix = writeShortVec(ordered.length);
  const wire = new Uint8Array(prefix.length + ordered.length * 64 + tx.messageBytes.length);
  wire.set(prefix, 0);
  ordered.forEach((signature, i) => wire.set(signature as Uint8Array, prefix.length + i * 64));
  wire.set(tx.messageBytes as Uint8Array, prefix.length + ordered.length * 64);
  return wire;
}

/**
 * The `transactions` + `encoding` of an enqueue body. All base58 strings are sent as they are with
 * `encoding: "base58"`; any other mix is sent as base64 (base58 strings decoded to bytes first).
 */
export function encodeTransactions(
  inputs: readonly TransactionInput[],
  stringEncoding?: TxEncoding,
): { transactions: string[]; encoding: TxEncoding } {
  const items = inputs.map((input, index) => {
    if (typeof input === 'string') {
      if (input.length === 0) throw new TypeError(`transaction #${index} is an empty string`);
      return { kind: 'string' as const, value: input, encoding: stringEncoding ?? detectEncoding(input) };
    }
    if (input instanceof Uint8Array) return { kind: 'bytes' as const, value: input };
    if (input instanceof ArrayBuffer) return { kind: 'bytes' as const, value: new Uint8Array(input) };
    if (isKitTransaction(input)) return { kind: 'bytes' as const, value: kitWireBytes(input, index) };
    if (isSerializable(input)) {
      const wire = input.serialize();
      if (!(wire instanceof Uint8Array))
        throw new TypeError(`transaction #${index}: serialize() did not return bytes`);
      return { kind: 'bytes' as const, value: wire };
    }
    throw new TypeError(
      `transaction #${index} is not a Transaction, VersionedTransaction, kit Transaction, Uint8Array or encoded string`,
    );
  });
  if (items.every((item) => item.kind === 'string' && item.encoding === 'base58')) {
    return { transactions: items.map((item) => item.value as string), encoding: 'base58' };
  }
  const transactions = items.map((item) => {
    if (item.kind === 'bytes') return bytesToBase64(item.value);
    return item.encoding === 'base58' ? bytesToBase64(base58ToBytes(item.value)) : item.value;
  });
  return { transactions, encoding: 'base64' };
}
