import { usePostgres } from '@solrelay/testkit';
import pg from 'pg';
import { loadMigrations, migrate } from '../../src/pg';

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
