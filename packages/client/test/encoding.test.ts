import { base58ToBytes, bytesToBase64, detectEncoding, encodeTransactions } from '../src';
import { base58Encode } from './helpers/base58';

const sample = Uint8Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % 256);

test('bytesToBase64 matches Node’s encoder, including large inputs', () => {
  const large = Uint8Array.from({ length: 100_000 }, (_, i) => (i * 7) % 256);
  for (const bytes of [new Uint8Array(), Uint8Array.of(0), sample, large]) {
    expect(bytesToBase64(bytes)).toBe(Buffer.from(bytes).toString('base64'));
  }
});

test('base58ToBytes inverts base58 encoding, leading zeros included, and refuses foreign characters', () => {
  for (const bytes of [Uint8Array.of(0, 0, 1, 2), sample, Uint8Array.of(255)]) {
    expect(base58ToBytes(base58Encode(bytes))).toEqual(bytes);
  }
  expect(() => base58ToBytes('abc0')).toThrow(TypeError);
});

test('detectEncoding: base58-only characters mean base58, anything else base64', () => {
  expect(detectEncoding(base58Encode(sample))).toBe('base58');
  expect(detectEncoding(Buffer.from(sample).toString('base64'))).toBe('base64');
});

test('encodeTransactions: all base58 stays base58; any mix goes out as base64; serialize() objects are detected structurally', () => {
  const b58 = base58Encode(sample);
  expect(encodeTransactions([b58, b58])).toEqual({ transactions: [b58, b58], encoding: 'base58' });

  const other = Uint8Array.of(1, 2, 3, 4);
  const serializable = { serialize: () => other };
  const b64 = Buffer.from(sample).toString('base64');
  expect(encodeTransactions([b58, serializable, other.buffer as ArrayBuffer, b64])).toEqual({
    transactions: [b64, 'AQIDBA==', 'AQIDBA==', b64],
    encoding: 'base64',
  });
  // An explicit encoding overrides the guess.
  expect(encodeTransactions(['abc'], 'base64')).toEqual({ transactions: ['abc'], encoding: 'base64' });
  expect(() => encodeTransactions([{} as never])).toThrow(/not a Transaction/);
  expect(() => encodeTransactions([''])).toThrow(/empty/);
});
