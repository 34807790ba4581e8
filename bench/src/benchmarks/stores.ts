/**
 * journal vs PostgreSQL: one host on each store in the same run, measured by the other benchmarks' own runs (reflex
 * decision latency, the API and fan-out levels, the burst of 100 with packing), taken alternately: each round runs
 * every measure on each store back to back (A, B), so the machine's load in that minute hits both alike, and the
 * table reports the median over rounds. PostgreSQL is the bench's own throwaway server (lib/store.ts), a fresh
 * database per stack; its commits (pg_stat_database.xact_commit) and its processes' CPU are read over each window.
 */
import type { Benchmark, BenchContext } from '../benchmark';
import { summarize } from '../lib/e2e-run';
import { runRelay } from '../lib/relay-submitter';
import type { SummaryRow } from '../lib/report';
import { round, type Distribution } from '../lib/stats';
import { openStore, storesFromEnv, type BenchStore, type StoreKind, type StoreUse } from '../lib/store';
import { runLevel } from './api-fanout';
import { runMode } from './decision-latency';

/** PostgreSQL's burst-of-100 landing times may be this much slower than the journal's (issue #28). */
const BURST_TOLERANCE = 0.1;
/** PostgreSQL's reflex decision p99 may be this many ms above the journal's (issue #28). */
const DECISION_P99_TOLERANCE_MS = 5;
const DECISION_RATE = 50;

/** One measure of one round on one store: its figures by name, and what the store and sidecar used meanwhile. */
interface Sample {
  measure: string;
  round: number;
  store: StoreKind;
  figures: Record<string, number>;
  use: StoreUse;
}

interface Measure {
  id: string;
  title: string;
  /** Figure names in table order, with how each reads. */
  figures: Array<{ name: string; label: string; unit: string; lowerIsBetter: boolean }>;
  run(ctx: BenchContext, store: BenchStore): Promise<{ figures: Record<string, number>; use: StoreUse }>;
}

function measures(quick: boolean): Measure[] {
  const decisions = Number(process.env.BENCH_STORE_DECISIONS ?? (quick ? 150 : 1_000));
  const seconds = quick ? 2 : 10;
  const fanout = (subscribers: number): Measure => ({
    id: `fanout-${subscribers}`,
    title: `API, ${subscribers.toLocaleString('en-US')} SSE subscribers`,
    figures: [
      { name: 'enqueues_per_s', label: 'enqueues/s', unit: '/s', lowerIsBetter: false },
      { name: 'enqueue_p99', label: 'enqueue p99', unit: ' ms', lowerIsBetter: true },
      { name: 'delivery_p99', label: 'SSE delivery p99', unit: ' ms', lowerIsBetter: true },
    ],
    async run(ctx, store) {
      const level = await runLevel(ctx, subscribers, seconds, false, store);
      return {
        figures: {
          enqueues_per_s: level.enqueues_per_s,
          enqueue_p99: round(level.enqueue_latency_ms.p99, 1),
          delivery_p99: level.delivery_latency_ms.p99,
          min_delivery_ratio: level.min_delivery_ratio,
        },
        use: level.store_use as StoreUse,
      };
    },
  });
  return [
    {
      id: 'decision',
      title: `reflex decision latency (${decisions} paced at ${DECISION_RATE}/s)`,
      figures: [
        { name: 'p50', label: 'decision p50', unit: ' ms', lowerIsBetter: true },
        { name: 'p99', label: 'decision p99', unit: ' ms', lowerIsBetter: true },
        { name: 'enqueue_answer_p50_ms', label: 'enqueue answer p50', unit: ' ms', lowerIsBetter: true },
        { name: 'enqueue_answer_p99_ms', label: 'enqueue answer p99', unit: ' ms', lowerIsBetter: true },
        { name: 'sent_rate_per_s', label: 'rate sent (target 50/s)', unit: '/s', lowerIsBetter: false },
      ],
      async run(ctx, store) {
        const r = await runMode(ctx, 'reflex', decisions, DECISION_RATE, store);
        return {
          figures: {
            p50: r.latency_ms.p50,
            p99: r.latency_ms.p99,
            max: r.latency_ms.max,
            undecided: r.undecided,
            sent_rate_per_s: r.sent_rate_per_s,
            enqueue_answer_p50_ms: r.enqueue_answer_ms.p50,
            enqueue_answer_p99_ms: r.enqueue_answer_ms.p99,
            agent_cpu_pct: r.cpu_pct_of_one_core.agent,
          },
          use: r.store_use,
        };
      },
    },
    fanout(100),
    fanout(1000),
    {
      id: 'burst-100',
      title: 'burst of 100, relay-packed, 8 regions, calm (seed 7)',
      figures: [
        { name: 'land_p50_ms', label: 'time to land p50', unit: ' ms', lowerIsBetter: true },
        { name: 'land_p90_ms', label: 'time to land p90', unit: ' ms', lowerIsBetter: true },
        { name: 'answer_p50_ms', label: 'answer to the POST p50', unit: ' ms', lowerIsBetter: true },
        { name: 'answer_max_ms', label: 'answer to the POST, slowest', unit: ' ms', lowerIsBetter: true },
        {
          name: 'decided_p50_ms',
          label: 'arrival to its first `submit_requested` p50',
          unit: ' ms',
          lowerIsBetter: true,
        },
        {
          name: 'decided_p95_ms',
          label: 'arrival to its first `submit_requested` p95',
          unit: ' ms',
          lowerIsBetter: true,
        },
        { name: 'engine_requests', label: 'engine requests (bundles sent)', unit: '', lowerIsBetter: true },
      ],
      async run(_ctx, store) {
        const run = await runRelay({
          seed: 7,
          regions: 8,
          regime: 'calm',
          kind: 'uncontended',
          arrivalsMs: Array.from({ length: 100 }, () => 0),
          warmupSlots: quick ? 20 : 30,
          label: 'relay-packed',
          env: { BUNDLE_PACK_MAX: '4' },
          store,
        });
        const x = summarize(run);
        const answer = run.extra?.answer_ms as Distribution;
        const decided = run.extra?.decided_ms as Distribution;
        return {
          figures: {
            answer_p50_ms: answer.p50,
            answer_max_ms: answer.max,
            decided_p50_ms: decided.p50,
            decided_p95_ms: decided.p95,
            land_p50_ms: x.time_to_land_ms.p50,
            land_p90_ms: x.time_to_land_ms.p90,
            land_p99_ms: x.time_to_land_ms.p99,
            landed: x.landed,
            accepted: x.accepted,
            accepted_then_expired: x.accepted_then_expired,
            engine_requests: x.engine_requests,
          },
          use: run.extra?.store_use as StoreUse,
        };
      },
    },
  ];
}

