import { existsSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { LocalPostgres } from '@solrelay/sidecar/pg';
import { migrateBeforeStart, refuseDatabaseInUse } from '../commands/db';
import { CLI_DEFAULTS } from '../env';
import { EXIT_CODES, ExitError, usageError } from '../errors';
import type { CliContext } from '../output';
import { agentDirOrFail, startAgent } from './agent';
import { startDemoTraffic, type DemoTraffic } from './demo-traffic';
import { atExit, spawnGroup, untilSignal, type ChildGroup, type GroupExit } from './process-group';
import { startSimulatedCluster, type SimFlags, type SimulatedCluster } from './simulated-cluster';
import { Teardown } from './teardown';

/**
 * `relay up --hosts N`: a local fleet (README "Running a fleet"). N sidecars on one PostgreSQL (`RELAY_FLEET=1`), each
 * a child process (`relay start`, its own process group, so `kill -9 <pid>` kills one host and the others take its
 * work over), with its own `RELAY_HOST_ID`, API port, data directory and, on the simulated cluster, its own source
 * address for the block engine (so its own engine budget); an agent beside each; the simulated cluster and the
 * PostgreSQL server (unless `RELAY_DATABASE_URL` names one) in this process. A host that dies is reported and the
 * fleet runs on; Ctrl-C stops everything and removes the temp directories; the fleet ends when every host has died.
 */

export interface FleetOptions {
  hosts: number;
  sim: SimFlags | null;
  demo: boolean;
  /** fsync (and full_page_writes) on the local PostgreSQL server: on unless `--no-pg-fsync`. */
  pgFsync: boolean;
}

export const hostPrefix = (id: string) => `[ ${id} ]`;
export const agentPrefix = (id: string) => `[ AGENT ${id} ]`;

/** The first line a host prints once its API listens (`relay start`'s). */
const LISTENING = /^relay: sidecar listening on (\S+)/;
/** How long a host may take to listen (loading the sidecar and opening its store on a busy machine). */
const LISTEN_TIMEOUT_MS = 120_000;

interface Host {
  id: string;
  port: number;
  /** The source address of its block-engine connections, or null when the hosts share this machine's. */
  engineAddress: string | null;
  dir: string;
  group: ChildGroup;
  url: string | null;
  agent: ChildGroup | null;
  up: boolean;
}

/** The built `relay` binary this code runs from (dist/bin.cjs beside the bundle; from src/, the package's dist). */
function relayBin(): string {
  const candidates = [join(__dirname, 'bin.cjs'), resolve(__dirname, '..', '..', 'dist', 'bin.cjs')];
  const found = candidates.find((path) => existsSync(path));
  if (!found)
    throw new ExitError(EXIT_CODES.failure, `cannot find the relay binary (${candidates.join(', ')})`);
  return found;
}

function canListen(host: string, port: number): Promise<NodeJS.ErrnoException | null> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => done(error));
    server.listen(port, host, () => server.close(() => done(null)));
  });
}

/** API_PORT (default 7777): host-1's port; host-k listens on it + k - 1. */
function basePort(ctx: CliContext, hosts: number): number {
  const raw = ctx.env.API_PORT?.trim() || String(CLI_DEFAULTS.apiPort);
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) + hosts - 1 > 65_535) {
    throw usageError(
      `API_PORT must be a port from 1 to ${65_536 - hosts} with --hosts ${hosts} (host-k listens on API_PORT + k - 1), got "${raw}"`,
      'Unset it to use 7777.',
    );
  }
  return Number(raw);
}

