/**
 * Several sidecars, one PostgreSQL (issue #29's benchmarks): a fleet of 1, 2 and 3 hosts, each a sidecar process of
 * its own (`RELAY_FLEET=1`, its own `RELAY_HOST_ID`, API port, data directory, and engine source address
 * `RELAY_ENGINE_LOCAL_ADDRESS=127.0.0.<2+i>`, so each has its own budget at the simnet's per-IP limiter) on one
 * database of the bench's PostgreSQL and one rate-limited 8-region simnet, taking signed transfers round-robin:
 * a burst of 500 and a steady 60 tx/s. Then under that steady load with 3 hosts, one host SIGKILLed (the time from
 * the kill to each of its transactions' adoption) and one SIGSTOPped past its lease (the time until its transactions
 * move; SIGCONT, and it must register again). PostgreSQL's commits/s and CPU and each host's CPU over every run.
 *
 * The hosts decide for themselves (bypass, a flat tip), not through an agent each: see the notes.
 */
import pg from 'pg';
import type { Benchmark, BenchContext } from '../benchmark';
import {
  burstArrivals,
  seedFromEnv,
  sleep,
  steadyArrivals,
  summarize,
  type StrategyRun,
  type StrategySummary,
} from '../lib/e2e-run';
import { loadAverage } from '../lib/machine';
import { runRelay, type LiveRelayRun } from '../lib/relay-submitter';
import type { SummaryRow } from '../lib/report';
import type { EngineTally, TipOnChain } from '../lib/simnet-process';
import { distribution, round, type Distribution } from '../lib/stats';
import { postgresStore, type BenchStore, type StoreUse } from '../lib/store';

const REGIONS = 8;
/** The sidecar's own default bypass tip (lamports per bundle). */
const BYPASS_TIP_LAMPORTS = 10_000;
/** Issue #29: landed/s with N hosts >= this x N x one host's. */
const SCALE_TARGET = 0.9;
/** DESIGN §10: a dead host's work moves within lease + sweep, about 7 s (the reliability suite's bound). */
const TAKEOVER_P99_TARGET_MS = 7_000;
/** How long a paused host stays stopped: past its 5 s lease, as the reliability suite's pause trial (12 s). */
const PAUSE_MS = 12_000;
/** How long a woken host has to register again before the run says it did not. */
const REREGISTER_WAIT_MS = 30_000;

/** Host `index`'s engine source address (the loopback network is 127.0.0.0/8: every one of them is this machine). */
const hostAddress = (index: number): string => `127.0.0.${2 + index}`;
const hostId = (index: number): string => `host-${index + 1}`;

interface Load {
  id: string;
  description: string;
  arrivalsMs: number[];
  /** Offered transactions a second; null for a burst. */
  rate: number | null;
}

type Fault =
  { kind: 'kill'; host: number; atMs: number } | { kind: 'pause'; host: number; atMs: number; forMs: number };

interface Trial {
  id: string;
  description: string;
  load: Load;
  faults: Fault[];
}

function loads(quick: boolean): Load[] {
  const steadyS = quick ? 5 : 60;
  const steady: Load = {
    id: 'steady-60',
    description: `steady 60 tx/s for ${steadyS} s`,
    arrivalsMs: steadyArrivals(60, steadyS),
    rate: 60,
  };
  if (quick) return [steady];
  return [
    { id: 'burst-500', description: 'burst of 500', arrivalsMs: burstArrivals(500), rate: null },
    steady,
  ];
}

function trials(quick: boolean): Trial[] {
  const load = (seconds: number): Load => ({
    id: `steady-60-${seconds}s`,
    description: `steady 60 tx/s for ${seconds} s`,
    arrivalsMs: steadyArrivals(60, seconds),
    rate: 60,
  });
  if (quick)
    return [
      {
        id: 'kill+pause',
        description: `host-2 SIGKILLed 2 s into the load, host-3 SIGSTOPped at 3 s for ${PAUSE_MS / 1000} s (quick: both in one run)`,
        load: load(6),
        faults: [
          { kind: 'kill', host: 1, atMs: 2_000 },
          { kind: 'pause', host: 2, atMs: 3_000, forMs: PAUSE_MS },
        ],
      },
    ];
  return [
    {
      id: 'kill',
      description: 'host-2 SIGKILLed 10 s into the load',
      load: load(30),
      faults: [{ kind: 'kill', host: 1, atMs: 10_000 }],
    },
    {
      id: 'pause',
      description: `host-2 SIGSTOPped 10 s into the load for ${PAUSE_MS / 1000} s, then SIGCONT`,
      load: load(30),
      faults: [{ kind: 'pause', host: 1, atMs: 10_000, forMs: PAUSE_MS }],
    },
  ];
}

