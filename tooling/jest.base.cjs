// Shared jest setup: @swc/jest transforms TypeScript to CommonJS, and a small reporter writes the
// package's pass/fail counts to test-results.json so .ci/run can print one total for the repo.
const path = require('node:path');

module.exports = function jestConfig(packageDir, overrides = {}) {
  return {
    rootDir: packageDir,
    testEnvironment: 'node',
    testMatch: ['<rootDir>/src/**/*.test.ts', '<rootDir>/test/**/*.test.ts'],
    transform: {
      '^.+\\.(t|j)sx?$': [
        '@swc/jest',
        {
          jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
          module: { type: 'commonjs' },
          sourceMaps: 'inline',
        },
      ],
    },
    moduleFileExtensions: ['ts', 'tsx', 'js', 'cjs', 'mjs', 'json'],
    passWithNoTests: false,
    // A test that waits on a condition may take longer on a loaded machine; a per-test limit is a backstop against
    // a hang, not a timing assertion (a test that means a bound asserts it).
    testTimeout: 30_000,
    // Two test files at once (jest's default is one fewer than the cores: 1 on CI's 2-core VM). The e2e files spend
    // most of their time waiting on simulated slots, so two overlap well (simnet 65 s -> 39 s on the project VM).
    // Packages whose tests measure load (the sidecar's PostgreSQL outage test, the browser test, the reliability long
    // suite) set 1 in their own config.
    maxWorkers: 2,
    setupFiles: [path.join(__dirname, 'jest.seed.cjs')],
    reporters: ['default', path.join(__dirname, 'jest-counts-reporter.cjs')],
    ...overrides,
  };
};
