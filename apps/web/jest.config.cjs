// The browser test starts a simnet, a sidecar serving dist/ and Chromium: allow it time beyond jest's 5 s. One file
// at a time: with two, the dashboard's browser test failed once in five runs beside the other file (33 s either way).
module.exports = require('../../tooling/jest.base.cjs')(__dirname, { testTimeout: 60_000, maxWorkers: 1 });
