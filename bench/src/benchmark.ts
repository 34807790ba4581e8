import type { SummaryRow } from './lib/report';

export interface BenchContext {
  quick: boolean;
  /** `--profile`: also run the sidecar under node --cpu-prof where a benchmark supports it. */
  profile: boolean;
  /** One line per phase on stdout, prefixed with the benchmark's name. */
  progress(line: string): void;
}

export interface BenchOutcome {
  rows: SummaryRow[];
  notes: string[];
  /** Extra markdown (e.g. a full comparison table) placed under the summary in BENCHMARKS.md. */
  markdown?: string[];
  details: Record<string, unknown>;
}

export interface Benchmark {
  name: string;
  title: string;
  /** Run only when named (`pnpm bench <name>`), not by a bare `pnpm bench`. */
  optIn?: boolean;
  run(ctx: BenchContext): Promise<BenchOutcome>;
}
