import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SseReader, get, post, type SseMessage, type Stack } from '@solrelay/testkit';
import pg from 'pg';
import type { Sidecar } from '../../src/service';
import { useMigratedPostgres } from '../helpers/migrated-postgres';
import { startBypassStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * Events out of the database (#28): on PostgreSQL, SSE follows the `events` table and an SSE id is its cursor, so a
 * client resumes with its Last-Event-ID across a restart of the sidecar on an empty data directory, and gets exactly
 * the events it missed, in order, none twice; a per-transaction stream still follows its transaction to the end.
 */
const postgres = useMigratedPostgres();
const TIP = 50_000;

let stack: Stack<Sidecar>;
let db: pg.Pool;
const readers: SseReader[] = [];
/** A transaction finalized before the restart (test 1), and the data dir the sidecar runs on since. */
let beforeRestart: { txId: string; dir: string } | null = null;

beforeAll(async () => {
  const url = await postgres.fresh();
  db = new pg.Pool({ connectionString: url, max: 2 });
  stack = await startBypassStack(TIP, { env: { RELAY_DATABASE_URL: url } });
}, 60_000);

afterAll(async () => {
  for (const reader of readers) reader.close();
  await stack?.close();
  await db?.end();
});

async function open(path: string, headers: Record<string, string> = {}): Promise<SseReader> {
  const reader = await SseReader.open(`${stack.sidecar.url}${path}`, headers);
  readers.push(reader);
  return reader;
}

/** The stored events after `cursor` (`<xid>.<id>`), in the log's order. */
async function storedAfter(cursor: string): Promise<Array<{ id: string; event: string }>> {
  const [xid, id] = cursor.split('.');
  const { rows } = await db.query<{ cursor: string; event: string }>(
    `SELECT xid::text || '.' || id::text AS cursor, name AS event FROM events
     WHERE (xid, id) > ($1::text::xid8, $2::bigint) ORDER BY events.xid, events.id`,
    [xid, id],
  );
  return rows.map((r) => ({ id: r.cursor, event: r.event }));
}

const stored = (messages: SseMessage[]) =>
  messages.filter((m) => m.id !== undefined).map((m) => ({ id: m.id as string, event: m.event }));

const finalizedOf = (txId: string) => (m: SseMessage) =>
  m.event === 'tx_status_changed' &&
  JSON.parse(m.data).tx_id === txId &&
  JSON.parse(m.data).state === 'finalized';

async function historyOf(txId: string): Promise<string[]> {
  const record = (await get(stack.sidecar.url, `/tx/${txId}`)).body as { history: Array<{ state: string }> };
  return record.history.map((h) => h.state);
}

async function enqueueToFinalized(): Promise<string> {
  const enqueued = await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer() });
  expect(enqueued.status).toBe(202);
  const txId: string = enqueued.body.tx_id;
  await waitAllFinalized(stack.sidecar.url, [txId], 45_000);
  return txId;
}

