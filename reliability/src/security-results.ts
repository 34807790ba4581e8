import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** reliability/results: the figures RELIABILITY.md quotes. */
export const RESULTS_DIR = join(__dirname, '..', 'results');

/** Write results/<name>.json whole (temp file + rename, so a reader never sees half a file). */
export function writeResults(name: string, figures: Record<string, unknown>): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.json`);
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify({ ...figures, recorded_at: new Date().toISOString() }, null, 2)}\n`);
  renameSync(temp, path);
  return path;
}

/** Nearest-rank percentile of a list of numbers (null when empty). */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}
