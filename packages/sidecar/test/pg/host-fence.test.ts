import { waitUntil } from '@solrelay/testkit';
import pg from 'pg';
import type { HostSession } from '../../src/pg';
import { PgTxStore } from '../../src/store/pg-store';
import { StoreConflict } from '../../src/store/store';
import { usePgStoreTests } from '../helpers/migrated-postgres';
import { attempt, tx } from '../helpers/store-records';

// The store's side of host sessions (DESIGN §10): what it accepts is owned by its session, every write of live work
// is fenced by that owner in the statement itself (the database refuses a stale one), and a session that lapsed
// writes nothing until it has registered a new epoch and adopted its work under it.
const pgt = usePgStoreTests();
const { sql, lapse } = pgt;

function openStore(hostId: string, leaseMs = 60_000): Promise<PgTxStore> {
  return pgt.open({ hostId, session: { hostId, leaseMs } });
}

async function owners(db: pg.Pool): Promise<Record<string, { host: string | null; epoch: number | null }>> {
  const { rows } = await db.query<{ tx_id: string; owner_host: string | null; owner_epoch: string | null }>(
    'SELECT tx_id, owner_host, owner_epoch FROM transactions ORDER BY tx_id',
  );
  return Object.fromEntries(
    rows.map((r) => [
      r.tx_id,
      { host: r.owner_host, epoch: r.owner_epoch === null ? null : Number(r.owner_epoch) },
    ]),
  );
}

/** The database's clock says the session's lease passed (a pause, a partition): the next heartbeat finds it gone. */

/** A store of host-a with tx_a accepted, its session and first epoch. */
async function withOneAccepted(): Promise<{
  db: pg.Pool;
  store: PgTxStore;
  session: HostSession;
  e1: number;
}> {
  const db = sql();
  const store = await openStore('host-a');
  await store.accept(tx('tx_a', 'sig-a'));
  const session = store.hostSession;
  if (!session) throw new Error('no session');
  return { db, store, session, e1: session.epoch };
}

test('what a store accepts is owned by its session; a restart under the same host id adopts the live work under its new epoch', async () => {
  const db = sql();
  const first = await openStore('host-a');
  const e1 = first.hostSession?.epoch as number;
  await first.accept(tx('tx_live', 'sig-live'));
  await first.accept(tx('tx_done', 'sig-done'));
  await first.transition('tx_done', { state: 'pending' }, { set: { state: 'expired', stopped: true } });
  expect(await owners(db)).toEqual({
    tx_done: { host: 'host-a', epoch: e1 },
    tx_live: { host: 'host-a', epoch: e1 },
  });
  await first.close();

  const second = await openStore('host-a');
  const e2 = second.hostSession?.epoch as number;
  expect(e2).toBeGreaterThan(e1);
  // Live work moves to the new epoch; a terminal row is no one's work and keeps the epoch that ended it.
  expect(await owners(db)).toEqual({
    tx_done: { host: 'host-a', epoch: e1 },
    tx_live: { host: 'host-a', epoch: e2 },
  });
  expect(
    (await second.transition('tx_live', { state: 'pending' }, { set: { state: 'submitted' } })).state,
  ).toBe('submitted');
  const { rows } = await db.query<{ ended: boolean }>(
    `SELECT ended_at IS NOT NULL AS ended FROM host_sessions WHERE host_id = 'host-a' ORDER BY epoch`,
  );
  expect(rows).toEqual([{ ended: true }, { ended: false }]);
});

test('a write by an owner whose work moved is refused by the database: no transition, no attempt (no second tip)', async () => {
  const db = sql();
  const store = await openStore('host-a');
  await store.accept(tx('tx_a', 'sig-a'));
  // Another session adopted the transaction (what the takeover sweep does) while this store still holds it.
  await db.query(`UPDATE transactions SET owner_host = 'host-b', owner_epoch = 999999 WHERE tx_id = 'tx_a'`);

  const transition = await store
    .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
    .catch((error: unknown) => error);
  expect(transition).toBeInstanceOf(StoreConflict);
  const added = await store
    .addAttempt('tx_a', attempt(1, 'b'.repeat(64)), { expect: { state: 'pending' } })
    .catch((error: unknown) => error);
  expect(added).toBeInstanceOf(StoreConflict);

  const { rows } = await db.query(
    `SELECT state, version, owner_host, (SELECT count(*)::int FROM attempts) AS attempts,
       (SELECT count(*)::int FROM spend_reservations) AS reservations
     FROM transactions WHERE tx_id = 'tx_a'`,
  );
  expect(rows).toEqual([
    { state: 'pending', version: '1', owner_host: 'host-b', attempts: 0, reservations: 0 },
  ]);
});

