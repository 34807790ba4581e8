import { startSimnet, type Simnet } from '@solrelay/simnet';
import { testSeed } from '@solrelay/testkit';
import {
  CrashPointNotReached,
  runTrial,
  seededRandom,
  type Kill,
  type TrialContext,
  type TrialResult,
  type TrialSpec,
} from './crash-trial';
import { writeResults } from './security-results';
import { resultsName, useStore, type StoreName, type StoreUnderTest } from './store';

/**
 * Crash (issue #10): a load of transactions through the real sidecar process, SIGKILLed at each named crash point
 * (after journaling an enqueue, after journaling an attempt and before sending it, after sending and before
 * recording the answer, mid-way through a lifecycle write, during compaction) and at random moments, 20 trials.
 * After the restarts every acknowledged transaction is terminal and known; none is lost, none lands twice, no
 * landed transaction has a second tip on chain, the tipper paid exactly the tips relay recorded, the lifecycle log
 * parses and agrees with the records, and a sidecar started once more on the final data dir answers the same
 * records. Every check goes through the sidecar's HTTP API and the simulated chain, not the store's internals.
 *
 * The store is a dimension (`crashSuite(store)`, a test file per store): the local journal (crash.test.ts) and
 * PostgreSQL (crash-postgres.test.ts: each trial its own fresh migrated database, `RELAY_DATABASE_URL` of every
 * process of the trial, so the final restart replays that database). On PostgreSQL the compaction trials are skipped,
 * with the reason in the test's name and in the results: compaction is the journal's (its snapshot and segment
 * files), PostgreSQL has no such step and the sidecar never hits those points there. Every other point exists on both
 * (the enqueue and attempt points fire after the store committed them, the lifecycle log is a file on both) and runs.
 * PostgreSQL in CI runs a subset that still kills at every point that applies, at random and with the agent
 * (PG_CI_TRIALS); RELIABILITY_PG_FULL=1 runs every trial that applies.
 *
 * A control trial with no kill runs first: it checks the same invariants, measures how long the load takes from
 * start to the last finalization (random kills are drawn over that whole span: the enqueue burst, confirmations,
 * finalizations, compactions and the idle end) and how much of it lands on this machine as loaded as it is now
 * (the baseline of the loose "most of it lands" check).
 *
 * RELIABILITY_CRASH_TX sets the transactions per trial (CI default 120; the issue's full size is 1000),
 * RELIABILITY_CRASH_SEED the seed of the random kills (printed; else the test seed: fixed, or fresh with
 * RELAY_TEST_SEED=random),
 * RELIABILITY_CRASH_ONLY a comma-separated list of trial numbers to run, RELIABILITY_CRASH_PARALLEL how many
 * run at once, RELIABILITY_CRASH_SLOT_MS the simnet's slot time. Figures go to results/crash.json
 * (crash-<N>tx.json for another size; crash-postgres.json, crash-postgres-full.json for PostgreSQL).
 */

const DEFAULT_TXS = 120;
const TXS = Number(process.env.RELIABILITY_CRASH_TX ?? DEFAULT_TXS);
const SEED = Number(process.env.RELIABILITY_CRASH_SEED ?? testSeed());
const ONLY = (process.env.RELIABILITY_CRASH_ONLY ?? '')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => n > 0);
/**
 * 60 ms slots: a blockhash lives 150 slots = 9 s, about four times the longest restart seen on a loaded two-core box
 * (about 2.3 s). What a restart still costs is allowed for, not guessed: the loose "most of it lands" floor is
 * discounted by the measured time no process was up (see finalizedFloor); lost, disagree, double landings and
 * double tips are judged strictly whatever the timing. (100 ms slots: the same checks, about 50% longer.)
 *
 * PostgreSQL: the same 60 ms slots. Before the store kept its owned records in memory and wrote each change in one
 * statement, every write was several round trips to the server, and at 60 ms the control's sends fell so far behind
 * on the loaded box that 104 of its 120 transactions expired before their first bundle went out; the suite ran at
 * 150 ms then. Since, the CI subset at 60 ms on the same box under load ~9: 600 of 600 finalized.
 * RELIABILITY_CRASH_SLOT_MS sets it.
 */
