import { join } from 'node:path';
import { spawnSidecar as spawnEntry, type RunningSidecar } from '@solrelay/testkit';

export type { RunningSidecar };

export const MAIN = join(__dirname, '..', 'dist', 'main.cjs');

/** Spawn this app's built sidecar and wait for its "listening" line (or its death). */
export function spawnSidecar(env: Record<string, string>, timeoutMs = 20_000): Promise<RunningSidecar> {
  return spawnEntry(MAIN, env, timeoutMs);
}