/** What happened to a host the trial faulted (times are Date.now()). */
type FaultEvent =
  | { kind: 'kill'; host: string; at: number }
  | {
      kind: 'pause';
      host: string;
      at: number;
      resumed: number;
      /** When /status said it was live again under a new epoch; null: not within REREGISTER_WAIT_MS. */
      back: number | null;
      epochs: [number | null, number | null];
    };

/** Read from the database and the chain once every accepted transaction is followed. */
interface AfterRun {
  adoptions: Array<{ tx_id: string; at: number; from_host: string; from_epoch: string; by: string }>;
  /** Live transactions whose owner's session has ended or lapsed: work nobody runs (must be 0). */
  stranded: number;
  sessions: Array<{ host_id: string; epoch: string }>;
  tips: TipOnChain[];
}

async function applyFault(live: LiveRelayRun, fault: Fault): Promise<FaultEvent> {
  await sleep(live.t0 + fault.atMs - Date.now());
  const host = live.stack.hosts[fault.host];
  if (!host) throw new Error(`no host ${fault.host} in a fleet of ${live.stack.hosts.length}`);
  const id = hostId(fault.host);
  if (fault.kind === 'kill') {
    const at = Date.now();
    process.kill(-host.pid, 'SIGKILL');
    live.down.add(fault.host);
    return { kind: 'kill', host: id, at };
  }
  const before = await fleetStatus(host.url);
  // The clients stop sending to it first (as the reliability suite's pause trial): a client waiting on a stopped
  // host would send elsewhere only after its timeout.
  live.down.add(fault.host);
  const at = Date.now();
  process.kill(-host.pid, 'SIGSTOP');
  try {
    await sleep(fault.forMs);
  } finally {
    process.kill(-host.pid, 'SIGCONT');
  }
  const resumed = Date.now();
  let back: number | null = null;
  let epoch: number | null = null;
  while (Date.now() < resumed + REREGISTER_WAIT_MS) {
    const now = await fleetStatus(host.url).catch(() => null);
    if (now?.live && before && now.epoch > before.epoch) {
      back = Date.now();
      epoch = now.epoch;
      live.down.delete(fault.host);
      break;
    }
    await sleep(100);
  }
  return { kind: 'pause', host: id, at, resumed, back, epochs: [before?.epoch ?? null, epoch] };
}

async function fleetStatus(url: string): Promise<{ live: boolean; epoch: number } | null> {
  const res = await fetch(`${url}/status`, { signal: AbortSignal.timeout(5_000) });
  const body = (await res.json()) as { fleet?: { live: boolean; epoch: number } | null };
  return body.fleet ?? null;
}

