// Sums every package's test-results.json and prints one line: "N passed, N failed[, N skipped]".
// Exits 1 when any test or suite failed, or when no test ran at all (an empty run proves nothing).
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const root = process.cwd();
const dirs = [];
for (const group of ['packages', 'apps', '.']) {
  const base = join(root, group);
  if (group === '.') {
    for (const name of ['bench', 'reliability', 'packaging'])
      if (existsSync(join(root, name, 'package.json'))) dirs.push(join(root, name));
    continue;
  }
  if (!existsSync(base)) continue;
  for (const name of readdirSync(base)) dirs.push(join(base, name));
}

let passed = 0;
let failed = 0;
let skipped = 0;
let suitesFailed = 0;
let suitesCrashed = 0;
const perPackage = [];
const missing = [];
for (const dir of dirs) {
  const file = join(dir, 'test-results.json');
  const manifest = join(dir, 'package.json');
  const hasTests = existsSync(manifest) && Boolean(JSON.parse(readFileSync(manifest, 'utf8')).scripts?.test);
  // A package that runs its tests in groups (tooling/jest-groups.mjs) must have every group's results.
  const grouped =
    existsSync(manifest) &&
    /jest-groups\.mjs/.test(JSON.parse(readFileSync(manifest, 'utf8')).scripts?.test ?? '');
  for (const group of grouped && existsSync(file) ? ['postgres', 'serial'] : []) {
    if (existsSync(join(dir, `test-results.${group}.json`))) continue;
    missing.push(`${dir.slice(root.length + 1)} (${group} group)`);
    perPackage.push(
      `${dir.slice(root.length + 1)}: no results of the ${group} group (its tests did not run)`,
    );
  }
  if (!existsSync(file)) {
    // A package with a test script but no results did not run its tests (crash, no tests found):
    // that must fail the run, not silently drop out of the total.
    if (hasTests) {
      missing.push(dir.slice(root.length + 1));
      perPackage.push(`${dir.slice(root.length + 1)}: no test results (tests did not run)`);
    }
    continue;
  }
  // `pnpm test:reliability` writes its counts apart, so a run of the long suite adds to the total; a package that
  // runs its tests in groups (the sidecar's PostgreSQL files apart) writes each later group's apart too.
  for (const [name, label] of [
    ['test-results.json', ''],
    ['test-results.postgres.json', ' (postgres group)'],
    ['test-results.serial.json', ' (serial group)'],
    ['test-results.reliability.json', ' (test:reliability)'],
  ]) {
    if (!existsSync(join(dir, name))) continue;
    const counts = JSON.parse(readFileSync(join(dir, name), 'utf8'));
    passed += counts.passed;
    failed += counts.failed;
    skipped += counts.skipped;
    suitesFailed += counts.suitesFailed;
    suitesCrashed += counts.runtimeErrorSuites ?? 0;
    perPackage.push(
      `${dir.slice(root.length + 1)}${label}: ${counts.passed} passed, ${counts.failed} failed`,
    );
    for (const failure of counts.failures ?? []) perPackage.push(`    failed: ${failure}`);
  }
}

for (const line of perPackage) console.log(`  ${line}`);
// jest counts a file as a failed suite when any of its tests failed; a runtime-error suite is one that did not run
// at all (an import or a hook threw outside any test).
if (suitesFailed > 0)
  console.log(`${suitesFailed} test file(s) with failures, ${suitesCrashed} of them failed to run`);
if (missing.length > 0) console.log(`${missing.length} package(s) ran no tests: ${missing.join(', ')}`);
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
if (passed + failed === 0) {
  console.error('no test ran: an empty test run fails CI');
  process.exit(1);
}
process.exit(failed > 0 || suitesFailed > 0 || missing.length > 0 ? 1 : 0);
