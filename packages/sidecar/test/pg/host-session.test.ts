import { isRelayError, type RelayError } from '@solrelay/core';
import { waitUntil } from '@solrelay/testkit';
import type pg from 'pg';
import { HostSession, connectDatabase, type DatabaseUrl, type HostSessionOptions } from '../../src/pg';
import { useMigratedPostgres } from '../helpers/migrated-postgres';

// Host sessions against a real PostgreSQL 15 (testkit), each test on a fresh migrated database: the host-id lock
// (refusal, crash restart), registration and epochs, the lease (database clock) and the monotonic rule (this
// process's clock), losing and renewing, and the fleet as /status lists it.
const postgres = useMigratedPostgres();

let pool: pg.Pool;
let target: DatabaseUrl;
const sessions: HostSession[] = [];

beforeEach(async () => {
  ({ pool, target } = await connectDatabase(await postgres.fresh(), { poolMin: 0, poolMax: 3 }));
});
afterEach(async () => {
  jest.restoreAllMocks();
  await Promise.all(sessions.splice(0).map((s) => s.end()));
  await pool.end();
});

/** A session opened the way the store opens one (its pool's settings); `lost` collects its onLost reasons. */
async function open(
  hostId: string,
  o: Partial<HostSessionOptions> = {},
): Promise<{ session: HostSession; lost: string[] }> {
  const lost: string[] = [];
  const session = await HostSession.open(pool.options, target, {
    hostId,
    leaseMs: 60_000,
    heartbeatMs: 0,
    onLost: (reason) => lost.push(reason),
    ...o,
  });
  sessions.push(session);
  return { session, lost };
}

async function refusal(promise: Promise<unknown>): Promise<RelayError> {
  try {
    const session = await promise;
    if (session instanceof HostSession) sessions.push(session);
  } catch (error) {
    if (isRelayError(error)) return error;
    throw error;
  }
  throw new Error('expected a RelayError');
}

interface Row {
  epoch: number;
  ended: boolean;
  /** The lease still live by the database clock. */
  live: boolean;
  lease_ms: number;
  remaining_ms: number;
  beat: boolean;
}

/** The database's view of one session. */
async function row(hostId: string, epoch: number): Promise<Row | undefined> {
  const { rows } = await pool.query<Row>(
    `SELECT epoch::float8 AS epoch, ended_at IS NOT NULL AS ended, lease_expires_at > now() AS live,
            (extract(epoch FROM lease_expires_at - started_at) * 1000)::float8 AS lease_ms,
            (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 AS remaining_ms,
            heartbeat_at > started_at AS beat
     FROM host_sessions WHERE host_id = $1 AND epoch = $2`,
    [hostId, epoch],
  );
  return rows[0];
}

/** The backend pids of this database's host-id lock connections. */
async function lockBackends(): Promise<number[]> {
  const { rows } = await pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'relay-host'
     ORDER BY pid`,
  );
  return rows.map((r) => r.pid);
}

async function terminate(pid: number): Promise<void> {
  const { rows } = await pool.query<{ done: boolean }>('SELECT pg_terminate_backend($1) AS done', [pid]);
  expect(rows[0]?.done).toBe(true);
}

/** The lease passed by the database clock (started_at moved back too: the table checks lease >= start). */
async function expireLease(hostId: string): Promise<void> {
  await pool.query(
    `UPDATE host_sessions SET started_at = now() - interval '1 minute', lease_expires_at = now() - interval '1 second'
     WHERE host_id = $1 AND ended_at IS NULL`,
    [hostId],
  );
}

test('open registers a session with a new epoch, its lease leaseMs long by the database clock; end ends it; the next start gets a larger epoch', async () => {
  const { session: first } = await open('host-a', { leaseMs: 45_000 });
  expect(Number.isSafeInteger(first.epoch)).toBe(true);
  expect(first.hostId).toBe('host-a');
  expect(first.leaseMs).toBe(45_000);
  expect(first.previousEpoch).toBeUndefined();
  expect(first.replaced).toEqual([]);
  expect(first.live).toBe(true);
  const registered = await row('host-a', first.epoch);
  expect(registered).toMatchObject({ ended: false, live: true, lease_ms: 45_000 });
  expect(registered?.remaining_ms).toBeGreaterThan(0);
  expect(registered?.remaining_ms).toBeLessThanOrEqual(45_000);

  await first.end();
  await first.end(); // idempotent
  expect(first.live).toBe(false);
  expect(await first.heartbeat()).toBe(false);
  expect(await row('host-a', first.epoch)).toMatchObject({ ended: true });
  expect(await lockBackends()).toEqual([]);

  const { session: second } = await open('host-a');
  expect(second.epoch).toBeGreaterThan(first.epoch);
  // Ended cleanly, the old session is not one the new start had to end.
  expect(second.replaced).toEqual([]);
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM host_sessions WHERE host_id = 'host-a' AND ended_at IS NULL`,
  );
  expect(rows).toEqual([{ n: 1 }]);
});

