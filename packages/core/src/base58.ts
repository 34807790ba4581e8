/**
 * Base58 (Bitcoin's alphabet, as Solana writes keys, blockhashes and signatures) encoding of bytes, for the hot
 * paths: every enqueue encodes a transaction's signatures, account keys and blockhash.
 *
 * `bs58` (base-x) converts one byte at a time into base-58 digits: for a 64-byte signature about 64 × 88 digit
 * updates. Here the value is carried in limbs of 58^5 (656,356,768, under 2^32) and fed two bytes at a time: each
 * step is `limb × 65,536 + carry`, at most about 4.3e13, exact in a double. A signature takes 32 × ~18 limb updates,
 * and the output is the same string (checked against `bs58` over random inputs with leading zeros in the tests).
 */

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const LIMB = 58 ** 5;

export function encodeBase58(bytes: Uint8Array): string {
  const length = bytes.length;
  let zeros = 0;
  while (zeros < length && bytes[zeros] === 0) zeros++;
  // Limbs, least significant first. log(256) / log(58^5) ≈ 0.2731 limbs per byte.
  const limbs = new Array<number>(Math.ceil((length - zeros) * 0.2732) + 1);
  let used = 0;
  let i = zeros;
  // An odd count of significant bytes: the first goes in alone, the rest two at a time.
  if ((length - zeros) % 2 === 1) {
    limbs[0] = bytes[i] as number;
    used = 1;
    i++;
  }
  for (; i < length; i += 2) {
    let carry = ((bytes[i] as number) << 8) | (bytes[i + 1] as number);
    for (let j = 0; j < used; j++) {
      const value = (limbs[j] as number) * 65_536 + carry;
      carry = Math.floor(value / LIMB);
      limbs[j] = value - carry * LIMB;
    }
    while (carry > 0) {
      limbs[used++] = carry % LIMB;
      carry = Math.floor(carry / LIMB);
    }
  }
  let out = '';
  for (let j = 0; j < used; j++) {
    let limb = limbs[j] as number;
    // Every limb but the most significant is exactly five digits (leading '1's included).
    const last = j === used - 1;
    for (let d = 0; d < 5 && (!last || limb > 0); d++) {
      const q = Math.floor(limb / 58);
      out = (ALPHABET[limb - q * 58] as string) + out;
      limb = q;
    }
  }
  return '1'.repeat(zeros) + out;
}
