const path = require('node:path');

// PostgreSQL test files (test/pg) share one server per run, started only if one of them runs.
module.exports = require('../../tooling/jest.base.cjs')(__dirname, {
  globalSetup: path.join(__dirname, 'test/helpers/postgres-global-setup.ts'),
  globalTeardown: path.join(__dirname, 'test/helpers/postgres-global-teardown.ts'),
});