export async function runFleet(ctx: CliContext, options: FleetOptions): Promise<number> {
  const out = (line: string) => ctx.io.stdout(`${line}\n`);
  const err = (line: string) => ctx.io.stderr(`${line}\n`);
  const ownDatabase = ctx.env.RELAY_DATABASE_URL?.trim() || null;
  if (!options.sim && !ownDatabase) {
    throw usageError(
      'relay up --hosts needs a database: add --sim (a local PostgreSQL and the simulated cluster), or set RELAY_DATABASE_URL',
      'e.g. `relay up --sim --hosts 3`',
    );
  }

  // Everything that can be known wrong is checked before anything starts.
  const agentDir = agentDirOrFail(ctx);
  const base = basePort(ctx, options.hosts);
  const ids = Array.from({ length: options.hosts }, (_, i) => `host-${i + 1}`);
  for (const [i, id] of ids.entries()) {
    const port = base + i;
    const code = (await canListen('127.0.0.1', port))?.code;
    if (code === 'EADDRINUSE') {
      throw new ExitError(
        EXIT_CODES.failure,
        `API port ${port} (${id}'s) is already in use (another relay?)`,
        {
          hint: `Set API_PORT to the first of ${options.hosts} free ports (host-k listens on API_PORT + k - 1).`,
        },
      );
    }
    if (code === 'EACCES') {
      throw new ExitError(EXIT_CODES.failure, `not allowed to listen on API port ${port} (${id}'s)`, {
        hint: 'Set API_PORT to a port above 1023 (ports below need privileges); host-k listens on API_PORT + k - 1.',
      });
    }
  }
  const db = await import('@solrelay/sidecar/pg');
  if (!ownDatabase) {
    try {
      db.findPostgresBinaries(ctx.env);
    } catch (error) {
      // By name, not instanceof: it holds across duplicated package copies.
      if ((error as Error).name !== 'PostgresNotFoundError') throw error;
      throw new ExitError(EXIT_CODES.failure, 'relay up --hosts: PostgreSQL is not installed here', {
        details: [(error as Error).message],
        hint: 'Install the package named above, or set RELAY_DATABASE_URL to a PostgreSQL database to run the fleet on.',
      });
    }
  }
  // Simulated hosts join no real fleet: a given database must hold nobody's work.
  if (options.sim && ownDatabase) await refuseDatabaseInUse(ctx, ownDatabase);
  // Each host's engine connections go out from an address of its own (127.0.0.2, ...: the simulated engine's budget
  // is per source address). Linux has all of 127.0.0.0/8 on loopback; elsewhere only 127.0.0.1 may be there.
  const engineAddresses: Array<string | null> = ids.map(() => null);
  if (!options.sim && options.hosts > 1) {
    const shared = ctx.env.RELAY_ENGINE_LOCAL_ADDRESS?.trim();
    err(
      `relay: without --sim every host's block-engine connections go out from one address (${shared ? `RELAY_ENGINE_LOCAL_ADDRESS=${shared}` : "this machine's"}): the hosts share one engine budget`,
    );
  }
  if (options.sim) {
    const wanted = ids.map((_, i) => `127.0.0.${i + 2}`);
    const missing = [];
    for (const address of wanted)
      if ((await canListen(address, 0))?.code === 'EADDRNOTAVAIL') missing.push(address);
    if (missing.length === 0) wanted.forEach((address, i) => (engineAddresses[i] = address));
    else
      err(
        `relay: ${missing.join(', ')} cannot be bound here (only 127.0.0.1 on loopback, as on macOS): the hosts share one engine budget`,
      );
  }

  const teardown = new Teardown(err);
  const signal = untilSignal(err);
  // Set by Ctrl-C (SIGINT), SIGTERM or SIGHUP: start-up checks it between its steps, and stops what it started.
  const state: { stopping: NodeJS.Signals | null } = { stopping: null };
  void signal.promise.then((name) => (state.stopping = name));
  const interrupted = signal.promise.then((name) => ({ kind: 'signal' as const, name }));
  const hosts: Host[] = [];
  const stopHosts = async () => {
    // Agents first (they follow their host), then every host at once: each ends its session cleanly on SIGTERM.
    await Promise.all(hosts.map((host) => host.agent?.stop()));
    await Promise.all(hosts.map((host) => host.group.stop()));
  };
  const finish = (name: NodeJS.Signals) => teardown.end(`${name}: stopping`, EXIT_CODES.ok);

  try {
    const scratch = await mkdtemp(join(tmpdir(), 'relay-up-fleet-'));
    // Removed however this process ends (a second Ctrl-C while stopping, a crash, a SIGKILL: see process-group.ts).
    const forgetScratch = atExit(() => rmSync(scratch, { recursive: true, force: true, maxRetries: 3 }), {
      kind: 'dir',
      path: scratch,
    });
    teardown.push(async () => {
      await rm(scratch, { recursive: true, force: true });
      forgetScratch();
    });

    let cluster: SimulatedCluster | null = null;
    let env: Record<string, string | undefined> = { ...ctx.env };
    if (options.sim) {
      cluster = teardown.add(await startSimulatedCluster(options.sim));
      env = { ...env, ...cluster.env };
    }
    if (state.stopping) return await finish(state.stopping);

    let server: LocalPostgres | null = null;
    if (!ownDatabase) {
      server = await db.startLocalPostgres({
        env: ctx.env,
        database: 'relay',
        ...(options.pgFsync
          ? {}
          : { settings: { fsync: 'off', full_page_writes: 'off' }, initdbNoSync: true }),
      });
      const started = server;
      // Whatever way this process ends, the server does not outlive it: the exit hook stops it, and after a death
      // no hook sees (SIGKILL) the watchdog does, with the same function (the password left out: it needs none).
      const forgetServer = atExit(() => db.stopLocalPostgres(started.info), {
        kind: 'call',
        module: createRequire(__filename).resolve('@solrelay/sidecar/pg'),
        fn: 'stopLocalPostgres',
        arg: { ...started.info, password: '' },
      });
      teardown.push(async () => {
        await started.stop();
        forgetServer();
      });
    }
    const databaseUrl = ownDatabase ?? (server as LocalPostgres).url();
    const migrated = await migrateBeforeStart(ctx, databaseUrl);
    if (state.stopping) return await finish(state.stopping);
    // What one more host needs, for a user who adds one by hand (the summary says how); it holds the password.
    const fleetEnv = join(scratch, 'fleet.env');
    await writeFile(
      fleetEnv,
      envFile({ ...cluster?.env, RELAY_DATABASE_URL: databaseUrl, RELAY_FLEET: '1' }),
      {
        mode: 0o600,
      },
    );

    // A host's files (data directory, lifecycle log): under RELAY_DATA_DIR when set, else in the scratch directory.
    const hostDir = (id: string) =>
      ctx.env.RELAY_DATA_DIR ? resolve(ctx.cwd, ctx.env.RELAY_DATA_DIR, id) : join(scratch, id);
    // The hosts' temp files (their engine forwarders' sockets, ...) in the scratch directory too: a host killed
    // outright cannot remove its own, and these go with the scratch directory at the end.
    const hostTmp = join(scratch, 'tmp');
    await mkdir(hostTmp, { mode: 0o700 });
    // The hosts: `relay start` in a child each, all at once.
    const bin = relayBin();
    teardown.push(stopHosts);
    const listening = ids.map(async (id, i) => {
      const dir = hostDir(id);
      let heard: (url: string) => void = () => undefined;
      const url = new Promise<string>((done) => (heard = done));
      const group = await spawnGroup(process.execPath, [bin, 'start'], {
        cwd: ctx.cwd,
        env: {
          ...env,
          RELAY_DATABASE_URL: databaseUrl,
          RELAY_FLEET: '1',
          RELAY_HOST_ID: id,
          API_PORT: String(base + i),
          RELAY_DATA_DIR: join(dir, 'data'),
          LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl'),
          TMPDIR: hostTmp,
          ...(engineAddresses[i] ? { RELAY_ENGINE_LOCAL_ADDRESS: engineAddresses[i] } : {}),
        },
        onStdoutLine: (line) => {
          const match = LISTENING.exec(line);
          if (match) heard(match[1] as string);
          out(`${hostPrefix(id)} ${line}`);
        },
        onStderrLine: (line) => err(`${hostPrefix(id)} ${line}`),
      });
      const host: Host = {
        id,
        port: base + i,
        engineAddress: engineAddresses[i] ?? null,
        dir,
        group,
        url: null,
        agent: null,
        up: true,
      };
      hosts.push(host);
      let timer: NodeJS.Timeout | undefined;
      const first = await Promise.race([
        url.then((u) => ({ kind: 'listening' as const, url: u })),
        group.exited.then((exit) => ({ kind: 'exited' as const, exit })),
        new Promise<{ kind: 'timeout' }>(
          (done) => (timer = setTimeout(() => done({ kind: 'timeout' }), LISTEN_TIMEOUT_MS)),
        ),
        interrupted,
      ]).finally(() => clearTimeout(timer));
      if (first.kind === 'exited')
        throw new ExitError(EXIT_CODES.failure, `${id} exited before it listened (${exitText(first.exit)})`, {
          hint: `Its lines above, prefixed ${hostPrefix(id)}, say why.`,
        });
      if (first.kind === 'timeout')
        throw new ExitError(EXIT_CODES.failure, `${id} did not listen within ${LISTEN_TIMEOUT_MS / 1000} s`);
      if (first.kind === 'listening') host.url = first.url;
      return host;
    });
    const started = await Promise.allSettled(listening);
    if (state.stopping) return await finish(state.stopping);
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;

    for (const host of hosts) {
      host.agent = await startAgent({
        agentDir,
        env,
        url: host.url as string,
        prefix: agentPrefix(host.id),
        out,
        err,
      });
    }

    let demo: DemoTraffic | null = null;
    if (cluster && options.demo) {
      demo = teardown.add(
        startDemoTraffic({
          targets: hosts.map((host) => ({ name: host.id, baseUrl: host.url as string })),
          token: ctx.env.RELAY_API_TOKEN?.trim() || undefined,
          cluster,
          print: out,
          log: err,
        }),
      );
    }

    hosts.sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }));
    const next = options.hosts + 1;
    const nextDir = hostDir(`host-${next}`);
    const addHost = [
      `(set -a; . ${fleetEnv}; RELAY_HOST_ID=host-${next} API_PORT=${base + options.hosts}`,
      `RELAY_DATA_DIR=${join(nextDir, 'data')} LIFECYCLE_PATH=${join(nextDir, 'lifecycle.jsonl')}`,
      ...(engineAddresses[0] ? [`RELAY_ENGINE_LOCAL_ADDRESS=127.0.0.${next + 1}`] : []),
      `${process.execPath} ${bin} start)`,
    ].join(' ');
    // Ctrl-C here removes the scratch directory (fleet.env, and the added host's files unless RELAY_DATA_DIR is set)
    // and the local database: a host added by hand is to be stopped first.
    const removedAtExit = [
      scratch,
      ...(ctx.env.RELAY_DATA_DIR ? [] : ['its data directory with it']),
      ...(server ? ['and the database'] : []),
    ].join(', ');
    const addHostLine = `stop it before this fleet (Ctrl-C here removes ${removedAtExit}): ${addHost}`;
    const context = {
      database: migrated.database,
      server,
      cluster,
      agentDir,
      addHost: addHostLine,
      demo: demo !== null,
    };
    for (const line of summary(hosts, options, context)) out(line);

    // Runs until Ctrl-C, or until no host is left.
    let allDown: () => void = () => undefined;
    const everyHostDown = new Promise<{ kind: 'all-down' }>(
      (done) => (allDown = () => done({ kind: 'all-down' })),
    );
    for (const host of hosts) {
      void host.group.exited.then(async (exit) => {
        host.up = false;
        demo?.targetDown(host.id);
        const left = hosts.filter((h) => h.up).length;
        if (state.stopping) return;
        err(
          left > 0
            ? `relay: ${host.id} exited (${exitText(exit)}); the fleet runs on with ${left} host${left === 1 ? '' : 's'}: they take over its live transactions once its session's lease lapses and a sweep runs (about 7 s with the default lease)`
            : `relay: ${host.id} exited (${exitText(exit)}); no host is left`,
        );
        await host.agent?.stop();
        if (left === 0) allDown();
      });
      void host.agent?.exited.then((exit) => {
        if (!state.stopping && host.up)
          err(
            `relay: ${host.id}'s agent exited (${exitText(exit)}); ${host.id} runs on without it (its own fallback decides after RELAY_AGENT_GRACE_S)`,
          );
      });
    }
    const ended = await Promise.race([interrupted, everyHostDown]);
    if (ended.kind === 'signal') return await finish(ended.name);
    return await teardown.end('every host has exited; stopping', EXIT_CODES.failure);
  } catch (error) {
    await teardown.stopAll();
    throw error;
  } finally {
    signal.cancel();
  }
}

