import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { testSeed } from '@solrelay/testkit';
import { gitRevision } from './security-results';

/** Where the bad-input suite leaves its figures for RELIABILITY.md. */
export const FUZZ_RESULTS_PATH = join(__dirname, '..', 'results', 'fuzz.json');

/**
 * Record one part's figures (routes, policy, cli) in results/fuzz.json, keeping the other parts' figures: read,
 * replace this part, write a temp file and rename it over, so a reader never sees half a file. Each part is stamped
 * with its time and the commit it was measured on (parts can come from different runs).
 */
export function recordFuzzFigures(part: string, figures: Record<string, unknown>): void {
  mkdirSync(join(FUZZ_RESULTS_PATH, '..'), { recursive: true });
  let all: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(readFileSync(FUZZ_RESULTS_PATH, 'utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      all = parsed as Record<string, unknown>;
  } catch {
    all = {};
  }
  all[part] = { ...figures, recorded_at: new Date().toISOString(), git_revision: gitRevision() };
  const temp = `${FUZZ_RESULTS_PATH}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(all, null, 2)}\n`);
  renameSync(temp, FUZZ_RESULTS_PATH);
}

/**
 * The seed for a fuzz run: RELAY_FUZZ_SEED when set (to replay a failure), else the test seed (fixed in CI,
 * fresh with RELAY_TEST_SEED=random).
 */
export function fuzzSeed(): number {
  const fromEnv = process.env.RELAY_FUZZ_SEED;
  if (fromEnv !== undefined && /^\d+$/.test(fromEnv.trim())) return Number(fromEnv.trim());
  return testSeed();
}

/** Increment a histogram bucket. */
export function bump(histogram: Record<string, number>, key: string | number, by = 1): void {
  histogram[String(key)] = (histogram[String(key)] ?? 0) + by;
}

/** Run `work` over `items` with at most `concurrency` in flight. */
export async function mapPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
