// Every test spawns the built binary (~0.3 s a run, more on a busy machine), so tests get 30 s rather than 5 s.
module.exports = require('../../tooling/jest.base.cjs')(__dirname, { testTimeout: 30_000 });
