import { existsSync } from 'node:fs';
import { findPostgresBinaries, startPostgres } from '@solrelay/testkit';
import pg from 'pg';

// The test harness itself (testkit's startPostgres): what every PostgreSQL test stands on.

test("without the server binaries it fails naming Debian's postgresql package, never passes or skips", () => {
  expect(() => findPostgresBinaries({}, ['/nonexistent/postgresql/bin'])).toThrow(
    /not found in \/nonexistent\/postgresql\/bin\. Install PostgreSQL 15 from Debian's packages: apt-get install -y postgresql/,
  );
  // On this machine they are there (CI installs them): a missing server fails the PostgreSQL tests loudly.
  expect(existsSync(`${findPostgresBinaries()}/initdb`)).toBe(true);
});

test('a server gives fresh databases copied from a template, each its own, runs with fsync off, and is gone after stop', async () => {
  const server = await startPostgres();
  let stopped = false;
  try {
    await server.createTemplate('tmpl', async (url) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`CREATE TABLE marker (n int); INSERT INTO marker VALUES (7)`);
      await client.end();
    });
    const [a, b] = [await server.createDatabase('tmpl'), await server.createDatabase('tmpl')];
    expect(a).not.toBe(b);
    const client = new pg.Client({ connectionString: a });
    await client.connect();
    const { rows } = await client.query(
      `SELECT (SELECT n FROM marker) AS n, current_setting('fsync') AS fsync,
              current_setting('synchronous_commit') AS sync`,
    );
    expect(rows[0]).toEqual({ n: 7, fsync: 'off', sync: 'on' });
    // A change in one database is not seen in the other copy.
    await client.query('DELETE FROM marker');
    await client.end();
    const other = new pg.Client({ connectionString: b });
    await other.connect();
    expect((await other.query('SELECT count(*)::int AS n FROM marker')).rows[0]).toEqual({ n: 1 });
    await other.end();
    await server.stop();
    stopped = true;
    expect(existsSync(server.dataDir)).toBe(false);
    const after = new pg.Client({ connectionString: a });
    await expect(after.connect()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  } finally {
    if (!stopped) await server.stop();
  }
});