test('a second start with the same host id while the first lives is refused, naming the holder; another id opens', async () => {
  const { session: first } = await open('host-a');
  const [pid] = await lockBackends();
  const refused = await refusal(open('host-a', { waitMs: 300 }));
  expect(refused.code).toBe('RELAY_E_HOST_ID_IN_USE');
  expect(refused.status).toBe(500);
  expect(refused.details).toMatchObject({
    host_id: 'host-a',
    url: target.redacted,
    holder: expect.stringContaining(`pid ${pid}`),
  });
  expect(refused.details).toMatchObject({ holder: expect.stringContaining('application relay-host') });
  expect(refused.message).toContain('host-a');
  expect(refused.message).not.toContain(postgres.server().password);
  // The refused start registered nothing, and took nothing from the first.
  const { rows } = await pool.query<{ epoch: number }>(
    `SELECT epoch::float8 AS epoch FROM host_sessions WHERE host_id = 'host-a'`,
  );
  expect(rows).toEqual([{ epoch: first.epoch }]);
  expect(await first.heartbeat()).toBe(true);
  expect(await lockBackends()).toEqual([pid]);

  const { session: other } = await open('host-b', { waitMs: 0 });
  expect(other.epoch).toBeGreaterThan(first.epoch);
  expect(await row('host-b', other.epoch)).toMatchObject({ ended: false, live: true });
});

test('a crash restart does not wait out the lease: the dead process frees its lock, the new start ends its session', async () => {
  const { session: crashed } = await open('host-a', { leaseMs: 60_000 });
  const [pid] = await lockBackends();
  // The process dies: its connection's session ends (here ended by the server), its lease has a minute left.
  await terminate(pid as number);
  expect(await row('host-a', crashed.epoch)).toMatchObject({ ended: false, live: true });

  const { session: restarted } = await open('host-a', { leaseMs: 60_000, waitMs: 5_000 });
  expect(restarted.epoch).toBeGreaterThan(crashed.epoch);
  expect(restarted.replaced).toEqual([crashed.epoch]);
  expect(await row('host-a', crashed.epoch)).toMatchObject({ ended: true });
  expect(await row('host-a', restarted.epoch)).toMatchObject({ ended: false, live: true });
  expect(restarted.live).toBe(true);
});

