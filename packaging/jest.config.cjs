// Packing, a fresh npm install and several node/tsc processes: minutes on a busy machine, so a long backstop.
module.exports = require('../tooling/jest.base.cjs')(__dirname, { testTimeout: 600_000 });
