/**
 * The store dimension of a benchmark: the local journal (the default) or PostgreSQL (`RELAY_DATABASE_URL`). For
 * PostgreSQL the bench starts its own throwaway server (testkit's harness: initdb into a temp directory, `pg_ctl -w`)
 * with PostgreSQL's defaults plus what relay expects (packages/sidecar/README.md, "Running on PostgreSQL"):
 * `synchronous_commit`, `fsync` and `full_page_writes` on (the test harness turns the last two off; the bench
 * does not). Each stack gets a fresh database copied from a template `relay db migrate` prepared, so one stack's rows
 * and commit counts never mix with another's.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { findPostgresBinaries, startPostgres, type PgServer } from '@solrelay/testkit';
import pg from 'pg';
import { CLI_BIN, REPO_ROOT, cpuTimeMs } from './processes';
import { round } from './stats';

export type StoreKind = 'journal' | 'postgres';
export const STORE_KINDS: readonly StoreKind[] = ['journal', 'postgres'];

/** PostgreSQL's settings for the bench: its defaults, with relay's expectations spelled out (never lowered). */
export const BENCH_PG_SETTINGS: Readonly<Record<string, string>> = {
  synchronous_commit: 'on',
  fsync: 'on',
  full_page_writes: 'on',
};

const TEMPLATE = 'relay_bench_template';

/** `BENCH_STORES` (from `--stores=`), checked; default both, journal first. */
export function storesFromEnv(env: NodeJS.ProcessEnv = process.env): StoreKind[] {
  const raw = env.BENCH_STORES?.split(',').filter(Boolean) ?? [...STORE_KINDS];
  const unknown = raw.filter((s) => !STORE_KINDS.includes(s as StoreKind));
  if (unknown.length)
    throw new Error(`--stores: unknown ${unknown.join(', ')} (known: ${STORE_KINDS.join(', ')})`);
  return [...new Set(raw)] as StoreKind[];
}

/** Counters of one stack's store and sidecar at one moment (see {@link StoreProbe.since}). */
export interface StoreSample {
  at: number;
  sidecarCpuMs: number;
  /** Each sidecar's CPU ms (one on a single host; a fleet's in host order), null for one no longer running. */
  sidecarsCpuMs: Array<number | null>;
  /** null on the journal. */
  pg: { xactCommit: number; xactRollback: number; cpuMs: number; statements?: StatementUse[] } | null;
}

/** What the store and the sidecar used over a window. */
export interface StoreUse {
  store: StoreKind;
  seconds: number;
  sidecar_cpu_s: number;
  sidecar_cpu_pct_of_one_core: number;
  /**
   * A fleet: each host's share (host order), null for a host not running at both ends of the window (the sidecar
   * figures above then count only the hosts that were).
   */
  sidecars_cpu_pct_of_one_core?: Array<number | null>;
  /** PostgreSQL only (null on the journal). */
  pg: {
    commits: number;
    commits_per_s: number;
    rollbacks: number;
    server_cpu_s: number;
    server_cpu_pct_of_one_core: number;
    /** With `BENCH_PG_STATEMENTS=1`: the statements of the window by total time (pg_stat_statements). */
    statements?: StatementUse[];
  } | null;
}

/** One statement's share of a window (pg_stat_statements, reset at the window's start). */
export interface StatementUse {
  calls: number;
  /** Execution time. */
  total_ms: number;
  mean_ms: number;
  /** Planning time (parse and analysis are not counted by pg_stat_statements). */
  plan_ms: number;
  query: string;
}

/** Samples a stack's counters; `since` turns two samples into a {@link StoreUse}. */
export interface StoreProbe {
  kind: StoreKind;
  sample(): Promise<StoreSample>;
  since(start: StoreSample): Promise<StoreUse>;
}

