const path = require('node:path');

// Every test spawns the built binary (~0.3 s a run, more on a busy machine), so tests get 30 s rather than 5 s.
// PostgreSQL test files share one server per run, started only if one of them runs.
module.exports = require('../../tooling/jest.base.cjs')(__dirname, {
  testTimeout: 30_000,
  globalSetup: path.join(__dirname, 'test/helpers/postgres-global-setup.ts'),
  globalTeardown: path.join(__dirname, 'test/helpers/postgres-global-teardown.ts'),
});