async function readAfter(live: LiveRelayRun): Promise<AfterRun> {
  const db = new pg.Client({ connectionString: live.stack.env.RELAY_DATABASE_URL });
  await db.connect();
  try {
    const { rows: adoptions } = await db.query<AfterRun['adoptions'][number]>(
      `SELECT tx_id, (payload->>'ts')::float8 AS at, payload->>'from_host_id' AS from_host,
         payload->>'from_epoch' AS from_epoch, host_id AS by
       FROM events WHERE name = 'tx_adopted'`,
    );
    const { rows: stranded } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM transactions t
         JOIN host_sessions s ON s.host_id = t.owner_host AND s.epoch = t.owner_epoch
       WHERE t.terminal_at IS NULL AND (s.ended_at IS NOT NULL OR s.lease_expires_at < now())`,
    );
    const { rows: sessions } = await db.query<AfterRun['sessions'][number]>(
      'SELECT host_id, epoch::text AS epoch FROM host_sessions ORDER BY epoch',
    );
    const tips = await live.stack.simnet.request<TipOnChain[]>({ op: 'tipsOnChain' });
    return { adoptions, stranded: stranded[0]?.n ?? 0, sessions, tips };
  } finally {
    await db.end();
  }
}

/** One host's share of a run (its engine figures are the run's: they are not split by host). */
interface HostFigures {
  host: string;
  address: string;
  submitted: number;
  accepted: number;
  landed: number;
  throughput_per_s: number;
  time_to_land_ms: { p50: number; p90: number };
  accepted_then_expired: number;
  engine_requests_at_engine: number;
  engine_429s_at_engine: number;
}

interface FleetRunSummary {
  id: string;
  description: string;
  hosts: number;
  total: StrategySummary;
  per_host: HostFigures[];
  /** Engine requests by the address the engine saw them from (from the simnet's start). */
  engine_addresses: EngineTally['byAddress'];
  /** Every host reached the block engine from its own address (its own budget). */
  own_addresses: boolean;
  /** Enqueues not accepted, by the refusal's code (429s at capacity, 503s no host took, none answered). */
  refused_for: Record<string, number>;
  /** From each POST /tx/enqueue to its answer (the last host's, for one sent again). */
  answer_ms: Distribution;
  /** Enqueues sent again to the next host (no answer, or 503), and why. */
  resent: number;
  resent_for: Record<string, number>;
  /** Accepted, yet neither confirmed nor terminal at the end, or unknown (must be 0). */
  lost: number;
  /** Confirmed/finalized but not on chain, or failed/expired but on chain. */
  disagree: number;
  chain: { tips_on_chain: number; orphan_tips: number; double_tips: number };
  stranded: number;
  store_use: StoreUse;
  load_avg: { before: number[]; after: number[] };
  faults: FaultEvent[];
  adoptions: AfterRun['adoptions'];
  sessions: AfterRun['sessions'];
}

const CONFIRMED = new Set(['confirmed', 'finalized']);
const SETTLED = new Set(['confirmed', 'finalized', 'failed', 'expired']);

async function runFleet(
  store: BenchStore,
  seed: number,
  hosts: number,
  load: Load,
  faults: Fault[],
  warmupSlots: number,
  id: string,
): Promise<FleetRunSummary> {
  const loadBefore = loadAverage();
  const run: StrategyRun = await runRelay({
    seed,
    regions: REGIONS,
    regime: 'calm',
    kind: 'uncontended',
    arrivalsMs: load.arrivalsMs,
    warmupSlots,
    label: `fleet-${hosts}`,
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(BYPASS_TIP_LAMPORTS) },
    store,
    fleet: { hosts, hostEnv: (i) => ({ RELAY_ENGINE_LOCAL_ADDRESS: hostAddress(i) }) },
    during: async (live) => {
      await live.stack.simnet.request({
        op: 'watchTips',
        tippers: live.stack.tippers.map((k) => k.publicKey.toBase58()),
      });
      return Promise.all(faults.map((f) => applyFault(live, f)));
    },
    after: readAfter,
  });
  const extra = run.extra as {
    store_use: StoreUse;
    answer_ms: Distribution;
    resent: number;
    resent_for: Record<string, number>;
    during: FaultEvent[];
    after: AfterRun;
  };
  const byAddress = run.engineSide?.byAddress ?? {};
  const seen = (address: string) =>
    Object.entries(byAddress).find(([a]) => a.replace(/^::ffff:/, '') === address)?.[1];
  const perHost = Array.from({ length: hosts }, (_, i): HostFigures => {
    const s = summarize({ ...run, outcomes: run.outcomes.filter((o) => o.host === i) });
    const engine = seen(hostAddress(i));
    return {
      host: hostId(i),
      address: hostAddress(i),
      submitted: s.submitted,
      accepted: s.accepted,
      landed: s.landed,
      throughput_per_s: s.throughput_per_s,
      time_to_land_ms: { p50: s.time_to_land_ms.p50, p90: s.time_to_land_ms.p90 },
      accepted_then_expired: s.accepted_then_expired,
      engine_requests_at_engine: engine?.requests ?? 0,
      engine_429s_at_engine: engine?.refused ?? 0,
    };
  });
  const accepted = run.outcomes.filter((o) => o.accepted);
  const refusedFor: Record<string, number> = {};
  for (const o of run.outcomes)
    if (!o.accepted) refusedFor[o.refusalCode ?? '?'] = (refusedFor[o.refusalCode ?? '?'] ?? 0) + 1;
  const { tips } = extra.after;
  const tipsPerUser = new Map<string, number>();
  for (const tip of tips) for (const u of tip.users) tipsPerUser.set(u, (tipsPerUser.get(u) ?? 0) + 1);
  return {
    id,
    description: load.description,
    hosts,
    total: summarize(run),
    per_host: perHost,
    engine_addresses: byAddress,
    // Each host reached the engine from its own address, and from no other: a host whose sends left from 127.0.0.1
    // (its binding lost) would share that budget while its gRPC polls still showed its own address.
    own_addresses:
      perHost.every((h) => h.engine_requests_at_engine > 0) &&
      Object.keys(byAddress).every((a) => perHost.some((h) => h.address === a.replace(/^::ffff:/, ''))),
    refused_for: refusedFor,
    answer_ms: extra.answer_ms,
    resent: extra.resent,
    resent_for: extra.resent_for,
    lost: accepted.filter((o) => !SETTLED.has(o.relayState ?? 'unknown')).length,
    disagree: accepted.filter(
      (o) =>
        SETTLED.has(o.relayState ?? '') && CONFIRMED.has(o.relayState as string) !== (o.landedSlot !== null),
    ).length,
    chain: {
      tips_on_chain: tips.length,
      orphan_tips: tips.filter((t) => t.users.length === 0).length,
      double_tips: [...tipsPerUser.values()].filter((n) => n > 1).length,
    },
    stranded: extra.after.stranded,
    store_use: extra.store_use,
    load_avg: { before: loadBefore, after: loadAverage() },
    faults: extra.during,
    adoptions: extra.after.adoptions,
    sessions: extra.after.sessions,
  };
}

/** Each fault's victim's transactions another host adopted, in ms after the fault (kill, or the pause's start). */
function takeover(run: FleetRunSummary): Array<{ fault: FaultEvent; adopted_ms: Distribution }> {
  return run.faults.map((fault) => ({
    fault,
    adopted_ms: distribution(
      run.adoptions
        // Only adoptions after the fault (the database's clock and the bench's differ by little on one machine).
        .filter((a) => a.from_host === fault.host && a.by !== fault.host && a.at >= fault.at)
        .map((a) => Math.round(a.at - fault.at)),
    ),
  }));
}

function progressLine(ctx: BenchContext, r: FleetRunSummary): void {
  const pgUse = r.store_use.pg;
  ctx.progress(
    `${r.id} ${r.hosts} host(s): accepted ${r.total.accepted}/${r.total.submitted} (answers p50 ${r.answer_ms.p50} ms, max ${r.answer_ms.max} ms), refused ${tally(r.refused_for)}, landed ${r.total.landed}, ${r.total.throughput_per_s} landed/s, p50 ${r.total.time_to_land_ms.p50} ms, p90 ${r.total.time_to_land_ms.p90} ms, expired ${r.total.accepted_then_expired}, lost ${r.lost}, engine 429s ${r.total.engine_429s_at_engine}, addresses ${Object.keys(r.engine_addresses).join(' ') || 'none'}${r.own_addresses ? '' : ' (SHARED)'}; postgres ${pgUse?.commits_per_s} commits/s cpu ${pgUse?.server_cpu_pct_of_one_core}%; sidecars cpu ${useCells(r)[1]}; resent ${r.resent} (${tally(r.resent_for)}); load ${r.load_avg.before.join(' ')} -> ${r.load_avg.after.join(' ')}`,
  );
}

const tally = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([what, n]) => `${what} ${n}`)
    .join(', ') || 'none';
const seconds = (ms: number) => `${round(ms / 1000, 2)} s`;
const pct = (v: number | null | undefined) => (v === null || v === undefined ? 'n/a' : `${v} %`);

export const fleet: Benchmark = {
  name: 'fleet',
  title: '8. Fleet: several sidecars on one PostgreSQL (throughput by host count, takeover)',
  optIn: true,
  async run(ctx) {
    const seed = seedFromEnv(ctx.progress);
    const only = process.env.BENCH_SCENARIOS?.split(',').filter(Boolean);
    const counts = ctx.quick ? [1, 3] : [1, 2, 3];
    const warmupSlots = ctx.quick ? 8 : 30;
    const loadList = loads(ctx.quick).filter((l) => !only || only.includes(l.id));
    const trialList = trials(ctx.quick).filter((t) => !only || only.includes(t.id));
    ctx.progress('starting the bench PostgreSQL');
    const store = await postgresStore();
    ctx.progress('PostgreSQL up');
    const runs: FleetRunSummary[] = [];
    const trialRuns: FleetRunSummary[] = [];
    try {
      for (const load of loadList)
        for (const n of counts) {
          const r = await runFleet(store, seed, n, load, [], warmupSlots, load.id);
          progressLine(ctx, r);
          runs.push(r);
        }
      for (const trial of trialList) {
        const r = await runFleet(store, seed, 3, trial.load, trial.faults, warmupSlots, trial.id);
        r.description = `${trial.load.description}; ${trial.description}`;
        progressLine(ctx, r);
        for (const t of takeover(r))
          ctx.progress(
            `${trial.id}: ${t.fault.kind} ${t.fault.host}: ${t.adopted_ms.n} adopted by others, p50 ${t.adopted_ms.p50} ms, p99 ${t.adopted_ms.p99} ms, max ${t.adopted_ms.max} ms${t.fault.kind === 'pause' ? `; live again ${t.fault.back === null ? 'NEVER' : `${t.fault.back - t.fault.resumed} ms`} after SIGCONT (epoch ${t.fault.epochs[0]} -> ${t.fault.epochs[1]})` : ''}; stranded ${r.stranded}, orphan tips ${r.chain.orphan_tips}, double tips ${r.chain.double_tips}`,
          );
        trialRuns.push(r);
      }
    } finally {
      await store.close().catch(() => undefined);
    }
    return {
      rows: [...throughputRows(loadList, runs), ...takeoverRows(trialRuns)],
      notes: notes(ctx.quick, seed, warmupSlots),
      markdown: markdown(runs, trialRuns),
      details: { seed, host_counts: counts, runs, trials: trialRuns },
    };
  },
};

function throughputRows(loadList: Load[], runs: FleetRunSummary[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  for (const load of loadList) {
    const of = runs.filter((r) => r.id === load.id).sort((a, b) => a.hosts - b.hosts);
    const one = of.find((r) => r.hosts === 1);
    if (!one || of.length < 2) continue;
    const base = one.total.throughput_per_s;
    // A one-host run that landed nothing judges nothing (every goal would be 0, and met).
    if (base <= 0) {
      rows.push({
        metric: `${load.description}: landed/s with ${of.map((r) => r.hosts).join(', ')} hosts (NOT JUDGED: one host landed nothing)`,
        target: `>= ${SCALE_TARGET} × N × one host's`,
        measured: of.map((r) => `${r.hosts}: ${r.total.throughput_per_s}`).join('; '),
        met: null,
      });
      continue;
    }
    const shared = of.filter((r) => !r.own_addresses).map((r) => r.hosts);
    const goal = (n: number) => SCALE_TARGET * Math.min(n * base, load.rate ?? Infinity);
    const scaled = of.filter((r) => r.hosts > 1);
    const cap = load.rate === null ? '' : `min(N × one host's, ${load.rate}/s offered)`;
    rows.push({
      metric: `${load.description}: landed/s with ${of.map((r) => r.hosts).join(', ')} hosts${shared.length ? ` (NOT JUDGED: ${shared.join(', ')}-host runs reached the engine from fewer addresses than hosts, so shared one budget)` : ''}`,
      target: `>= ${SCALE_TARGET} × ${cap || "N × one host's"} (${scaled.map((r) => `${r.hosts}: ${round(goal(r.hosts), 1)}`).join('; ')})`,
      measured: of
        .map(
          (r) =>
            `${r.hosts}: ${r.total.throughput_per_s}${r.hosts > 1 && base > 0 ? ` (${round(r.total.throughput_per_s / base, 2)}×)` : ''}`,
        )
        .join('; '),
      met: shared.length ? null : scaled.every((r) => r.total.throughput_per_s >= goal(r.hosts)),
    });
    rows.push({
      metric: `${load.description}: accepted-then-expired with ${of.map((r) => r.hosts).join(', ')} hosts`,
      target: '0',
      measured: of
        .map((r) => `${r.hosts}: ${r.total.accepted_then_expired} (of ${r.total.accepted} accepted)`)
        .join('; '),
      met: of.every((r) => r.total.accepted_then_expired === 0),
    });
  }
  return rows;
}

