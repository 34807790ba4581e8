import { RelayClient, reconnectDelay, type ConnectionStateEvent, type FetchFunction } from '../src';

// Pure logic with fakes: the schedule is driven by jest's fake timers and a scripted fetch (no network).

test('reconnectDelay follows the spec table: 500 ms, 1 s, 2 s, 4 s, then doubling capped at 30 s', () => {
  expect([1, 2, 3, 4, 5, 6, 7, 8, 50, 10_000].map(reconnectDelay)).toEqual([
    500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000,
  ]);
  expect(() => reconnectDelay(0)).toThrow(RangeError);
  expect(() => reconnectDelay(1.5)).toThrow(RangeError);
});

interface Scripted {
  fetch: FetchFunction;
  calls: Array<{ url: string; headers: Record<string, string> }>;
  /** What the next stream request gets; default a network failure. */
  next: Array<() => Response>;
  /** Controllers of streams handed out, to feed or end them. */
  streams: ReadableStreamDefaultController<Uint8Array>[];
}

function scriptedFetch(): Scripted {
  const script: Scripted = {
    calls: [],
    next: [],
    streams: [],
    fetch: async (input, init) => {
      script.calls.push({ url: String(input), headers: { ...(init?.headers as Record<string, string>) } });
      const respond = script.next.shift();
      if (!respond) throw new TypeError('fetch failed');
      return respond();
    },
  };
  return script;
}

function openStream(script: Scripted): () => Response {
  return () =>
    new Response(
      new ReadableStream<Uint8Array>({
        start: (controller) => {
          script.streams.push(controller);
        },
      }),
      { status: 200, headers: { 'content-type': 'text/event-stream' } },
    );
}

function frame(id: string, event: string, data: unknown): Uint8Array {
  return new TextEncoder().encode(`id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

afterEach(() => {
  jest.useRealTimers();
});

test('the global stream retries on the exact schedule and resets it after a successful connect', async () => {
  jest.useFakeTimers();
  const script = scriptedFetch();
  const relay = new RelayClient({ baseUrl: 'http://relay.test', fetch: script.fetch });
  const states: ConnectionStateEvent[] = [];
  relay.on('connection', (e) => states.push(e));
  await jest.advanceTimersByTimeAsync(0);
  expect(script.calls).toHaveLength(1);

  // Each wait: nothing one millisecond early, exactly one new request on time.
  const expected = [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000];
  for (const [i, wait] of expected.entries()) {
    await jest.advanceTimersByTimeAsync(wait - 1);
    expect(script.calls).toHaveLength(i + 1);
    if (i === expected.length - 1) script.next.push(openStream(script));
    await jest.advanceTimersByTimeAsync(1);
    expect(script.calls).toHaveLength(i + 2);
  }
  expect(states.filter((s) => s.state === 'reconnecting').map((s) => s.delay_ms)).toEqual(expected);
  expect(relay.connectionState).toBe('open');

  // A drop after a successful connect starts over at 500 ms, and resumes from the last id received.
  script.streams[0]?.enqueue(frame('boot1-41', 'slot_update', { slot: 7, leader: null, ts: 1 }));
  await jest.advanceTimersByTimeAsync(0);
  expect(relay.lastEventId).toBe('boot1-41');
  script.streams[0]?.close();
  await jest.advanceTimersByTimeAsync(499);
  expect(script.calls).toHaveLength(expected.length + 1);
  await jest.advanceTimersByTimeAsync(1);
  expect(script.calls).toHaveLength(expected.length + 2);
  expect(script.calls[script.calls.length - 1]?.headers['Last-Event-ID']).toBe('boot1-41');
  expect(script.calls[0]?.headers['Last-Event-ID']).toBeUndefined();
  relay.close();
  expect(relay.connectionState).toBe('closed');
  await jest.advanceTimersByTimeAsync(60_000);
  expect(script.calls).toHaveLength(expected.length + 2);
});

test('a 401 ends the stream in `unauthorized` with the server code and never retries', async () => {
  jest.useFakeTimers();
  const script = scriptedFetch();
  script.next.push(
    () =>
      new Response(
        JSON.stringify({
          error: {
            code: 'RELAY_E_AUTH_INVALID_TOKEN',
            message: 'The bearer token is not valid',
            details: {},
          },
        }),
        { status: 401, headers: { 'content-type': 'application/json' } },
      ),
  );
  const relay = new RelayClient({ baseUrl: 'http://relay.test', token: 'wrong', fetch: script.fetch });
  const states: ConnectionStateEvent[] = [];
  relay.on('connection', (e) => states.push(e));
  await jest.advanceTimersByTimeAsync(0);
  expect(script.calls[0]?.headers.Authorization).toBe('Bearer wrong');
  expect(relay.connectionState).toBe('unauthorized');
  expect(states[states.length - 1]?.error?.code).toBe('RELAY_E_AUTH_INVALID_TOKEN');
  await jest.advanceTimersByTimeAsync(120_000);
  expect(script.calls).toHaveLength(1);
  relay.close();
});

test('handlers: typed on/once/off, a throwing handler does not starve others, events() iterates and ends on close', async () => {
  const script = scriptedFetch();
  script.next.push(openStream(script));
  const relay = new RelayClient({ baseUrl: 'http://relay.test', fetch: script.fetch });
  const slots: number[] = [];
  const onceSlots: number[] = [];
  relay.on('slot_update', () => {
    throw new Error('a careless handler');
  });
  const off = relay.on('slot_update', (e) => slots.push(e.slot));
  relay.once('slot_update', (e) => onceSlots.push(e.slot));
  // @ts-expect-error -- only names of the event map are accepted
  relay.on('no_such_event', () => undefined);
  const iterator = relay.events({ names: ['tx_enqueued'] });
  await new Promise((r) => setTimeout(r, 20));
  const controller = script.streams[0] as ReadableStreamDefaultController<Uint8Array>;
  controller.enqueue(frame('b-1', 'slot_update', { slot: 1 }));
  controller.enqueue(frame('b-2', 'tx_enqueued', { tx_id: 'tx_a', slot: 1 }));
  controller.enqueue(frame('b-3', 'slot_update', { slot: 2 }));
  const first = await iterator.next();
  expect(first).toEqual({ done: false, value: { event: 'tx_enqueued', data: { tx_id: 'tx_a', slot: 1 } } });
  await new Promise((r) => setTimeout(r, 20));
  expect(slots).toEqual([1, 2]);
  expect(onceSlots).toEqual([1]);
  off();
  controller.enqueue(frame('b-4', 'slot_update', { slot: 3 }));
  await new Promise((r) => setTimeout(r, 20));
  expect(slots).toEqual([1, 2]);
  const pending = iterator.next();
  relay.close();
  await expect(pending).resolves.toEqual({ done: true, value: undefined });
  expect(() => relay.on('slot_update', () => undefined)).toThrow(
    expect.objectContaining({ name: 'ClientClosedError' }),
  );
});
