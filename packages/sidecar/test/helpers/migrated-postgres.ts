import { usePostgres } from '@solrelay/testkit';
import pg from 'pg';
import { loadMigrations, migrate } from '../../src/pg';
import { PgTxStore } from '../../src/store/pg-store';

/**
 * A PostgreSQL server for this test file whose `fresh()` databases are copies of a template with relay's migrations
 * applied (prepared once per run, shared by every file that asks for it).
 */
export function useMigratedPostgres(): ReturnType<typeof usePostgres> {
  return usePostgres(async (url) => {
    const pool = new pg.Pool({ connectionString: url });
    try {
      await migrate(pool, loadMigrations());
    } finally {
      await pool.end();
    }
  });
}

/**
 * Store tests on PostgreSQL: a fresh migrated database for every test (`url`), and every store opened with `open` and
 * every pool from `sql()` closed after it. `lapse` ends a host's live session by the database's clock, as a host that
 * stopped renewing would have.
 */
export interface PgStoreTests {
  readonly url: string;
  /** The server (for a database of its own: `postgres.server().createDatabase()`). */
  readonly postgres: ReturnType<typeof usePostgres>;
  /** A store on this test's database, or on `at` (`maintenanceMs: 0` unless given), closed after the test. */
  open(options?: Parameters<typeof PgTxStore.open>[1], at?: string): Promise<PgTxStore>;
  /** Close every store opened so far (a test that restarts its hosts). */
  closeStores(): Promise<void>;
  /** A small pool on this test's database for direct SQL, ended after the test. */
  sql(): pg.Pool;
  lapse(db: pg.Pool, hostId: string): Promise<void>;
}

export function usePgStoreTests(): PgStoreTests {
  const postgres = useMigratedPostgres();
  let url = '';
  const opened: PgTxStore[] = [];
  const pools: pg.Pool[] = [];
  const closeStores = async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
  };
  beforeEach(async () => {
    url = await postgres.fresh();
  });
  afterEach(async () => {
    await closeStores();
    await Promise.all(pools.splice(0).map((p) => p.end()));
  });
  return {
    get url() {
      return url;
    },
    postgres,
    async open(options = {}, at = url) {
      const store = await PgTxStore.open(at, { maintenanceMs: 0, ...options });
      opened.push(store);
      return store;
    },
    closeStores,
    sql() {
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      pools.push(pool);
      return pool;
    },
    async lapse(db, hostId) {
      await db.query(
        `UPDATE host_sessions SET started_at = now() - interval '1 minute', lease_expires_at = now() - interval '1 second'
         WHERE host_id = $1 AND ended_at IS NULL`,
        [hostId],
      );
    },
  };
}
