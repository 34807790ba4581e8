// Runs a package's jest in its three groups, one after the other, with the same arguments: `parallel` (files without
// PostgreSQL), `postgres` (the PostgreSQL files), then `serial` (the files that measure load); the package's
// jest.config.cjs reads RELAY_JEST_GROUP to choose each group's files and workers. Every group runs even if an earlier
// one fails; the exit status fails if any did. Used as `"test": "node ../../tooling/jest-groups.mjs"`. With arguments
// (`pnpm test -- <files>`) it runs jest once, without a group: the files named, one at a time (a filter matching one
// group only would fail the others with "no tests found").
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const jest = createRequire(join(process.cwd(), 'package.json')).resolve('jest/bin/jest');
const args = process.argv.slice(2);
let status = 0;
for (const group of args.length > 0 ? [undefined] : ['parallel', 'postgres', 'serial']) {
  const env = { ...process.env };
  if (group) env.RELAY_JEST_GROUP = group;
  else delete env.RELAY_JEST_GROUP;
  const run = spawnSync(process.execPath, [jest, ...args], { stdio: 'inherit', env });
  if (run.status !== 0) status = run.status ?? 1;
}
process.exit(status);
