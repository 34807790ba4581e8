import { isRelayError } from '@solrelay/core';
import type * as Db from '@solrelay/sidecar/pg';
import type { DatabasePool, DatabaseUrl, MigrationStatus } from '@solrelay/sidecar/pg';
import { EXIT_CODES, ExitError, usageError } from '../../errors';
import { keyValueTable, paint, type CliContext, type CommandResult } from '../../output';

/**
 * `relay db migrate` / `relay db status`: relay's PostgreSQL schema (DESIGN §10) at `RELAY_DATABASE_URL` (or
 * `--database-url`). The password is never printed: every URL shown is redacted. The sidecar does not run on
 * PostgreSQL yet; these prepare the database it will use.
 */

export interface DbOptions {
  /** `--database-url`, which wins over `RELAY_DATABASE_URL`. */
  databaseUrl: string | undefined;
}

const URL_SHAPE = 'postgres://user:password@host:5432/database';

/** What a database failure exits with, and the hint that goes with it. */
const EXITS: Record<string, { code: (typeof EXIT_CODES)[keyof typeof EXIT_CODES]; hint: string }> = {
  RELAY_E_DB_INVALID_URL: { code: EXIT_CODES.usage, hint: `Give RELAY_DATABASE_URL as ${URL_SHAPE}.` },
  RELAY_E_DB_UNREACHABLE: {
    code: EXIT_CODES.unreachable,
    hint: 'Is PostgreSQL running, listening on that host and port, and reachable from here?',
  },
  RELAY_E_DB_AUTH_FAILED: { code: EXIT_CODES.failure, hint: 'Check the user and password in the URL.' },
  RELAY_E_DB_NOT_FOUND: {
    code: EXIT_CODES.failure,
    hint: 'Create it first (createdb, or CREATE DATABASE as a user allowed to), then run `relay db migrate`.',
  },
  RELAY_E_DB_SCHEMA_AHEAD: {
    code: EXIT_CODES.failure,
    hint: 'The database was migrated by a newer relay: upgrade this one.',
  },
  RELAY_E_DB_MIGRATION_FAILED: {
    code: EXIT_CODES.failure,
    hint: 'Nothing of that migration was kept; the ones before it stay applied.',
  },
};

function exitErrorOf(error: unknown): unknown {
  if (!isRelayError(error)) return error;
  const exit = EXITS[error.code] ?? { code: EXIT_CODES.failure, hint: undefined };
  return new ExitError(exit.code, `${error.code}: ${error.message}`, {
    ...(exit.hint ? { hint: exit.hint } : {}),
    cause: error,
  });
}

/** Connects (every failure coded, the password redacted), runs `work`, and closes the pool. */
async function withDatabase<T>(
  ctx: CliContext,
  options: DbOptions,
  work: (db: typeof Db, pool: DatabasePool, target: DatabaseUrl) => Promise<T>,
): Promise<T> {
  const raw = options.databaseUrl ?? ctx.env.RELAY_DATABASE_URL;
  if (raw === undefined || raw.trim() === '') {
    throw usageError(
      'no database: set RELAY_DATABASE_URL or pass --database-url',
      `e.g. RELAY_DATABASE_URL=${URL_SHAPE} relay db status`,
    );
  }
  // Loaded here only: the other commands never load the driver.
  const db = await import('@solrelay/sidecar/pg');
  let connected: { pool: DatabasePool; target: DatabaseUrl };
  try {
    // No client-side statement limit: migrate waits on another host's migration lock as long as that takes.
    connected = await db.connectDatabase(raw, { queryTimeoutMarginMs: null });
  } catch (error) {
    throw exitErrorOf(error);
  }
  try {
    return await work(db, connected.pool, connected.target);
  } catch (error) {
    throw exitErrorOf(error);
  } finally {
    await connected.pool.end();
  }
}

/** The JSON document of a schema's status. */
function statusData(target: DatabaseUrl, status: MigrationStatus) {
  return {
    database: target.redacted,
    state: status.state,
    current: status.current,
    latest: status.latest,
    pending: status.pending.map((p) => p.id),
    applied: status.applied.map(({ version, name, applied_at }) => ({ version, name, applied_at })),
    changed: status.changed,
  };
}

function stateLine(status: MigrationStatus, color: boolean): string {
  switch (status.state) {
    case 'up-to-date':
      return paint(color, 'green', 'up to date');
    case 'behind':
      return paint(color, 'yellow', `behind: ${status.pending.length} pending (run \`relay db migrate\`)`);
    case 'ahead':
      return paint(color, 'red', 'ahead: migrated by a newer relay (upgrade this one)');
  }
}

