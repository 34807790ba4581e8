import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from '@solrelay/testkit';
import { RelayProcess, baseEnv, freePort, portInUse, processAlive, runRelay } from '../helpers/relay-bin';

const FIXTURE_AGENT = join(__dirname, '..', 'fixtures', 'agent');
const running: RelayProcess[] = [];

afterEach(async () => {
  for (const relay of running.splice(0)) await relay.stop('SIGKILL');
});

async function up(extraEnv: Record<string, string>, args: string[] = []) {
  const port = await freePort();
  const cwd = await mkdtemp(join(tmpdir(), 'relay-cli-up-'));
  const relay = new RelayProcess(['up', '--sim', '--slot-ms', '100', '--no-rate-limit', ...args], {
    cwd,
    env: baseEnv({ API_PORT: String(port), ...extraEnv }),
  });
  running.push(relay);
  return { relay, port, cwd };
}

test('relay up --sim: addresses and env lines, [ AGENT ] lines, a finalized demo transaction; Ctrl-C stops the whole group', async () => {
  // A stand-in agent: prints lines, reaches the sidecar at RELAY_URL, starts a grandchild. It decides nothing; the
  // sidecar's own fallback (after RELAY_AGENT_GRACE_S) submits the demo traffic.
  // npm settings as `pnpm relay` leaves them in the environment: the agent's npm must not see (and warn about) them.
  const { relay, port } = await up({
    AGENT_DIR: FIXTURE_AGENT,
    RELAY_AGENT_GRACE_S: '1',
    npm_config_nodedir: '/nonexistent-nodedir',
    NPM_CONFIG_RELAY_TEST_ONLY: '1',
  });
  await relay.waitForStdout(new RegExp(`relay: dashboard http://localhost:${port}/`), 20_000);
  // Each line may come in a later chunk than the one before it (a clean-clone CI read the dashboard line alone):
  // wait for each, do not assume.
  await relay.waitForStdout(new RegExp(`relay: api +http://localhost:${port}`), 10_000);
  await relay.waitForStdout(/^STREAM_ENDPOINT=http:\/\/127\.0\.0\.1:\d+$/m, 10_000);
  await relay.waitForStdout(/^RPC_URL=http:\/\/127\.0\.0\.1:\d+$/m, 10_000);
  await relay.waitForStdout(/^KEYPAIR_PATH=.+keypair\.json$/m, 10_000);

  const [, agentPid, grandchildPid] = (
    await relay.waitForStdout(/^\[ AGENT \] fixture agent pid (\d+) grandchild (\d+)$/m, 20_000)
  ).map(Number);
  await relay.waitForStdout(
    new RegExp(`^\\[ AGENT \\] relay url http://127\\.0\\.0\\.1:${port}$`, 'm'),
    10_000,
  );
  await relay.waitForStdout(/^\[ AGENT \] healthz 200$/m, 10_000);
  await relay.waitForStdout(/^\[ DEMO \] tx_\w+ finalized in [\d.]+ s \(\w+\)$/m, 40_000);

  // Inspect commands reach the sidecar `up` runs.
  const status = await runRelay(['status', '--json'], { env: baseEnv({ API_PORT: String(port) }) });
  expect(status.code).toBe(0);
  expect(JSON.parse(status.stdout).slot).toBeGreaterThan(0);

  expect(processAlive(grandchildPid as number)).toBe(true);
  expect(await relay.stop('SIGINT')).toBe(0);
  expect(relay.stderr).toContain('SIGINT: stopping');
  expect(relay.stderr).toMatch(/SIGINT: stopping\n(.*\n)*relay: stopped\n$/);
  expect(relay.stdout + relay.stderr).not.toMatch(/Unknown env config/);
  await waitUntil(
    () => !processAlive(agentPid as number) && !processAlive(grandchildPid as number),
    5000,
    'the agent group to stop',
  );
  expect(await portInUse(port)).toBe(false);
}, 60_000);

test('relay up stops the sidecar and exits 1 when the agent exits on its own', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'relay-cli-agent-'));
  const { writeFile } = await import('node:fs/promises');
  await writeFile(
    join(dir, 'package.json'),
    JSON.stringify({ private: true, scripts: { dev: 'node -e "console.log(\'bye\'); process.exit(4)"' } }),
  );
  const { relay, port } = await up({ AGENT_DIR: dir }, ['--no-demo']);
  expect(await relay.closed).toBe(1);
  expect(relay.stdout).toMatch(/^\[ AGENT \] bye$/m);
  expect(relay.stderr).toContain('the agent exited (code 4)');
  expect(relay.stderr).toMatch(/relay: stopped\n$/);
  expect(await portInUse(port)).toBe(false);
}, 30_000);

test('relay up --sim with apps/agents: the agent registers through presence and the demo finalizes', async () => {
  const { relay, port } = await up({});
  await relay.waitForStdout(/^\[ AGENT \] .+$/m, 30_000);
  await waitUntil(
    async () => {
      const status = await runRelay(['status', '--json'], { env: baseEnv({ API_PORT: String(port) }) });
      return status.code === 0 && JSON.parse(status.stdout).agent.connected === true;
    },
    30_000,
    'the agent to register',
  );
  await relay.waitForStdout(/^\[ DEMO \] tx_\w+ finalized in [\d.]+ s/m, 60_000);
  expect(await relay.stop('SIGINT')).toBe(0);
  expect(await portInUse(port)).toBe(false);
}, 120_000);
