// The fast parts (bad input, security, slow consumers): part of `pnpm test`.
module.exports = require('../tooling/jest.base.cjs')(__dirname, {
  testMatch: ['<rootDir>/test/fast/**/*.test.ts'],
});