function statusRows(target: DatabaseUrl, status: MigrationStatus, color: boolean): Array<[string, string]> {
  const rows: Array<[string, string]> = [
    ['database', target.redacted],
    ['schema version', `${status.current} (this relay: ${status.latest})`],
    ['state', stateLine(status, color)],
  ];
  if (status.pending.length > 0) rows.push(['pending', status.pending.map((p) => p.id).join(', ')]);
  if (status.changed.length > 0) {
    rows.push(['changed since applied', paint(color, 'yellow', status.changed.join(', '))]);
  }
  return rows;
}

/**
 * `relay db status`: the schema version against the one this relay ships, and what is pending. Exit 0 when up to
 * date, 1 when behind (pending migrations) or ahead (a newer relay migrated it): a sidecar would refuse either.
 */
export async function dbStatus(ctx: CliContext, options: DbOptions): Promise<CommandResult> {
  return withDatabase(ctx, options, async (db, pool, target) => {
    const status = await db.migrationStatus(pool);
    return {
      data: statusData(target, status),
      text: keyValueTable(statusRows(target, status, ctx.color), ctx.color),
      exitCode: status.state === 'up-to-date' ? EXIT_CODES.ok : EXIT_CODES.failure,
    };
  });
}

/**
 * `relay db migrate`: applies every pending migration, each in one transaction, under an advisory lock (several
 * hosts running it at once take turns; the later ones find nothing to do). Refuses a database a newer relay migrated.
 */
export async function dbMigrate(ctx: CliContext, options: DbOptions): Promise<CommandResult> {
  return withDatabase(ctx, options, async (db, pool, target) => {
    const { applied, status } = await db.migrate(pool);
    const lines = [
      ...applied.map((m) => `${paint(ctx.color, 'green', 'applied')} ${m.id}`),
      applied.length === 0 ? 'nothing to apply' : `${applied.length} applied`,
      keyValueTable(statusRows(target, status, ctx.color), ctx.color),
    ];
    return {
      data: { ...statusData(target, status), applied_now: applied.map((m) => m.id) },
      text: lines.join('\n'),
    };
  });
}

/**
 * `relay up --hosts N`: the schema migrated before its hosts start, by `relay db migrate`'s code (the same coded
 * errors and exits; the URL redacted). Returns the redacted URL and the migrations it applied.
 */
export async function migrateBeforeStart(
  ctx: CliContext,
  databaseUrl: string,
): Promise<{ database: string; applied: string[] }> {
  return withDatabase(ctx, { databaseUrl }, async (db, pool, target) => {
    const { applied } = await db.migrate(pool);
    return { database: target.redacted, applied: applied.map((m) => m.id) };
  });
}

/**
 * `relay up --sim --hosts N` on a database `RELAY_DATABASE_URL` names: refused (exit 1) when it already holds a host
 * session or a transaction. Simulated hosts on a database some fleet uses would join that fleet: each side would
 * adopt the other's live work once a session ends or lapses (the takeover sweep) and track it against the wrong chain.
 */
export async function refuseDatabaseInUse(ctx: CliContext, databaseUrl: string): Promise<void> {
  await withDatabase(ctx, { databaseUrl }, async (_db, pool, target) => {
    const held: string[] = [];
    for (const table of ['host_sessions', 'transactions']) {
      // A table that is not there (a database never migrated) holds nothing.
      const { rows } = await pool.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [
        table,
      ]);
      if (!rows[0]?.found) continue;
      const any = await pool.query(`SELECT 1 FROM ${table} LIMIT 1`);
      if (any.rowCount) held.push(table);
    }
    if (held.length === 0) return;
    throw new ExitError(
      EXIT_CODES.failure,
      `relay up --sim: the database ${target.redacted} (RELAY_DATABASE_URL) already holds ${held.join(' and ')} rows: simulated hosts would join the fleet that uses it`,
      {
        details: [
          "they and that fleet's hosts would adopt each other's live transactions (a takeover sweep takes the work of sessions that ended or lapsed) and track them against the wrong chain",
        ],
        hint: 'Give --sim an empty database (a new one: createdb, then point RELAY_DATABASE_URL at it), or unset RELAY_DATABASE_URL to run on a throwaway local PostgreSQL.',
      },
    );
  });
}