function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

const STORE_LABEL: Record<StoreKind, string> = { journal: 'journal', postgres: 'PostgreSQL' };

export const storeCompare: Benchmark = {
  name: 'stores',
  title: '7. journal vs PostgreSQL (one host each, alternating rounds)',
  async run(ctx) {
    const kinds = storesFromEnv();
    const rounds = Number(process.env.BENCH_ROUNDS ?? (ctx.quick ? 1 : 3));
    if (!Number.isInteger(rounds) || rounds < 1)
      throw new Error(`--rounds: ${rounds} is not a positive integer`);
    const only = process.env.BENCH_STORE_MEASURES?.split(',').filter(Boolean);
    const list = measures(ctx.quick).filter((m) => !only || only.includes(m.id));
    const stores = new Map<StoreKind, BenchStore>();
    const samples: Sample[] = [];
    try {
      for (const kind of kinds) {
        ctx.progress(
          `opening the ${kind} store${kind === 'postgres' ? ' (starting the bench PostgreSQL)' : ''}`,
        );
        stores.set(kind, await openStore(kind));
      }
      for (let r = 1; r <= rounds; r++) {
        for (const m of list) {
          for (const kind of kinds) {
            const got = await m.run(ctx, stores.get(kind) as BenchStore);
            samples.push({ measure: m.id, round: r, store: kind, ...got });
            const pgPart = got.use.pg
              ? `; postgres ${got.use.pg.commits_per_s} commits/s, cpu ${got.use.pg.server_cpu_pct_of_one_core}%`
              : '';
            ctx.progress(
              `round ${r} ${m.id} ${kind}: ${Object.entries(got.figures)
                .map(([k, v]) => `${k} ${v}`)
                .join(', ')}; sidecar cpu ${got.use.sidecar_cpu_pct_of_one_core}%${pgPart}`,
            );
          }
        }
      }
    } finally {
      for (const store of stores.values()) await store.close().catch(() => undefined);
    }

    const of = (kind: StoreKind, id: string) => samples.filter((s) => s.store === kind && s.measure === id);
    const med = (kind: StoreKind, id: string, figure: string) =>
      median(of(kind, id).map((s) => s.figures[figure] as number));
    const medUse = (kind: StoreKind, id: string, pick: (u: StoreUse) => number | undefined) =>
      median(
        of(kind, id)
          .map((s) => pick(s.use))
          .filter((v): v is number => typeof v === 'number'),
      );

    const rows: SummaryRow[] = [];
    const both = kinds.includes('journal') && kinds.includes('postgres');
    if (both && list.some((m) => m.id === 'burst-100')) {
      for (const figure of ['land_p50_ms', 'land_p90_ms']) {
        const j = med('journal', 'burst-100', figure);
        const p = med('postgres', 'burst-100', figure);
        rows.push({
          metric: `PostgreSQL burst of 100, time to land ${figure === 'land_p50_ms' ? 'p50' : 'p90'} (median of ${rounds})`,
          target: `<= journal + ${BURST_TOLERANCE * 100} % (${round((j * (1 + BURST_TOLERANCE)) / 1000, 2)} s)`,
          measured: `${round(p / 1000, 2)} s (journal ${round(j / 1000, 2)} s; ${signedPct(p, j)})`,
          met: p <= j * (1 + BURST_TOLERANCE),
        });
      }
    }
    if (both && list.some((m) => m.id === 'decision')) {
      const j = med('journal', 'decision', 'p99');
      const p = med('postgres', 'decision', 'p99');
      rows.push({
        metric: `PostgreSQL reflex decision latency p99 (median of ${rounds})`,
        target: `<= journal + ${DECISION_P99_TOLERANCE_MS} ms (${j + DECISION_P99_TOLERANCE_MS} ms)`,
        measured: `${p} ms (journal ${j} ms)`,
        met: p <= j + DECISION_P99_TOLERANCE_MS,
      });
    }

    const header = `| measure | ${kinds.map((k) => `${STORE_LABEL[k]} (median; each round)`).join(' | ')} |`;
    const markdown = [header, `|---|${kinds.map(() => '---').join('|')}|`];
    for (const m of list) {
      for (const f of m.figures) {
        const cells = kinds.map((k) => {
          const values = of(k, m.id).map((s) => s.figures[f.name] as number);
          return `${fmt(median(values), f.unit)} (${values.map((v) => fmt(v, '')).join(', ')})`;
        });
        markdown.push(`| ${m.title}: ${f.label} | ${cells.join(' | ')} |`);
      }
      const cpu = kinds.map((k) => {
        const sidecar = medUse(k, m.id, (u) => u.sidecar_cpu_pct_of_one_core);
        const pgCpu = medUse(k, m.id, (u) => u.pg?.server_cpu_pct_of_one_core);
        const commits = medUse(k, m.id, (u) => u.pg?.commits_per_s);
        return k === 'postgres'
          ? `sidecar ${fmt(sidecar, ' %')}, postgres ${fmt(pgCpu, ' %')}; ${fmt(commits, '')} commits/s`
          : `sidecar ${fmt(sidecar, ' %')}`;
      });
      markdown.push(`| ${m.title}: CPU (% of one core); PostgreSQL commits/s | ${cpu.join(' | ')} |`);
    }

    const notes = [
      `${rounds} round(s); in each, every measure ran once per store back to back (${kinds.join(', then ')}), each on a fresh stack (simnet, sidecar, agent where the measure has one); the figure is the median over rounds, the values in brackets each round's.`,
      "PostgreSQL 15: the bench's own server (testkit's harness: initdb into a temp directory, `pg_ctl -w`, on this machine's disk), started once for the run, PostgreSQL's defaults plus relay's expectations: `synchronous_commit=on`, `fsync=on`, `full_page_writes=on` (checked at start); a fresh database per stack, copied from a template `relay db migrate` prepared. The sidecar's pool is its default (10 connections).",
      "Commits/s: `pg_stat_database.xact_commit` of that stack's database over the measured window (PostgreSQL flushes these counters about once a second, so each end of a window may lag by up to ~1 s); it counts every transaction, and each read the store makes outside a write is one (in a diagnosis run about a quarter of them were writes). PostgreSQL CPU: utime + stime of the postmaster, its live children and its reaped children (backends that exited) from /proc. Sidecar CPU: the sidecar process alone, same window.",
      "Decision latency, fan-out and the burst are the runs of sections 1, 2 and 3 with the store as the only difference (reflex only; fan-out at 100 and 1,000 subscribers, 64 connections in a closed loop; the burst is `submission-budget`'s burst-100 cell for relay-packed).",
      'The decision run paces its POSTs but awaits each answer, so a store with slower enqueues is sent fewer transactions a second (the "rate sent" row) and is measured at a lighter load: the decision figures favour the slower store, if anything.',
    ];
    return {
      rows,
      notes,
      markdown,
      details: { stores: kinds, rounds, measures: list.map((m) => m.id), samples },
    };
  },
};

function fmt(v: number, unit: string): string {
  if (!Number.isFinite(v)) return 'n/a';
  return `${Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : round(v, 1)}${unit}`;
}

function signedPct(value: number, base: number): string {
  if (!base) return 'n/a';
  const d = ((value - base) / base) * 100;
  return `${d >= 0 ? '+' : ''}${round(d, 1)} %`;
}
