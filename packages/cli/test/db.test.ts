import { usePostgres } from '@solrelay/testkit';
import { baseEnv, freePort, runRelay } from './helpers/relay-bin';

// `relay db migrate` / `relay db status` as the built binary runs them (migrations read from the sidecar's package),
// against a real PostgreSQL 15 from testkit; each test on an empty database of its own.
const server = usePostgres();

function envFor(url: string): Record<string, string> {
  return baseEnv({ RELAY_DATABASE_URL: url });
}

/** Nothing the binary printed holds a password. */
function expectNoPassword(run: { stdout: string; stderr: string }, ...passwords: string[]): void {
  for (const password of passwords) {
    expect(run.stdout).not.toContain(password);
    expect(run.stderr).not.toContain(password);
  }
}

test('status on an empty database: behind, exit 1; migrate applies 001 and 002; status then up to date, exit 0', async () => {
  const url = await server.fresh();
  const { password } = server.server();
  const before = await runRelay(['db', 'status'], { env: envFor(url) });
  expect(before.code).toBe(1);
  expect(before.stdout).toMatch(/schema version\s*│\s*0 \(this relay: 5\)/);
  expect(before.stdout).toMatch(/state\s*│\s*behind: 5 pending \(run `relay db migrate`\)/);
  expect(before.stdout).toMatch(/pending\s*│\s*001_initial/);
  expect(before.stdout).toContain('postgres://relay:***@127.0.0.1:');
  expectNoPassword(before, password);

  const migrated = await runRelay(['db', 'migrate'], { env: envFor(url) });
  expect(migrated.code).toBe(0);
  expect(migrated.stdout).toMatch(/^applied 001_initial$/m);
  expect(migrated.stdout).toMatch(/^applied 002_webhook_order$/m);
  expect(migrated.stdout).toMatch(/^applied 003_fleet$/m);
  expect(migrated.stdout).toMatch(/^applied 004_limits_in_one_statement$/m);
  expect(migrated.stdout).toMatch(/^applied 005_attempt_region$/m);
  expect(migrated.stdout).toMatch(/state\s*│\s*up to date/);
  expectNoPassword(migrated, password);

  const again = await runRelay(['db', 'migrate'], { env: envFor(url) });
  expect(again.code).toBe(0);
  expect(again.stdout).toContain('nothing to apply');
  expect(again.stdout).not.toContain('applied 001_initial');

  const after = await runRelay(['db', 'status', '--json'], { env: envFor(url) });
  expect(after.code).toBe(0);
  const doc = JSON.parse(after.stdout);
  expect(doc).toMatchObject({ state: 'up-to-date', current: 5, latest: 5, pending: [], changed: [] });
  expect(doc.applied).toEqual([
    { version: 1, name: 'initial', applied_at: expect.any(String) },
    { version: 2, name: 'webhook_order', applied_at: expect.any(String) },
    { version: 3, name: 'fleet', applied_at: expect.any(String) },
    { version: 4, name: 'limits_in_one_statement', applied_at: expect.any(String) },
    { version: 5, name: 'attempt_region', applied_at: expect.any(String) },
  ]);
  expect(doc.database).toMatch(/^postgres:\/\/relay:\*\*\*@127\.0\.0\.1:\d+\/t\d+_\d+_[0-9a-f]+$/);
  expectNoPassword(after, password);
});

test('migrate --json with --database-url (over RELAY_DATABASE_URL): one JSON document naming what it applied', async () => {
  const url = await server.fresh();
  const run = await runRelay(['db', 'migrate', '--json', '--database-url', url], {
    env: envFor('postgres://relay:x@127.0.0.1:1/not_this_one'),
  });
  expect(run.code).toBe(0);
  expect(JSON.parse(run.stdout)).toMatchObject({
    applied_now: [
      '001_initial',
      '002_webhook_order',
      '003_fleet',
      '004_limits_in_one_statement',
      '005_attempt_region',
    ],
    state: 'up-to-date',
    current: 5,
  });
  const status = await runRelay(['db', 'status', '--json'], { env: envFor(url) });
  expect(JSON.parse(status.stdout)).toMatchObject({ state: 'up-to-date', pending: [] });
});

test('a database migrated by a newer relay: status says ahead (exit 1); migrate refuses naming both versions', async () => {
  const url = await server.fresh();
  expect((await runRelay(['db', 'migrate'], { env: envFor(url) })).code).toBe(0);
  await server
    .server()
    .sql(
      `INSERT INTO schema_migrations (version, name, checksum) VALUES (6, 'future', 'x')`,
      new URL(url).pathname.slice(1),
    );
  const status = await runRelay(['db', 'status'], { env: envFor(url) });
  expect(status.code).toBe(1);
  expect(status.stdout).toMatch(/state\s*│\s*ahead/);
  const migrate = await runRelay(['db', 'migrate', '--json'], { env: envFor(url) });
  expect(migrate.code).toBe(1);
  expect(migrate.stderr).toContain('RELAY_E_DB_SCHEMA_AHEAD');
  expect(JSON.parse(migrate.stdout).error).toMatchObject({
    exit_code: 1,
    message: expect.stringMatching(/version 6, newer than the 5 this relay knows/),
  });
});

test('each bad database setting exits with its code, names the cause and never prints the password', async () => {
  const s = server.server();
  const port = await freePort();
  const cases: Array<[string, number, RegExp]> = [
    [s.url('postgres').replace(s.password, 'hunter2'), 1, /RELAY_E_DB_AUTH_FAILED: .*refused user relay/],
    [s.url('no_such_db'), 1, /RELAY_E_DB_NOT_FOUND: The database no_such_db does not exist/],
    [`postgres://relay:hunter2@127.0.0.1:${port}/relay`, 3, /RELAY_E_DB_UNREACHABLE: .*ECONNREFUSED/],
    ['postgres://relay:hunter2@/relay', 2, /RELAY_E_DB_INVALID_URL/],
  ];
  for (const [url, code, message] of cases) {
    for (const json of [false, true]) {
      const run = await runRelay(['db', 'status', ...(json ? ['--json'] : [])], { env: envFor(url) });
      expect([url, json, run.code]).toEqual([url, json, code]);
      expect(run.stderr).toMatch(message);
      expect(run.stderr).toContain('hint:');
      if (json) expect(JSON.parse(run.stdout).error).toMatchObject({ exit_code: code });
      expectNoPassword(run, 'hunter2', s.password);
    }
  }
  const none = await runRelay(['db', 'migrate'], { env: baseEnv() });
  expect(none.code).toBe(2);
  expect(none.stderr).toContain('set RELAY_DATABASE_URL or pass --database-url');
});