let SLOT_MS = 60;
let BLOCKHASH_LIFE_MS = 150 * SLOT_MS;
// The journal takes about 4 KB per transaction here: every trial compacts at least once, the compaction trials
// a dozen times or more.
const COMPACT_SMALL = Math.max(64 * 1024, TXS * 512);
const COMPACT_NORMAL = TXS * 2048;
/**
 * A crash point whose N-th hit never came (batching merges flushes on a loaded box) is tried again at N/2. The count
 * is shared by a trial's kills, and a retry reruns the whole trial, where a point that fired the last time may not
 * fire this time (trial 11 ran out at 3 in a clean-clone CI: #120, #60, then the second kill's #5, then #30 again).
 */
const MAX_POINT_RETRIES = 6;

const random = seededRandom(SEED);
/** A kill by this process at a random moment of the trial's whole span (see `TrialContext.randomKill`). */
const randomKill = (): Kill => ({ kind: 'random', fraction: Number(random().toFixed(4)) });
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
/** Why a compaction trial does not run on PostgreSQL (the test's name and the results say so). */
const JOURNAL_ONLY =
  'journal only: compaction rewrites the journal into a snapshot, PostgreSQL has no such step, so the point never fires there';
const compacting = (name: string, kills: Kill[]): TrialSpec => ({ name, kills, compactBytes: COMPACT_SMALL });
/** Trials whose crash points are all the journal's own (compaction.*). */
const journalOnly = (spec: TrialSpec): boolean =>
  spec.kills.some((k) => k.kind === 'point' && k.point.startsWith('compaction.'));

