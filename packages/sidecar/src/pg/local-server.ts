import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  chownSync,
  constants,
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
import pg from 'pg';

/**
 * A throwaway PostgreSQL server on this machine: the real server from the machine's packages (Debian's or Ubuntu's
 * `postgresql`, Homebrew's `postgresql@15`), initdb'd into a fresh temp directory and started with `pg_ctl -w` on a
 * loopback port, no systemd. `relay up --hosts N` runs its local fleet on one; the test harness
 * (`@solrelay/testkit`'s `startPostgres`) starts its servers with it, adding test settings.
 *
 * The settings are relay's production expectations (README "Running on PostgreSQL"): `fsync`, `full_page_writes` and
 * `synchronous_commit` on, unless `settings` says otherwise. Connections over TCP authenticate with a password
 * (scram-sha-256), so a wrong password is refused as it would be in production; the Unix socket in the temp
 * directory trusts local users. PostgreSQL refuses to run as root: as root its tools run as the `postgres` user
 * (`runuser`), which the package creates.
 */

/** Where a running server is and how to reach and stop it (plain data: it may be handed to another process). */
export interface LocalPostgresInfo {
  /** The directory holding `initdb` and `pg_ctl`. */
  bin: string;
  /** Its tools run as the `postgres` user (this process is root). */
  asPostgres: boolean;
  /** The temp directory holding the data directory, socket and log; removed on stop. */
  root: string;
  dataDir: string;
  host: string;
  port: number;
  /** The superuser initdb created, with `password`. */
  user: string;
  password: string;
  /** The `-o` flags it was started with (port, addresses, settings): a start after `shutDown` reuses them. */
  flags?: string;
}

export interface LocalPostgresOptions {
  /** Extra `-c name=value` settings, over the defaults (the test harness turns `fsync` off). */
  settings?: Record<string, string>;
  /** initdb without flushing what it wrote (`--no-sync`): for a server whose data no crash needs to keep. */
  initdbNoSync?: boolean;
  /** Where the binaries are looked for (`RELAY_PG_BIN`, `PATH`); default this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** Where the temp directory goes; default the system's (`TMPDIR`). */
  parentDir?: string;
  /** A database to create once the server runs (owned by the superuser), e.g. `relay`. */
  database?: string;
}

export interface LocalPostgres {
  info: LocalPostgresInfo;
  /** `postgres://user:password@127.0.0.1:port/<database>` (default `postgres`, or the database it was made with). */
  url(database?: string): string;
  /** Runs SQL as the superuser in `database` (default as for `url`), on a short-lived connection. */
  sql(text: string, database?: string): Promise<void>;
  /**
   * Shuts the server down as an outage would, keeping its data directory and port: `immediate` (every session cut,
   * the next start recovers from the WAL) or `fast` (sessions ended, then a clean shutdown). Waits until it is down.
   */
  shutDown(mode: 'immediate' | 'fast'): Promise<void>;
  /** Starts it again after `shutDown`, on the same data directory, port and settings. */
  startAgain(): Promise<void>;
  /** Stops the server (immediate: its data is thrown away) and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

/** The server's binaries are not on this machine; the message names the package to install. */
export class PostgresNotFoundError extends Error {
  override readonly name = 'PostgresNotFoundError';
  constructor(readonly searched: readonly string[]) {
    super(
      `PostgreSQL server binaries (initdb, pg_ctl) not found in ${searched.join(', ')}. ` +
        'Install PostgreSQL 15 from Debian\'s packages: apt-get install -y postgresql (package "postgresql", the same ' +
        'on Ubuntu), or with Homebrew: brew install postgresql@15; or point RELAY_PG_BIN at the directory holding ' +
        'initdb and pg_ctl.',
    );
  }
}

/**
 * Where the server binaries are looked for, first match wins. `RELAY_PG_BIN`, when set, is the only place: a
 * directory named on purpose is not passed over for another version found elsewhere.
 */
export function postgresBinaryDirectories(env: NodeJS.ProcessEnv = process.env): string[] {
  if (env.RELAY_PG_BIN) return [env.RELAY_PG_BIN];
  // Debian's layout: 15 (what DESIGN §10 names, Debian 12's), then any other version installed, newest first.
  const dirs = ['/usr/lib/postgresql/15/bin'];
  try {
    const versions = readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v));
    for (const v of versions.sort((a, b) => Number(b) - Number(a))) dirs.push(`/usr/lib/postgresql/${v}/bin`);
  } catch {
    // no PostgreSQL from Debian's packages
  }
  // Homebrew (Apple silicon, then Intel); its postgresql@15 is keg-only, so not on PATH.
  dirs.push('/opt/homebrew/opt/postgresql@15/bin', '/usr/local/opt/postgresql@15/bin');
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