test('a lapsed lease fences every write until the session registers a new epoch and adopts its work', async () => {
  const { db, store, session, e1 } = await withOneAccepted();
  const told: string[] = [];
  store.watchAvailability((change) => told.push(change.kind));

  // The database's clock says the lease passed (a pause, a partition): the next heartbeat finds it gone.
  await lapse(db, 'host-a');
  expect(await session.heartbeat()).toBe(false);
  const fenced = await store
    .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
    .catch((error: unknown) => error);
  expect(fenced).toMatchObject({
    code: 'RELAY_E_DB_UNAVAILABLE',
    details: { reason: expect.stringMatching(/host session \(host-a, epoch \d+\) lapsed/) },
  });
  expect((await db.query(`SELECT state FROM transactions WHERE tx_id = 'tx_a'`)).rows).toEqual([
    { state: 'pending' },
  ]);

  await waitUntil(async () => store.healthy, 10_000, 'the store to register again');
  expect(told).toEqual(['down', 'up']);
  expect(session.epoch).toBeGreaterThan(e1);
  expect(await owners(db)).toEqual({ tx_a: { host: 'host-a', epoch: session.epoch } });
  expect((await store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
  const fleet = await store.fleetStatus();
  expect(fleet).toMatchObject({ host_id: 'host-a', epoch: session.epoch, lease_ms: 60_000, live: true });
  expect(fleet.hosts?.map((h) => [h.epoch, h.live, h.owned, h.ended_at === null])).toEqual([
    [e1, false, 0, false],
    [session.epoch, true, 1, true],
  ]);
});

test('a second sidecar under the same host id is refused by name; under another id, by the one-writer lock', async () => {
  await openStore('host-a');
  const same = await PgTxStore.open(pgt.url, {
    maintenanceMs: 0,
    session: { hostId: 'host-a', leaseMs: 60_000 },
  }).catch((error: unknown) => error);
  expect(same).toMatchObject({
    code: 'RELAY_E_HOST_ID_IN_USE',
    details: { host_id: 'host-a', holder: expect.stringMatching(/pid \d+/) },
  });
  const other = await PgTxStore.open(pgt.url, {
    maintenanceMs: 0,
    session: { hostId: 'host-b', leaseMs: 60_000 },
  }).catch((error: unknown) => error);
  expect(other).toMatchObject({ code: 'RELAY_E_DB_IN_USE' });
  // The refused one left no session open behind it.
  const { rows } = await sql().query(
    `SELECT host_id FROM host_sessions WHERE ended_at IS NULL ORDER BY host_id`,
  );
  expect(rows).toEqual([{ host_id: 'host-a' }]);
});

test('a renewal whose adoption fails, or whose new session is lost meanwhile, keeps the store unavailable until both hold', async () => {
  const { db, store, session, e1 } = await withOneAccepted();
  // Another transaction holds the row: the adoption waits on it until lock_timeout refuses it.
  const blocker = new pg.Client({ connectionString: pgt.url });
  await blocker.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query(`SELECT 1 FROM transactions WHERE tx_id = 'tx_a' FOR UPDATE`);
    await lapse(db, 'host-a');
    expect(await session.heartbeat()).toBe(false);
    await waitUntil(
      async () => {
        const { rows } = await db.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE transactions t SET owner_host%'`,
        );
        return rows.length > 0;
      },
      15_000,
      'the adoption to wait on the row',
    );
    expect(session.epoch).toBeGreaterThan(e1);
    // The new epoch's own connection dies while its adoption waits: it must register yet again.
    const e2 = session.epoch;
    await db.query(
      // This test's database only: the server is shared with other test files.
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE application_name = 'relay-host' AND datname = current_database()`,
    );
    await waitUntil(async () => !session.live, 10_000, 'the session to notice its connection gone');
    // At least one adoption is refused by lock_timeout meanwhile; the store never calls itself healthy.
    await waitUntil(async () => session.live && session.epoch > e2, 15_000, 'a third epoch');
    expect(store.healthy).toBe(false);
    const refused = await store
      .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'RELAY_E_DB_UNAVAILABLE' });
    await blocker.query('COMMIT');
  } finally {
    await blocker.end();
  }
  await waitUntil(async () => store.healthy, 15_000, 'the store to adopt its work and come back');
  expect(await owners(db)).toEqual({ tx_a: { host: 'host-a', epoch: session.epoch } });
  expect((await store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
});

test('a write begun under the old epoch that reaches the database after it ended is refused there: nothing stranded, nothing written', async () => {
  const db = sql();
  const store = await openStore('host-a');
  const session = store.hostSession;
  if (!session) throw new Error('no session');
  const e1 = session.epoch;
  // The accept's checkout is held back (every connection busy), so it is still in flight when the session lapses.
  const pool = store.database;
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => Promise<pg.PoolClient> | undefined;
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = true;
  // Only the next promise checkout (the accept's); pool.query's own checkouts pass a callback and go straight on.
  (pool as unknown as { connect: typeof connect }).connect = (...args: unknown[]) => {
    if (!held || args.length > 0) return connect(...args);
    held = false;
    return gate.then(() => connect() as Promise<pg.PoolClient>);
  };
  const accepting = store.accept(tx('tx_b', 'sig-b'));
  await lapse(db, 'host-a');
  expect(await session.heartbeat()).toBe(false);
  await waitUntil(async () => session.live && session.epoch > e1, 10_000, 'a new epoch');
  // Registered, but the adoption waits for the write in flight: still unavailable.
  expect(store.healthy).toBe(false);
  release();
  // It reached the database after its epoch ended: the database refuses the row (migrations/003), nothing is written,
  // and the caller is told to retry; tried again, it is accepted under the new epoch.
  await expect(accepting).rejects.toMatchObject({
    code: 'RELAY_E_DB_UNAVAILABLE',
    details: { reason: expect.stringMatching(/host session host-a \(epoch \d+\) is not live/) },
  });
  expect(await owners(db)).toEqual({});
  await waitUntil(async () => store.healthy, 10_000, 'the store to adopt its work');
  expect((await store.accept(tx('tx_b', 'sig-b'))).created).toBe(true);
  expect(await owners(db)).toEqual({ tx_b: { host: 'host-a', epoch: session.epoch } });
  expect((await store.transition('tx_b', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
});
