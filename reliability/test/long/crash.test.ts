import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startSimnet, type Simnet } from '@solrelay/simnet';
import { runTrial, seededRandom, type Kill, type TrialResult, type TrialSpec } from '../../src/crash-trial';

/**
 * Crash (issue #10): a load of transactions through the real sidecar process, SIGKILLed at each named crash point
 * (after journaling an enqueue, after journaling an attempt and before sending it, after sending and before
 * recording the answer, mid-way through a lifecycle write, during compaction) and at random moments, 20 trials.
 * After the restarts every acknowledged transaction is terminal and known; none is lost, none lands twice, no
 * landed transaction has a second tip on chain, the tipper paid exactly the tips relay recorded, the lifecycle log
 * parses and agrees with the records, and the final journal replays to the same records.
 *
 * RELIABILITY_CRASH_TX sets the transactions per trial (CI default 120; the issue's full size is 1000),
 * RELIABILITY_CRASH_SEED the seed of the random kill delays (printed; a fresh one each run otherwise),
 * RELIABILITY_CRASH_ONLY a comma-separated list of trial numbers to run, RELIABILITY_CRASH_PARALLEL how many
 * run at once. Figures go to results/crash.json (crash-<N>tx.json for another size).
 */

const DEFAULT_TXS = 120;
const TXS = Number(process.env.RELIABILITY_CRASH_TX ?? DEFAULT_TXS);
const SEED = Number(process.env.RELIABILITY_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const ONLY = (process.env.RELIABILITY_CRASH_ONLY ?? '')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => n > 0);
const SLOT_MS = 40;
// The journal takes about 4 KB per transaction here: every trial compacts at least once, the compaction trials
// a dozen times or more.
const COMPACT_SMALL = Math.max(64 * 1024, TXS * 512);
const COMPACT_NORMAL = TXS * 2048;

const random = seededRandom(SEED);
/** A kill by this process at a random moment while the load is in flight or landing. */
const randomKill = (): Kill => ({ kind: 'random', delayMs: Math.round(100 + random() * (600 + TXS * 3)) });
const at = (point: string, after: number): Kill => ({
  kind: 'point',
  point,
  after: Math.max(1, Math.round(after)),
});
const normal = (name: string, kills: Kill[], extra: Partial<TrialSpec> = {}): TrialSpec => ({
  name,
  kills,
  compactBytes: COMPACT_NORMAL,
  ...extra,
});
const compacting = (name: string, kills: Kill[]): TrialSpec => ({ name, kills, compactBytes: COMPACT_SMALL });

const TRIALS: TrialSpec[] = [
  normal('enqueue.journaled, the first', [at('enqueue.journaled', 1)]),
  normal('enqueue.journaled, 40% in', [at('enqueue.journaled', TXS * 0.4)]),
  normal('enqueue.journaled 90% in, then a random kill', [at('enqueue.journaled', TXS * 0.9), randomKill()]),
  normal('attempt.journaled, the first', [at('attempt.journaled', 1)]),
  normal('attempt.journaled, 50% in', [at('attempt.journaled', TXS * 0.5)]),
  normal('attempt.sent, the first', [at('attempt.sent', 1)]),
  normal('attempt.sent, 50% in', [at('attempt.sent', TXS * 0.5)]),
  normal('attempt.sent at the last, then attempt.sent again on the resends', [
    at('attempt.sent', TXS),
    at('attempt.sent', 1),
  ]),
  normal('lifecycle.mid-write, the first', [at('lifecycle.mid-write', 1)]),
  normal('lifecycle.mid-write, the 8th', [at('lifecycle.mid-write', 8)]),
  // Late: the writes then are mostly confirmations and finalizations already in the journal.
  normal('lifecycle.mid-write late (the Nth for N transactions), then the 5th', [
    at('lifecycle.mid-write', TXS),
    at('lifecycle.mid-write', 5),
  ]),
  compacting('compaction.started, the first', [at('compaction.started', 1)]),
  compacting('compaction.snapshot-written, the second', [at('compaction.snapshot-written', 2)]),
  compacting('compaction.renamed, then compaction.before-rename', [
    at('compaction.renamed', 1),
    at('compaction.before-rename', 1),
  ]),
  normal('random', [randomKill()]),
  normal('random', [randomKill()]),
  compacting('random, compacting', [randomKill()]),
  normal('random, twice', [randomKill(), randomKill()]),
  normal(
    'agent (reflex): attempt.sent 30% in, then a random kill',
    [at('attempt.sent', TXS * 0.3), randomKill()],
    {
      agent: true,
    },
  ),
  normal('agent (reflex): random', [randomKill()], { agent: true }),
];

let simnet: Simnet;
const results: TrialResult[] = [];
const suiteStarted = Date.now();
let simnetStarted: () => void;
const simnetReady = new Promise<void>((resolve) => (simnetStarted = resolve));

/**
 * Trials run PARALLEL at a time (each has its own sidecar, payer and tipper; the simnet is shared). Default 1: on two
 * cores, two at once take about as long and starve the sidecars into expiring transactions.
 */
const PARALLEL = Math.max(1, Number(process.env.RELIABILITY_CRASH_PARALLEL ?? 1));
let running = 0;
const waiting: Array<() => void> = [];
async function withTrialSlot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= PARALLEL) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

