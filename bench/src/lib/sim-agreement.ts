/**
 * Where the fast simulator (landing-economics, no engine budget) agrees with the end-to-end runs
 * (submission-budget): each end-to-end cell is paired with the simulator cell of the same regime and strategy at
 * expiry 150 (relay's default), and they agree when their landing rates are within 3 points and their lamports per
 * landed within 10 %: it is a section on economics, so a landing rate that agrees at a different price does not.
 * BENCHMARKS.md keeps a simulator row only where no paired end-to-end run disagrees with it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const AGREEMENT_POINTS = 3;
/** Lamports per landed within this fraction of each other. */
export const AGREEMENT_SPEND = 0.1;

export interface SimCell {
  regime: string;
  expiry: number;
  strategy: string;
  landing_rate: { mean: number };
  lamports_per_landed: { mean: number };
}

export interface E2eCell {
  scenario: string;
  summary: { strategy: string; landed_pct_of_submitted: number; lamports_per_landed: number };
}

export interface Agreement {
  scenario: string;
  strategy: string;
  regime: string;
  sim_strategy: string;
  e2e_pct: number;
  sim_pct: number;
  gap_points: number;
  e2e_lamports: number;
  sim_lamports: number;
  agree: boolean;
}

/** End-to-end scenario and strategy -> the simulator's regime and strategy (relay's reflex tier is the simulator's reflex). */
const PAIRS: Array<[string, string, string, string]> = [
  ['steady-1', 'relay', 'calm', 'reflex'],
  ['steady-5', 'relay', 'calm', 'reflex'],
  ['steady-5', 'always-p95', 'calm', 'always-p95'],
  ['burst-100', 'relay', 'calm', 'reflex'],
  ['burst-100', 'always-p95', 'calm', 'always-p95'],
  ['burst-100-busy', 'relay', 'busy', 'reflex'],
  ['burst-100-busy', 'always-p95', 'busy', 'always-p95'],
  ['burst-100-spike', 'relay', 'spike', 'reflex'],
  ['burst-100-spike', 'always-p95', 'spike', 'always-p95'],
];

export function readSimulatorCells(): SimCell[] {
  const path = fileURLToPath(new URL('../../results/landing-economics.json', import.meta.url));
  if (!existsSync(path)) return [];
  return (JSON.parse(readFileSync(path, 'utf8')) as { details: { cells: SimCell[] } }).details.cells;
}

export function compareWithSimulator(cells: readonly E2eCell[], sim: readonly SimCell[]): Agreement[] {
  const out: Agreement[] = [];
  for (const [scenario, strategy, regime, simStrategy] of PAIRS) {
    const e2e = cells.find((c) => c.scenario === scenario && c.summary.strategy === strategy)?.summary;
    const s = sim.find((c) => c.regime === regime && c.expiry === 150 && c.strategy === simStrategy);
    if (!e2e || !s) continue;
    const simPct = Math.round(s.landing_rate.mean * 1000) / 10;
    const gap = Math.round(Math.abs(simPct - e2e.landed_pct_of_submitted) * 10) / 10;
    out.push({
      scenario,
      strategy,
      regime,
      sim_strategy: simStrategy,
      e2e_pct: e2e.landed_pct_of_submitted,
      sim_pct: simPct,
      gap_points: gap,
      e2e_lamports: e2e.lamports_per_landed,
      sim_lamports: Math.round(s.lamports_per_landed.mean),
      agree:
        gap <= AGREEMENT_POINTS &&
        Math.abs(e2e.lamports_per_landed - s.lamports_per_landed.mean) <=
          AGREEMENT_SPEND * s.lamports_per_landed.mean,
    });
  }
  return out;
}

export function comparisonTable(agreements: readonly Agreement[]): string[] {
  if (agreements.length === 0) return [];
  return [
    `| end-to-end cell | simulator cell (expiry 150) | landed % e2e vs sim | points apart | lamports/landed e2e vs sim | agree (landing within ${AGREEMENT_POINTS} points, lamports within ${AGREEMENT_SPEND * 100} %)? |`,
    '|---|---|---|---|---|---|',
    ...agreements.map(
      (a) =>
        `| ${a.scenario} ${a.strategy} | ${a.regime} ${a.sim_strategy} | ${a.e2e_pct} vs ${a.sim_pct} | ${a.gap_points} | ${a.e2e_lamports.toLocaleString('en-US')} vs ${a.sim_lamports.toLocaleString('en-US')} | ${a.agree ? 'yes' : '**no**'} |`,
    ),
  ];
}