test('a client resumes with its Last-Event-ID after a restart on an empty data dir: exactly what it missed', async () => {
  const first = await open('/internal/events');
  const seen = await enqueueToFinalized();
  await first.waitFor((r) => r.messages.some(finalizedOf(seen)), 10_000);
  // Stored events carry cursor ids, in the log's order; this host's own news (slot_update, ...) carries none.
  const before = stored(first.messages);
  expect(before.map((m) => m.event)).toEqual(expect.arrayContaining(['tx_enqueued', 'tx_status_changed']));
  expect(first.messages.filter((m) => m.event === 'slot_update').every((m) => m.id === undefined)).toBe(true);
  const lastId = before[before.length - 1]!.id;
  first.close();

  // Missed while disconnected on this boot, and after the restart on a new, empty data dir.
  const missedBefore = await enqueueToFinalized();
  const dir = mkdtempSync(join(tmpdir(), 'relay-events-'));
  await stack.restart({ RELAY_DATA_DIR: join(dir, 'data'), LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl') });
  beforeRestart = { txId: missedBefore, dir };
  const missedAfter = await enqueueToFinalized();

  const resumed = await open('/internal/events', { 'last-event-id': lastId });
  await resumed.waitFor((r) => r.messages.some(finalizedOf(missedAfter)), 10_000);
  expect(resumed.events('resync')).toEqual([]);
  const expected = await storedAfter(lastId);
  expect(stored(resumed.messages)).toEqual(expected);
  // Both transactions' whole lives, once each: every state of their history, in order.
  for (const txId of [missedBefore, missedAfter]) {
    const states = resumed
      .events('tx_status_changed')
      .map((m) => JSON.parse(m.data))
      .filter((d) => d.tx_id === txId)
      .map((d) => d.state);
    expect(states).toEqual(await historyOf(txId));
    expect(states[states.length - 1]).toBe('finalized');
  }
  expect(
    resumed.messages.some((m) => m.event === 'tx_status_changed' && JSON.parse(m.data).tx_id === seen),
  ).toBe(false);

  // Then live: a new transaction's events follow on the same stream, after the replay.
  const live = await enqueueToFinalized();
  await resumed.waitFor((r) => r.messages.some(finalizedOf(live)), 10_000);
  expect(stored(resumed.messages)).toEqual(await storedAfter(lastId));
}, 240_000);

test('an unknown or malformed Last-Event-ID gets resync, then live events', async () => {
  for (const lastEventId of ['1.999999999', 'a1b2c3d4e5f6-17', 'not an id']) {
    const reader = await open('/internal/events', { 'last-event-id': lastEventId });
    await reader.waitFor((r) => r.events('resync').length === 1, 5_000);
    expect(JSON.parse(reader.events('resync')[0]!.data).reason).toMatch(/^(too_old|unknown_boot)$/);
    expect(stored(reader.messages)).toEqual([]);
    reader.close();
  }
}, 30_000);

test('a per-transaction stream follows its transaction to finalized on PostgreSQL, each state once', async () => {
  const enqueued = await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer() });
  const txId: string = enqueued.body.tx_id;
  const reader = await open(`/tx/events/${txId}`);
  await reader.waitFor((r) => r.ended, 45_000);
  const states = reader.events('tx_status_changed').map((m) => JSON.parse(m.data).state as string);
  expect(states[states.length - 1]).toBe('finalized');
  // The first frame is the state at connect time; each later one is a change after it, none repeated or skipped.
  const history = await historyOf(txId);
  expect(states).toEqual(history.slice(history.length - states.length));
  // Already terminal: the current state, then the stream ends.
  const again = await open(`/tx/events/${txId}`);
  await again.waitFor((r) => r.ended, 5_000);
  expect(again.events('tx_status_changed').map((m) => JSON.parse(m.data).state)).toEqual(['finalized']);
}, 60_000);

test("GET /lifecycle and GET /bundle read the fleet log in the database, not only this host's file", async () => {
  expect(beforeRestart).not.toBeNull();
  const { txId, dir } = beforeRestart!;
  const url = stack.sidecar.url;
  const bundleId: string = (await get(url, `/tx/${txId}`)).body.attempts[0].bundle_id;
  // Another host's bundle: a row of the fleet's log that this host's file never had.
  const other = {
    ...(await get(url, `/bundle/${bundleId}`)).body,
    bundle_id: 'ab'.repeat(32),
    tx_id: 'tx_other',
  };
  await db.query(
    `INSERT INTO lifecycle_entries (bundle_id, tx_id, attempt, stage, host_id, entry)
     VALUES ($1, 'tx_other', 1, 'finalized', 'another-host', $2::json)`,
    [other.bundle_id, JSON.stringify(other)],
  );
  expect(readFileSync(join(dir, 'lifecycle.jsonl'), 'utf8')).not.toContain(other.bundle_id);
  expect((await get(url, `/bundle/${other.bundle_id}`)).body).toEqual(other);
  expect((await get(url, '/lifecycle?last=1')).body.entries).toEqual([other]);

  const found = await get(url, `/bundle/${bundleId}`);
  expect(found.status).toBe(200);
  expect(found.body).toMatchObject({ bundle_id: bundleId, tx_id: txId, stage: 'finalized' });
  const latest = await db.query<{ entry: unknown }>(
    `SELECT entry FROM lifecycle_entries WHERE bundle_id = $1 ORDER BY seq DESC LIMIT 1`,
    [bundleId],
  );
  expect(found.body).toEqual(latest.rows[0]!.entry);

  // Every bundle's latest entry, most recently submitted last.
  const { rows } = await db.query<{ entry: { bundle_id: string } }>(
    `SELECT l.entry FROM (SELECT bundle_id, min(seq) AS first, max(seq) AS latest FROM lifecycle_entries
       GROUP BY bundle_id) b JOIN lifecycle_entries l ON l.seq = b.latest ORDER BY b.first`,
  );
  expect(rows.length).toBeGreaterThanOrEqual(4);
  const all = await get(url, '/lifecycle?last=1000');
  expect(all.body.entries).toEqual(rows.map((r) => r.entry));
  const two = await get(url, '/lifecycle?last=2');
  expect(two.body.entries).toEqual(rows.slice(-2).map((r) => r.entry));
  expect((await get(url, `/bundle/${'0'.repeat(64)}`)).body.error.code).toBe('RELAY_E_BUNDLE_NOT_FOUND');
}, 30_000);
