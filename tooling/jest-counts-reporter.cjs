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
      // The names of what failed, so the summary at the end of a long CI log says which test to look at.
      failures: results.testResults.flatMap((file) => {
        const relative = path.relative(this.rootDir, file.testFilePath);
        if (file.testExecError) return [`${relative}: ${String(file.testExecError.message).split('\n')[0]}`];
        return file.testResults
          .filter((test) => test.status === 'failed')
          .map((test) => `${relative}: ${test.fullName}`);
      }),
    };
    fs.writeFileSync(path.join(this.rootDir, this.file), JSON.stringify(counts) + '\n');
  }
}

module.exports = CountsReporter;
