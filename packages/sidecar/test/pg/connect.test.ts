import { isRelayError, type RelayError } from '@solrelay/core';
import { freePort, usePostgres } from '@solrelay/testkit';
import { DATABASE_DEFAULTS, connectDatabase, withServerKeepalives } from '../../src/pg';

// A real PostgreSQL 15 (testkit): password authentication over TCP, so a wrong password is refused as in production.
const pg = usePostgres();

async function refusal(url: string): Promise<RelayError> {
  try {
    const { pool } = await connectDatabase(url, { connectionTimeoutMs: 10_000 });
    await pool.end();
  } catch (error) {
    if (isRelayError(error)) return error;
    throw error;
  }
  throw new Error(`connecting to ${url} succeeded`);
}

test('connects with the timeouts relay relies on, each set on the session', async () => {
  const { pool, target } = await connectDatabase(await pg.fresh());
  try {
    expect(target.redacted).toBe(`postgres://relay:***@127.0.0.1:${pg.server().port}/${target.database}`);
    const { rows } = await pool.query<Record<string, string>>(
      `SELECT current_setting('statement_timeout') AS statement_timeout,
              current_setting('lock_timeout') AS lock_timeout,
              current_setting('idle_in_transaction_session_timeout') AS idle,
              current_setting('application_name') AS app,
              current_setting('synchronous_commit') AS sync`,
    );
    expect(rows[0]).toEqual({
      statement_timeout: `${DATABASE_DEFAULTS.statementTimeoutMs / 1000}s`,
      lock_timeout: `${DATABASE_DEFAULTS.lockTimeoutMs / 1000}s`,
      idle: `${DATABASE_DEFAULTS.idleInTransactionSessionTimeoutMs / 1000}s`,
      app: 'relay',
      sync: 'on',
    });
  } finally {
    await pool.end();
  }
});

test('a malformed URL is RELAY_E_DB_INVALID_URL, the password redacted', async () => {
  const error = await refusal('postgres://relay:hunter2@:5432/relay');
  expect(error.code).toBe('RELAY_E_DB_INVALID_URL');
  expect(error.message).not.toContain('hunter2');
  expect(JSON.stringify(error.details)).not.toContain('hunter2');
});

test('nothing listening at the address is RELAY_E_DB_UNREACHABLE, naming it, the password redacted', async () => {
  const port = await freePort();
  const error = await refusal(`postgres://relay:hunter2@127.0.0.1:${port}/relay`);
  expect(error.code).toBe('RELAY_E_DB_UNREACHABLE');
  expect(error.status).toBe(503);
  expect(error.message).toContain(`postgres://relay:***@127.0.0.1:${port}/relay`);
  expect(error.message).toContain('ECONNREFUSED');
  expect(error.message).not.toContain('hunter2');
});

test('a wrong password is RELAY_E_DB_AUTH_FAILED naming the user; neither password is shown', async () => {
  const server = pg.server();
  const url = server.url('postgres').replace(server.password, 'hunter2');
  const error = await refusal(url);
  expect(error.code).toBe('RELAY_E_DB_AUTH_FAILED');
  expect(error.details).toMatchObject({ user: 'relay' });
  expect(error.message).toContain('28P01');
  expect(error.message).not.toContain('hunter2');
  expect(error.message).not.toContain(server.password);
});

test('a database that does not exist is RELAY_E_DB_NOT_FOUND naming it; the password is not shown', async () => {
  const server = pg.server();
  const error = await refusal(server.url('no_such_db'));
  expect(error.code).toBe('RELAY_E_DB_NOT_FOUND');
  expect(error.details).toMatchObject({ database: 'no_such_db' });
  expect(error.message).toContain('no_such_db');
  expect(error.message).not.toContain(server.password);
});

test("a lock's own connection asks the server for TCP keepalives, so a vanished peer's lock is freed in seconds", async () => {
  const { pool } = await connectDatabase(`${await pg.fresh()}?application_name=relay`);
  const client = new (await import('pg')).default.Client(withServerKeepalives(pool.options));
  try {
    await client.connect();
    const { rows } = await client.query<Record<string, string>>(
      `SELECT current_setting('tcp_keepalives_idle') AS idle, current_setting('tcp_keepalives_interval') AS interval,
              current_setting('tcp_keepalives_count') AS count, current_setting('tcp_user_timeout') AS user_timeout,
              current_setting('application_name') AS app`,
    );
    expect(rows[0]).toEqual({ idle: '5', interval: '2', count: '3', user_timeout: '10000', app: 'relay' });
  } finally {
    await client.end();
    await pool.end();
  }
});
