import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { RelayError } from '@solrelay/core';
import type pg from 'pg';

/**
 * relay's schema migrations: plain SQL files `NNN_name.sql` shipped in the package's `migrations/` folder, applied in
 * order, each in one transaction, under a session advisory lock so several hosts starting together take turns (the
 * later ones wait, then find nothing to do). `schema_migrations` records each applied version.
 */

export interface Migration {
  version: number;
  name: string;
  /** `NNN_name`, as the file is called without `.sql`. */
  id: string;
  sql: string;
  /** sha256 of the file, recorded when applied. */
  checksum: string;
}

export interface AppliedMigration {
  version: number;
  name: string;
  checksum: string;
  applied_at: string;
}

export interface MigrationStatus {
  /** Highest applied version; 0 for an empty database. */
  current: number;
  /** Highest version this relay ships. */
  latest: number;
  applied: AppliedMigration[];
  /** Shipped and not applied, oldest first. */
  pending: Array<{ version: number; name: string; id: string }>;
  /** Applied versions whose file now differs from what was applied (edited after release: a mistake). */
  changed: number[];
  /** `up-to-date`, `behind` (pending migrations), or `ahead` (the database has versions this relay does not know). */
  state: 'up-to-date' | 'behind' | 'ahead';
}

/**
 * The advisory lock key migrations run under (any fixed bigint; this one spells "relaymig"). Session-level: held
 * across the per-migration transactions, released at the end, or by the server if the session dies.
 */
export const MIGRATION_LOCK_KEY = 0x72656c61796d6967n;

const FILE_PATTERN = /^(\d{3,})_([a-z0-9_]+)\.sql$/;

/**
 * The package's `migrations/` folder: found from this file's location, built (`dist/`) or not (`src/pg/`), by walking
 * up to the package root (the first folder with a package.json).
 */
export function migrationsDir(start: string = __dirname): string {
  let dir = start;
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'migrations')))
      return join(dir, 'migrations');
    dir = dirname(dir);
  }
  throw new Error(`relay's migrations/ folder not found above ${start} (is the package installed whole?)`);
}

/** The migrations in `dir`, in version order. Throws on a misnamed file, a version given twice, or a gap. */
export function loadMigrations(dir: string = migrationsDir()): Migration[] {
  const migrations = readdirSync(dir)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => {
      const match = FILE_PATTERN.exec(file);
      if (!match) throw new Error(`migration file ${join(dir, file)} is not named NNN_name.sql`);
      const sql = readFileSync(join(dir, file), 'utf8');
      return {
        version: Number(match[1]),
        name: match[2] as string,
        id: file.slice(0, -'.sql'.length),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    })
    .sort((a, b) => a.version - b.version);
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) {
      throw new Error(
        `migrations in ${dir} must be numbered 1, 2, 3, ... without gaps; found ${m.id} at position ${i + 1}`,
      );
    }
  });
  return migrations;
}

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer     PRIMARY KEY,
  name       text        NOT NULL,
  checksum   text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)`;

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

async function appliedMigrations(db: Queryable): Promise<AppliedMigration[]> {
  const exists = await db.query<{ exists: boolean }>(
    `SELECT to_regclass('schema_migrations') IS NOT NULL AS exists`,
  );
  if (!exists.rows[0]?.exists) return [];
  const { rows } = await db.query<{ version: number; name: string; checksum: string; applied_at: Date }>(
    'SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version',
  );
  return rows.map((r) => ({ ...r, applied_at: r.applied_at.toISOString() }));
}

/** Where the database stands against the migrations this relay ships. Reads only; takes no lock. */
export async function migrationStatus(
  db: Queryable,
  migrations: Migration[] = loadMigrations(),
): Promise<MigrationStatus> {
  const applied = await appliedMigrations(db);
  const done = new Map(applied.map((a) => [a.version, a]));
  const current = applied.reduce((max, a) => Math.max(max, a.version), 0);
  const latest = migrations.reduce((max, m) => Math.max(max, m.version), 0);
  const pending = migrations
    .filter((m) => !done.has(m.version))
    .map(({ version, name, id }) => ({ version, name, id }));
  const changed = migrations.filter(
    (m) => done.has(m.version) && done.get(m.version)?.checksum !== m.checksum,
  );
  return {
    current,
    latest,
    applied,
    pending,
    changed: changed.map((m) => m.version),
    state: current > latest ? 'ahead' : pending.length > 0 ? 'behind' : 'up-to-date',
  };
}

/**
 * Refuse a database this relay cannot run on: `RELAY_E_DB_SCHEMA_BEHIND` when migrations are pending (run
 * `relay db migrate`), `RELAY_E_DB_SCHEMA_AHEAD` when it holds a version newer than this relay ships. Both name the
 * database's version and this relay's.
 */
export async function assertSchema(
  db: Queryable,
  migrations: Migration[] = loadMigrations(),
): Promise<MigrationStatus> {
  const status = await migrationStatus(db, migrations);
  if (status.state === 'ahead') {
    throw new RelayError('RELAY_E_DB_SCHEMA_AHEAD', { current: status.current, latest: status.latest });
  }
  if (status.state === 'behind') {
    throw new RelayError('RELAY_E_DB_SCHEMA_BEHIND', {
      current: status.current,
      latest: status.latest,
      pending: status.pending.map((p) => p.id),
    });
  }
  return status;
}

export interface MigrateResult {
  /** What this call applied (empty when another host had already done it, or nothing was pending). */
  applied: Array<{ version: number; name: string; id: string }>;
  status: MigrationStatus;
}

/**
 * Apply every pending migration, each in its own transaction, holding the advisory lock throughout. A second caller
 * waits for the lock (no lock or statement timeout applies to this session; give it a pool without a client-side
 * limit, `queryTimeoutMarginMs: null`, as `relay db migrate` does), then applies only what is still
 * pending. Refuses a database ahead of this relay (`RELAY_E_DB_SCHEMA_AHEAD`) and applies nothing; a migration that
 * fails is rolled back whole (`RELAY_E_DB_MIGRATION_FAILED`), leaving the ones before it applied.
 */
export async function migrate(
  pool: pg.Pool,
  migrations: Migration[] = loadMigrations(),
): Promise<MigrateResult> {
  const client = await pool.connect();
  try {
    // Waiting for another host's migrations is expected: no timeout on this session's lock wait or statements.
    await client.query(`SET lock_timeout = 0; SET statement_timeout = 0`);
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    try {
      await client.query(CREATE_TABLE);
      const before = await migrationStatus(client, migrations);
      if (before.state === 'ahead') {
        throw new RelayError('RELAY_E_DB_SCHEMA_AHEAD', { current: before.current, latest: before.latest });
      }
      const applied: MigrateResult['applied'] = [];
      for (const pending of before.pending) {
        const migration = migrations.find((m) => m.version === pending.version) as Migration;
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
            migration.version,
            migration.name,
            migration.checksum,
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => {});
          throw new RelayError(
            'RELAY_E_DB_MIGRATION_FAILED',
            {
              version: migration.version,
              name: migration.name,
              reason: String((error as Error).message ?? error),
            },
            { cause: error },
          );
        }
        applied.push(pending);
      }
      return { applied, status: await migrationStatus(client, migrations) };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()]).catch(() => {});
    }
  } finally {
    // This session's timeouts were turned off, so it never goes back to the pool: closing it also frees whatever a
    // failed rollback or unlock left held.
    client.release(true);
  }
}
