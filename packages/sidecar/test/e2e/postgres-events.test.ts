import { mkdtempSync } from 'node:fs';
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
