import { createHash, randomBytes } from 'node:crypto';
import bs58 from 'bs58';
import fc from 'fast-check';
import { deriveBundleId, isBundleId, isRelayError, isSignature } from '../src';

function nodeBundleId(signatures: string[]): string {
  return createHash('sha256').update(signatures.join(','), 'utf8').digest('hex');
}

const signatureArb = fc.uint8Array({ minLength: 64, maxLength: 64 }).map((bytes) => bs58.encode(bytes));

describe('deriveBundleId', () => {
  it('is SHA-256 of the signatures joined with "," (checked against node:crypto)', () => {
    const signatures = [bs58.encode(randomBytes(64)), bs58.encode(randomBytes(64))];
    expect(deriveBundleId(signatures)).toBe(nodeBundleId(signatures));
    expect(deriveBundleId(signatures)).not.toBe(
      createHash('sha256').update(signatures.join('')).digest('hex'),
    );
    expect(deriveBundleId(signatures)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('reproduces the shape of jito.md §1.2 for known strings', () => {
    // The reference's vector truncates its signatures, so the hash is checked against node:crypto.
    const signatures = [
      '3bC2M9fiACSjkTXZDgeNAuQ4ScTsdKGwR42ytFdhUvikqTmBheUxfsR1fDVsM5ADCMMspuwGkdm1uKbU246x5aE3',
      '8t9hKYEYNbLvNqiSzP96S13XF1C2f1ro271Kdf7bkZ6EpjPLuDff1ywRy4gfaGSTubsM2FeYGDoT64ZwPm1QUt',
    ];
    expect(deriveBundleId(signatures)).toBe(nodeBundleId(signatures));
  });

  it('agrees with node:crypto for any 1..5 signatures (property)', () => {
    fc.assert(
      fc.property(fc.array(signatureArb, { minLength: 1, maxLength: 5 }), (signatures) => {
        expect(deriveBundleId(signatures)).toBe(nodeBundleId(signatures));
      }),
      { numRuns: 200 },
    );
  });

  it('depends on order', () => {
    const a = bs58.encode(randomBytes(64));
    const b = bs58.encode(randomBytes(64));
    expect(deriveBundleId([a, b])).not.toBe(deriveBundleId([b, a]));
  });

  it.each([[[]], [['a', 'b', 'c', 'd', 'e', 'f']], [['not base58 0OIl']]])('refuses %j', (signatures) => {
    let thrown: unknown;
    try {
      deriveBundleId(signatures);
    } catch (error) {
      thrown = error;
    }
    expect(isRelayError(thrown, 'RELAY_E_INTERNAL_ERROR')).toBe(true);
  });
});

describe('isBundleId / isSignature', () => {
  it('recognise their shapes', () => {
    expect(isBundleId('a'.repeat(64))).toBe(true);
    expect(isBundleId('A'.repeat(64))).toBe(false);
    expect(isBundleId('a'.repeat(63))).toBe(false);
    expect(isSignature(bs58.encode(randomBytes(64)))).toBe(true);
    expect(isSignature(bs58.encode(randomBytes(32)))).toBe(false);
    expect(isSignature('0'.repeat(88))).toBe(false);
  });
});
