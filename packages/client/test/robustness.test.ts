import { getEventListeners } from 'node:events';
import { join } from 'node:path';
import { build } from 'esbuild';
import {
  RelayClient,
  isClientClosedError,
  isEventsOverflowError,
  isRelayError,
  isTxFailedError,
  isWaitTimeoutError,
  type FetchFunction,
} from '../src';
import { record } from './helpers/records';

// How the client behaves when the sidecar hangs, the client is closed under it, or a reader falls behind.
// Scripted fetch, no network.

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

/** A sidecar that accepted the TCP connection but never answers (a hung process, a half-open socket). */
const hangingFetch: FetchFunction = () => new Promise<Response>(() => undefined);

/** Settles within `ms`, or resolves to 'still pending'. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still pending'> {
  return Promise.race([
    promise.then(
      (v) => v,
      (e: unknown) => e as T,
    ),
    new Promise<'still pending'>((r) => setTimeout(() => r('still pending'), ms).unref()),
  ]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A global event stream the test writes to: `send()` delivers SSE text on the open connection. */
function scriptedEventStream(): { fetch: FetchFunction; send(text: string): void } {
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  return {
    fetch: async () =>
      new Response(new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) }), {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
      }),
    send: (text) => {
      if (!controller) throw new Error('the client has not opened the event stream yet');
      controller.enqueue(new TextEncoder().encode(text));
    },
  };
}

const slotUpdate = (slot: number) =>
  `id: x-${slot}\nevent: slot_update\ndata: {"slot":${slot},"leader":null,"ts":1}\n\n`;

const clients: RelayClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});
function client(fetch: FetchFunction, options: { waitReadTimeoutMs?: number } = {}): RelayClient {
  const c = new RelayClient({ baseUrl: 'http://relay.test', fetch, ...options });
  clients.push(c);
  return c;
}

test('waitFor({ timeoutMs }) settles near its deadline even when the sidecar never answers GET /tx/{id}', async () => {
  const relay = client(hangingFetch);
  const outcome = await within(relay.handle('tx_1').waitFor('finalized', { timeoutMs: 300 }), 3_000);
  // Every read is bounded by the deadline (and the last one by FINAL_READ_TIMEOUT_MS), so `timeoutMs` holds; the
  // sidecar never answered, so the state is unverified.
  expect(outcome).toMatchObject({ name: 'WaitTimeoutError', verified: false });
}, 10_000);

test('a handle created before close() rejects waitFor() with ClientClosedError after close()', async () => {
  const relay = client(hangingFetch);
  const handle = relay.handle('tx_1');
  relay.close();
  const outcome = await within(handle.waitFor('finalized'), 2_000);
  expect(outcome).toMatchObject({ name: 'ClientClosedError' });
}, 10_000);

test('`failed` seen on the per-tx stream rejects even if the follow-up record read hangs', async () => {
  let txReads = 0;
  const fetch: FetchFunction = async (input) => {
    const url = String(input);
    if (url.includes('/tx/events/')) {
      const body = new TextEncoder().encode(
        `event: tx_status_changed\ndata: ${JSON.stringify({
          tx_id: 'tx_1',
          state: 'failed',
          bundle_id: 'b',
          tx_signatures: [],
          failure: 'simulation_failed',
          ts: 1,
        })}\n\n`,
      );
      return new Response(
        new ReadableStream({
          start: (c) => {
            c.enqueue(body);
            c.close();
          },
        }),
        { status: 200, headers: { 'content-type': 'text/event-stream' } },
      );
    }
    txReads += 1;
    if (txReads === 1) return json(record('pending'));
    return new Promise<Response>(() => undefined); // the sidecar stops answering right after the failure
  };
  const relay = client(fetch);
  const outcome = await within(relay.handle('tx_1').waitFor('finalized', { timeoutMs: 1_000 }), 3_000);
  // The stream already carried the class; the wait must not hang on an optional read (and close() cannot cancel it).
  expect(isTxFailedError(outcome)).toBe(true);
  expect(outcome).toMatchObject({ state: 'failed', failure: 'simulation_failed' });
}, 10_000);

test('events() serves concurrent next() calls (async-iterator protocol) and both resolve', async () => {
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  const fetch: FetchFunction = async () =>
    new Response(
      new ReadableStream<Uint8Array>({
        start: (c) => {
          controller = c;
        },
      }),
      { status: 200, headers: { 'content-type': 'text/event-stream' } },
    );
  const relay = client(fetch);
  const it = relay.events({ names: ['slot_update'] });
  const a = it.next();
  const b = it.next();
  await new Promise((r) => setTimeout(r, 50));
  const enc = new TextEncoder();
  controller!.enqueue(enc.encode(`id: x-1\nevent: slot_update\ndata: {"slot":1,"leader":null,"ts":1}\n\n`));
  controller!.enqueue(enc.encode(`id: x-2\nevent: slot_update\ndata: {"slot":2,"leader":null,"ts":1}\n\n`));
  const results = await within(Promise.all([a, b]), 2_000);
  expect(results).not.toBe('still pending');
  expect(
    (results as Array<{ value: { data: { slot: number } } }>).map((r) => r.value.data.slot).sort(),
  ).toEqual([1, 2]);
}, 10_000);

