/**
 * The secrets a sidecar holds, in every encoding a leak could take, and a search of texts for them. A leak is any
 * needle found verbatim (case-insensitively for hex) in a haystack.
 */
import { base58 } from './crash-wire';

export interface Needle {
  name: string;
  value: string;
}

/**
 * A Solana keypair's secret in every form it could be written: the 64 bytes (the file's JSON array, base58,
 * base64, base64url, hex) and the 32-byte seed alone (the part that is secret; the last 32 bytes are the public
 * key, which relay shows on purpose). Base64 of the seed is cut to whole 3-byte groups so it also matches inside
 * a longer encoding.
 */
export function keypairNeedles(secretKey: Uint8Array): Needle[] {
  const full = Buffer.from(secretKey);
  const seed = full.subarray(0, 32);
  const seedAligned = seed.subarray(0, 30);
  return [
    { name: 'key JSON array', value: JSON.stringify([...full]) },
    { name: 'seed bytes as a number list', value: [...seed].join(',') },
    { name: 'seed bytes as a spaced number list', value: [...seed].join(', ') },
    { name: 'key base58', value: base58(full) },
    { name: 'seed base58', value: base58(seed) },
    { name: 'key base64', value: full.toString('base64') },
    { name: 'seed base64', value: seedAligned.toString('base64') },
    { name: 'seed base64url', value: seedAligned.toString('base64url') },
    { name: 'key hex', value: full.toString('hex') },
    { name: 'seed hex', value: seed.toString('hex') },
  ];
}

/** A bearer token or credential as it could leak: verbatim, base64 (Basic auth), URL-encoded. */
export function credentialNeedles(name: string, secret: string): Needle[] {
  const forms = [
    { name, value: secret },
    { name: `${name} base64`, value: Buffer.from(secret).toString('base64') },
    { name: `${name} url-encoded`, value: encodeURIComponent(secret) },
  ];
  return forms.filter((form, i) => forms.findIndex((f) => f.value === form.value) === i);
}

/** Every (needle, haystack) pair where the secret appears. Hex needles match in either case. */
export function findLeaks(haystacks: Record<string, string>, needles: Needle[]): string[] {
  const leaks: string[] = [];
  for (const [where, text] of Object.entries(haystacks)) {
    const lower = text.toLowerCase();
    for (const needle of needles) {
      const hit = /hex$/.test(needle.name)
        ? lower.includes(needle.value.toLowerCase())
        : text.includes(needle.value);
      if (hit) leaks.push(`${needle.name} in ${where}`);
    }
  }
  return leaks;
}

/** Total characters searched (a figure for the report). */
export function haystackBytes(haystacks: Record<string, string>): number {
  return Object.values(haystacks).reduce((sum, text) => sum + text.length, 0);
}
