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
    setupFiles: [path.join(__dirname, 'jest.seed.cjs')],
    reporters: ['default', path.join(__dirname, 'jest-counts-reporter.cjs')],
    ...overrides,
  };
};