beforeAll(async () => {
  process.stdout.write(
    `crash trials: seed ${SEED} (RELIABILITY_CRASH_SEED), ${TXS} transactions per trial, ${PARALLEL} at a time\n`,
  );
  simnet = await startSimnet({ slotMs: SLOT_MS, rateLimit: false, seed: SEED % 1000 });
  simnetStarted();
}, 30_000);

afterAll(async () => {
  await simnet?.stop();
  if (results.length === 0) return;
  const sum = (f: (r: TrialResult) => number) => results.reduce((a, r) => a + f(r), 0);
  const terminal: Record<string, number> = {};
  for (const r of results)
    for (const [state, n] of Object.entries(r.terminal)) terminal[state] = (terminal[state] ?? 0) + n;
  const dir = join(__dirname, '..', '..', 'results');
  await mkdir(dir, { recursive: true });
  // The CI size writes crash.json; another size (the issue's full 1000) its own file beside it. results/ is outside
  // the prettier check (prettier cannot be imported inside jest's module sandbox).
  const path = join(dir, TXS === DEFAULT_TXS ? 'crash.json' : `crash-${TXS}tx.json`);
  const json = JSON.stringify(
    {
      suite: 'crash',
      seed: SEED,
      txs_per_trial: TXS,
      slot_ms: SLOT_MS,
      trials: results.length,
      totals: {
        transactions: sum((r) => r.txs),
        acknowledged: sum((r) => r.acknowledged),
        kills: sum((r) => r.kills.length),
        kills_at_crash_points: sum((r) => r.kills.filter((k) => k.kind === 'point').length),
        random_kills: sum((r) => r.kills.filter((k) => k.kind === 'random').length),
        in_flight_at_kills: sum((r) => r.kills.reduce((a, k) => a + k.in_flight, 0)),
        resent: {
          found: sum((r) => r.resent.found),
          accepted: sum((r) => r.resent.accepted),
          refused: sum((r) => r.resent.refused),
        },
        terminal,
        lost: sum((r) => r.lost),
        not_terminal: sum((r) => r.not_terminal),
        disagree: sum((r) => r.disagree),
        double_landed: sum((r) => r.double_landed),
        unknown_landed: sum((r) => r.unknown_landed),
        tips_on_chain: sum((r) => r.tips_on_chain),
        double_tips: sum((r) => r.double_tips),
        orphan_tips: sum((r) => r.orphan_tips),
        attempts: sum((r) => r.attempts),
        unsent_attempts: sum((r) => r.unsent_attempts),
        expired_with_unsent_attempt: sum((r) => r.expired_with_unsent_attempt),
        lifecycle_torn_tails_after_kills: sum(
          (r) => r.kills.filter((k) => k.lifecycle_torn_tail_bytes > 0).length,
        ),
        lifecycle_bad_lines: sum((r) => r.lifecycle.bad_lines),
        lifecycle_stale_entries: sum((r) => r.lifecycle.stale_entries),
        replay_mismatch: sum((r) => r.replay_mismatch),
        restart_ms_max: Math.max(
          ...results.flatMap((r) => [r.restart_ms, ...r.kills.map((k) => k.start_ms)]),
        ),
        duration_ms: Date.now() - suiteStarted,
      },
      results,
    },
    null,
    2,
  );
  await writeFile(path, `${json}\n`);
});

const selected = TRIALS.map((spec, i) => ({ spec, n: i + 1 })).filter(
  ({ n }) => ONLY.length === 0 || ONLY.includes(n),
);

test.concurrent.each(selected.map(({ spec, n }) => [n, spec.name, spec] as const))(
  'trial %i: %s',
  async (n, _name, spec) => {
    await simnetReady;
    const result = await withTrialSlot(() =>
      runTrial({ simnet, txs: TXS, concurrency: 24, bypassTip: 100_000 }, spec, n),
    );
    results.push(result);
    results.sort((a, b) => a.trial - b.trial);
    const summary = `trial ${n} (${spec.name}): ${JSON.stringify({
      kills: result.kills.map((k) => [k.point ?? `random ${k.delay_ms} ms`, k.in_flight, k.start_ms]),
      terminal: result.terminal,
      resent: result.resent,
      tips: result.tips_on_chain,
      restart_ms: result.restart_ms,
      ms: result.duration_ms,
    })}\n`;
    process.stdout.write(summary);
    expect(result.problems).toEqual([]);
    expect(result.kills.every((k) => k.ended === 'SIGKILL')).toBe(true);
    expect(result.kills.filter((k) => k.kind === 'point').every((k) => k.crash_point_reached)).toBe(true);
    expect(result.lost).toBe(0);
    expect(result.not_terminal).toBe(0);
    expect(result.disagree).toBe(0);
    expect(result.double_landed).toBe(0);
    expect(result.unknown_landed).toBe(0);
    expect(result.double_tips).toBe(0);
    expect(result.orphan_tips).toBe(0);
    expect(result.tipper_drop_lamports).toBe(result.relay_paid_lamports);
    expect(result.lifecycle.bad_lines).toBe(0);
    expect(result.lifecycle.stale_entries).toBe(0);
    expect(result.replay_mismatch).toBe(0);
    expect(result.expired_with_unsent_attempt).toBe(0);
    // Most of the load lands: a crash must not strand transactions into expiry. (The agent decides over HTTP and
    // reconnects after each restart, inside the transactions' 150-slot window: more of its load can expire.)
    expect(result.terminal.finalized ?? 0).toBeGreaterThanOrEqual(
      result.acknowledged * (spec.agent ? 0.5 : 0.8),
    );
  },
  600_000,
);
