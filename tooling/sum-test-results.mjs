// Sums every package's test-results.json and prints one line: "N passed, N failed[, N skipped]".
// Exits 1 when any test or suite failed, or when no test ran at all (an empty run proves nothing).
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const root = process.cwd();
const dirs = [];
for (const group of ['packages', 'apps', '.']) {
  const base = join(root, group);
  if (group === '.') {
    if (existsSync(join(root, 'bench', 'package.json'))) dirs.push(join(root, 'bench'));
    continue;
  }
  if (!existsSync(base)) continue;
  for (const name of readdirSync(base)) dirs.push(join(base, name));
}

let passed = 0;
let failed = 0;
let skipped = 0;
let suitesFailed = 0;
const perPackage = [];
for (const dir of dirs) {
  const file = join(dir, 'test-results.json');
  if (!existsSync(file)) continue;
  const counts = JSON.parse(readFileSync(file, 'utf8'));
  passed += counts.passed;
  failed += counts.failed;
  skipped += counts.skipped;
  suitesFailed += counts.suitesFailed;
  perPackage.push(`${dir.slice(root.length + 1)}: ${counts.passed} passed, ${counts.failed} failed`);
}

for (const line of perPackage) console.log(`  ${line}`);
if (suitesFailed > 0) console.log(`${suitesFailed} test suite(s) failed to run`);
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
if (passed + failed === 0) {
  console.error('no test ran: an empty test run fails CI');
  process.exit(1);
}
process.exit(failed > 0 || suitesFailed > 0 ? 1 : 0);
