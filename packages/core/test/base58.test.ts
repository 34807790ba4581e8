import bs58 from 'bs58';
import fc from 'fast-check';
import { encodeBase58 } from '../src/base58';

describe('encodeBase58', () => {
  test('writes what bs58 writes, for any bytes (leading zeros, keys, signatures, odd lengths)', () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 80 }),
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.uint8Array({ minLength: 64, maxLength: 64 }),
      // Leading zero bytes become leading '1's.
      fc
        .tuple(fc.nat({ max: 6 }), fc.uint8Array({ maxLength: 64 }))
        .map(([zeros, rest]) => Uint8Array.from([...new Array<number>(zeros).fill(0), ...rest])),
    );
    fc.assert(
      fc.property(bytes, (b) => {
        expect(encodeBase58(b)).toBe(bs58.encode(b));
      }),
      { numRuns: 2000 },
    );
  });

  test('edges: empty, zeros only, one byte, the largest values', () => {
    for (const b of [
      [],
      [0],
      [0, 0, 0],
      [1],
      [57],
      [58],
      [255],
      new Array<number>(64).fill(255),
      new Array<number>(32).fill(0),
    ]) {
      expect(encodeBase58(Uint8Array.from(b))).toBe(bs58.encode(Uint8Array.from(b)));
    }
    // The system program's id is 32 zero bytes.
    expect(encodeBase58(new Uint8Array(32))).toBe('11111111111111111111111111111111');
  });
});
