// jest globalSetup: this run's PostgreSQL test files share one server, started by the first that needs one (a run
// without them starts none); the global teardown stops it.
export { postgresGlobalSetup as default } from '@solrelay/testkit/postgres';
