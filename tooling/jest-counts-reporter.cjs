// Writes {passed, failed, skipped, suitesFailed} for this jest run to <rootDir>/test-results.json
// (or the file named by the reporter's `file` option, for runs kept apart from `pnpm test`).
// .ci/run sums these files to print the repository's single "N passed, N failed" line.
const fs = require('node:fs');
const path = require('node:path');

class CountsReporter {
  constructor(globalConfig, options = {}) {
    this.rootDir = globalConfig.rootDir;
    this.file = options.file ?? 'test-results.json';
  }

  onRunComplete(_contexts, results) {
    const counts = {
      passed: results.numPassedTests,
      failed: results.numFailedTests,
      skipped: results.numPendingTests + results.numTodoTests,
      suitesFailed: results.numFailedTestSuites,
      runtimeErrorSuites: results.numRuntimeErrorTestSuites,
    };
    fs.writeFileSync(path.join(this.rootDir, this.file), JSON.stringify(counts) + '\n');
  }
}

module.exports = CountsReporter;
