import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { compareEventCursors, parseEventCursor, type EventCursor } from '@solrelay/core';
import { SseReader } from '@solrelay/testkit';
import { EventHub, type StoredEventSource, type StoredHubEvent } from '../src/events/hub';

// The hub on an event log (PostgreSQL's `followStore` mode), over an in-memory log standing in for the `events`
// table: ids are cursors, a resume is served from the ring or from the log (live events waiting meanwhile), none
// twice and none skipped, and what the log does not hold gets `resync`. The table itself is covered by the e2e test.

/** The log: events with cursors (n.1), and a gate that holds replays from the "table" until opened. */
class MemoryLog implements StoredEventSource {
  readonly events: StoredHubEvent[] = [];
  reads = 0;
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => undefined;

  add(n: number, txId = 'tx_1'): StoredHubEvent {
    const event = { cursor: { xid: BigInt(n), id: 1n }, name: 'tx_status_changed', data: { tx_id: txId, n } };
    this.events.push(event);
    return event;
  }

  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open();
  }

  async between(
    after: EventCursor,
    upTo: EventCursor,
    limit: number,
    txId?: string,
  ): Promise<StoredHubEvent[]> {
    this.reads++;
    await this.gate;
    return this.events
      .filter((e) => compareEventCursors(e.cursor, after) > 0 && compareEventCursors(e.cursor, upTo) <= 0)
      .filter((e) => txId === undefined || (e.data as { tx_id: string }).tx_id === txId)
      .slice(0, limit);
  }

  async exists(cursor: EventCursor): Promise<boolean> {
    return this.events.some((e) => compareEventCursors(e.cursor, cursor) === 0);
  }
}

let server: Server;
let hub: EventHub;
let log: MemoryLog;
let base: string;
const readers: SseReader[] = [];

beforeEach(async () => {
  hub = new EventHub({ bootId: 'boot1', ringSize: 5, keepAliveMs: 0, now: () => 1 });
  log = new MemoryLog();
  for (let n = 1; n <= 3; n++) log.add(n);
  hub.followStore(log, { xid: 3n, id: 1n });
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const tx = url.searchParams.get('tx');
    const after = url.searchParams.get('after');
    hub.subscribe(res, {
      lastEventId: req.headers['last-event-id'] as string | undefined,
      ...(tx ? { filter: (e) => (e.data as { tx_id: string }).tx_id === tx, replayTxId: tx } : {}),
      ...(after ? { after: parseEventCursor(after) ?? { xid: 0n, id: 0n } } : {}),
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const reader of readers.splice(0)) reader.close();
  hub.dispose();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

async function open(headers: Record<string, string> = {}, query = ''): Promise<SseReader> {
  const reader = await SseReader.open(`${base}/${query}`, headers);
  readers.push(reader);
  return reader;
}

/** Publish log events n..m as the follower would (added to the log, then to the hub). */
function follow(from: number, to: number, txId = 'tx_1'): void {
  const events: StoredHubEvent[] = [];
  for (let n = from; n <= to; n++) events.push(log.add(n, txId));
  hub.publishStored(events);
}

const ids = (reader: SseReader) => reader.messages.filter((m) => m.id !== undefined).map((m) => m.id);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${from + i}.1`);

test("stored events carry their cursor as id; this host's own events go live without one", async () => {
  const reader = await open();
  follow(4, 5);
  hub.publish('mode_changed', { decision_mode: 'reflex', previous: 'cortex', ts: 1 });
  await reader.waitFor((r) => r.messages.length === 3);
  expect(reader.messages.map((m) => [m.id, m.event])).toEqual([
    ['4.1', 'tx_status_changed'],
    ['5.1', 'tx_status_changed'],
    [undefined, 'mode_changed'],
  ]);
  expect(hub.lastId).toBe('5.1');
});

test('a resume the ring covers is replayed from the ring, then live, without reading the log', async () => {
  follow(4, 7);
  const reader = await open({ 'last-event-id': '5.1' });
  follow(8, 8);
  await reader.waitFor((r) => ids(r).length === 3);
  expect(ids(reader)).toEqual(range(6, 8));
  expect(log.reads).toBe(0);
});

test('an older resume reads the log while live events wait: each once, in order', async () => {
  follow(4, 12); // the ring (5) holds 8..12
  log.hold();
  const reader = await open({ 'last-event-id': '2.1' });
  follow(13, 14); // live while the replay is held
  await new Promise((r) => setTimeout(r, 50));
  expect(ids(reader)).toEqual([]);
  log.release();
  await reader.waitFor((r) => ids(r).length === 12);
  follow(15, 15);
  await reader.waitFor((r) => ids(r).length === 13);
  expect(ids(reader)).toEqual(range(3, 15));
  expect(reader.events('resync')).toEqual([]);
});

test("a per-transaction resume after the record's own cursor: only its events, from the log", async () => {
  follow(4, 9, 'tx_2');
  follow(10, 10, 'tx_1');
  const reader = await open({}, `?tx=tx_1&after=2.1`);
  follow(11, 11, 'tx_1');
  await reader.waitFor((r) => ids(r).length === 3);
  expect(ids(reader)).toEqual(['3.1', '10.1', '11.1']);
});

test('a per-transaction resume after a cursor the log has not reached yet: live events from after it', async () => {
  const reader = await open({}, `?tx=tx_1&after=5.1`);
  follow(4, 6);
  await reader.waitFor((r) => ids(r).length === 1);
  follow(7, 7);
  await reader.waitFor((r) => ids(r).length === 2);
  expect(ids(reader)).toEqual(['6.1', '7.1']);
  expect(reader.events('resync')).toEqual([]);
});

test.each([
  ['not a cursor', 'unknown_boot'],
  ['boot1-3', 'unknown_boot'],
  ['99.1', 'unknown_boot'],
  ['2.7', 'too_old'],
])('Last-Event-ID %p gets resync (%s), then live events', async (lastEventId, reason) => {
  const reader = await open({ 'last-event-id': lastEventId });
  await reader.waitFor((r) => r.events('resync').length === 1);
  expect(JSON.parse(reader.events('resync')[0]!.data)).toMatchObject({ reason, last_id: '3.1' });
  follow(4, 4);
  await reader.waitFor((r) => ids(r).length === 1);
  expect(ids(reader)).toEqual(['4.1']);
});