test('the heartbeat extends the lease; a lease found gone is lost once, and renew registers a new epoch', async () => {
  const { session, lost } = await open('host-a');
  const { rows: before } = await pool.query<{ lease: string }>(
    `SELECT lease_expires_at::text AS lease FROM host_sessions WHERE host_id = 'host-a'`,
  );
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await session.heartbeat()).toBe(true);
  const { rows: moved } = await pool.query<{ moved: boolean; beat: boolean }>(
    `SELECT lease_expires_at > $1::timestamptz AS moved, heartbeat_at > started_at AS beat
     FROM host_sessions WHERE host_id = 'host-a'`,
    [before[0]?.lease],
  );
  expect(moved).toEqual([{ moved: true, beat: true }]);
  expect(session.live).toBe(true);
  expect(lost).toEqual([]);

  // The lease passed by the database clock: the next heartbeat finds it gone.
  await expireLease('host-a');
  const old = session.epoch;
  expect(await session.heartbeat()).toBe(false);
  expect(session.live).toBe(false);
  expect(lost).toHaveLength(1);
  expect(lost[0]).toMatch(/lease .* gone/);
  // Once per epoch, whatever is tried after.
  expect(await session.heartbeat()).toBe(false);
  expect(lost).toHaveLength(1);
  expect(await row('host-a', old)).toMatchObject({ ended: false, live: false });

  const renewed = await session.renew();
  expect(renewed).toBeGreaterThan(old);
  expect(session.epoch).toBe(renewed);
  expect(session.previousEpoch).toBe(old);
  expect(session.replaced).toEqual([old]);
  expect(session.live).toBe(true);
  expect(await row('host-a', old)).toMatchObject({ ended: true });
  expect(await row('host-a', renewed)).toMatchObject({ ended: false, live: true });
  // The same lock connection (it was never lost), and the new epoch beats and can be lost once again.
  expect(await lockBackends()).toHaveLength(1);
  expect(await session.heartbeat()).toBe(true);
  await expireLease('host-a');
  expect(await session.heartbeat()).toBe(false);
  expect(lost).toHaveLength(2);
});

test('heartbeats overlap never: a second call while one is in flight gets the same answer', async () => {
  const { session } = await open('host-a');
  const a = session.heartbeat();
  const b = session.heartbeat();
  expect(b).toBe(a);
  expect(await a).toBe(true);
  const c = session.heartbeat();
  expect(c).not.toBe(a);
  expect(await c).toBe(true);
});

test('the timer heartbeats on its own, and finds a lease gone without being asked', async () => {
  const { session, lost } = await open('host-a', { leaseMs: 5_000, heartbeatMs: undefined });
  await waitUntil(
    async () => (await row('host-a', session.epoch))?.beat,
    10_000,
    'a heartbeat from the timer',
  );
  await expireLease('host-a');
  await waitUntil(() => lost.length > 0, 10_000, 'the timer to find the lease gone');
  expect(lost).toHaveLength(1);
  expect(session.live).toBe(false);
});

test('the monotonic rule: past its lease by its own clock a host is not live, before any statement says so', async () => {
  let skew = 0;
  const now = performance.now.bind(performance);
  jest.spyOn(performance, 'now').mockImplementation(() => now() + skew);
  const { session, lost } = await open('host-a', { leaseMs: 60_000 });
  expect(session.live).toBe(true);
  // The process was paused for longer than its lease: nothing has run, yet it knows.
  skew = 60_001;
  expect(session.live).toBe(false);
  // The database (whose clock did not move) still has it live: `live` asked no statement.
  expect(await row('host-a', session.epoch)).toMatchObject({ live: true, beat: false });
  // The next heartbeat does not even send: the epoch is lost, reported once.
  expect(await session.heartbeat()).toBe(false);
  expect(lost).toEqual([expect.stringContaining('own clock')]);
  expect(await row('host-a', session.epoch)).toMatchObject({ live: true, beat: false });
  expect(session.live).toBe(false);
});

test('the monotonic rule in real time: with a 300 ms lease and no heartbeat, the host stops counting itself live', async () => {
  const before = performance.now();
  const { session, lost } = await open('host-a', { leaseMs: 300 });
  await waitUntil(() => !session.live, 5_000, 'the session to stop being live');
  // Not before the lease ran out (counted from the registration's send, which came after `before`).
  expect(performance.now() - before).toBeGreaterThanOrEqual(300);
  expect(lost).toEqual([]);
  expect(await session.heartbeat()).toBe(false);
  expect(lost).toEqual([expect.stringContaining('own clock')]);
  expect(session.live).toBe(false);
});

