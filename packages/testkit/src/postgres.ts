import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

/**
 * A throwaway PostgreSQL server for tests: @solrelay/sidecar's local server (`startLocalPostgres`: the real server
 * from the machine's packages, initdb'd into a fresh temp directory and started with `pg_ctl -w` on a loopback port,
 * no systemd), with what only tests need on top: databases copied from a template (`CREATE DATABASE x TEMPLATE t`,
 * ~0.1 s) so no test sees another's rows, one server shared by a run's workers, and test settings.
 *
 * Test settings, not production ones: `fsync=off` and `full_page_writes=off`, and initdb without syncing (a crash of
 * the machine may lose the test server's data, which is thrown away anyway; `synchronous_commit` stays on, so commits
 * behave as relay expects).
 *
 * testkit does not depend on @solrelay/sidecar (the sidecar's tests depend on testkit, and turbo refuses the cycle),
 * as `inProcessSidecar` takes the sidecar's functions from its caller: the server code is loaded at run time, by name
 * (`@solrelay/sidecar/pg`, built), from the package whose tests run (the working directory: the sidecar itself, or a
 * package depending on it). {@link LocalServer} is the part of it testkit uses.
 */

/** Where a running server is (the sidecar's `LocalPostgresInfo`: plain data, handed to other workers as JSON). */
export interface PgServerInfo {
  /** The directory holding `initdb` and `pg_ctl` (stopping the server runs its `pg_ctl`). */
  bin: string;
  /** Its tools run as the `postgres` user (the process that started it is root). */
  asPostgres: boolean;
  /** The temp directory holding the data directory, socket and log; removed on stop. */
  root: string;
  dataDir: string;
  host: string;
  port: number;
  user: string;
  password: string;
  /** The `-o` flags it was started with: `startAgain` after `shutDown` reuses them. */
  flags?: string;
}

/** A handle on a running server, as the sidecar's `LocalPostgres` gives it. */
interface LocalServerHandle {
  info: PgServerInfo;
  url(database?: string): string;
  sql(text: string, database?: string): Promise<void>;
  shutDown(mode: 'immediate' | 'fast'): Promise<void>;
  startAgain(): Promise<void>;
  stop(): Promise<void>;
}

/** What testkit uses of `@solrelay/sidecar/pg`'s local server (src/pg/local-server.ts there). */
interface LocalServer {
  findPostgresBinaries(env?: NodeJS.ProcessEnv, dirs?: readonly string[]): string;
  startLocalPostgres(options: {
    settings?: Record<string, string>;
    initdbNoSync?: boolean;
  }): Promise<LocalServerHandle>;
  localPostgres(info: PgServerInfo): LocalServerHandle;
  stopLocalPostgres(info: PgServerInfo): void;
}

let loaded: LocalServer | null = null;

/** The sidecar's local server, loaded once from the package whose tests run. */
function localServer(): LocalServer {
  if (loaded) return loaded;
  try {
    loaded = createRequire(join(process.cwd(), 'package.json'))('@solrelay/sidecar/pg') as LocalServer;
  } catch (error) {
    throw new Error(
      `testkit starts PostgreSQL with @solrelay/sidecar's local server, loaded from the package whose tests run ` +
        `(${process.cwd()}): it must be @solrelay/sidecar or depend on it, and the sidecar must be built ` +
        `(pnpm --filter @solrelay/sidecar build): ${(error as Error).message}`,
      { cause: error },
    );
  }
  return loaded;
}

export interface PgServer extends LocalServerHandle {
  host: string;
  port: number;
  user: string;
  password: string;
  /** The data directory (its parent temp directory is removed by `stop`). */
  dataDir: string;
  /**
   * Create the template database `name` and run `prepare` against it (e.g. apply migrations); it is then marked as a
   * template nobody may connect to, so copies of it never wait on a leftover connection.
   */
  createTemplate(name: string, prepare: (url: string) => Promise<void>): Promise<string>;
  /** A new empty database, or a copy of `template`; returns its URL. Names are unique within the server. */
  createDatabase(template?: string): Promise<string>;
}

export interface PgServerOptions {
  /** Extra `-c name=value` settings. */
  settings?: Record<string, string>;
}

/**
 * The directory holding `initdb` and `pg_ctl` (the sidecar's `findPostgresBinaries`). Throws, naming Debian's
 * package, when they are missing: a test that needs PostgreSQL must fail where there is none, never pass or skip.
 */
export function findPostgresBinaries(env: NodeJS.ProcessEnv = process.env, dirs?: readonly string[]): string {
  return localServer().findPostgresBinaries(env, dirs);
}

/** Every server started by this process, stopped on exit if a test run ends before its teardown. */
const running = new Set<PgServer>();
let exitHookInstalled = false;

function installExitHook(stopSync: () => void): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => stopSync());
}

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

/**
 * Start a throwaway server with test settings; see {@link PgServer}. Stopped by `stop()`, or when this process exits;
 * `shared` leaves that to {@link postgresGlobalTeardown} (other workers use it).
 */
export async function startPostgres(options: PgServerOptions & { shared?: boolean } = {}): Promise<PgServer> {
  refuseInParallelGroup();
  const started = await localServer().startLocalPostgres({
    initdbNoSync: true,
    settings: { fsync: 'off', full_page_writes: 'off', ...options.settings },
  });
  if (options.shared) return serverHandle(started, false);
  const server = serverHandle(started, true);
  running.add(server);
  installExitHook(() => {
    for (const s of running) void s.stop();
  });
  return server;
}

/** The test handle on a running server; `owned` when stopping it is this holder's to do (not a shared one's). */
function serverHandle(server: LocalServerHandle, owned: boolean): PgServer {
  const { info } = server;
  let counter = 0;
  const handle: PgServer = {
    ...server,
    host: info.host,
    port: info.port,
    user: info.user,
    password: info.password,
    dataDir: info.dataDir,
    async createTemplate(name, prepare) {
      await server.sql(`CREATE DATABASE ${quoteIdent(name)}`);
      await prepare(server.url(name));
      await server.sql(`ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`);
      return name;
    },
    async createDatabase(template) {
      // Unique across the workers and files sharing a server (a worker's pid serves many files).
      const name = `t${process.pid}_${++counter}_${randomBytes(3).toString('hex')}`;
      await server.sql(
        `CREATE DATABASE ${quoteIdent(name)}${template ? ` TEMPLATE ${quoteIdent(template)}` : ''}`,
      );
      return server.url(name);
    },
    async stop() {
      if (!owned) return;
      running.delete(handle);
      await server.stop();
    },
  };
  return handle;
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
  if (existsSync(file))
    localServer().stopLocalPostgres(JSON.parse(readFileSync(file, 'utf8')) as PgServerInfo);
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
      const info = JSON.parse(readFileSync(file, 'utf8')) as PgServerInfo;
      server = serverHandle(localServer().localPostgres(info), false);
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
