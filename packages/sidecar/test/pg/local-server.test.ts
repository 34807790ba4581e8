import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import {
  PostgresNotFoundError,
  findPostgresBinaries,
  postgresBinaryDirectories,
  startLocalPostgres,
} from '../../src/pg/local-server';

// The local server `relay up --hosts N` runs its fleet on (and the test harness builds on): production settings.

test('without the binaries: an error naming the Debian/Ubuntu and Homebrew packages; RELAY_PG_BIN is the only place looked at when set', () => {
  expect(postgresBinaryDirectories({ RELAY_PG_BIN: '/opt/pg/bin', PATH: '/usr/bin' })).toEqual([
    '/opt/pg/bin',
  ]);
  let thrown: unknown;
  try {
    findPostgresBinaries({ RELAY_PG_BIN: '/nonexistent/pg/bin' });
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(PostgresNotFoundError);
  expect((thrown as Error).message).toMatch(
    /not found in \/nonexistent\/pg\/bin\. .*apt-get install -y postgresql \(package "postgresql".*brew install postgresql@15.*RELAY_PG_BIN/,
  );
});

test('a server started with relay production settings (fsync, synchronous_commit on), its database made, password required, gone after stop', async () => {
  const server = await startLocalPostgres({ database: 'relay', initdbNoSync: true });
  try {
    expect(server.url()).toMatch(/^postgres:\/\/relay:[0-9a-f]+@127\.0\.0\.1:\d+\/relay$/);
    const client = new pg.Client({ connectionString: server.url() });
    await client.connect();
    const { rows } = await client.query(
      `SELECT current_database() AS db, current_setting('fsync') AS fsync,
              current_setting('full_page_writes') AS fpw, current_setting('synchronous_commit') AS sync`,
    );
    await client.end();
    expect(rows[0]).toEqual({ db: 'relay', fsync: 'on', fpw: 'on', sync: 'on' });
    const wrong = new pg.Client({ connectionString: server.url().replace(/:[0-9a-f]+@/, ':wrong@') });
    await expect(wrong.connect()).rejects.toMatchObject({ code: '28P01' });
  } finally {
    await server.stop();
  }
  expect(existsSync(server.info.root)).toBe(false);
});

test("a server that cannot start: the error carries the server's own complaint from its log, and nothing is left", async () => {
  const parentDir = mkdtempSync(join(tmpdir(), 'relay-pg-test-'));
  chmodSync(parentDir, 0o755); // traversable by `postgres`, which runs the server as root
  try {
    const started = startLocalPostgres({
      parentDir,
      initdbNoSync: true,
      settings: { shared_buffers: 'nonsense' },
    });
    // pg_ctl's own words, then the server's, from the log the failed start removes.
    await expect(started).rejects.toThrow(
      /could not start server[\s\S]*last lines of the server log:\n[\s\S]*invalid value for parameter "shared_buffers": "nonsense"/,
    );
    expect(readdirSync(parentDir)).toEqual([]);
  } finally {
    rmSync(parentDir, { recursive: true, force: true });
  }
});
