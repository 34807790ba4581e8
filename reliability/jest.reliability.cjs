// The longer parts (crash trials, upstream fault matrix), each on the journal and on PostgreSQL: `pnpm test:reliability`,
// also run by .ci/run.
const path = require('node:path');
module.exports = require('../tooling/jest.base.cjs')(__dirname, {
  testMatch: ['<rootDir>/test/long/**/*.test.ts'],
  // One file at a time: each trial and matrix phase runs a real-clock cluster and measures what it did (the figures in
  // RELIABILITY.md); two beside each other on a 2-core VM would measure each other.
  maxWorkers: 1,
  // The PostgreSQL files share one server per run (the testkit's), started only if one of them runs.
  globalSetup: path.join(__dirname, 'test/helpers/postgres-global-setup.ts'),
  globalTeardown: path.join(__dirname, 'test/helpers/postgres-global-teardown.ts'),
  reporters: [
    'default',
    [path.join(__dirname, '../tooling/jest-counts-reporter.cjs'), { file: 'test-results.reliability.json' }],
  ],
});
