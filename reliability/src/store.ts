import { createDatabasePool, loadMigrations, migrate, parseDatabaseUrl } from '@solrelay/sidecar/pg';
import { usePostgres } from '@solrelay/testkit';

/**
 * The store the sidecar keeps its records in, a dimension of the crash suite and the fault matrix: the local journal
 * (the default) or PostgreSQL (`RELAY_DATABASE_URL`). Each suite has a file per store (crash.test.ts and
 * crash-postgres.test.ts, ...); the judge is the same, only the sidecar's environment differs.
 */
export type StoreName = 'journal' | 'postgres';

export interface StoreUnderTest {
  name: StoreName;
  /**
   * What a sidecar needs to keep its records in this store, fresh for each call: for PostgreSQL a new database copied
   * from a template with relay's migrations applied (`RELAY_DATABASE_URL`); for the journal nothing (the data dir).
   * Every process of one trial is given the same answer, so a restart replays the same database.
   */
  env(): Promise<Record<string, string>>;
}

/**
 * Call at the top of a test file (it registers the PostgreSQL server's beforeAll/afterAll): the server is the
 * testkit's (initdb'd into a temp directory, run as the `postgres` user when we are root), shared by the run's files
 * through the jest globalSetup, and its template is migrated with the sidecar's own `migrate` (what `relay db
 * migrate` runs).
 */
export function useStore(name: StoreName): StoreUnderTest {
  if (name === 'journal') return { name, env: async () => ({}) };
  const postgres = useMigratedPostgres('relay_reliability_template');
  return { name, env: async () => ({ RELAY_DATABASE_URL: await postgres.fresh() }) };
}

/**
 * The testkit's PostgreSQL for a test file (call at its top), whose `fresh()` databases come from a template migrated
 * with the sidecar's own `migrate`.
 */
export function useMigratedPostgres(template?: string): ReturnType<typeof usePostgres> {
  return usePostgres(async (url) => {
    const pool = createDatabasePool(parseDatabaseUrl(url));
    try {
      await migrate(pool, loadMigrations());
    } finally {
      await pool.end();
    }
  }, template);
}

/** A figure file's name for this store: `crash` for the journal, `crash-postgres` for PostgreSQL. */
export function resultsName(base: string, store: StoreName): string {
  return store === 'journal' ? base : `${base}-postgres`;
}
