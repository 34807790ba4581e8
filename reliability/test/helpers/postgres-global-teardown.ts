// jest globalTeardown: stops the PostgreSQL server this run's test files shared, if one was started.
export { postgresGlobalTeardown as default } from '@solrelay/testkit/postgres';