function takeoverRows(trialRuns: FleetRunSummary[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  for (const r of trialRuns) {
    for (const { fault, adopted_ms: d } of takeover(r)) {
      const what =
        fault.kind === 'kill'
          ? `SIGKILL ${fault.host} of 3 under load: kill to each of its transactions' adoption`
          : `SIGSTOP ${fault.host} of 3 for ${PAUSE_MS / 1000} s under load: pause to each of its transactions' move`;
      rows.push({
        metric: `${what}, p50 / p99 / max (${d.n} adopted)`,
        target: `p99 <= ${seconds(TAKEOVER_P99_TARGET_MS)}; some adopted`,
        measured: d.n ? `${seconds(d.p50)} / ${seconds(d.p99)} / ${seconds(d.max)}` : 'none adopted',
        met: d.n > 0 && d.p99 <= TAKEOVER_P99_TARGET_MS,
      });
      if (fault.kind === 'pause')
        rows.push({
          metric: `${fault.host} woken (SIGCONT): live again under a new epoch`,
          target: `within ${seconds(REREGISTER_WAIT_MS)}`,
          measured:
            fault.back === null
              ? `not within ${seconds(REREGISTER_WAIT_MS)} (epoch ${fault.epochs[0]})`
              : `after ${seconds(fault.back - fault.resumed)} (epoch ${fault.epochs[0]} -> ${fault.epochs[1]})`,
          met: fault.back !== null,
        });
    }
    rows.push({
      metric: `${r.id}: lost; second tips (orphan + double); relay vs chain disagreements; live work under a lapsed session`,
      target: '0; 0; 0; 0',
      measured: `${r.lost}; ${r.chain.orphan_tips + r.chain.double_tips}; ${r.disagree}; ${r.stranded}`,
      met: r.lost + r.chain.orphan_tips + r.chain.double_tips + r.disagree + r.stranded === 0,
    });
  }
  return rows;
}

function useCells(r: FleetRunSummary): string[] {
  const u = r.store_use;
  const sidecars = u.sidecars_cpu_pct_of_one_core ?? [u.sidecar_cpu_pct_of_one_core];
  return [
    `${u.pg?.commits_per_s ?? 'n/a'}; ${pct(u.pg?.server_cpu_pct_of_one_core)}`,
    sidecars.map((v) => (v === null ? 'gone' : `${v}`)).join(' / ') + ' %',
  ];
}

function markdown(runs: FleetRunSummary[], trialRuns: FleetRunSummary[]): string[] {
  const md: string[] = [];
  if (runs.length) {
    md.push(
      '| load | hosts | accepted / submitted | landed | landed/s | time to land p50 / p90 | answer to the POST p50 / max | accepted-then-expired | engine 429s (addresses seen) | PostgreSQL commits/s; CPU (% of one core) | sidecar CPU per host (% of one core) |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of runs) {
      const t = r.total;
      md.push(
        `| ${r.description} | ${r.hosts} | ${t.accepted} / ${t.submitted} | ${t.landed} | ${t.throughput_per_s} | ${seconds(t.time_to_land_ms.p50)} / ${seconds(t.time_to_land_ms.p90)} | ${seconds(r.answer_ms.p50)} / ${seconds(r.answer_ms.max)} | ${t.accepted_then_expired} | ${t.engine_429s_at_engine ?? 'n/a'} (${Object.keys(r.engine_addresses).length}) | ${useCells(r).join(' | ')} |`,
      );
    }
    md.push(
      '',
      'Each host of those runs:',
      '',
      '| load | hosts | host (engine address) | accepted / submitted | landed | landed/s | time to land p50 / p90 | accepted-then-expired | engine requests; 429s |',
      '|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of runs)
      for (const h of r.per_host)
        md.push(
          `| ${r.description} | ${r.hosts} | ${h.host} (${h.address}) | ${h.accepted} / ${h.submitted} | ${h.landed} | ${h.throughput_per_s} | ${seconds(h.time_to_land_ms.p50)} / ${seconds(h.time_to_land_ms.p90)} | ${h.accepted_then_expired} | ${h.engine_requests_at_engine}; ${h.engine_429s_at_engine} |`,
        );
  }
  if (trialRuns.length) {
    md.push(
      '',
      'Takeover (3 hosts):',
      '',
      '| run | fault | adopted by others | after the fault p50 / p99 / max | accepted / submitted | landed | accepted-then-expired | resent to another host | PostgreSQL commits/s; CPU | sidecar CPU per host |',
      '|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of trialRuns)
      for (const { fault, adopted_ms: d } of takeover(r))
        md.push(
          `| ${r.description} | ${fault.kind} ${fault.host} | ${d.n} | ${seconds(d.p50)} / ${seconds(d.p99)} / ${seconds(d.max)} | ${r.total.accepted} / ${r.total.submitted} | ${r.total.landed} | ${r.total.accepted_then_expired} | ${r.resent} | ${useCells(r).join(' | ')} |`,
        );
  }
  return md;
}

function notes(quick: boolean, seed: number, warmupSlots: number): string[] {
  return [
    `Each run is a fresh stack: a simnet process (seed ${seed}, 400 ms slots, ${REGIONS} regions, the block engine's per-IP rate limit on: 1 request/s per address per region; the calm regime pinned ${warmupSlots} slots before the first arrival), a fresh database of the bench's PostgreSQL (as section 7: its defaults, \`synchronous_commit\`, \`fsync\` and \`full_page_writes\` on) and N sidecar processes with \`RELAY_FLEET=1\`, \`RELAY_HOST_ID=host-<n>\`, their own API port, data directory and lifecycle file, one shared tipper and policy (the bench policy: rate-limit and max-queue out of the way), \`BUNDLE_ENGINE_RPS=1\` (the real budget) and packing at its default (4). One host is the same fleet with N = 1, so "one host's" is a fleet host on PostgreSQL, not the journal sidecar of section 3.`,
    "Each host connects to the block engine from its own address, `RELAY_ENGINE_LOCAL_ADDRESS=127.0.0.<2+i>` (loopback: every byte stays on the machine), so the engine's per-IP limiter gives each its own budget, as separate machines would have. The simnet counts requests by the address it saw them from; a run in which a host's address never reached the engine (a sidecar that ignores the variable sends from 127.0.0.1, and the hosts then share one budget) is marked SHARED and its throughput row is not judged.",
    `The hosts decide for themselves: \`BYPASS_AGENT=1\` with the sidecar's default flat tip (${BYPASS_TIP_LAMPORTS.toLocaleString('en-US')} lamports a bundle), not an agent process beside each host. On two cores, three agents beside three sidecars, PostgreSQL, the simnet and the load generator would make the machine, not the engine budget, the limit being measured; the decision tier's own speed is section 1's, and the reliability suite's fleet trial runs the agent variant of the takeover.`,
    "Load: signed transfers from 32 seeded payers (as section 3), the n-th sent to host n mod N; an enqueue a host does not answer within 60 s (a safety net: a killed host's connections fail at once and a paused one answers at wake), or answers 503, goes to the next host byte for byte (dedupe by signature is fleet-wide); a 429 (relay refusing at capacity) is a refusal, as in section 3. Each accepted transaction is followed (SSE on host-1, which carries every host's events) to confirmed or a terminal state; landed, time to land, landed/s and accepted-then-expired are section 3's: from the chain (getSignatureStatuses), time to land from the POST to the slot it landed in, landed/s over the first arrival to the last landing. A host's figures are the transactions it accepted.",
    "The throughput target is issue #29's (landed/s with N hosts >= 0.9 × N × one host's), capped for the steady load by what is offered: 60 tx/s cannot land faster than 60/s, so there it is 0.9 × min(N × one host's, 60/s).",
    `Takeover: 3 hosts under the steady load; ${quick ? 'quick mode runs the kill and the pause in one run (host-2 killed, then host-3 paused)' : 'one run with host-2 SIGKILLed (process group) 10 s in, one with host-2 SIGSTOPped 10 s in'}. The clients stop sending to the faulted host at once (as the reliability suite's trial). A transaction's move is its \`tx_adopted\` event (the adopting commit's time, by the database's clock on this machine) from the faulted host by another host, from the kill or the SIGSTOP. The pause lasts ${PAUSE_MS / 1000} s (past the 5 s lease); after SIGCONT the host must report itself live under a new epoch (\`GET /status\` \`fleet\`). Lost: accepted but neither confirmed nor terminal at the end. Second tips: from the chain, a tip transaction of the fleet's tipper that landed with none of our transactions right before it in its block (orphan), or a transaction with two tips; relay vs chain: confirmed/finalized but not on chain or failed/expired but on chain; stranded: live rows whose owner's session has ended or lapsed, read once everything settled.`,
    "PostgreSQL commits/s (`pg_stat_database.xact_commit` of the run's database) and CPU (postmaster, live and exited backends, from /proc), and each sidecar's CPU, over the window from the first arrival until every accepted transaction settled (as section 7; a killed host's CPU is lost with its process: 'gone').",
  ];
}
