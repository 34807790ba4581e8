// The browser test starts a simnet, a sidecar serving dist/ and Chromium: allow it time beyond jest's 5 s.
module.exports = require('../../tooling/jest.base.cjs')(__dirname, { testTimeout: 60_000 });
