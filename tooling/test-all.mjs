// `pnpm test`: every package's tests, in two turbo runs. First the packages whose tests run clusters, sidecar
// processes and databases, one package at a time (several of them measure what load does); then the light ones two
// packages at a time (pure logic, the client and agent against one in-process stack each, the packaging test that
// mostly waits on npm and tsc). Arguments go to both runs (e.g. `pnpm test --continue`); both run even if the first
// fails, and the exit status fails if either did.
import { spawnSync } from 'node:child_process';

const PAIRED = [
  '@solrelay/core',
  '@solrelay/client',
  '@solrelay/agent',
  '@solrelay/app-agents',
  '@solrelay/packaging',
];
const args = process.argv.slice(2);
// A caller's own --filter or --concurrency (turbo unions filters: each run would add its own set) makes one plain run.
const own = args.some((arg) => arg.startsWith('--filter') || arg.startsWith('--concurrency'));
const runs = own
  ? [args.some((arg) => arg.startsWith('--concurrency')) ? [] : ['--concurrency=1']]
  : [
      ['--concurrency=1', ...PAIRED.map((name) => `--filter=!${name}`)],
      ['--concurrency=2', ...PAIRED.map((name) => `--filter=${name}`)],
    ];
let status = 0;
for (const run of runs) {
  const turbo = spawnSync('pnpm', ['exec', 'turbo', 'run', 'test', ...run, ...args], { stdio: 'inherit' });
  if (turbo.status !== 0) status = turbo.status ?? 1;
}
process.exit(status);