const CONTROL: TrialSpec = normal('control: no kill', []);

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
  // Late: the writes then are mostly confirmations and finalizations already in the journal. (A process with fewer
  // flushes than that, their batches grown under load, is tried again at half; see MAX_POINT_RETRIES.)
  normal('lifecycle.mid-write late (the Nth for N transactions), then the 5th', [
    at('lifecycle.mid-write', TXS),
    at('lifecycle.mid-write', 5),
  ]),
  compacting('compaction.started, the first', [at('compaction.started', 1)]),
  compacting('compaction.snapshot-written (before its fsync), the second', [
    at('compaction.snapshot-written', 2),
  ]),
  compacting('compaction.renamed, then compaction.before-rename (after the fsync)', [
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

/**
 * PostgreSQL in CI (trial numbers): enqueue.journaled 90% in then a random kill, attempt.journaled 50% in, attempt.sent
 * at the last then again on the resends, lifecycle.mid-write (the 8th), the agent (attempt.sent 30% in, then a random
 * kill). Every crash point that applies to PostgreSQL, random kills and the agent, in a quarter of the time;
 * RELIABILITY_PG_FULL=1 runs all 17 trials that apply.
 */
const PG_CI_TRIALS = [3, 5, 8, 10, 19];
/**
 * The journal in CI leaves out eight trials that repeat a point another trial already kills at (enqueue.journaled
 * the first and 40% in, attempt.journaled the first, attempt.sent 50% in, lifecycle.mid-write the first, both plain
 * random kills, the agent's plain random kill): every crash point, the compaction points, random (after a point kill,
 * while compacting, twice), double and agent kills still run, in about 60 % of the time (CI's budget).
 * RELIABILITY_CRASH_FULL=1 runs every trial on both stores.
 */
const JOURNAL_SKIPPED_IN_CI = [1, 2, 4, 7, 9, 15, 16, 20];
const FULL = process.env.RELIABILITY_CRASH_FULL === '1';
const PG_FULL = FULL || process.env.RELIABILITY_PG_FULL === '1';

/** A trial's result with how its crash points were reached (`after` as asked and as run). */
type Reported = TrialResult & {
  after_requested: Array<number | null>;
  point_retries: number;
  /** The loose floor its finalized count was held to. */
  finalized_floor?: number;
};

let store: StoreUnderTest;
let simnet: Simnet;
let control: Reported | null = null;
const results: Reported[] = [];
const suiteStarted = Date.now();
const ctx = (): TrialContext => ({
  simnet,
  txs: TXS,
  concurrency: 24,
  bypassTip: 100_000,
  storeEnv: () => store.env(),
  // The span of the control's load, listening to the last finalization (until the control has run: an estimate
  // from the slot time, a second of enqueues and 40 slots to finalize).
  randomKill: {
    floorMs: 100,
    spanMs: control?.phases_ms.load_to_terminal ?? 1000 + 40 * SLOT_MS,
  },
});

/**
 * Trials run PARALLEL at a time (each has its own sidecar, payer and tipper; the simnet is shared). Default 1: on two
 * cores, two at once take about as long and starve the sidecars into expiring transactions. With 1 the trials are
 * plain sequential tests (a test queued for a slot would have its timeout running while it waits).
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

/** Run a trial; a crash point whose N-th hit never came is tried again (fresh trial) at the N/2-th hit. */
async function runReported(spec: TrialSpec, n: number): Promise<Reported> {
  const requested = spec.kills.map((k) => (k.kind === 'point' ? k.after : null));
  let current = spec;
  for (let retries = 0; ; retries++) {
    try {
      const result = await runTrial(ctx(), current, n);
      return { ...result, after_requested: requested, point_retries: retries };
    } catch (error) {
      if (!(error instanceof CrashPointNotReached) || error.after <= 1 || retries >= MAX_POINT_RETRIES)
        throw error;
      const after = Math.max(1, Math.floor(error.after / 2));
      process.stdout.write(
        `trial ${n}: ${error.point} #${error.after} never fired (fewer flushes); again at #${after}\n`,
      );
      current = {
        ...current,
        kills: current.kills.map((k, i) =>
          i === error.killIndex && k.kind === 'point' ? { ...k, after } : k,
        ),
      };
    }
  }
}

/** Every invariant of a trial, judged strictly; only the finalized share is loose (it depends on the machine). */
function check(result: Reported, spec: TrialSpec): void {
  expect(result.problems).toEqual([]);
  expect(result.kills).toHaveLength(spec.kills.length);
  expect(result.kills.every((k) => k.ended === 'SIGKILL')).toBe(true);
  expect(result.kills.filter((k) => k.kind === 'point').every((k) => k.crash_point_reached)).toBe(true);
  // Every transaction of the load is accounted for: acknowledged, or a resend refused because its blockhash died
  // meanwhile (each checked against the chain); every enqueue answer was one of the expected ones.
  expect(result.acknowledged + result.resent.refused).toBe(TXS);
  expect(result.txs).toBe(TXS);
  expect(result.unexpected_answers).toBe(0);
  expect(result.refused_unexplained).toBe(0);
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
  // On PostgreSQL the records are rows of the trial's database: no journal is written, so every restart and the final
  // replay read the database.
  if (store.name === 'postgres') {
    expect(result.journal.files).toEqual([]);
    expect(result.kills.flatMap((k) => k.journal_files)).toEqual([]);
  }
  // A kill mid-way through a lifecycle write leaves a torn last line, which the next process reports and cuts.
  for (const kill of result.kills.filter((k) => k.point === 'lifecycle.mid-write')) {
    expect(kill.lifecycle_torn_tail_bytes).toBeGreaterThan(0);
    expect(kill.recovery_warnings).toContain(
      `lifecycle log: skipped a torn last line (${kill.lifecycle_torn_tail_bytes} bytes) left by a crash`,
    );
  }
}

/**
 * Most of the load lands: a crash must not strand transactions into expiry. Loose: relative to what the control
 * landed on this machine now, and discounted by the share of a blockhash's life that no process was up. (The agent
 * decides over HTTP and reconnects after each restart, inside the transactions' 150-slot window: more can expire.)
 */
function finalizedFloor(result: Reported, agent: boolean): number {
  const controlShare = control ? (control.terminal.finalized ?? 0) / Math.max(1, control.acknowledged) : 1;
  const up = Math.max(0, 1 - result.downtime_ms / BLOCKHASH_LIFE_MS);
  return Math.floor(result.acknowledged * (agent ? 0.5 : 0.8) * controlShare * up);
}

const chosen = TRIALS.map((spec, i) => ({ spec, n: i + 1 })).filter(
  ({ n }) => ONLY.length === 0 || ONLY.includes(n),
);
/**
 * The journal runs every trial but JOURNAL_SKIPPED_IN_CI; PostgreSQL skips the journal's own points, and in CI runs
 * PG_CI_TRIALS. RELIABILITY_CRASH_ONLY runs what it names.
 */
const runsOn = (name: StoreName, { spec, n }: { spec: TrialSpec; n: number }): boolean => {
  if (ONLY.length > 0) return name === 'journal' || !journalOnly(spec);
  if (name === 'journal') return FULL || !JOURNAL_SKIPPED_IN_CI.includes(n);
  return !journalOnly(spec) && (PG_FULL || PG_CI_TRIALS.includes(n));
};
let skipped: Array<{ spec: TrialSpec; n: number }> = [];

let controlDone: () => void;
const controlReady = new Promise<void>((resolve) => (controlDone = resolve));

async function trial(n: number, _name: string, spec: TrialSpec): Promise<void> {
  await controlReady;
  const result = await withTrialSlot(() => runReported(spec, n));
  result.finalized_floor = finalizedFloor(result, spec.agent ?? false);
  results.push(result);
  results.sort((a, b) => a.trial - b.trial);
  process.stdout.write(summary(n, result));
  check(result, spec);
  expect(result.terminal.finalized ?? 0).toBeGreaterThanOrEqual(result.finalized_floor);
}

function summary(n: number, result: Reported): string {
  return `trial ${n} (${result.name}): ${JSON.stringify({
    kills: result.kills.map((k) => [
      k.point ? `${k.point} #${k.after}` : `random ${k.delay_ms} ms`,
      k.in_flight,
      k.start_ms,
      k.down_ms,
      k.lifecycle_torn_tail_bytes,
    ]),
    terminal: result.terminal,
    resent: result.resent,
    tips: result.tips_on_chain,
    restart_ms: result.restart_ms,
    ms: result.duration_ms,
  })}\n`;
}

/**
 * The crash suite's tests on `storeName`: call once at the top of a test file. Journal-only trials are skipped on
 * PostgreSQL (shown as skipped, the reason in their name and in the results).
 */
export function crashSuite(storeName: StoreName): void {
  store = useStore(storeName);
  SLOT_MS = Number(process.env.RELIABILITY_CRASH_SLOT_MS ?? 60);
  BLOCKHASH_LIFE_MS = 150 * SLOT_MS;
  skipped = chosen.filter((c) => journalOnly(c.spec) && storeName !== 'journal');
  beforeAll(async () => {
    process.stdout.write(
      `crash trials: seed ${SEED} (RELIABILITY_CRASH_SEED), ${TXS} transactions per trial, ${SLOT_MS} ms slots, ` +
        `${PARALLEL} at a time\n`,
    );
    simnet = await startSimnet({ slotMs: SLOT_MS, rateLimit: false, seed: SEED % 1000 });
  }, 30_000);

  afterAll(async () => {
    await simnet?.stop();
    if (results.length === 0) return;
    const sum = (f: (r: Reported) => number) => results.reduce((a, r) => a + f(r), 0);
    const terminal: Record<string, number> = {};
    for (const r of results)
      for (const [state, n] of Object.entries(r.terminal)) terminal[state] = (terminal[state] ?? 0) + n;
    const midWrites = results.flatMap((r) => r.kills.filter((k) => k.point === 'lifecycle.mid-write'));
    // The CI size writes crash.json; another size (the issue's full 1000) its own file beside it. CI's subset:
    // crash.json, crash-postgres.json; every trial (that applies): crash-full.json, crash-postgres-full.json.
    const size = TXS === DEFAULT_TXS ? '' : `-${TXS}tx`;
    const full = store.name === 'postgres' ? PG_FULL : FULL;
    writeResults(`${resultsName('crash', store.name)}${full && ONLY.length === 0 ? '-full' : ''}${size}`, {
      suite: 'crash',
      store: store.name,
      trials_run:
        ONLY.length > 0
          ? `RELIABILITY_CRASH_ONLY: ${ONLY.join(', ')}`
          : store.name === 'postgres'
            ? PG_FULL
              ? 'every trial that applies to PostgreSQL'
              : `CI's subset: ${PG_CI_TRIALS.join(', ')}`
            : FULL
              ? 'every trial'
              : `CI's subset: all but ${JOURNAL_SKIPPED_IN_CI.join(', ')}`,
      ...(store.name === 'postgres'
        ? { skipped: skipped.map(({ n, spec }) => ({ trial: n, name: spec.name, reason: JOURNAL_ONLY })) }
        : {}),
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
        random_kill_delays_ms: results.flatMap((r) =>
          r.kills.filter((k) => k.kind === 'random').map((k) => k.delay_ms),
        ),
        in_flight_at_kills: sum((r) => r.kills.reduce((a, k) => a + k.in_flight, 0)),
        resent: {
          found: sum((r) => r.resent.found),
          accepted: sum((r) => r.resent.accepted),
          refused: sum((r) => r.resent.refused),
        },
        refused_unexplained: sum((r) => r.refused_unexplained),
        unexpected_answers: sum((r) => r.unexpected_answers),
        retried_answers: {
          rate_limited: sum((r) => r.retried_answers.rate_limited),
          not_ready: sum((r) => r.retried_answers.not_ready),
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
        lifecycle_mid_write_kills: midWrites.length,
        lifecycle_mid_write_torn_tail_bytes: midWrites.map((k) => k.lifecycle_torn_tail_bytes),
        crash_point_retries: sum((r) => r.point_retries),
        lifecycle_bad_lines: sum((r) => r.lifecycle.bad_lines),
        lifecycle_stale_entries: sum((r) => r.lifecycle.stale_entries),
        replay_mismatch: sum((r) => r.replay_mismatch),
        restart_ms_max: Math.max(
          ...results.flatMap((r) => [r.restart_ms, ...r.kills.map((k) => k.start_ms)]),
        ),
        down_ms_max: Math.max(0, ...results.flatMap((r) => r.kills.map((k) => k.down_ms))),
        duration_ms: Date.now() - suiteStarted,
      },
      control,
      results,
    });
  });

  // The control runs first (tests of a file run in order; concurrent trials wait for it): the random kills' span and
  // the finalized baseline. Its own share is judged loosely too: no kill, but the machine may be loaded.
  test('trial 0: control, no kill', async () => {
    try {
      const result = await runReported(CONTROL, 0);
      control = result;
      process.stdout.write(summary(0, result));
      check(result, CONTROL);
      expect(result.kills).toEqual([]);
      expect(result.phases_ms.load_to_terminal).toBeGreaterThan(0);
      expect(result.terminal.finalized ?? 0).toBeGreaterThanOrEqual(result.acknowledged * 0.5);
    } finally {
      controlDone();
    }
  }, 600_000);

  const selected = chosen.filter((c) => runsOn(storeName, c));
  const cases = selected.map(({ spec, n }) => [n, spec.name, spec] as const);
  if (cases.length === 0) {
    // Nothing selected but the control (RELIABILITY_CRASH_ONLY naming only trials that do not apply here).
  } else if (PARALLEL > 1) {
    // Concurrent tests start their timers together (and wait for the control and for the ones ahead of them).
    test.concurrent.each(cases)('trial %i: %s', trial, 600_000 * (1 + Math.ceil(cases.length / PARALLEL)));
  } else {
    test.each(cases)('trial %i: %s', trial, 600_000);
  }
  // Shown as skipped, with the reason, rather than left out.
  for (const { spec, n } of skipped)
    test.skip(`trial ${n}: ${spec.name} (on PostgreSQL: ${JOURNAL_ONLY})`, () => {});
}
