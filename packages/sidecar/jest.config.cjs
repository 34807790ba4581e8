const path = require('node:path');

// The PostgreSQL test files share one server per run, started only if one of them runs. `pnpm test` runs the package
// in two groups (RELAY_JEST_GROUP, set by tooling/jest-groups.mjs):
// - `parallel`: everything that does not use PostgreSQL, two files at once. The e2e files mostly wait on simulated
//   slots (the whole e2e directory used 35 % of one core, one file at a time), so two overlap well.
// - `serial`: the PostgreSQL files, one at a time. The outage test (400 transactions through outages on 60 ms slots)
//   and the webhook outbox's ordering test failed in a clean-clone CI with two files at once, where 48 transactions
//   expired under the doubled load; they pass one at a time.
// Unset (`pnpm exec jest <files>` by hand): every file, one at a time, as CI's serial group would run it.
const POSTGRES_FILES = [
  'test/pg/.*\\.test\\.ts$',
  'test/e2e/postgres-.*\\.test\\.ts$',
  'test/store-contract\\.test\\.ts$',
  'test/commit-unknown\\.test\\.ts$',
  // Not PostgreSQL, but timing-sensitive: its deliveries-in-order test is the other one that failed two at a time.
  'test/webhook-outbox\\.test\\.ts$',
];
const group = process.env.RELAY_JEST_GROUP;
if (group !== undefined && group !== 'parallel' && group !== 'serial')
  throw new Error(`RELAY_JEST_GROUP must be "parallel" or "serial" (got ${JSON.stringify(group)})`);

const base = require('../../tooling/jest.base.cjs');
const countsReporter = path.join(__dirname, '../../tooling/jest-counts-reporter.cjs');
module.exports = base(__dirname, {
  maxWorkers: group === 'parallel' ? 2 : 1,
  globalSetup: path.join(__dirname, 'test/helpers/postgres-global-setup.ts'),
  globalTeardown: path.join(__dirname, 'test/helpers/postgres-global-teardown.ts'),
  ...(group === 'parallel' ? { testPathIgnorePatterns: ['/node_modules/', ...POSTGRES_FILES] } : {}),
  ...(group === 'serial'
    ? {
        testRegex: POSTGRES_FILES,
        testMatch: undefined,
        reporters: ['default', [countsReporter, { file: 'test-results.serial.json' }]],
      }
    : {}),
});
