import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** reliability/results: the figures RELIABILITY.md quotes. */
export const RESULTS_DIR = join(__dirname, '..', 'results');

/**
 * The commit the figures were measured on ("<sha>+dirty" when the tree had uncommitted changes; null outside a git
 * checkout), so RELIABILITY.md can be checked against the code it describes.
 */
export function gitRevision(): string | null {
  try {
    const sha = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: __dirname, stdio: 'pipe' })
      .toString()
      .trim();
    const dirty =
      execFileSync(
        'git',
        // Source only: the results files themselves are rewritten by every run.
        [
          'status',
          '--porcelain',
          '--untracked-files=no',
          '--',
          '..',
          ':(exclude)../results',
          '../../packages',
          '../../apps',
        ],
        {
          cwd: __dirname,
          stdio: 'pipe',
        },
      )
        .toString()
        .trim().length > 0;
    return dirty ? `${sha}+dirty` : sha;
  } catch {
    return null;
  }
}

/**
 * Write results/<name>.json whole (temp file + rename, so a reader never sees half a file), stamped with the time
 * and the commit.
 */
export function writeResults(name: string, figures: Record<string, unknown>): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.json`);
  const temp = `${path}.${process.pid}.tmp`;
  const stamped = { ...figures, recorded_at: new Date().toISOString(), git_revision: gitRevision() };
  writeFileSync(temp, `${JSON.stringify(stamped, null, 2)}\n`);
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
