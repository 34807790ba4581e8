import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, runRelay } from './helpers/relay-bin';

test.each([
  [['bogus'], /Unknown argument: bogus/],
  [[], /Name a command/],
  [['policy'], /Name a policy command/],
  [['start', '--tip', '5000'], /--tip is only used with --bypass/],
  [['start', '--bypass', '--tip', '12abc'], /--tip needs a whole number/],
  [['lifecycle', '--last', 'abc'], /--last needs a whole number/],
  [['lifecycle', '-l', '0'], /--last needs a whole number/],
  [['bundle'], /Not enough non-option arguments/],
  [['status', '--verbose'], /Unknown argument/],
  [['up', '--seed', '3'], /only apply with --sim/],
  [['up', '--no-demo'], /--no-demo only apply with --sim/],
  [['start', '--no-demo'], /--no-demo only apply with --sim/],
  [['--verbose', 'status'], /--verbose before the command: options go after it/],
  [['-x'], /-x before the command/],
  [['policy', '--bogus', 'show'], /--bogus before the policy command/],
  [['db'], /Name a db command/],
  [['db', '--bogus', 'status'], /--bogus before the db command/],
  [['db', 'status', '--verbose'], /Unknown argument/],
  [['bundle', '..'], /a bundle id is 64 hex characters, got "\.\."/],
])('relay %j is a usage error: exit 2 with the reason and a hint', async (args, message) => {
  const run = await runRelay(args as string[]);
  expect(run.code).toBe(2);
  expect(run.stderr).toMatch(message);
  expect(run.stderr).toContain('hint:');
  expect(run.stdout).toBe('');
});

test('--help lists every command and exits 0', async () => {
  const run = await runRelay(['--help']);
  expect(run.code).toBe(0);
  for (const command of [
    'up',
    'start',
    'agent',
    'web',
    'smoke',
    'sim',
    'status',
    'tip',
    'queue',
    'lifecycle',
    'bundle',
    'policy',
    'db',
  ]) {
    expect(run.stdout).toContain(`relay ${command}`);
  }
});

test('start without the upstream env exits 1 naming the variable, with the --sim hint', async () => {
  const cwd = await mkdtemp(join(tmpdir(), 'relay-cli-start-'));
  const run = await runRelay(['start'], { cwd, env: baseEnv() });
  expect(run.code).toBe(1);
  expect(run.stderr).toContain('STREAM_ENDPOINT');
  expect(run.stderr).toContain('--sim');
});

test('web, agent and up with no app directory exit 1 naming where they looked', async () => {
  const cwd = await mkdtemp(join(tmpdir(), 'relay-cli-dirs-'));
  const web = await runRelay(['web'], { cwd, env: baseEnv({ WEB_DIR: 'missing-web' }) });
  expect(web.code).toBe(1);
  expect(web.stderr).toContain(join(cwd, 'missing-web'));
  expect(web.stderr).toContain('WEB_DIR');
  const agent = await runRelay(['agent'], { cwd, env: baseEnv({ AGENT_DIR: 'missing-agent' }) });
  expect(agent.code).toBe(1);
  expect(agent.stderr).toContain(join(cwd, 'missing-agent'));
  const up = await runRelay(['up', '--sim'], { cwd, env: baseEnv({ AGENT_DIR: 'missing-agent' }) });
  expect(up.code).toBe(1);
  expect(up.stderr).toContain('AGENT_DIR');
});

test('NO_COLOR off and a terminal absent: no ANSI escapes either way on a pipe', async () => {
  const run = await runRelay(['policy', 'show'], { env: { ...baseEnv(), NO_COLOR: '' } });
  expect(run.code).toBe(0);
  expect(run.stdout).not.toContain(String.fromCharCode(27));
});
