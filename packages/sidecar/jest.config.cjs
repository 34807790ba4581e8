const path = require('node:path');

// The PostgreSQL test files share one server per run, started only if one of them runs. `pnpm test` runs the package
// in three groups, one after the other (RELAY_JEST_GROUP, set by tooling/jest-groups.mjs):
// - `parallel`: everything that does not use PostgreSQL, two files at once. The e2e files mostly wait on simulated
//   slots (the whole e2e directory used 35 % of one core, one file at a time), so two overlap well. (Three at a time
//   took 144 s instead of 194 s on the idle project VM, but 152 s and 180 s in two clean-clone CI runs, whose first
//   runs of the group at two took 178 s, and each of those runs had a test fail on a timing it assumed: two it stays.)
// - `postgres`: the PostgreSQL files except those below, two at a time (each has a database of its own from the
//   template): 148 s one at a time in CI, 99 s two at a time.
// - postgres-fleet (two host processes handing work over) runs in `serial`: beside another file it failed two
//   clean-clone CI runs (session 20: its hosts got 503s; session 22: a stopped host's work not finished by the other in
//   90 s), while alone it passes in seconds.
// - `serial`: one at a time, the files that measure what load does. The outage test (400 transactions through outages
//   on 60 ms slots) and the webhook outbox's ordering test failed in a clean-clone CI with two files at once, where 48
//   transactions expired under the doubled load; they pass one at a time.
// Unset (`pnpm exec jest <files>` by hand): every file, one at a time, as CI's serial group would run it.
const POSTGRES_FILES = [
  'test/pg/.*\\.test\\.ts$',
  'test/e2e/postgres-.*\\.test\\.ts$',
  'test/store-contract\\.test\\.ts$',
  'test/commit-unknown\\.test\\.ts$',
];
const ALONE_FILES = [
  'test/e2e/postgres-outage\\.test\\.ts$',
  'test/e2e/postgres-fleet\\.test\\.ts$',
  'test/pg/webhook-outbox\\.test\\.ts$',
  // Not PostgreSQL, but timing-sensitive: its deliveries-in-order test is the other one that failed two at a time.
  'test/webhook-outbox\\.test\\.ts$',
];
const group = process.env.RELAY_JEST_GROUP;
if (group !== undefined && !['parallel', 'postgres', 'serial'].includes(group))
  throw new Error(
    `RELAY_JEST_GROUP must be "parallel", "postgres" or "serial" (got ${JSON.stringify(group)})`,
  );

const base = require('../../tooling/jest.base.cjs');
const countsReporter = path.join(__dirname, '../../tooling/jest-counts-reporter.cjs');
const ignored = ['/node_modules/'];
const groups = {
  parallel: { maxWorkers: 2, testPathIgnorePatterns: [...ignored, ...POSTGRES_FILES, ...ALONE_FILES] },
  postgres: {
    maxWorkers: 2,
    testRegex: POSTGRES_FILES,
    testMatch: undefined,
    testPathIgnorePatterns: [...ignored, ...ALONE_FILES],
    reporters: ['default', [countsReporter, { file: 'test-results.postgres.json' }]],
  },
  serial: {
    maxWorkers: 1,
    testRegex: ALONE_FILES,
    testMatch: undefined,
    reporters: ['default', [countsReporter, { file: 'test-results.serial.json' }]],
  },
};
module.exports = base(__dirname, {
  maxWorkers: 1,
  globalSetup: path.join(__dirname, 'test/helpers/postgres-global-setup.ts'),
  globalTeardown: path.join(__dirname, 'test/helpers/postgres-global-teardown.ts'),
  ...(group === undefined ? {} : groups[group]),
});
