import { chmod, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection, Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { RelayClient } from '@solrelay/client';
import { SseReader, usePostgres, waitUntil } from '@solrelay/testkit';
import { RelayProcess, baseEnv, freePort, portInUse, processAlive, runRelay } from '../helpers/relay-bin';

// `relay up --sim --hosts N` (README "Running a fleet"): N sidecar processes on a local PostgreSQL. Two hosts keep the
// run short. Their agents are stand-ins that register and decide nothing, so what a host accepts stays pending: live
// work for the other host to adopt when it dies.
const IDLE_AGENT = join(__dirname, '..', 'fixtures', 'idle-agent');

// For the test of a given database that holds another fleet's rows (the shared test server, started in beforeAll).
const pg = usePostgres();

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

/** The environment of a `relay up --hosts 2` in `tmp` (its TMPDIR): two free API ports, the idle agents. */
async function fleetEnv(tmp: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return baseEnv({ API_PORT: String(await freePorts(2)), TMPDIR: tmp, AGENT_DIR: IDLE_AGENT, ...extra });
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
  // A host added by hand: its files are in the fleet's temp directory, which Ctrl-C removes.
  expect(relay.stdout).toMatch(
    /^relay: add a host: stop it before this fleet \(Ctrl-C here removes \S+\/relay-up-fleet-\w+, its data directory with it, and the database\): \(set -a; \. \S+\/fleet\.env; RELAY_HOST_ID=host-3 /m,
  );
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

/** `relay up --sim --hosts 2` until every host's agent runs: the pids of its hosts, agents and PostgreSQL server. */
async function startFleet(tmp: string): Promise<{ relay: RelayProcess; pids: number[]; pgPort: number }> {
  const relay = new RelayProcess(['up', '--sim', '--hosts', '2', '--no-demo', '--slot-ms', '200'], {
    env: await fleetEnv(tmp, { RELAY_AGENT_GRACE_S: '600' }),
    cwd: tmp,
  });
  running.push(relay);
  const hostPids = [];
  for (const id of ['host-1', 'host-2'])
    hostPids.push(
      (await relay.waitForStdout(new RegExp(`^relay: ${id} +api .* pid (\\d+)`, 'm'), 60_000))[1],
    );
  const [, pgPort, pgRoot] = await relay.waitForStdout(
    /^relay: database +postgres:\/\/relay:\*\*\*@127\.0\.0\.1:(\d+)\/relay +\(PostgreSQL in (\S+),/m,
    5_000,
  );
  const postmaster = (await readFile(join(pgRoot as string, 'data', 'postmaster.pid'), 'utf8')).split(
    '\n',
  )[0];
  const agentPids = [];
  for (const id of ['host-1', 'host-2'])
    agentPids.push(
      (await relay.waitForStdout(new RegExp(`^\\[ AGENT ${id} \\] idle agent pid (\\d+)`, 'm'), 20_000))[1],
    );
  return { relay, pids: [...hostPids, ...agentPids, postmaster].map(Number), pgPort: Number(pgPort) };
}

/** Every process gone (a group's members may outlive its leader by a moment), the server's port free, no temp dir. */
async function expectNothingLeft(tmp: string, pids: number[], pgPort: number): Promise<void> {
  await waitUntil(
    () => pids.every((pid) => !processAlive(pid)),
    15_000,
    'every host, agent and the PostgreSQL server to be gone',
  );
  expect(await portInUse(pgPort)).toBe(false);
  await waitUntil(async () => (await readdir(tmp)).length === 0, 10_000, 'every temp dir to be removed');
}

test('a second signal while stopping (SIGINT, then SIGHUP at once) kills everything at once: no host, agent or PostgreSQL process, no temp dir', async () => {
  const tmp = await scratch();
  const { relay, pids, pgPort } = await startFleet(tmp);
  relay.child.kill('SIGINT');
  relay.child.kill('SIGHUP');
  // 128 + the second signal's number (the kernel may hand over the two in either order).
  expect([128 + 1, 128 + 2]).toContain(await relay.closed);
  expect(relay.stderr).toMatch(/^relay: (SIGINT|SIGHUP) while stopping: killing everything now$/m);
  expect(relay.stderr).not.toMatch(/^relay: stopped$/m);
  await expectNothingLeft(tmp, pids, pgPort);
}, 120_000);

test('SIGHUP alone (the terminal closed) stops the fleet as Ctrl-C does; SIGKILL of relay itself leaves nothing either (its watchdog cleans up)', async () => {
  const tmp = await scratch();
  const first = await startFleet(tmp);
  expect(await first.relay.stop('SIGHUP')).toBe(0);
  expect(first.relay.stderr).toMatch(/relay: SIGHUP: stopping\n(.*\n)*relay: stopped\n$/);
  await expectNothingLeft(tmp, first.pids, first.pgPort);

  // No handler runs on SIGKILL: the watchdog, told of every group, the server and the temp dirs, sees the pipe close.
  const second = await startFleet(tmp);
  second.relay.child.kill('SIGKILL');
  await second.relay.closed;
  await expectNothingLeft(tmp, second.pids, second.pgPort);
}, 180_000);

test("--sim with RELAY_DATABASE_URL naming a database that holds another fleet's rows: exit 1 before anything starts, saying why and what to do", async () => {
  const url = await pg.fresh();
  const migrated = await runRelay(['db', 'migrate'], { env: baseEnv({ RELAY_DATABASE_URL: url }) });
  expect(migrated.code).toBe(0);
  // A session of some other fleet's host (a live one: its lease runs).
  await pg
    .server()
    .sql(
      "INSERT INTO host_sessions (host_id, lease_expires_at) VALUES ('prod-1', now() + interval '1 hour')",
      new URL(url).pathname.slice(1),
    );
  const tmp = await scratch();
  const run = await runRelay(['up', '--sim', '--hosts', '2'], {
    env: await fleetEnv(tmp, { RELAY_DATABASE_URL: url }),
  });
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(
    /relay up --sim: the database postgres:\/\/relay:\*\*\*@127\.0\.0\.1:\d+\/\S+ \(RELAY_DATABASE_URL\) already holds host_sessions rows: simulated hosts would join the fleet that uses it/,
  );
  expect(run.stderr).toContain("adopt each other's live transactions");
  expect(run.stderr).toMatch(/hint: Give --sim an empty database .* or unset RELAY_DATABASE_URL/);
  expect(run.stderr).not.toContain(pg.server().password);
  expect(run.stdout).toBe('');
  expect(await readdir(tmp)).toEqual([]);
});

test('without --sim, on RELAY_DATABASE_URL: a line says the hosts share one engine budget (here they then fail to start: no upstreams)', async () => {
  const tmp = await scratch();
  const run = await runRelay(['up', '--hosts', '2'], {
    env: await fleetEnv(tmp, { RELAY_DATABASE_URL: await pg.fresh() }),
    timeoutMs: 60_000,
  });
  expect(run.stderr).toMatch(
    /^relay: without --sim every host's block-engine connections go out from one address \(this machine's\): the hosts share one engine budget$/m,
  );
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/host-\d exited before it listened/);
  expect(await readdir(tmp)).toEqual([]);
}, 60_000);

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
    env: await fleetEnv(tmp, {
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