test('a 429 without Retry-After does not invent retry_after_s = 0', async () => {
  const relay = client(async () =>
    json({ error: { code: 'RELAY_E_QUEUE_FULL', message: 'queue full', details: {} } }, 429),
  );
  const error = await relay.status().catch((e: unknown) => e);
  expect(isRelayError(error)).toBe(true);
  expect((error as { details: Record<string, unknown> }).details.retry_after_s).toBeUndefined();
});

test('off(event, handler) also removes a handler registered with once()', async () => {
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  const relay = client(
    async () =>
      new Response(new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) }), {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
      }),
  );
  const seen: number[] = [];
  const handler = (e: { slot: number }) => seen.push(e.slot);
  relay.once('slot_update', handler);
  relay.off('slot_update', handler);
  await new Promise((r) => setTimeout(r, 50));
  controller!.enqueue(
    new TextEncoder().encode(`id: x-1\nevent: slot_update\ndata: {"slot":1,"leader":null,"ts":1}\n\n`),
  );
  await new Promise((r) => setTimeout(r, 50));
  expect(seen).toEqual([]);
});

test('the browser bundle depends on core types only (issue: "depends only on @solrelay/core types and eventsource")', async () => {
  const result = await build({
    entryPoints: [join(__dirname, '..', 'src', 'index.ts')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    minify: true,
    logLevel: 'silent',
    metafile: true,
  });
  const inputs = Object.keys(result.metafile.inputs);
  expect(inputs.filter((p) => /node_modules\/(zod|@noble|bs58|base-x)\//.test(p))).toEqual([]);
  expect(result.outputFiles[0]!.text.length).toBeLessThan(100_000);
}, 20_000);

test('without timeoutMs, a read of GET /tx/{id} that hangs is abandoned after waitReadTimeoutMs and retried', async () => {
  let txReads = 0;
  const fetch: FetchFunction = async (input) => {
    if (String(input).includes('/tx/events/')) return new Promise<Response>(() => undefined);
    txReads += 1;
    if (txReads === 1) return new Promise<Response>(() => undefined); // the first read never answers
    return json(record('finalized'));
  };
  const relay = client(fetch, { waitReadTimeoutMs: 100 });
  const outcome = await within(relay.handle('tx_1').waitFor('finalized'), 3_000);
  expect(outcome).toMatchObject({ tx_id: 'tx_1', state: 'finalized' });
  expect(txReads).toBe(2);
}, 10_000);

test('at the deadline a hung read is cancelled and one last read decides; nothing is read after it', async () => {
  let txReads = 0;
  let firstReadSignal: AbortSignal | undefined;
  const fetch: FetchFunction = async (input, init) => {
    if (String(input).includes('/tx/events/')) return new Promise<Response>(() => undefined);
    txReads += 1;
    if (txReads === 1) {
      firstReadSignal = init?.signal ?? undefined;
      return new Promise<Response>(() => undefined);
    }
    return json(record('processed'));
  };
  const relay = client(fetch);
  const startedAt = Date.now();
  const outcome = await within(relay.handle('tx_1').waitFor('finalized', { timeoutMs: 300 }), 3_000);
  expect(isWaitTimeoutError(outcome)).toBe(true);
  expect(outcome).toMatchObject({ last_state: 'processed', verified: true });
  // The deadline's read answered at once, so the wait ended near timeoutMs, not after the 10 s read bound (the
  // bound sits halfway between: a loaded machine cannot stretch 300 ms to 5 s, a missed cancel takes 10 s).
  expect(Date.now() - startedAt).toBeLessThan(5_000);
  // The first read's signal ended with the deadline (its own 10 s bound had not passed), so a fetch that honours
  // signals releases the connection.
  expect(firstReadSignal?.aborted).toBe(true);
  // A reconnect cycle would re-read 500 ms later; a settled wait must not.
  await sleep(800);
  expect(txReads).toBe(2);
}, 10_000);

test('`expired` seen on the per-tx stream rejects with TxFailedError (record null) even if the follow-up read hangs', async () => {
  let txReads = 0;
  const fetch: FetchFunction = async (input) => {
    if (String(input).includes('/tx/events/')) {
      const event = {
        tx_id: 'tx_1',
        state: 'expired',
        bundle_id: null,
        tx_signatures: [],
        failure: null,
        ts: 1,
      };
      return new Response(`event: tx_status_changed\ndata: ${JSON.stringify(event)}\n\n`, {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
      });
    }
    txReads += 1;
    if (txReads === 1) return json(record('submitted'));
    return new Promise<Response>(() => undefined);
  };
  const relay = client(fetch);
  const outcome = await within(relay.handle('tx_1').waitFor('finalized'), 4_000);
  expect(isTxFailedError(outcome)).toBe(true);
  expect(outcome).toMatchObject({ state: 'expired', failure: null, record: null });
  expect(txReads).toBe(2);
}, 10_000);

test('after close(), HTTP calls (of the client and of earlier handles) reject with ClientClosedError without a request', async () => {
  let requests = 0;
  const relay = client(async () => {
    requests += 1;
    return json(record('pending'));
  });
  const handle = relay.handle('tx_1');
  relay.close();
  expect(isClientClosedError(await relay.status().catch((e: unknown) => e))).toBe(true);
  expect(isClientClosedError(await relay.tx('tx_1').catch((e: unknown) => e))).toBe(true);
  expect(isClientClosedError(await handle.record().catch((e: unknown) => e))).toBe(true);
  expect(requests).toBe(0);
});

test('a 429 with Retry-After reports it in seconds (delta-seconds or an HTTP date); the body wins when it has one', async () => {
  const queueFull = { error: { code: 'RELAY_E_QUEUE_FULL', message: 'queue full', details: {} } };
  const withSeconds = await client(async () => json(queueFull, 429, { 'retry-after': '7' }))
    .status()
    .catch((e: unknown) => e);
  expect(withSeconds).toMatchObject({ code: 'RELAY_E_QUEUE_FULL', details: { retry_after_s: 7 } });

  const inThirtySeconds = new Date(Date.now() + 30_000).toUTCString();
  const withDate = (await client(async () => json(queueFull, 429, { 'retry-after': inThirtySeconds }))
    .status()
    .catch((e: unknown) => e)) as { details: { retry_after_s: number } };
  expect(withDate.details.retry_after_s).toBeGreaterThanOrEqual(28);
  expect(withDate.details.retry_after_s).toBeLessThanOrEqual(31);

  const bodySaysTwo = { error: { ...queueFull.error, details: { retry_after_s: 2 } } };
  const fromBody = await client(async () => json(bodySaysTwo, 429, { 'retry-after': '7' }))
    .status()
    .catch((e: unknown) => e);
  expect(fromBody).toMatchObject({ details: { retry_after_s: 2 } });
});

test("unsubscribing removes the abort listener that on()/once() put on the caller's signal", async () => {
  const stream = scriptedEventStream();
  const relay = client(stream.fetch);
  const controller = new AbortController();
  const abortListeners = () => getEventListeners(controller.signal, 'abort').length;

  const off = relay.on('slot_update', () => undefined, { signal: controller.signal });
  expect(abortListeners()).toBe(1);
  off();
  expect(abortListeners()).toBe(0);

  const offOnce = relay.once('slot_update', () => undefined, { signal: controller.signal });
  expect(abortListeners()).toBe(1);
  offOnce();
  expect(abortListeners()).toBe(0);

  // A once() handler that fired has unsubscribed itself, listener included.
  const seen: number[] = [];
  relay.once('slot_update', (e) => seen.push(e.slot), { signal: controller.signal });
  expect(abortListeners()).toBe(1);
  await sleep(50);
  stream.send(slotUpdate(1));
  stream.send(slotUpdate(2));
  await sleep(50);
  expect(seen).toEqual([1]);
  expect(abortListeners()).toBe(0);
});

test('events(): a reader past highWaterMark gets the buffered events, then EventsOverflowError, then the end', async () => {
  const stream = scriptedEventStream();
  const relay = client(stream.fetch);
  const overflowing = relay.events({ names: ['slot_update'], highWaterMark: 2 });
  const atTheMark = relay.events({ names: ['slot_update'], highWaterMark: 3 });
  await sleep(50);
  for (const slot of [1, 2, 3]) stream.send(slotUpdate(slot));
  await sleep(50);

  expect((await overflowing.next()).value?.data.slot).toBe(1);
  expect((await overflowing.next()).value?.data.slot).toBe(2);
  const error = await overflowing.next().catch((e: unknown) => e);
  expect(isEventsOverflowError(error)).toBe(true);
  expect(error).toMatchObject({ highWaterMark: 2 });
  expect(await overflowing.next()).toEqual({ value: undefined, done: true });

  // Exactly highWaterMark unread events is still within bounds: all delivered, and the iterator goes on.
  const slots: number[] = [];
  for (let i = 0; i < 3; i++)
    slots.push(((await atTheMark.next()).value as { data: { slot: number } }).data.slot);
  expect(slots).toEqual([1, 2, 3]);
  expect(await within(atTheMark.next(), 100)).toBe('still pending');

  expect(() => relay.events({ highWaterMark: 0 })).toThrow(RangeError);
});

test('events(): every pending next() resolves as done when the client closes', async () => {
  const stream = scriptedEventStream();
  const relay = client(stream.fetch);
  const iterator = relay.events({ names: ['slot_update'] });
  const pending = [iterator.next(), iterator.next()];
  relay.close();
  expect(await within(Promise.all(pending), 1_000)).toEqual([
    { value: undefined, done: true },
    { value: undefined, done: true },
  ]);
});
