import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRelayError, type RelayError } from '@solrelay/core';
import { usePostgres, waitUntil } from '@solrelay/testkit';
import pg from 'pg';
import {
  MIGRATION_LOCK_KEY,
  assertSchema,
  loadMigrations,
  migrate,
  migrationStatus,
  migrationsDir,
} from '../../src/pg';

// Every test runs against a real PostgreSQL 15 (testkit), on an empty database of its own unless it says otherwise.
const server = usePostgres();
const shipped = loadMigrations();
const latest = shipped.length;
const pools: pg.Pool[] = [];

function poolOn(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  pools.push(pool);
  return pool;
}

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end()));
});

async function thrown(promise: Promise<unknown>): Promise<RelayError> {
  try {
    await promise;
  } catch (error) {
    if (isRelayError(error)) return error;
    throw error;
  }
  throw new Error('expected a RelayError');
}

const TABLES = [
  'admissions',
  'attempts',
  'events',
  'eviction_counts',
  'host_sessions',
  'lifecycle_entries',
  'schema_migrations',
  'spend_reservations',
  'transactions',
  'webhook_outbox',
];

async function tables(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_name NOT LIKE 'events\\_%' ORDER BY table_name`,
  );
  return rows.map((r) => r.table_name);
}

test('the package ships its migrations as numbered SQL files in migrations/ (the CLI tests read them from dist/)', () => {
  expect(migrationsDir()).toMatch(/packages\/sidecar\/migrations$/);
  expect(shipped[0]).toMatchObject({ version: 1, name: 'initial', id: '001_initial' });
  expect(shipped.map((m) => m.version)).toEqual(shipped.map((_, i) => i + 1));
});

test('status before and after: an empty database is behind and refused; migrate applies it; then it is accepted', async () => {
  const pool = poolOn(await server.fresh());
  const before = await migrationStatus(pool, shipped);
  expect(before).toMatchObject({ current: 0, latest, state: 'behind', applied: [] });
  expect(before.pending.map((p) => p.id)).toEqual(shipped.map((m) => m.id));

  const behind = await thrown(assertSchema(pool, shipped));
  expect(behind.code).toBe('RELAY_E_DB_SCHEMA_BEHIND');
  expect(behind.details).toMatchObject({ current: 0, latest, pending: shipped.map((m) => m.id) });
  expect(behind.message).toContain(`version 0`);
  expect(behind.message).toContain(`version ${latest}`);

  const result = await migrate(pool, shipped);
  expect(result.applied.map((a) => a.id)).toEqual(shipped.map((m) => m.id));
  expect(result.status).toMatchObject({
    current: latest,
    latest,
    pending: [],
    changed: [],
    state: 'up-to-date',
  });
  expect(await tables(pool)).toEqual(TABLES);
  await expect(assertSchema(pool, shipped)).resolves.toMatchObject({ state: 'up-to-date' });
  const { rows } = await pool.query('SELECT version, name, checksum FROM schema_migrations ORDER BY version');
  expect(rows).toEqual(shipped.map((m) => ({ version: m.version, name: m.name, checksum: m.checksum })));
});

test('migrate is idempotent: a second run applies nothing and records nothing twice', async () => {
  const pool = poolOn(await server.fresh());
  await migrate(pool, shipped);
  const again = await migrate(pool, shipped);
  expect(again.applied).toEqual([]);
  expect(again.status.state).toBe('up-to-date');
  const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations');
  expect(Number(rows[0]?.n)).toBe(latest);
});

test('two hosts migrating at once: the second waits for the lock (no timeout, no failure), the schema is applied once', async () => {
  const url = await server.fresh();
  const holder = poolOn(url);
  const watcher = poolOn(url);
  // Hold the migration lock first, so both runs provably contend for it.
  const held = await holder.connect();
  await held.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
  // Short lock and statement timeouts on the migrating sessions: migrate must lift them while it waits.
  const a = new pg.Pool({ connectionString: url, max: 1, lock_timeout: 100, statement_timeout: 100 });
  const b = new pg.Pool({ connectionString: url, max: 1, lock_timeout: 100, statement_timeout: 100 });
  pools.push(a, b);
  const runs = [migrate(a, shipped), migrate(b, shipped)];
  try {
    await waitUntil(
      async () => {
        const { rows } = await watcher.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
        );
        return Number(rows[0]?.n) === 2;
      },
      20_000,
      'both migrations waiting on the advisory lock',
    );
  } finally {
    await held.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()]);
    held.release();
  }
  const [first, second] = await Promise.all(runs);
  const appliedBy = [first!.applied.length, second!.applied.length].sort();
  expect(appliedBy).toEqual([0, latest]);
  expect(first!.status.state).toBe('up-to-date');
  expect(second!.status.state).toBe('up-to-date');
  const { rows } = await watcher.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations');
  expect(Number(rows[0]?.n)).toBe(latest);
});

test('a database newer than this relay is refused by assertSchema and by migrate, naming both versions', async () => {
  const pool = poolOn(await server.fresh());
  await migrate(pool, shipped);
  await pool.query(
    `INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, 'from_the_future', 'x')`,
    [latest + 1],
  );
  expect((await migrationStatus(pool, shipped)).state).toBe('ahead');
  for (const error of [await thrown(assertSchema(pool, shipped)), await thrown(migrate(pool, shipped))]) {
    expect(error.code).toBe('RELAY_E_DB_SCHEMA_AHEAD');
    expect(error.details).toEqual({ current: latest + 1, latest });
    expect(error.message).toContain(`version ${latest + 1}`);
    expect(error.message).toContain(`the ${latest} this relay knows`);
  }
});

test('a migration that fails is rolled back whole and named; the ones before it stay applied', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-migrations-'));
  try {
    for (const m of shipped) writeFileSync(join(dir, `${m.id}.sql`), m.sql);
    const broken = String(latest + 1).padStart(3, '0');
    writeFileSync(
      join(dir, `${broken}_broken.sql`),
      'CREATE TABLE half_done (id int);\nALTER TABLE no_such_table ADD COLUMN x int;\n',
    );
    const withBroken = loadMigrations(dir);
    const pool = poolOn(await server.fresh());
    const error = await thrown(migrate(pool, withBroken));
    expect(error.code).toBe('RELAY_E_DB_MIGRATION_FAILED');
    expect(error.details).toMatchObject({ version: latest + 1, name: 'broken' });
    expect(error.message).toContain('no_such_table');
    const status = await migrationStatus(pool, withBroken);
    expect(status).toMatchObject({ current: latest, state: 'behind' });
    const { rows } = await pool.query(`SELECT to_regclass('half_done') AS t`);
    expect(rows[0]).toEqual({ t: null });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an applied migration whose file changed since is reported', async () => {
  const pool = poolOn(await server.fresh());
  await migrate(pool, shipped);
  const edited = shipped.map((m, i) => (i === 0 ? { ...m, checksum: 'edited' } : m));
  expect((await migrationStatus(pool, edited)).changed).toEqual([1]);
});

test('a migrations folder with a gap or a misnamed file is refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-migrations-'));
  try {
    writeFileSync(join(dir, '001_a.sql'), 'SELECT 1;');
    writeFileSync(join(dir, '003_c.sql'), 'SELECT 1;');
    expect(() => loadMigrations(dir)).toThrow(/without gaps/);
    rmSync(join(dir, '003_c.sql'));
    writeFileSync(join(dir, '2-b.sql'), 'SELECT 1;');
    expect(() => loadMigrations(dir)).toThrow(/NNN_name\.sql/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
