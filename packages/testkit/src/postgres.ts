import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { Client } from 'pg';
import { freePort } from './stack';

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
export interface PgServer {
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

/** Start a throwaway server; see {@link PgServer}. Cleans up after itself if any step fails. */
export async function startPostgres(options: PgServerOptions = {}): Promise<PgServer> {
  const bin = findPostgresBinaries();
  const owner = asServerUser();
  const root = mkdtempSync(join(tmpdir(), 'relay-pg-'));
  const dataDir = join(root, 'data');
  const user = 'relay';
  const password = randomBytes(12).toString('hex');
  const host = '127.0.0.1';
  let started = false;
  let port = 0;
  const pgCtl = join(bin, 'pg_ctl');
  const stopSync = () => {
    // Also after a failed start: pg_ctl may have left a server running before it gave up waiting.
    if (started || existsSync(join(dataDir, 'postmaster.pid'))) {
      try {
        const args = ['-D', dataDir, '-m', 'immediate', '-w', 'stop'];
        if (owner) execFileSync('runuser', ['-u', 'postgres', '--', pgCtl, ...args], { stdio: 'ignore' });
        else execFileSync(pgCtl, args, { stdio: 'ignore' });
      } catch {
        // already stopped
      }
      started = false;
    }
    rmSync(root, { recursive: true, force: true });
  };
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
      port = await freePort();
      const settings: Record<string, string> = {
        port: String(port),
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
    stopSync();
    throw error;
  }

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
  const server: PgServer = {
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
      const name = `t${process.pid}_${++counter}`;
      await sql(`CREATE DATABASE ${quoteIdent(name)}${template ? ` TEMPLATE ${quoteIdent(template)}` : ''}`);
      return url(name);
    },
    async stop() {
      running.delete(server);
      stopSync();
    },
  };
  running.add(server);
  installExitHook(() => {
    for (const s of running) void s.stop();
  });
  return server;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * One server for the test file that calls this (started in `beforeAll`, stopped in `afterAll`, which jest runs even
 * when a test or the setup failed), with a template prepared once by `prepare` (e.g. relay's migrations).
 * `fresh()` gives each test its own database copied from the template.
 */
export function usePostgres(prepare?: (url: string) => Promise<void>): {
  server(): PgServer;
  fresh(): Promise<string>;
} {
  let server: PgServer | null = null;
  let template: string | undefined;
  beforeAll(async () => {
    server = await startPostgres();
    if (prepare) template = await server.createTemplate('relay_template', prepare);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });
  const get = () => {
    if (!server)
      throw new Error('usePostgres: the server is not started (call it at the top of a test file)');
    return server;
  };
  return { server: get, fresh: () => get().createDatabase(template) };
}