test('the lock connection dying loses the epoch; renew takes the lock again on a new connection', async () => {
  const { session, lost } = await open('host-a');
  const [pid] = await lockBackends();
  await terminate(pid as number);
  await waitUntil(() => lost.length > 0, 10_000, 'onLost after the lock connection died');
  expect(lost).toEqual([expect.stringContaining('connection')]);
  expect(session.live).toBe(false);
  expect(await session.heartbeat()).toBe(false);
  expect(lost).toHaveLength(1);

  const old = session.epoch;
  const renewed = await session.renew(5_000);
  expect(renewed).toBeGreaterThan(old);
  expect(session.previousEpoch).toBe(old);
  const backends = await lockBackends();
  expect(backends).toHaveLength(1);
  expect(backends).not.toContain(pid);
  expect(await row('host-a', old)).toMatchObject({ ended: true });
  expect(await session.heartbeat()).toBe(true);
  // And it holds the id again: another start is refused.
  expect((await refusal(open('host-a', { waitMs: 0 }))).code).toBe('RELAY_E_HOST_ID_IN_USE');
});

test('fleet lists live sessions and recently ended ones, each with what it owns', async () => {
  const { session: a } = await open('host-a');
  const { session: b } = await open('host-b');
  await b.end();
  // Ended long ago: no longer listed.
  const { session: c } = await open('host-c');
  await c.end();
  await pool.query(
    `UPDATE host_sessions SET ended_at = now() - interval '11 minutes' WHERE host_id = 'host-c'`,
  );

  const query = (text: string, values?: unknown[]) => pool.query(text, values);
  let fleet = await HostSession.fleet(query);
  expect(fleet.map((h) => [h.host_id, h.epoch])).toEqual([
    ['host-a', a.epoch],
    ['host-b', b.epoch],
  ]);
  const [liveHost, endedHost] = fleet;
  expect(liveHost).toMatchObject({ live: true, ended_at: null, owned: 0 });
  expect(liveHost?.started_at).toBe(a.startedAt.toISOString());
  expect(Number.isInteger(liveHost?.heartbeat_age_ms)).toBe(true);
  expect(liveHost?.heartbeat_age_ms).toBeGreaterThanOrEqual(0);
  expect(liveHost?.lease_remaining_ms).toBeGreaterThan(0);
  expect(liveHost?.lease_remaining_ms).toBeLessThanOrEqual(60_000);
  expect(endedHost).toMatchObject({ live: false, owned: 0 });
  expect(endedHost?.ended_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  // Owned: what is not terminal and names the session (host and epoch). tx_c names an epoch of another host id, which
  // no sidecar writes (the database refuses it, migrations/003): the fixture turns that check off to show it counted.
  await pool.query('ALTER TABLE transactions DISABLE TRIGGER transactions_owner_live');
  await pool.query(
    `INSERT INTO transactions (tx_id, state, priority, tip_mode, first_signature, signatures, blockhashes,
       nonce_accounts, fee_payers, enqueued_at, enqueued_slot, expires_at_slot, owner_host, owner_epoch, terminal_at)
     VALUES
       ('tx_a', 'pending', 'normal', 'auto', 'sig-a', ARRAY['sig-a'], ARRAY['h'], ARRAY[NULL]::text[], ARRAY['p'],
        now(), 100, 250, 'host-a', $1, NULL),
       ('tx_b', 'finalized', 'normal', 'auto', 'sig-b', ARRAY['sig-b'], ARRAY['h'], ARRAY[NULL]::text[], ARRAY['p'],
        now(), 100, 250, 'host-a', $1, now()),
       ('tx_c', 'pending', 'normal', 'auto', 'sig-c', ARRAY['sig-c'], ARRAY['h'], ARRAY[NULL]::text[], ARRAY['p'],
        now(), 100, 250, 'host-a', $2, NULL)`,
    [a.epoch, b.epoch],
  );
  // A lease that passed without the session ending: listed, not live.
  await expireLease('host-a');
  fleet = await HostSession.fleet(query);
  expect(fleet[0]).toMatchObject({ host_id: 'host-a', owned: 1, live: false, ended_at: null });
  expect(fleet[0]?.lease_remaining_ms).toBeLessThan(0);
  expect(fleet[1]).toMatchObject({ host_id: 'host-b', owned: 0 });
});
