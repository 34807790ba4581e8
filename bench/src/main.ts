/**
 * `pnpm bench [name ...] [--quick]`: runs relay's benchmarks one after another (never in parallel: they share
 * two cores; the last, `stores`, runs the first three again on the journal and on PostgreSQL in alternating rounds), writes `bench/results/<name>.json` (quick runs: `bench/results/quick/`) and regenerates the root
 * BENCHMARKS.md from the full-mode results. `--report` only regenerates BENCHMARKS.md.
 *
 * A bare `pnpm bench` runs every benchmark but the opt-in ones, which run only when named: `fleet` (issue #29: 1-3
 * sidecars on one PostgreSQL, takeover after SIGKILL and SIGSTOP; about 12 minutes full, under 2 quick) is
 * `pnpm bench fleet [--quick]`. Its results still go into BENCHMARKS.md whenever a full run regenerates it.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Benchmark } from './benchmark';
import { apiFanout } from './benchmarks/api-fanout';
import { coldStart } from './benchmarks/cold-start';
import { decisionLatency } from './benchmarks/decision-latency';
import { finality } from './benchmarks/finality';
import { fleet } from './benchmarks/fleet';
import { landingEconomics } from './benchmarks/landing-economics';
import { memoryScale } from './benchmarks/memory-scale';
import { storeCompare } from './benchmarks/stores';
import { sseFanout } from './benchmarks/sse-fanout';
import { submissionBudget } from './benchmarks/submission-budget';
import { loadAverage, machineInfo } from './lib/machine';
import { REPO_ROOT } from './lib/processes';
import { writeBenchmarksMd, writeResult, type BenchResult } from './lib/report';

const BENCHMARKS: Benchmark[] = [
  decisionLatency,
  apiFanout,
  sseFanout,
  submissionBudget,
  landingEconomics,
  memoryScale,
  coldStart,
  finality,
  storeCompare,
  fleet,
];
const BENCH_DIR = fileURLToPath(new URL('../', import.meta.url));
const RESULTS_DIR = join(BENCH_DIR, 'results');

async function main(): Promise<number> {
  const args = process.argv.slice(2).filter((a) => a !== '--');
  const quick = args.includes('--quick');
  const profile = args.includes('--profile');
  // `--seed=<n|random>`, `--scenarios=a,b`, `--strategies=a,b`, `--stores=journal,postgres` and `--rounds=<n>` reach
  // the benchmarks as BENCH_SEED / BENCH_SCENARIOS / BENCH_STRATEGIES / BENCH_STORES / BENCH_ROUNDS (turbo passes no
  // environment variables through to the task, so flags are how `pnpm bench` takes them).
  const FLAG_ENV: Record<string, string> = {
    seed: 'BENCH_SEED',
    scenarios: 'BENCH_SCENARIOS',
    strategies: 'BENCH_STRATEGIES',
    stores: 'BENCH_STORES',
    rounds: 'BENCH_ROUNDS',
  };
  for (const arg of args) {
    const m = /^--(seed|scenarios|strategies|stores|rounds)=(.+)$/.exec(arg);
    if (m) process.env[FLAG_ENV[m[1] as string] as string] = m[2];
  }
  const unknownFlags = args.filter(
    (a) =>
      a.startsWith('--') &&
      !['--quick', '--profile', '--report'].includes(a) &&
      !/^--(seed|scenarios|strategies|stores|rounds)=/.test(a),
  );
  const names = args.filter((a) => !a.startsWith('--'));
  const unknown = names.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknownFlags.length || unknown.length) {
    process.stderr.write(
      `bench: unknown ${[...unknownFlags, ...unknown].join(', ')}; usage: pnpm bench [--quick] [--profile] [--report] [--seed=<n|random>] [--scenarios=<id,...>] [--strategies=<name,...>] [--stores=journal,postgres] [--rounds=<n>] [${BENCHMARKS.map((b) => b.name).join('|')} ...]\n`,
    );
    return 2;
  }
  if (args.includes('--report')) {
    // Only regenerate BENCHMARKS.md from the results on disk (after editing FINDINGS.md or the report's layout).
    await writeBenchmarksMd(RESULTS_DIR, join(BENCH_DIR, 'FINDINGS.md'), join(REPO_ROOT, 'BENCHMARKS.md'));
    process.stdout.write('bench: BENCHMARKS.md regenerated from bench/results\n');
    return 0;
  }
  const selected = names.length
    ? BENCHMARKS.filter((b) => names.includes(b.name))
    : BENCHMARKS.filter((b) => !b.optIn);
  const started = performance.now();
  let failures = 0;
  for (const bench of selected) {
    const t0 = performance.now();
    const loadBefore = loadAverage();
    const progress = (line: string) =>
      process.stdout.write(`[${bench.name}] ${((performance.now() - t0) / 1000).toFixed(1)}s ${line}\n`);
    progress(`start${quick ? ' (quick)' : ''}; load ${loadBefore.join(' ')}`);
    try {
      const outcome = await bench.run({ quick, profile, progress });
      const result: BenchResult = {
        name: bench.name,
        title: bench.title,
        quick,
        machine: machineInfo(REPO_ROOT),
        load: { before: loadBefore, after: loadAverage() },
        duration_s: Math.round((performance.now() - t0) / 100) / 10,
        ...outcome,
      };
      const path = writeResult(RESULTS_DIR, result);
      for (const row of outcome.rows) {
        const met = row.met === null ? '' : row.met ? '  [met]' : '  [MISSED]';
        progress(`${row.metric}: ${row.measured} (target ${row.target})${met}`);
      }
      progress(`done in ${result.duration_s} s -> ${path}`);
    } catch (error) {
      failures++;
      progress(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    }
  }
  if (!quick) {
    await writeBenchmarksMd(RESULTS_DIR, join(BENCH_DIR, 'FINDINGS.md'), join(REPO_ROOT, 'BENCHMARKS.md'));
  }
  process.stdout.write(
    `bench: ${selected.length - failures}/${selected.length} benchmarks ran in ${((performance.now() - started) / 1000).toFixed(1)} s${quick ? '' : '; BENCHMARKS.md regenerated'}\n`,
  );
  return failures ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${String(error)}\n`);
    process.exit(1);
  },
);
