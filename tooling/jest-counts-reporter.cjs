// Writes {passed, failed, skipped, suitesFailed} for this jest run to <rootDir>/test-results.json.
// .ci/run sums these files to print the repository's single "N passed, N failed" line.
const fs = require('node:fs');
const path = require('node:path');

class CountsReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
  }

  onRunComplete(_contexts, results) {
    const counts = {
      passed: results.numPassedTests,
      failed: results.numFailedTests,
      skipped: results.numPendingTests + results.numTodoTests,
      suitesFailed: results.numFailedTestSuites,
      runtimeErrorSuites: results.numRuntimeErrorTestSuites,
    };
    fs.writeFileSync(path.join(this.rootDir, 'test-results.json'), JSON.stringify(counts) + '\n');
  }
}

module.exports = CountsReporter;
