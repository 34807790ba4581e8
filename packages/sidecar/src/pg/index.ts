// PostgreSQL (DESIGN §10): connecting with relay's settings and coded errors, the schema's migrations, and host
// sessions (the fleet's fencing token). The store on top of it, PgTxStore, is in src/store/pg-store.ts (exported by
// the package's main entry). A throwaway local server from the machine's packages (`relay up --hosts N`, the tests):
// local-server.ts.
export {
  DATABASE_DEFAULTS,
  connectDatabase,
  createDatabasePool,
  databaseError,
  withServerKeepalives,
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
export {
  HOST_LEASE_MS,
  HOST_SESSION_WAIT_MS,
  HostSession,
  type FleetHost,
  type HostSessionOptions,
} from './host-session';
export {
  PostgresNotFoundError,
  findPostgresBinaries,
  localPostgres,
  postgresBinaryDirectories,
  startLocalPostgres,
  stopLocalPostgres,
  type LocalPostgres,
  type LocalPostgresInfo,
  type LocalPostgresOptions,
} from './local-server';
