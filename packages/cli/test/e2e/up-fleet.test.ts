import { chmod, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection, Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { RelayClient } from '@solrelay/client';
import { SseReader, waitUntil } from '@solrelay/testkit';
import { RelayProcess, baseEnv, freePort, portInUse, processAlive, runRelay } from '../helpers/relay-bin';

// `relay up --sim --hosts N` (README "Running a fleet"): N sidecar processes on a local PostgreSQL. Two hosts keep the
// run short. Their agents are stand-ins that register and decide nothing, so what a host accepts stays pending: live
// work for the other host to adopt when it dies.
const IDLE_AGENT = join(__dirname, '..', 'fixtures', 'idle-agent');

const running: RelayProcess[] = [];
const temps: string[] = [];
afterEach(async () => {
  for (const relay of running.splice(0)) await relay.stop('SIGKILL');
  for (const dir of temps.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A base port whose next `count - 1` ports are free too (host-k listens on API_PORT + k - 1). */
async function freePorts(count: number): Promise<number> {
  for (;;) {
    const base = await freePort();
    let free = true;
    for (let k = 1; k < count; k++) if (await portInUse(base + k)) free = false;
    if (free) return base;
  }
}

/** A temp directory of the test's own for the CLI's TMPDIR (traversable by `postgres`, which runs the server as root). */
async function scratch(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'relay-cli-fleet-'));
  await chmod(dir, 0o755);
  temps.push(dir);
  return dir;
}

async function readyz(url: string): Promise<number> {
  return fetch(`${url}/readyz`).then(
    (r) => r.status,
    () => 0,
  );
}

test("relay up --sim --hosts 2: both hosts ready, reads fleet-wide, a SIGKILLed host's transaction adopted by the other; Ctrl-C leaves no process or temp dir", async () => {
  const base = await freePorts(2);
  const tmp = await scratch();
  const relay = new RelayProcess(['up', '--sim', '--hosts', '2', '--no-demo', '--slot-ms', '200'], {
    env: baseEnv({
      API_PORT: String(base),
      TMPDIR: tmp,
      AGENT_DIR: IDLE_AGENT,
      // A short lease: the takeover comes about 2.5 s after the kill rather than 7 s.
      RELAY_LEASE_MS: '2000',
      RELAY_AGENT_GRACE_S: '600',
    }),
    cwd: tmp,
  });
  running.push(relay);

  const [, pid1] = await relay.waitForStdout(
    /^relay: host-1 +api http:\/\/localhost:\d+ .* pid (\d+)/m,
    60_000,
  );
  const [, pid2] = await relay.waitForStdout(
    /^relay: host-2 +api http:\/\/localhost:\d+ .* pid (\d+)/m,
    5_000,
  );
  const [, pgPort] = await relay.waitForStdout(
    /^relay: database +postgres:\/\/relay:\*\*\*@127\.0\.0\.1:(\d+)\/relay/m,
    5_000,
  );
  const [, rpcUrl] = await relay.waitForStdout(/^RPC_URL=(\S+)$/m, 5_000);
  const [, keypairPath] = await relay.waitForStdout(/^KEYPAIR_PATH=(\S+)$/m, 5_000);
  expect(relay.stdout).toMatch(/engine source 127\.0\.0\.2/);
  expect(relay.stdout).toMatch(/kill -9 \d+ \(host-2\)/);
  const [host1, host2] = [`http://127.0.0.1:${base}`, `http://127.0.0.1:${base + 1}`];
  const agentPids = await Promise.all(
    ['host-1', 'host-2'].map(
      async (id) =>
        (await relay.waitForStdout(new RegExp(`^\\[ AGENT ${id} \\] idle agent pid (\\d+)`, 'm'), 20_000))[1],
    ),
  );

  await waitUntil(
    async () => (await readyz(host1)) === 200 && (await readyz(host2)) === 200,
    40_000,
    'both hosts ready',
  );

  // A self-transfer enqueued on host-1 (its agent decides nothing: it stays pending there).
  const payer = Keypair.fromSecretKey(
    Uint8Array.from(JSON.parse(await readFile(keypairPath as string, 'utf8'))),
  );
  const { blockhash } = await new Connection(rpcUrl as string, 'confirmed').getLatestBlockhash();
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: payer.publicKey, lamports: 1 }),
  );
  tx.sign(payer);
  const client = new RelayClient({ baseUrl: host1 });
  const { tx_id: txId } = await client.enqueue(tx);
  client.close();

  // Read from host-2: fleet-wide.
  const seen = await fetch(`${host2}/tx/${txId}`);
  expect(seen.status).toBe(200);
  expect(((await seen.json()) as { state: string }).state).toBe('pending');

  // host-1 dies; host-2 adopts its live transaction.
  const events = await SseReader.open(`${host2}/internal/events`);
  try {
    process.kill(Number(pid1), 'SIGKILL');
    await waitUntil(
      () => /relay: host-1 exited \(SIGKILL\); the fleet runs on with 1 host/.test(relay.stderr),
      10_000,
      'the CLI to report host-1 gone',
    );
    await events.waitFor(
      (r) =>
        r.messages.some((m) => {
          if (m.event !== 'tx_adopted') return false;
          const data = JSON.parse(m.data) as { tx_id: string; host_id: string; from_host_id: string };
          return data.tx_id === txId && data.host_id === 'host-2' && data.from_host_id === 'host-1';
        }),
      30_000,
    );
  } finally {
    events.close();
  }
  expect(relay.child.exitCode).toBeNull();
  await waitUntil(() => !processAlive(Number(agentPids[0])), 10_000, "host-1's agent to be stopped");

  expect(await relay.stop('SIGINT')).toBe(0);
  expect(relay.stderr).toMatch(/relay: SIGINT: stopping\n(.*\n)*relay: stopped\n$/);
  // The hosts and the agents (a group's members may outlive its leader by a moment).
  const pids = [pid1, pid2, ...agentPids].map(Number);
  await waitUntil(() => pids.every((pid) => !processAlive(pid)), 10_000, 'every host and agent to be gone');
  expect(await portInUse(Number(pgPort))).toBe(false);
  expect(await portInUse(base + 1)).toBe(false);
  // The simulated cluster's, the database's and the hosts' directories are gone.
  expect(await readdir(tmp)).toEqual([]);
}, 120_000);