/** Where a benchmark's stacks keep their records: the journal, or a database of the bench's own server. */
export interface BenchStore {
  kind: StoreKind;
  /**
   * The sidecar environment for one new stack (a fresh database on PostgreSQL; a fleet's hosts share it) and a probe
   * for that stack, given its sidecar's pid (a fleet: every host's).
   */
  attach(): Promise<{
    env: Record<string, string>;
    probe: (sidecarPids: () => readonly number[]) => StoreProbe;
  }>;
  close(): Promise<void>;
}

export function journalStore(): BenchStore {
  return {
    kind: 'journal',
    attach: async () => ({ env: {}, probe: (pid) => probe('journal', pid, null) }),
    close: async () => undefined,
  };
}

/**
 * The bench's PostgreSQL: checks the binaries first (a clear error naming Debian's `postgresql` package), starts the
 * server, migrates a template with the real CLI (`relay db migrate`). Stopped by `close` (and on exit by testkit).
 */
export async function postgresStore(): Promise<BenchStore & { server: PgServer }> {
  try {
    findPostgresBinaries();
  } catch (error) {
    throw new Error(
      `the postgres store needs a PostgreSQL server on this machine (bench starts its own): ${(error as Error).message}`,
      { cause: error },
    );
  }
  // BENCH_PG_STATEMENTS=1: where the time goes, per statement (a diagnosis run; it costs the server a little).
  const statements = process.env.BENCH_PG_STATEMENTS === '1';
  const server = await startPostgres({
    settings: {
      ...BENCH_PG_SETTINGS,
      ...(statements
        ? {
            shared_preload_libraries: 'pg_stat_statements',
            'pg_stat_statements.track': 'all',
            'pg_stat_statements.track_planning': 'on',
          }
        : {}),
    },
  });
  const stats = new pg.Client({ connectionString: server.url() });
  try {
    await server.createTemplate(TEMPLATE, (url) => migrateWithCli(url));
    await stats.connect();
    if (statements) await stats.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const { rows } = await stats.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name = ANY($1)`,
      [Object.keys(BENCH_PG_SETTINGS)],
    );
    for (const row of rows) {
      if (row.setting !== BENCH_PG_SETTINGS[row.name])
        throw new Error(
          `the bench's PostgreSQL has ${row.name}=${row.setting}, not ${BENCH_PG_SETTINGS[row.name]}`,
        );
    }
  } catch (error) {
    await stats.end().catch(() => undefined);
    await server.stop();
    throw error;
  }
  const postmasterPid = Number(readFileSync(join(server.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    kind: 'postgres',
    server,
    async attach() {
      const url = await server.createDatabase(TEMPLATE);
      const name = decodeURIComponent(new URL(url).pathname.slice(1));
      const pgSample = async (end: boolean) => {
        if (statements && !end) await stats.query('SELECT pg_stat_statements_reset()');
        const top = statements && end ? await topStatements(stats, name) : undefined;
        const { rows } = await stats.query<{ xact_commit: string; xact_rollback: string }>(
          'SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1',
          [name],
        );
        return {
          xactCommit: Number(rows[0]?.xact_commit ?? 0),
          xactRollback: Number(rows[0]?.xact_rollback ?? 0),
          cpuMs: serverCpuMs(postmasterPid),
          ...(top ? { statements: top } : {}),
        };
      };
      return { env: { RELAY_DATABASE_URL: url }, probe: (pid) => probe('postgres', pid, pgSample) };
    },
    async close() {
      await stats.end().catch(() => undefined);
      await server.stop();
    },
  };
}

export function openStore(kind: StoreKind): Promise<BenchStore> {
  return kind === 'postgres' ? postgresStore() : Promise.resolve(journalStore());
}

function probe(
  kind: StoreKind,
  sidecarPids: () => readonly number[],
  pgSample: ((end: boolean) => Promise<NonNullable<StoreSample['pg']>>) | null,
): StoreProbe {
  const sample = async (end = false): Promise<StoreSample> => {
    // A fleet's host may have been killed meanwhile (its /proc entry gone once reaped).
    const each = sidecarPids().map((pid) => {
      try {
        return cpuTimeMs(pid);
      } catch {
        return null;
      }
    });
    return {
      at: performance.now(),
      sidecarCpuMs: each.reduce<number>((sum, ms) => sum + (ms ?? 0), 0),
      sidecarsCpuMs: each,
      pg: pgSample ? await pgSample(end) : null,
    };
  };
  return {
    kind,
    sample: () => sample(false),
    async since(start) {
      const end = await sample(true);
      const seconds = (end.at - start.at) / 1000;
      const pct = (ms: number) => round((ms / (seconds * 1000)) * 100, 1);
      const each = end.sidecarsCpuMs.map((ms, i) => {
        const from = start.sidecarsCpuMs[i];
        return ms === null || from === null || from === undefined ? null : ms - from;
      });
      const sidecarMs = each.reduce<number>((sum, ms) => sum + (ms ?? 0), 0);
      let pgUse: StoreUse['pg'] = null;
      if (start.pg && end.pg) {
        const commits = end.pg.xactCommit - start.pg.xactCommit;
        pgUse = {
          commits,
          commits_per_s: Math.round(commits / seconds),
          rollbacks: end.pg.xactRollback - start.pg.xactRollback,
          server_cpu_s: round((end.pg.cpuMs - start.pg.cpuMs) / 1000, 2),
          server_cpu_pct_of_one_core: pct(end.pg.cpuMs - start.pg.cpuMs),
          ...(end.pg.statements ? { statements: end.pg.statements } : {}),
        };
      }
      return {
        store: kind,
        seconds: round(seconds, 2),
        sidecar_cpu_s: round(sidecarMs / 1000, 2),
        sidecar_cpu_pct_of_one_core: pct(sidecarMs),
        ...(each.length > 1
          ? { sidecars_cpu_pct_of_one_core: each.map((ms) => (ms === null ? null : pct(ms))) }
          : {}),
        pg: pgUse,
      };
    },
  };
}

/** The statements run in database `name` since the last reset, by total execution time. */
async function topStatements(stats: pg.Client, name: string): Promise<StatementUse[]> {
  const { rows } = await stats.query<{
    calls: string;
    total: number;
    mean: number;
    plan: number;
    query: string;
  }>(
    `SELECT s.calls, s.total_exec_time AS total, s.mean_exec_time AS mean, s.total_plan_time AS plan, s.query
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = $1 ORDER BY s.calls DESC LIMIT 25`,
    [name],
  );
  return rows.map((r) => ({
    calls: Number(r.calls),
    total_ms: round(r.total, 1),
    mean_ms: round(r.mean, 3),
    plan_ms: round(r.plan, 1),
    query: r.query.replace(/\s+/g, ' ').slice(0, 160),
  }));
}

/** Clock ticks per second of /proc/<pid>/stat times. */
const USER_HZ = 100;

/**
 * CPU ms of the whole PostgreSQL server: the postmaster's own time, the time of its children that have exited (its
 * cutime + cstime: backends whose connection closed), and the time of every live child (backends, checkpointer,
 * WAL writer, background writer, autovacuum, ...). Continuous across a backend's exit, so deltas are exact.
 */
function serverCpuMs(postmasterPid: number): number {
  const fields = (pid: number | string) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  };
  const own = fields(postmasterPid);
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === postmasterPid) continue;
    try {
      const f = fields(entry);
      if (Number(f[1]) === postmasterPid) ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // the process ended while we looked (its time is now in the postmaster's cutime)
    }
  }
  return (ticks * 1000) / USER_HZ;
}

/** `relay db migrate` (the real CLI) against `url`. */
function migrateWithCli(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CLI_BIN, 'db', 'migrate'],
      { cwd: REPO_ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME, RELAY_DATABASE_URL: url } },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`relay db migrate failed: ${error.message}\n${stdout}${stderr}`));
        else resolve();
      },
    );
  });
}
