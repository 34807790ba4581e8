import { readFile, stat } from 'node:fs/promises';
import { Keypair } from '@solana/web3.js';
import { RelayError } from '@solrelay/core';
import type { Logger } from 'pino';

/** Read the tipper keypair (a Solana CLI keypair file: a JSON array of 64 bytes). */
export async function loadKeypair(path: string, log?: Logger): Promise<Keypair> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: (error as NodeJS.ErrnoException).code ?? 'unreadable',
    });
  }
  let bytes: unknown;
  try {
    bytes = JSON.parse(text);
  } catch {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: 'not JSON (expected an array of 64 numbers)',
    });
  }
  if (
    !Array.isArray(bytes) ||
    bytes.length !== 64 ||
    !bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)
  ) {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: 'expected a JSON array of 64 numbers from 0 to 255',
    });
  }
  let keypair: Keypair;
  try {
    keypair = Keypair.fromSecretKey(Uint8Array.from(bytes as number[]));
  } catch {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: 'the 64 bytes are not a valid ed25519 keypair',
    });
  }
  try {
    const mode = (await stat(path)).mode;
    if (mode & 0o077)
      log?.warn(
        { path, mode: (mode & 0o777).toString(8) },
        'keypair file is readable by other users; chmod 600 it',
      );
  } catch {
    /* checked above */
  }
  return keypair;
}

/**
 * Read the tipper pool: every keypair file, in order (`KEYPAIR_PATH` lists them comma-separated). The first file
 * that is missing, unreadable or not a keypair stops start-up with an error naming its path; two files holding the
 * same keypair are refused (the pool would count one account twice).
 */
export async function loadKeypairs(paths: readonly string[], log?: Logger): Promise<Keypair[]> {
  const keypairs: Keypair[] = [];
  const seen = new Map<string, string>();
  for (const path of paths) {
    const keypair = await loadKeypair(path, log);
    const pubkey = keypair.publicKey.toBase58();
    const other = seen.get(pubkey);
    if (other !== undefined) {
      throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
        path,
        reason: `it holds the same keypair (${pubkey}) as ${other}`,
      });
    }
    seen.set(pubkey, path);
    keypairs.push(keypair);
  }
  return keypairs;
}
