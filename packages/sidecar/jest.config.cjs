const path = require('node:path');

// PostgreSQL test files (test/pg) share one server per run, started only if one of them runs.
// One file at a time (the base config runs two): the PostgreSQL outage test (400 transactions through outages on
// 60 ms slots) and the webhook outbox's ordering test failed in a clean-clone CI with two files at once, where 48
// transactions expired under the doubled load; they pass one at a time.
module.exports = require('../../tooling/jest.base.cjs')(__dirname, {
  maxWorkers: 1,
  globalSetup: path.join(__dirname, 'test/helpers/postgres-global-setup.ts'),
  globalTeardown: path.join(__dirname, 'test/helpers/postgres-global-teardown.ts'),
});
