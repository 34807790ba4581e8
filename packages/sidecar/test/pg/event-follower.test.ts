import { compareEventCursors, formatEventCursor } from '@solrelay/core';
import { waitUntil } from '@solrelay/testkit';
import pg from 'pg';
import { EventFollower, type StoredEvent } from '../../src/store/pg-events';
import { PgTxStore } from '../../src/store/pg-store';
import { useMigratedPostgres } from '../helpers/migrated-postgres';
import { status, tx } from '../helpers/store-records';

// The events follower against a real PostgreSQL: it reads after its cursor, below the snapshot's xmin, in (xid, id)
// order, so an event whose transaction took its xid first but committed last is delivered, in its place, never
// skipped; and what many writers commit side by side comes out once each, in cursor order.
const postgres = useMigratedPostgres();

let url: string;
let store: PgTxStore;
const pools: pg.Pool[] = [];
const followers: EventFollower[] = [];

beforeAll(async () => {
  url = await postgres.fresh();
  store = await PgTxStore.open(url, { maintenanceMs: 0 });
});

afterAll(async () => {
  for (const follower of followers) await follower.close();
  await store?.close();
  for (const pool of pools) await pool.end();
});

function sql(max = 2): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pools.push(pool);
  return pool;
}

async function follow(
  pollMs = 60_000,
  listen = false,
): Promise<{ follower: EventFollower; seen: StoredEvent[] }> {
  const seen: StoredEvent[] = [];
  const follower = new EventFollower(store.eventLog, {
    deliver: (events) => seen.push(...events),
    pollMs,
    listen,
  });
  followers.push(follower);
  await follower.start();
  return { follower, seen };
}

const INSERT = `INSERT INTO events (name, tx_id, payload) VALUES ('tx_enqueued', $1::text, json_build_object('tx_id', $1::text))`;

async function logAfter(db: pg.Pool, after: StoredEvent['cursor']): Promise<string[]> {
  const { rows } = await db.query<{ cursor: string }>(
    `SELECT xid::text || '.' || id::text AS cursor FROM events WHERE (xid, id) > ($1::text::xid8, $2::bigint)
     ORDER BY xid, id`,
    [after.xid.toString(), after.id.toString()],
  );
  return rows.map((r) => r.cursor);
}

test('the lower xid committing last is delivered in its place, not skipped', async () => {
  const { follower, seen } = await follow();
  const start = follower.position;
  const db = sql();
  const first = new pg.Client({ connectionString: url });
  const second = new pg.Client({ connectionString: url });
  await first.connect();
  await second.connect();
  try {
    // `first` takes the lower xid, `second` the higher; `second` commits first.
    await first.query('BEGIN');
    const low = (await first.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid')).rows[0]!.xid;
    await second.query('BEGIN');
    const high = (await second.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid')).rows[0]!
      .xid;
    expect(BigInt(low)).toBeLessThan(BigInt(high));
    await first.query(INSERT, ['low']);
    await second.query(INSERT, ['high']);
    await second.query('COMMIT');

    // The higher one is committed and visible, but not delivered while the lower may still commit before it.
    const visible = await db.query(`SELECT tx_id FROM events WHERE tx_id IN ('low', 'high')`);
    expect(visible.rows).toEqual([{ tx_id: 'high' }]);
    await follower.settle();
    expect(seen.map((e) => e.txId)).toEqual([]);

    // Held back, the follower looks again by itself (no wake, no poll): once the lower commits, both come, in order.
    await first.query('COMMIT');
    await waitUntil(() => seen.length === 2, 10_000, 'both delivered');
    expect(seen.map((e) => e.txId)).toEqual(['low', 'high']);
    expect(seen.map((e) => e.cursor.xid.toString())).toEqual([low, high]);
    expect(seen.map((e) => formatEventCursor(e.cursor))).toEqual(await logAfter(db, start));
  } finally {
    await first.end();
    await second.end();
  }
});

test('many writers committing side by side: every event once, in cursor order', async () => {
  const { follower, seen } = await follow(5);
  const start = follower.position;
  const db = sql(8);
  const writers = 40;
  // Each writer takes its xid, waits a little (so commits interleave out of xid order), then commits.
  await Promise.all(
    Array.from({ length: writers }, async (_, n) => {
      const client = await db.connect();
      try {
        await client.query('BEGIN');
        await client.query(INSERT, [`w${n}-a`]);
        await client.query('SELECT pg_sleep($1)', [((n * 7) % 5) / 200]);
        await client.query(INSERT, [`w${n}-b`]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      follower.wake();
    }),
  );
  await waitUntil(() => seen.length >= writers * 2, 10_000, 'every event delivered');
  await follower.settle();
  const cursors = seen.map((e) => formatEventCursor(e.cursor));
  expect(new Set(cursors).size).toBe(cursors.length);
  for (let i = 1; i < seen.length; i++)
    expect(compareEventCursors(seen[i - 1]!.cursor, seen[i]!.cursor)).toBeLessThan(0);
  expect(cursors).toEqual(await logAfter(db, start));
  // One writer's two events come together (the same xid), a before b.
  for (let n = 0; n < writers; n++) {
    const at = seen.findIndex((e) => e.txId === `w${n}-a`);
    expect(seen[at + 1]?.txId).toBe(`w${n}-b`);
  }
});

test("another host's commit wakes the follower through NOTIFY, with no local wake and no poll", async () => {
  const { seen } = await follow(3_600_000, true);
  // Another host: several sidecars on one database (not sole, so no sole-writer lock).
  const other = await PgTxStore.open(url, { maintenanceMs: 0, notifyEvents: true, sole: false });
  try {
    await other.accept(tx('tx_notified', 'sig-notified'), [status('tx_notified', 'pending')]);
    await waitUntil(() => seen.some((e) => e.txId === 'tx_notified'), 10_000, 'the notified event delivered');
  } finally {
    await other.close();
  }
});