test('--hosts takes 1 to 8, and needs --sim or RELAY_DATABASE_URL', async () => {
  for (const [args, message] of [
    [['up', '--sim', '--hosts', '0'], /--hosts needs a whole number from 1 to 8, got "0"/],
    [['up', '--sim', '--hosts', '9'], /--hosts needs a whole number from 1 to 8/],
    [['up', '--sim', '--hosts', 'three'], /--hosts needs a whole number from 1 to 8/],
    [['up', '--sim', '--no-pg-fsync'], /--no-pg-fsync only applies with --hosts/],
    [['up', '--hosts', '2'], /relay up --hosts needs a database: add --sim .* or set RELAY_DATABASE_URL/],
  ] as const) {
    const run = await runRelay([...args], { env: baseEnv({ AGENT_DIR: IDLE_AGENT }) });
    expect({ args, code: run.code }).toEqual({ args, code: 2 });
    expect(run.stderr).toMatch(message);
  }
});

test('without PostgreSQL on the machine: exit 1 naming the package to install, before anything starts', async () => {
  const tmp = await scratch();
  const run = await runRelay(['up', '--sim', '--hosts', '2'], {
    env: baseEnv({
      API_PORT: String(await freePorts(2)),
      TMPDIR: tmp,
      AGENT_DIR: IDLE_AGENT,
      // Where the binaries are looked for, and nothing else: a directory without them.
      RELAY_PG_BIN: join(tmp, 'no-postgres-here'),
    }),
  });
  expect(run.code).toBe(1);
  expect(run.stderr).toContain('relay up --hosts: PostgreSQL is not installed here');
  expect(run.stderr).toMatch(/apt-get install -y postgresql \(package "postgresql"/);
  expect(run.stderr).toContain('brew install postgresql@15');
  expect(run.stdout).toBe('');
  expect(await readdir(tmp)).toEqual([]);
});