/** The directory holding `initdb` and `pg_ctl`; throws {@link PostgresNotFoundError} when there is none. */
export function findPostgresBinaries(
  env: NodeJS.ProcessEnv = process.env,
  dirs: readonly string[] = postgresBinaryDirectories(env),
): string {
  const found = dirs.find((dir) => executable(join(dir, 'initdb')) && executable(join(dir, 'pg_ctl')));
  if (found) return found;
  throw new PostgresNotFoundError(dirs);
}

/** PostgreSQL refuses to run as root: as root, its tools run as the `postgres` user. */
function serverUser(): { uid: number; gid: number } | null {
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

function runTool(info: Pick<LocalPostgresInfo, 'bin' | 'asPostgres' | 'root'>, tool: string, args: string[]) {
  const [file, ...argv] = toolArgv(info, tool, args);
  return new Promise<string>((resolve, reject) => {
    // cwd: the server's own directory, which the `postgres` user can enter (runuser keeps the caller's cwd).
    execFile(file, argv, { encoding: 'utf8', cwd: info.root }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`${[file, ...argv].join(' ')} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The command line running `tool` from the server's binaries with `args` (through `runuser` as root). */
function toolArgv(
  info: Pick<LocalPostgresInfo, 'bin' | 'asPostgres'>,
  tool: string,
  args: string[],
): [string, ...string[]] {
  const bin = join(info.bin, tool);
  return info.asPostgres ? ['runuser', '-u', 'postgres', '--', bin, ...args] : [bin, ...args];
}

/**
 * Stops a server (immediate) and removes its directory, synchronously, so it also serves an `exit` hook. Also after
 * a failed start: pg_ctl may have left a server running before it gave up waiting.
 */
export function stopLocalPostgres(info: LocalPostgresInfo): void {
  if (existsSync(join(info.dataDir, 'postmaster.pid'))) {
    try {
      const [file, ...argv] = toolArgv(info, 'pg_ctl', ['-D', info.dataDir, '-m', 'immediate', '-w', 'stop']);
      execFileSync(file, argv, { stdio: 'ignore', cwd: info.root });
    } catch {
      // already stopped
    }
  }
  rmSync(info.root, { recursive: true, force: true });
}

/** pg_ctl could not start the server; the message ends with the last lines of its log, `serverLog`. */
class ServerStartError extends Error {
  constructor(
    message: string,
    readonly serverLog: string,
    cause: unknown,
  ) {
    super(message, { cause });
  }
}

/**
 * `pg_ctl start` with the log at `log`. pg_ctl's own error only says to examine the log, which a failed start then
 * removes with the rest of the directory: the error carries the log's last lines (the server's own complaint).
 */
async function startServer(info: LocalPostgresInfo, log: string, flags: string): Promise<void> {
  try {
    await runTool(info, 'pg_ctl', ['-D', info.dataDir, '-w', '-t', '60', '-l', log, '-o', flags, 'start']);
  } catch (error) {
    const tail = logTail(log);
    const logged = tail === null ? `(no server log at ${log})` : `last lines of the server log:\n${tail}`;
    throw new ServerStartError(`${(error as Error).message.trimEnd()}\n${logged}`, tail ?? '', error);
  }
}

/** The last `lines` lines of a log, or null when it cannot be read (pg_ctl failed before creating it). */
function logTail(log: string, lines = 40): string | null {
  try {
    return readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return null;
  }
}

/** A loopback port for the server, below Linux's ephemeral range (where `listen(0)` and outgoing sockets go). */
function portCandidate(): number {
  return 20_000 + (randomBytes(2).readUInt16BE(0) % 12_000);
}

/**
 * Starts a server; see {@link LocalPostgres}. Throws {@link PostgresNotFoundError} before touching anything when the
 * binaries are missing, and removes whatever it made if a later step fails.
 */
export async function startLocalPostgres(options: LocalPostgresOptions = {}): Promise<LocalPostgres> {
  const bin = findPostgresBinaries(options.env ?? process.env);
  const owner = serverUser();
  const root = mkdtempSync(join(options.parentDir ?? tmpdir(), 'relay-pg-'));
  const info: LocalPostgresInfo = {
    bin,
    asPostgres: owner !== null,
    root,
    dataDir: join(root, 'data'),
    host: '127.0.0.1',
    port: 0,
    user: 'relay',
    password: randomBytes(12).toString('hex'),
  };
  try {
    if (owner) chownSync(root, owner.uid, owner.gid);
    const pwfile = join(root, 'pwfile');
    await writeFile(pwfile, `${info.password}\n`, { mode: 0o600 });
    if (owner) chownSync(pwfile, owner.uid, owner.gid);
    await runTool(info, 'initdb', [
      '-D',
      info.dataDir,
      '-U',
      info.user,
      `--pwfile=${pwfile}`,
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
      ...(options.initdbNoSync ? ['--no-sync'] : []),
      '--encoding=UTF8',
      '--locale=C',
    ]);
    rmSync(pwfile, { force: true });
    // A port free now may be taken before the server binds it: another port, a few times.
    for (let tries = 1; ; tries++) {
      info.port = portCandidate();
      const settings: Record<string, string> = {
        port: String(info.port),
        listen_addresses: info.host,
        unix_socket_directories: root,
        fsync: 'on',
        full_page_writes: 'on',
        synchronous_commit: 'on',
        max_connections: '100',
        ...options.settings,
      };
      info.flags = Object.entries(settings)
        .map(([name, v]) => `-c ${name}=${v}`)
        .join(' ');
      // A fresh log each try, so the error's tail is this try's.
      const log = join(root, 'server.log');
      rmSync(log, { force: true });
      try {
        await startServer(info, log, info.flags);
        break;
      } catch (error) {
        const inUse =
          error instanceof ServerStartError && /could not bind|Address already in use/.test(error.serverLog);
        if (!inUse || tries >= 5) throw error;
      }
    }
    if (options.database) await localPostgres(info).sql(`CREATE DATABASE ${quoteIdent(options.database)}`);
    return localPostgres(info, options.database);
  } catch (error) {
    stopLocalPostgres(info);
    throw error;
  }
}

/**
 * A handle on a running server from its {@link LocalPostgresInfo} (e.g. one another process started); `url()` and
 * `sql()` without a database name go to `database`.
 */
export function localPostgres(info: LocalPostgresInfo, database = 'postgres'): LocalPostgres {
  const url = (name = database) =>
    `postgres://${info.user}:${info.password}@${info.host}:${info.port}/${encodeURIComponent(name)}`;
  return {
    info,
    url,
    async sql(text, name) {
      const client = new pg.Client({ connectionString: url(name) });
      await client.connect();
      try {
        await client.query(text);
      } finally {
        await client.end();
      }
    },
    async shutDown(mode) {
      await runTool(info, 'pg_ctl', ['-D', info.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
    },
    async startAgain() {
      await startServer(info, join(info.root, 'server.log'), info.flags ?? `-c port=${info.port}`);
    },
    async stop() {
      stopLocalPostgres(info);
    },
  };
}

/** An SQL identifier, quoted. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
