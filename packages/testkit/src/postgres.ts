import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { Client } from 'pg';
import { freePort } from './ports';

/**
 * A throwaway PostgreSQL server for tests: the real server from the machine's packages (Debian's `postgresql`,
 * version 15), initdb'd into a fresh temp directory and started with `pg_ctl -w` on a free loopback port, no systemd.
 * Tests take a database each, copied from a template (`CREATE DATABASE x TEMPLATE t`, ~0.1 s), so none sees
 * another's rows.
 *
 * Test settings, not production ones: `fsync=off` and `full_page_writes=off` (a crash of the machine may lose the
 * test server's data, which is thrown away anyway; `synchronous_commit` stays on, so commits behave as relay expects).
 * Connections over TCP authenticate with a password (scram-sha-256), so a wrong password is refused as it would be in
 * production; the Unix socket in the temp directory trusts local users.
 */
/** Where a running server is and how to reach and stop it (what a shared server hands to other test workers). */
export interface PgServerInfo {
  bin: string;
  /** Its tools run as the `postgres` user (we are root). */
  asPostgres: boolean;
  /** The temp directory holding the data directory, socket and log; removed on stop. */
  root: string;
  dataDir: string;
  host: string;
  port: number;
  user: string;
  password: string;
  /** The `-o` flags it was started with (port, addresses, test settings): a start after `shutDown` reuses them. */
  flags?: string;
}

export interface PgServer {
  info: PgServerInfo;
  host: string;
  port: number;
  user: string;
  password: string;
  /** The data directory (its parent temp directory is removed by `stop`). */
  dataDir: string;
  /** `postgres://user:password@127.0.0.1:port/<database>`. */
  url(database?: string): string;
  /** Run SQL as the superuser in `database` (default `postgres`), on a short-lived connection. */
  sql(text: string, database?: string): Promise<void>;
  /**
   * Create the template database `name` and run `prepare` against it (e.g. apply migrations); it is then marked as a
   * template nobody may connect to, so copies of it never wait on a leftover connection.
   */
  createTemplate(name: string, prepare: (url: string) => Promise<void>): Promise<string>;
  /** A new empty database, or a copy of `template`; returns its URL. Names are unique within the server. */
  createDatabase(template?: string): Promise<string>;
  /**
   * Shut the server down as an outage would, keeping its data directory and port: `pg_ctl stop -m immediate` (no
   * clean shutdown: every session is cut and the next start recovers from the WAL) or `-m fast` (sessions are told
   * and ended, then a clean shutdown). Waits until it is down.
   */
  shutDown(mode: 'immediate' | 'fast'): Promise<void>;
  /** Start it again after `shutDown`, on the same data directory, port and settings (`pg_ctl start -w`). */
  startAgain(): Promise<void>;
  /** Stop the server (immediate) and remove its directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface PgServerOptions {
  /** Extra `-c name=value` settings. */
  settings?: Record<string, string>;
}

/** Where the server binaries are looked for, first match wins. */
function binaryDirectories(env: NodeJS.ProcessEnv): string[] {
  const dirs: string[] = [];
  if (env.RELAY_PG_BIN) dirs.push(env.RELAY_PG_BIN);
  // Debian's layout: 15 (what DESIGN §10 names, Debian 12's), then any other version installed, newest first.
  dirs.push('/usr/lib/postgresql/15/bin');
  try {
    const versions = readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v));
    for (const v of versions.sort((a, b) => Number(b) - Number(a))) dirs.push(`/usr/lib/postgresql/${v}/bin`);
  } catch {
    // no PostgreSQL from Debian's packages
  }
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    // pg_ctl on PATH is often a symlink into the versioned directory that also holds initdb.
    try {
      dirs.push(dirname(realpathSync(join(dir, 'pg_ctl'))));
    } catch {
      // not here
    }
  }
  return [...new Set(dirs)];
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The directory holding `initdb` and `pg_ctl`. Throws, naming Debian's package, when they are missing: a test that
 * needs PostgreSQL must fail where there is none, never pass or skip.
 */
export function findPostgresBinaries(
  env: NodeJS.ProcessEnv = process.env,
  dirs: readonly string[] = binaryDirectories(env),
): string {
  const found = dirs.find((dir) => executable(join(dir, 'initdb')) && executable(join(dir, 'pg_ctl')));
  if (found) return found;
  throw new Error(
    `PostgreSQL server binaries (initdb, pg_ctl) not found in ${dirs.join(', ')}. ` +
      'Install PostgreSQL 15 from Debian\'s packages: apt-get install -y postgresql (package "postgresql"), ' +
      'or point RELAY_PG_BIN at the directory holding initdb and pg_ctl.',
  );
}

/** PostgreSQL refuses to run as root: as root, run its tools as the `postgres` user. */
function asServerUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) {
    throw new Error(
      'running as root, and there is no "postgres" user to run PostgreSQL as (Debian\'s "postgresql" package creates it)',
    );
  }
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

