import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { SlotUpdateEvent } from '@solrelay/core';
import { EventHub } from '../src/events/hub';
import { SseReader, waitUntil } from '@solrelay/testkit';

/** A `slot_update` for slot `slot`: the numbered event most tests publish. */
function slotUpdate(slot: number): SlotUpdateEvent {
  return { slot, leader: null, bundle_engine_leader: null, next_bundle_engine_slot: null, ts: 1 };
}

let server: Server;
let hub: EventHub;
let base: string;

beforeEach(async () => {
  hub = new EventHub({
    bootId: 'boot1',
    ringSize: 5,
    clientBufferLimitBytes: 256 * 1024,
    keepAliveMs: 0,
    now: () => 1,
  });
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const only = url.searchParams.get('only');
    hub.subscribe(res, {
      lastEventId: req.headers['last-event-id'] as string | undefined,
      filter: only ? (e) => e.name === only : undefined,
      closeAfter: url.searchParams.has('close-on-presence') ? (e) => e.name === 'agent_presence' : undefined,
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  hub.dispose();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

test('frames carry <bootId>-<seq> ids, the event name and one-line JSON data', async () => {
  const reader = await SseReader.open(base);
  expect(reader.status).toBe(200);
  expect(reader.headers['content-type']).toMatch(/^text\/event-stream/);
  hub.publish('slot_update', {
    slot: 7,
    leader: 'L',
    bundle_engine_leader: true,
    next_bundle_engine_slot: 7,
    ts: 1,
  });
  hub.publish('tx_enqueued', {
    tx_id: 'tx_1',
    slot: 7,
    priority: 'normal',
    expires_at_slot: 157,
    max_tip: null,
    tip: 'auto',
    ts: 1,
  });
  await reader.waitFor((r) => r.messages.length === 2);
  expect(reader.messages[0]).toEqual({
    id: 'boot1-1',
    event: 'slot_update',
    data: '{"slot":7,"leader":"L","bundle_engine_leader":true,"next_bundle_engine_slot":7,"ts":1}',
  });
  expect(reader.messages[1]!.id).toBe('boot1-2');
  reader.close();
});

test('Last-Event-ID from this boot replays exactly the missed events', async () => {
  for (let i = 1; i <= 4; i++) hub.publish('slot_update', slotUpdate(i));
  const reader = await SseReader.open(base, { 'last-event-id': 'boot1-2' });
  await reader.waitFor((r) => r.messages.length === 2);
  expect(reader.messages.map((m) => JSON.parse(m.data).slot)).toEqual([3, 4]);
  hub.publish('slot_update', slotUpdate(5));
  await reader.waitFor((r) => r.messages.length === 3);
  expect(reader.messages[2]!.id).toBe('boot1-5');
  reader.close();
});

test('an id older than the ring, from another boot, or from the future gets resync', async () => {
  for (let i = 1; i <= 9; i++) hub.publish('slot_update', slotUpdate(i)); // ring of 5 keeps 5..9
  for (const id of ['boot1-2', 'otherboot-3', 'boot1-99', 'garbage', 'boot1-x']) {
    const reader = await SseReader.open(base, { 'last-event-id': id });
    await reader.waitFor((r) => r.messages.length === 1);
    expect(reader.messages[0]!.event).toBe('resync');
    expect(JSON.parse(reader.messages[0]!.data)).toMatchObject({
      boot_id: 'boot1',
      last_id: 'boot1-9',
      reason: id.startsWith('boot1-') ? 'too_old' : 'unknown_boot',
    });
    reader.close();
  }
  // The oldest id still replayable: everything after 4 is in the ring.
  const ok = await SseReader.open(base, { 'last-event-id': 'boot1-4' });
  await ok.waitFor((r) => r.messages.length === 5);
  expect(ok.messages.map((m) => m.id)).toEqual(['boot1-5', 'boot1-6', 'boot1-7', 'boot1-8', 'boot1-9']);
  ok.close();
});

test('filters apply to replay and live events; closeAfter ends the stream', async () => {
  hub.publish('mode_changed', { decision_mode: 'reflex', previous: 'cortex', ts: 1 });
  hub.publish('agent_presence', { connected: false, model: null, provider: null, ts: 2 });
  const reader = await SseReader.open(`${base}/?only=agent_presence&close-on-presence`, {
    'last-event-id': 'boot1-1',
  });
  await reader.waitFor((r) => r.ended);
  expect(reader.messages).toHaveLength(1);
  expect(JSON.parse(reader.messages[0]!.data)).toEqual({
    connected: false,
    model: null,
    provider: null,
    ts: 2,
  });
  expect(hub.clientCount).toBe(0);
});

test('a client that stops reading is dropped past its buffer limit; others keep receiving', async () => {
  const stalled = await SseReader.open(base);
  const healthy = await SseReader.open(base);
  await new Promise((r) => setTimeout(r, 50));
  stalled.pause();
  const payload = {
    tx_id: 'tx_1',
    bundle_id: 'b'.repeat(64),
    tip_lamports: 1_000,
    reason: 'x'.repeat(16 * 1024),
    leader: null,
    ts: 1,
  };
  // 16 MB in small bursts: far more than loopback socket buffers hold for the stalled reader, while the
  // healthy reader's backlog never nears the limit.
  for (let i = 0; i < 1000; i++) {
    hub.publish('submit_requested', payload);
    if (i % 4 === 3) await new Promise((r) => setTimeout(r, 1));
  }
  await healthy.waitFor((r) => r.messages.length === 1000, 15_000);
  expect(hub.counters.slowClientsDropped).toBe(1);
  expect(hub.clientCount).toBe(1);
  // What the hub held for the stalled reader grew toward the limit and never past it (plus a chunk's framing):
  // the 16 MB published did not pile up in memory.
  expect(hub.counters.peakClientBufferedBytes).toBeGreaterThan(128 * 1024);
  expect(hub.counters.peakClientBufferedBytes).toBeLessThanOrEqual(256 * 1024 + 64);
  expect(hub.counters.peakBufferedBytes).toBeGreaterThanOrEqual(hub.counters.peakClientBufferedBytes);
  expect(hub.counters.peakBufferedBytes).toBeLessThanOrEqual(2 * (256 * 1024 + 64));
  expect(hub.bufferedBytes).toBeLessThan(256 * 1024); // only the healthy reader's backlog is left
  healthy.close();
  stalled.close();
}, 30_000);

async function countingServer(target: EventHub) {
  const writes: number[] = [];
  // Counts what reaches each connection's socket after the headers: the hub writes framed chunks to it directly.
  const server = createServer((_req, res) => {
    target.subscribe(res, {});
    const socket = res.socket as Socket;
    const write = socket.write.bind(socket) as (chunk: Buffer) => boolean;
    socket.write = ((chunk: Buffer) => {
      writes.push(chunk.length);
      return write(chunk);
    }) as typeof socket.write;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    writes,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

test('with many clients, events of several turns are written together, at most every few ms', async () => {
  const fanout = new EventHub({
    bootId: 'fan',
    keepAliveMs: 0,
    flushWritesPerMs: 0.001, // a flush to 3 clients -> the next no sooner than 1 s later (the cap)
    maxFlushDelayMs: 1000,
  });
  const server = await countingServer(fanout);
  try {
    const readers = await Promise.all([1, 2, 3].map(() => SseReader.open(server.url)));
    fanout.publish('slot_update', slotUpdate(100)); // the first flush is immediate; it sets the spacing of the next
    await new Promise((r) => setImmediate(r));
    const before = server.writes.length;
    fanout.publish('slot_update', slotUpdate(0));
    await new Promise((r) => setImmediate(r));
    fanout.publish('slot_update', slotUpdate(1));
    await new Promise((r) => setTimeout(r, 2));
    fanout.publish('slot_update', slotUpdate(2));
    for (const reader of readers) await reader.waitFor((r) => r.messages.length === 4);
    expect(server.writes.length - before).toBe(3); // one write per client for three events in three turns
    for (const reader of readers) reader.close();
  } finally {
    fanout.dispose();
    await server.close();
  }
});

test('a burst published in one turn reaches each client as one socket write, in order', async () => {
  const server = await countingServer(hub);
  try {
    const a = await SseReader.open(server.url);
    const b = await SseReader.open(server.url);
    const before = server.writes.length;
    for (let i = 0; i < 200; i++) hub.publish('slot_update', slotUpdate(i));
    await a.waitFor((r) => r.messages.length === 200);
    await b.waitFor((r) => r.messages.length === 200);
    expect(server.writes.length - before).toBe(2);
    expect(a.messages.map((m) => JSON.parse(m.data).slot)).toEqual([...Array(200).keys()]);
    a.close();
    b.close();
  } finally {
    await server.close();
  }
});

test('frames reach an HTTP/1.1 client as chunks and an HTTP/1.0 client unframed, the same events', async () => {
  const server = await countingServer(hub);
  const raw = async (version: '1.0' | '1.1') => {
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1').on('data', (d: string) => (text += d));
    socket.write(`GET / HTTP/${version}\r\nHost: x\r\n\r\n`);
    return { socket, text: () => text };
  };
  try {
    const [v10, v11] = [await raw('1.0'), await raw('1.1')];
    await waitUntil(() => v10.text().includes('\r\n\r\n') && v11.text().includes('\r\n\r\n'));
    hub.publish('slot_update', slotUpdate(7));
    await waitUntil(() => v10.text().includes('"slot":7') && /"slot":7[^\n]*\n\n\r\n/.test(v11.text()));
    const body = (t: string) => t.slice(t.indexOf('\r\n\r\n') + 4);
    const frame = body(v10.text());
    expect(frame).toMatch(/^id: [^\n]+\nevent: slot_update\ndata: \{[^\n]*"slot":7[^\n]*\}\n\n$/);
    expect(v10.text()).not.toMatch(/transfer-encoding/i);
    expect(v11.text()).toMatch(/transfer-encoding: chunked/i);
    // The HTTP/1.1 body is that same frame as one chunk: its size in hex, CRLF, the frame, CRLF.
    expect(body(v11.text())).toBe(`${Buffer.byteLength(frame).toString(16)}\r\n${frame}\r\n`);
    v10.socket.destroy();
    v11.socket.destroy();
  } finally {
    await server.close();
  }
});

test('a HEAD request gets the headers and no body bytes, while a GET beside it gets the events', async () => {
  const server = await countingServer(hub);
  const port = Number(new URL(server.url).port);
  const head = connect(port, '127.0.0.1');
  let text = '';
  head.setEncoding('latin1').on('data', (d: string) => (text += d));
  head.write('HEAD / HTTP/1.1\r\nHost: x\r\n\r\n');
  try {
    await waitUntil(() => text.includes('\r\n\r\n'));
    const reader = await SseReader.open(server.url);
    hub.publish('slot_update', slotUpdate(9));
    hub.publish('slot_update', slotUpdate(10));
    await reader.waitFor((r) => r.messages.length === 2);
    // Both were written in the same flushes; give loopback a few more turns to deliver anything sent to HEAD.
    await new Promise((r) => setTimeout(r, 50));
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe('');
    reader.close();
  } finally {
    head.destroy();
    await server.close();
  }
});

test("publish takes only the names of core's RelayEventMap, each with its own payload", () => {
  const quiet = new EventHub({ bootId: 'types', keepAliveMs: 0 });
  try {
    // Each line below must fail to typecheck (`pnpm typecheck` fails if one compiles).
    // @ts-expect-error not an event of RelayEventMap
    quiet.publish('slot', slotUpdate(1));
    // @ts-expect-error the payload of another event
    quiet.publish('tx_enqueued', slotUpdate(1));
    // @ts-expect-error a payload missing a field of its event (ts)
    quiet.publish('mode_changed', { decision_mode: 'reflex', previous: 'cortex' });
    const event = quiet.publish('resync', { reason: 'too_old', ts: 1 });
    expect(event).toMatchObject({ id: 'types-4', seq: 4, name: 'resync' });
    expect(event.frame).toBe('id: types-4\nevent: resync\ndata: {"reason":"too_old","ts":1}\n\n');
  } finally {
    quiet.dispose();
  }
});
