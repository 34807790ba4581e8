import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex } from '@noble/hashes/utils';
import bs58 from 'bs58';
import { RelayError } from './errors';

/**
 * Most transactions the block engine accepts in one bundle (jito-docs `lowlatencytxnsend.md`: up to 5, run in
 * order, atomically, in one slot; more is refused with "exceeded maximum number of transactions").
 */
export const MAX_BUNDLE_TRANSACTIONS = 5;

/** Most user transactions in one relay transaction (one bundle slot is the tip transaction). */
export const MAX_USER_TRANSACTIONS = 4;

const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;
const BUNDLE_ID = /^[0-9a-f]{64}$/;

/**
 * Jito's bundle id: lowercase hex SHA-256 of the UTF-8 string made by joining each transaction's
 * first signature (base58) with `","`, in bundle order. relay computes it before sending, so the
 * journal holds it before the engine answers.
 *
 * @throws RelayError `RELAY_E_INTERNAL_ERROR` for an empty list, more than 5 signatures, or a
 * signature that is not base58 (callers pass signatures they decoded themselves, so this is a bug).
 *
 * @example
 * deriveBundleId([userSignature, tipSignature]); // '892b79ed…'
 */
export function deriveBundleId(firstSignaturesBase58: readonly string[]): string {
  if (firstSignaturesBase58.length === 0 || firstSignaturesBase58.length > MAX_BUNDLE_TRANSACTIONS) {
    throw new RelayError('RELAY_E_INTERNAL_ERROR', {
      reason: `a bundle has 1 to ${MAX_BUNDLE_TRANSACTIONS} signatures, got ${firstSignaturesBase58.length}`,
    });
  }
  for (const signature of firstSignaturesBase58) {
    if (!BASE58.test(signature)) {
      throw new RelayError('RELAY_E_INTERNAL_ERROR', { reason: `not a base58 signature: ${signature}` });
    }
  }
  return bytesToHex(sha256(new TextEncoder().encode(firstSignaturesBase58.join(','))));
}

/** True for a string shaped like a bundle id (64 lowercase hex digits). */
export function isBundleId(value: unknown): value is string {
  return typeof value === 'string' && BUNDLE_ID.test(value);
}

/** True for a base58 string that decodes to a 64-byte ed25519 signature. */
export function isSignature(value: unknown): value is string {
  if (typeof value !== 'string' || value.length < 64 || value.length > 88 || !BASE58.test(value))
    return false;
  try {
    return bs58.decode(value).length === 64;
  } catch {
    return false;
  }
}