/** `NAME='value'` lines a POSIX shell can source. */
function envFile(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([name, value]) => `${name}='${value.replace(/'/g, `'\\''`)}'\n`)
    .join('');
}

function exitText(exit: GroupExit | null | undefined): string {
  return exit?.signal ?? `code ${exit?.code}`;
}

/** The block printed once every host listens: where everything is, how to watch a takeover, how to add a host. */
function summary(
  hosts: Host[],
  options: FleetOptions,
  context: {
    database: string;
    server: LocalPostgres | null;
    cluster: SimulatedCluster | null;
    agentDir: string;
    addHost: string;
    demo: boolean;
  },
): string[] {
  const { server, cluster } = context;
  const lines = [`relay: a fleet of ${hosts.length} host${hosts.length === 1 ? '' : 's'} on one PostgreSQL`];
  for (const host of hosts) {
    const local = (host.url as string).replace('://127.0.0.1:', '://localhost:');
    lines.push(
      `relay: ${host.id}  api ${local}  dashboard ${local}/  pid ${host.group.pid}` +
        (host.engineAddress ? `  engine source ${host.engineAddress}` : ''),
    );
  }
  if (hosts.length > 1 && hosts.every((host) => host.engineAddress === null))
    lines.push('relay: the hosts share one engine budget (one source address)');
  lines.push(
    `relay: database  ${context.database}` +
      (server
        ? `  (PostgreSQL in ${server.info.root}, fsync ${options.pgFsync ? 'on' : 'off'}; removed at exit)`
        : ''),
  );
  lines.push(
    `relay: agents    npm run dev in ${context.agentDir}, one per host (lines prefixed [ AGENT host-k ])`,
  );
  if (context.demo)
    lines.push(
      'relay: demo traffic on: a self-transfer every 2 s, round-robin over the hosts (--no-demo turns it off)',
    );
  const victim = hosts[1];
  lines.push(
    victim
      ? `relay: watch a takeover: kill -9 ${victim.group.pid} (${victim.id}); the others adopt its live transactions in about 7 s. ` +
          `kill -STOP ${victim.group.pid}, later kill -CONT, pauses it instead (fenced, its work adopted; it registers again with a new epoch)`
      : 'relay: one host: a takeover needs a second one (add a host as below, then kill -9 one of them)',
  );
  lines.push(`relay: add a host: ${context.addHost}`);
  if (cluster) lines.push(...cluster.lines());
  return lines;
}
