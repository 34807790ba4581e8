import type { TxEncoding } from '@solrelay/core';

/**
 * Anything with a `serialize()` that returns the signed wire bytes: web3.js `Transaction` (returns a Buffer, a
 * Uint8Array subclass) and `VersionedTransaction`. Detected structurally so web3.js is never loaded at run time.
 */
export interface SerializableTransaction {
  serialize(): Uint8Array;
}

/** One user transaction as the caller has it: a web3.js transaction, raw wire bytes, or an encoded string. */
export type TransactionInput = SerializableTransaction | Uint8Array | ArrayBuffer | string;

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
    if (isSerializable(input)) {
      const wire = input.serialize();
      if (!(wire instanceof Uint8Array))
        throw new TypeError(`transaction #${index}: serialize() did not return bytes`);
      return { kind: 'bytes' as const, value: wire };
    }
    throw new TypeError(
      `transaction #${index} is not a Transaction, VersionedTransaction, Uint8Array or encoded string`,
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
