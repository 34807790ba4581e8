// The longer parts (crash trials, upstream fault matrix): `pnpm test:reliability`, also run by .ci/run.
const path = require('node:path');
module.exports = require('../tooling/jest.base.cjs')(__dirname, {
  testMatch: ['<rootDir>/test/long/**/*.test.ts'],
  reporters: [
    'default',
    [path.join(__dirname, '../tooling/jest-counts-reporter.cjs'), { file: 'test-results.reliability.json' }],
  ],
});
