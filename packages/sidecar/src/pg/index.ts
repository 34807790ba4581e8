// PostgreSQL (DESIGN §10): connecting with relay's settings and coded errors, and the schema's migrations. The store
// on top of it, PgTxStore, is in src/store/pg-store.ts (exported by the package's main entry).
export {
  DATABASE_DEFAULTS,
  connectDatabase,
  createDatabasePool,
  databaseError,
  type DatabaseOptions,
  type DatabasePool,
} from './connect';
export { parseDatabaseUrl, redactDatabaseUrl, type DatabaseUrl } from './url';
export {
  MIGRATION_LOCK_KEY,
  assertSchema,
  loadMigrations,
  migrate,
  migrationStatus,
  migrationsDir,
  type AppliedMigration,
  type MigrateResult,
  type Migration,
  type MigrationStatus,
} from './migrations';
