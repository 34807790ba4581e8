// The 10-minute soak: `pnpm test:soak`. Not run by CI.
const path = require('node:path');
module.exports = require('../tooling/jest.base.cjs')(__dirname, {
  testMatch: ['<rootDir>/test/soak/**/*.test.ts'],
  reporters: [
    'default',
    [path.join(__dirname, '../tooling/jest-counts-reporter.cjs'), { file: 'test-results.soak.json' }],
  ],
});