function run(bin: string, args: string[], asPostgres: boolean): Promise<string> {
  const [file, argv] = asPostgres ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`${[file, ...argv].join(' ')} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Every server started by this process, stopped on exit if a test run ends before its teardown. */
const running = new Set<PgServer>();
let exitHookInstalled = false;

function installExitHook(stopSync: () => void): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => stopSync());
}

/** Stop a server (immediate: nothing of a test server is worth a clean shutdown) and remove its directory. */
function stopServer(info: PgServerInfo): void {
  // Also after a failed start: pg_ctl may have left a server running before it gave up waiting.
  if (existsSync(join(info.dataDir, 'postmaster.pid'))) {
    try {
      const args = ['-D', info.dataDir, '-m', 'immediate', '-w', 'stop'];
      const pgCtl = join(info.bin, 'pg_ctl');
      if (info.asPostgres)
        execFileSync('runuser', ['-u', 'postgres', '--', pgCtl, ...args], { stdio: 'ignore' });
      else execFileSync(pgCtl, args, { stdio: 'ignore' });
    } catch {
      // already stopped
    }
  }
  rmSync(info.root, { recursive: true, force: true });
}

/**
 * Start a throwaway server; see {@link PgServer}. Cleans up after itself if any step fails. Stopped by `stop()`, or
 * when this process exits; `shared` leaves that to {@link postgresGlobalTeardown} (other workers use it).
 */
/**
 * A package that runs its tests in two groups (tooling/jest-groups.mjs) runs the files using PostgreSQL one at a
 * time (`RELAY_JEST_GROUP=serial`); one that reaches here from the parallel group is missing from the config's list.
 */
function refuseInParallelGroup(): void {
  if (process.env.RELAY_JEST_GROUP === 'parallel')
    throw new Error(
      "this test file uses PostgreSQL but runs in the parallel group: add it to the package's jest.config.cjs list of PostgreSQL files (they run one at a time)",
    );
}

export async function startPostgres(options: PgServerOptions & { shared?: boolean } = {}): Promise<PgServer> {
  refuseInParallelGroup();
  const bin = findPostgresBinaries();
  const owner = asServerUser();
  const root = mkdtempSync(join(tmpdir(), 'relay-pg-'));
  const info: PgServerInfo = {
    bin,
    asPostgres: owner !== null,
    root,
    dataDir: join(root, 'data'),
    host: '127.0.0.1',
    port: 0,
    user: 'relay',
    password: randomBytes(12).toString('hex'),
  };
  const { dataDir, host, user, password } = info;
  const pgCtl = join(bin, 'pg_ctl');
  let started = false;
  try {
    if (owner) chownSync(root, owner.uid, owner.gid);
    const pwfile = join(root, 'pwfile');
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    if (owner) chownSync(pwfile, owner.uid, owner.gid);
    await run(
      join(bin, 'initdb'),
      [
        '-D',
        dataDir,
        '-U',
        user,
        `--pwfile=${pwfile}`,
        '--auth-local=trust',
        '--auth-host=scram-sha-256',
        '--no-sync',
        '--encoding=UTF8',
        '--locale=C',
      ],
      owner !== null,
    );
    // A free port now may be taken before the server binds it: try another port a few times.
    for (let tries = 1; !started; tries++) {
      info.port = await freePort();
      const settings: Record<string, string> = {
        port: String(info.port),
        listen_addresses: host,
        unix_socket_directories: root,
        fsync: 'off',
        full_page_writes: 'off',
        synchronous_commit: 'on',
        max_connections: '100',
        ...options.settings,
      };
      const flags = Object.entries(settings)
        .map(([name, v]) => `-c ${name}=${v}`)
        .join(' ');
      const log = join(root, 'server.log');
      info.flags = flags;
      try {
        await run(pgCtl, ['-D', dataDir, '-w', '-t', '60', '-l', log, '-o', flags, 'start'], owner !== null);
      } catch (error) {
        const inUse = /could not bind|Address already in use/.test(readFileSync(log, 'utf8'));
        if (!inUse || tries >= 3) throw error;
        continue;
      }
      started = true;
    }
  } catch (error) {
    stopServer(info);
    throw error;
  }
  if (options.shared) return serverHandle(info, () => {});
  const server = serverHandle(info, () => {
    running.delete(server);
    stopServer(info);
  });
  running.add(server);
  installExitHook(() => {
    for (const s of running) void s.stop();
  });
  return server;
}

/** The handle on a running server; `stop` is what stopping means for this holder. */
function serverHandle(info: PgServerInfo, stop: () => void): PgServer {
  const { host, port, user, password, dataDir } = info;
  let counter = 0;
  const url = (database = 'postgres') =>
    `postgres://${user}:${password}@${host}:${port}/${encodeURIComponent(database)}`;
  const sql = async (text: string, database?: string) => {
    const client = new Client({ connectionString: url(database) });
    await client.connect();
    try {
      await client.query(text);
    } finally {
      await client.end();
    }
  };
  return {
    info,
    host,
    port,
    user,
    password,
    dataDir,
    url,
    sql,
    async createTemplate(name, prepare) {
      await sql(`CREATE DATABASE ${quoteIdent(name)}`);
      await prepare(url(name));
      await sql(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`);
      return name;
    },
    async createDatabase(template) {
      // Unique across the workers and files sharing a server (a worker's pid serves many files).
      const name = `t${process.pid}_${++counter}_${randomBytes(3).toString('hex')}`;
      await sql(`CREATE DATABASE ${quoteIdent(name)}${template ? ` TEMPLATE ${quoteIdent(template)}` : ''}`);
      return url(name);
    },
    async shutDown(mode) {
      await run(
        join(info.bin, 'pg_ctl'),
        ['-D', dataDir, '-m', mode, '-w', '-t', '60', 'stop'],
        info.asPostgres,
      );
    },
    async startAgain() {
      const log = join(info.root, 'server.log');
      await run(
        join(info.bin, 'pg_ctl'),
        ['-D', dataDir, '-w', '-t', '60', '-l', log, '-o', info.flags ?? `-c port=${port}`, 'start'],
        info.asPostgres,
      );
    },
    async stop() {
      stop();
    },
  };
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The variable that tells test workers to share one server: a directory, set by {@link postgresGlobalSetup}, where
 * the first worker that needs a server records it (`server.json`) under a lock; {@link postgresGlobalTeardown} stops it.
 */
export const SHARED_POSTGRES_ENV = 'RELAY_TEST_PG_SHARED';

/**
 * A jest `globalSetup`: test files of this run that call {@link usePostgres} share one server, started by the first
 * that needs it (a run with no PostgreSQL test starts none). Pair it with {@link postgresGlobalTeardown}.
 */
export async function postgresGlobalSetup(): Promise<void> {
  process.env[SHARED_POSTGRES_ENV] = mkdtempSync(join(tmpdir(), 'relay-pg-shared-'));
}

/** A jest `globalTeardown`: stops the shared server, if one was started, and removes what it left. */
export async function postgresGlobalTeardown(): Promise<void> {
  const dir = process.env[SHARED_POSTGRES_ENV];
  if (!dir) return;
  const file = join(dir, 'server.json');
  if (existsSync(file)) stopServer(JSON.parse(readFileSync(file, 'utf8')) as PgServerInfo);
  rmSync(dir, { recursive: true, force: true });
  delete process.env[SHARED_POSTGRES_ENV];
}

/** Runs `work` holding a lock shared by every worker (a directory: `mkdir` either creates it or fails). */
async function withDirectoryLock<T>(lock: string, work: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== 'EEXIST') throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  try {
    return await work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** The run's shared server (started now if this is the first file to need it) with `template` prepared once. */
async function sharedServer(
  dir: string,
  template: string | undefined,
  prepare: ((url: string) => Promise<void>) | undefined,
): Promise<PgServer> {
  return withDirectoryLock(join(dir, 'lock'), async () => {
    const file = join(dir, 'server.json');
    let server: PgServer;
    if (existsSync(file)) {
      server = serverHandle(JSON.parse(readFileSync(file, 'utf8')) as PgServerInfo, () => {});
    } else {
      server = await startPostgres({ shared: true });
      writeFileSync(file, JSON.stringify(server.info));
    }
    if (template && prepare) {
      const client = new Client({ connectionString: server.url() });
      await client.connect();
      const { rowCount } = await client
        .query('SELECT 1 FROM pg_database WHERE datname = $1', [template])
        .finally(() => client.end());
      if (!rowCount) await server.createTemplate(template, prepare);
    }
    return server;
  });
}

/**
 * A server for the test file that calls this, with a template prepared once by `prepare` (e.g. relay's migrations)
 * under the name `template`; `fresh()` gives each test its own database copied from it (or an empty one).
 *
 * With {@link postgresGlobalSetup} as the package's jest globalSetup, every file of the run shares one server (files
 * that prepare different templates must name them differently). Without it, the file gets its own server, started in
 * `beforeAll` and stopped in `afterAll`, which jest runs even when a test or the setup failed.
 */
export function usePostgres(
  prepare?: (url: string) => Promise<void>,
  template = 'relay_template',
): {
  server(): PgServer;
  fresh(): Promise<string>;
} {
  let server: PgServer | null = null;
  const shared = process.env[SHARED_POSTGRES_ENV];
  refuseInParallelGroup();
  beforeAll(async () => {
    if (shared) {
      server = await sharedServer(shared, prepare ? template : undefined, prepare);
    } else {
      server = await startPostgres();
      if (prepare) await server.createTemplate(template, prepare);
    }
  }, 60_000);
  afterAll(async () => {
    // A shared server outlives the file: the global teardown stops it.
    if (!shared) await server?.stop();
  });
  const get = () => {
    if (!server)
      throw new Error('usePostgres: the server is not started (call it at the top of a test file)');
    return server;
  };
  return { server: get, fresh: () => get().createDatabase(prepare ? template : undefined) };
}
