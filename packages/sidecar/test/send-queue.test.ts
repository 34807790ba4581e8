import { DEFAULT_POLICY, type Policy } from '@solrelay/core';
import { FILL_WAIT_MS, HOLD_RECHECK_MS, SendQueue, type SendJob } from '../src/send/queue';

/**
 * The budgeted send queue on its own, with fake timers (Date.now is faked too): which job each token goes to
 * (priority, then deadline, then notBefore), and that jobs wait for their notBefore and for a token.
 */

function rig(options: {
  rps: number;
  policy?: Partial<Policy>;
  maxConcurrent?: number;
  regions?: number;
  preferredRegion?: () => number | null;
  pacing?: number;
  hold?: () => boolean;
  onHeld?: (job: SendJob) => void;
  fill?: () => { perBundle: number; undecided: number };
}) {
  const sent: string[] = [];
  /** `txId@region` of every send. */
  const routed: string[] = [];
  let closed = false;
  const queue = new SendQueue({
    now: () => Date.now(),
    policy: () => ({ ...DEFAULT_POLICY, ...options.policy }) as Policy,
    ratePerSecond: options.rps,
    ...(options.regions !== undefined ? { regions: options.regions } : {}),
    ...(options.pacing !== undefined ? { pacing: options.pacing } : {}),
    ...(options.preferredRegion ? { preferredRegion: options.preferredRegion } : {}),
    ...(options.hold ? { hold: options.hold } : {}),
    ...(options.onHeld ? { onHeld: options.onHeld } : {}),
    ...(options.fill ? { fill: options.fill } : {}),
    send: (job: SendJob, region: number) => {
      sent.push(job.txId);
      routed.push(`${job.txId}@${region}`);
      return Promise.resolve();
    },
    log: {
      error: () => {
        throw new Error('unexpected send failure');
      },
    },
    isClosed: () => closed,
    ...(options.maxConcurrent !== undefined ? { maxConcurrent: options.maxConcurrent } : {}),
  });
  return { queue, sent, routed, close: () => ((closed = true), queue.close()) };
}

function job(txId: string, priority: number, deadline: number, notBefore = Date.now()): SendJob {
  return { txId, attempt: 1, priority, deadline, notBefore };
}

beforeEach(() => {
  jest.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  jest.useRealTimers();
});

test('each token goes to the highest priority, then the nearest deadline, then the earliest notBefore', () => {
  const { queue, sent, close } = rig({ rps: 1 });
  queue.push(job('first', 2, 999)); // takes the one token at once
  expect(sent).toEqual(['first']);
  const now = Date.now();
  queue.push(job('low', 2, 100, now - 500));
  queue.push(job('normal-late', 1, 300, now - 500));
  queue.push(job('high-late', 0, 300, now - 500));
  queue.push(job('high-soon-newer', 0, 200, now - 10));
  queue.push(job('high-soon-older', 0, 200, now - 20));
  queue.push(job('normal-soon', 1, 250, now - 500));
  expect(sent).toEqual(['first']); // no token yet
  for (let i = 0; i < 6; i++) jest.advanceTimersByTime(1000);
  expect(sent).toEqual([
    'first',
    'high-soon-older',
    'high-soon-newer',
    'high-late',
    'normal-soon',
    'normal-late',
    'low',
  ]);
  expect(queue.length).toBe(0);
  close();
});

test('waits for a token: one send per 1/rps second, none early', () => {
  const { queue, sent, close } = rig({ rps: 2 }); // burst 2, then one token every 500 ms
  for (const id of ['a', 'b', 'c', 'd']) queue.push(job(id, 1, 100));
  expect(sent).toEqual(['a', 'b']);
  jest.advanceTimersByTime(499);
  expect(sent).toEqual(['a', 'b']);
  jest.advanceTimersByTime(1);
  expect(sent).toEqual(['a', 'b', 'c']);
  jest.advanceTimersByTime(499);
  expect(sent).toEqual(['a', 'b', 'c']);
  jest.advanceTimersByTime(1);
  expect(sent).toEqual(['a', 'b', 'c', 'd']);
  close();
});

test('a job waits for its notBefore (a backoff) even with tokens to spare; a later, more urgent one goes first', () => {
  const { queue, sent, close } = rig({ rps: 10 });
  const tx = { tx_id: 'backoff', priority: 'high' as const, expires_at_slot: 50 };
  queue.queueSend(tx, 1, 300);
  expect(sent).toEqual([]);
  jest.advanceTimersByTime(299);
  expect(sent).toEqual([]);
  queue.queueSend({ tx_id: 'now', priority: 'low', expires_at_slot: 500 }, 1);
  expect(sent).toEqual(['now']);
  jest.advanceTimersByTime(1);
  expect(sent).toEqual(['now', 'backoff']);
  close();
});

test("queueSend ranks by the policy's priority when it overrides the transaction's", () => {
  const { queue, sent, close } = rig({ rps: 1, policy: { priority: 'low' } });
  queue.push(job('blocker', 0, 1));
  queue.queueSend({ tx_id: 'high-by-caller', priority: 'high', expires_at_slot: 300 }, 1);
  queue.queueSend({ tx_id: 'normal-by-caller', priority: 'normal', expires_at_slot: 200 }, 1);
  jest.advanceTimersByTime(2000);
  // Both count as low: the nearer deadline decides.
  expect(sent).toEqual(['blocker', 'normal-by-caller', 'high-by-caller']);
  close();
});

test('at most maxConcurrent sends on the wire at once; a finished send frees a place', async () => {
  const resolvers: Array<() => void> = [];
  const sent: string[] = [];
  const queue = new SendQueue({
    now: () => Date.now(),
    policy: () => DEFAULT_POLICY as Policy,
    ratePerSecond: 100,
    send: (j) => {
      sent.push(j.txId);
      return new Promise<void>((resolve) => resolvers.push(resolve));
    },
    log: { error: () => undefined },
    isClosed: () => false,
    maxConcurrent: 2,
  });
  for (const id of ['a', 'b', 'c']) queue.push(job(id, 1, 100));
  expect(sent).toEqual(['a', 'b']);
  resolvers[0]?.();
  for (let i = 0; i < 10; i++) await Promise.resolve(); // the send's catch/finally chain
  expect(sent).toEqual(['a', 'b', 'c']);
  queue.close();
});

test('once closed, nothing more is sent', () => {
  const { queue, sent, close } = rig({ rps: 1 });
  queue.push(job('a', 1, 100));
  queue.push(job('b', 1, 100));
  close();
  jest.advanceTimersByTime(5000);
  expect(sent).toEqual(['a']);
});

describe('one token bucket per region', () => {
  test('each region has its own budget: eight regions take eight bundles at once, then one each a second', async () => {
    const { queue, sent, close } = rig({ rps: 1, regions: 8 });
    for (let i = 0; i < 20; i++) queue.push(job(`tx${i}`, 1, 100 + i));
    expect(sent).toHaveLength(8);
    await jest.advanceTimersByTimeAsync(1000);
    expect(sent).toHaveLength(16);
    await jest.advanceTimersByTimeAsync(1000);
    expect(sent).toHaveLength(20);
    close();
  });

  test("the target leader's region is spent first, then the next regions in turn", () => {
    const { queue, routed, close } = rig({ rps: 1, regions: 4, preferredRegion: () => 2 });
    for (let i = 0; i < 4; i++) queue.push(job(`tx${i}`, 1, 100 + i));
    expect(routed).toEqual(['tx0@2', 'tx1@3', 'tx2@0', 'tx3@1']);
    close();
  });

  test('a 429 cools that region only: the others go on sending, it takes nothing until the cool-down ends', async () => {
    const { queue, routed, close } = rig({ rps: 1, regions: 2, preferredRegion: () => 0 });
    queue.cool(0, 5_000);
    queue.push(job('a', 1, 100));
    queue.push(job('b', 1, 101));
    expect(routed).toEqual(['a@1']);
    await jest.advanceTimersByTimeAsync(1000);
    // Region 0's bucket is full but it is cooling: b waited for region 1's next token.
    expect(routed).toEqual(['a@1', 'b@1']);
    await jest.advanceTimersByTimeAsync(4000);
    queue.push(job('c', 1, 102));
    queue.push(job('d', 1, 103));
    // Cool-down over: region 0 takes again, first as the preferred one.
    expect(routed).toEqual(['a@1', 'b@1', 'c@0', 'd@1']);
    close();
  });

  test("a region's own backoff doubles with each failed probe, up to 5 s; Retry-After at most 30 s; an answer resets it", () => {
    const { queue, close } = rig({ rps: 1, regions: 2 });
    const cooling = () => queue.coolingMs(Date.now())[0];
    queue.cool(0, null);
    expect(cooling()).toBe(250);
    // A failure of a request sent before the cool-down began is the same failure: no doubling.
    queue.cool(0, null);
    expect(cooling()).toBe(250);
    for (const expected of [500, 1000, 2000, 4000, 5000, 5000]) {
      jest.advanceTimersByTime(cooling() as number);
      queue.cool(0, null); // the probe after each cool-down fails
      expect(cooling()).toBe(expected);
    }
    queue.cool(0, 3_600_000); // Retry-After: an hour
    expect(cooling()).toBe(30_000);
    expect(queue.regionsTakingBundles()).toBe(1);
    queue.answered(0);
    jest.advanceTimersByTime(30_000);
    queue.cool(0, null);
    expect(cooling()).toBe(250);
    // A brief cool-down (a 429's second) still counts the region as taking bundles.
    expect(queue.regionsTakingBundles()).toBe(2);
    close();
  });

  test('paced at 90 % of the budget, one region sends a bundle every 1.11 s, not every second', async () => {
    const { queue, sent, close } = rig({ rps: 1, regions: 1, pacing: 0.9 });
    for (let i = 0; i < 20; i++) queue.push(job(`tx${i}`, 1, 100 + i));
    expect(sent).toHaveLength(1); // the burst of one
    await jest.advanceTimersByTimeAsync(9_000);
    expect(sent).toHaveLength(1 + 8); // at the full budget: 1 + 9
    close();
  });
});

test('takeReady hands the packer the most valuable ready jobs it accepts, and removes only those', () => {
  const { queue, sent, close } = rig({ rps: 1 });
  queue.push(job('first', 1, 100)); // takes the one token at once
  queue.push(job('low', 2, 50));
  queue.push(job('high-late', 0, 300));
  queue.push(job('high-soon', 0, 200));
  queue.push(job('not-ready', 0, 10, Date.now() + 5_000));
  queue.push(job('refused', 0, 1));
  expect(sent).toEqual(['first']);
  const taken = queue.takeReady((j) => j.txId !== 'refused', 2);
  expect(taken.map((j) => j.txId)).toEqual(['high-soon', 'high-late']);
  expect(queue.length).toBe(3);
  // What was not taken is sent in its order as tokens come.
  jest.advanceTimersByTime(1_000);
  expect(sent).toEqual(['first', 'refused']);
  close();
});

test('while held (a consensus migration window) nothing goes out; held jobs go out best first when it ends', async () => {
  let holding = true;
  const held: string[] = [];
  const { queue, sent, close } = rig({ rps: 100, hold: () => holding, onHeld: (j) => held.push(j.txId) });
  queue.push(job('low', 2, 100));
  queue.push(job('high', 0, 100));
  await jest.advanceTimersByTimeAsync(5_000);
  expect(sent).toEqual([]);
  expect(queue.length).toBe(2);
  // Each job counted once for the hold, however often the queue looked again.
  expect(held.sort()).toEqual(['high', 'low']);
  holding = false;
  await jest.advanceTimersByTimeAsync(HOLD_RECHECK_MS);
  expect(sent).toEqual(['high', 'low']);
  expect(held).toHaveLength(2);
  close();
});

test('requests to one region leave at least a paced token apart, however late each was prepared (waitTurn)', async () => {
  const { queue, close } = rig({ rps: 1, pacing: 0.9, regions: 2 });
  const gap = 1_000 / 0.9;
  const wentAt: Array<[number, number]> = [];
  // Each answered as soon as it went.
  const go = (region: number) =>
    queue.waitTurn(region).then((turn) => {
      wentAt.push([region, Date.now()]);
      turn.end(true);
    });
  // Three sends to region 0 whose preparation ended at once, and one to region 1: region 0's leave a gap apart in
  // the order they asked; region 1 is not held by them.
  const done = Promise.all([go(0), go(0), go(1), go(0)]);
  await jest.advanceTimersByTimeAsync(3 * gap);
  await done;
  const start = 1_000_000;
  expect(wentAt).toEqual([
    [0, start],
    [1, start],
    [0, start + Math.ceil(gap)],
    [0, start + 2 * Math.ceil(gap)],
  ]);
  // A send prepared long after the last one goes at once.
  await jest.advanceTimersByTimeAsync(5_000);
  const late = Date.now();
  await go(0);
  expect(wentAt.at(-1)).toEqual([0, late]);
  close();
});

test('a request whose turn came late (the event loop busy) still leaves the next one a whole paced token later', async () => {
  // Real timers: the point is a timer that fires late because the thread was busy, which fake timers cannot show.
  // Asserted is a lower bound on the gap only, which a loaded machine can only widen.
  jest.useRealTimers();
  const { queue, close } = rig({ rps: 4, pacing: 1 });
  const gap = 250;
  const wentAt: number[] = [];
  const go = () =>
    queue.waitTurn(0).then((turn) => {
      wentAt.push(Date.now());
      turn.end(true);
    });
  const turns = [go(), go(), go()];
  await turns[0];
  // The thread is busy through the second's due time (250 ms after the first) and 200 ms past it.
  const busyUntil = Date.now() + 450;
  while (Date.now() < busyUntil) {
    // a burst's synchronous work
  }
  await Promise.all(turns);
  const [first, second, third] = wentAt as [number, number, number];
  expect(second - first).toBeGreaterThanOrEqual(450);
  // Counted from when the second went, not from when it was due (which would leave only ~50 ms).
  expect(third - second).toBeGreaterThanOrEqual(gap);
  close();
});

test('a region cooling after a 429 paces the sends waiting their turn past the cool-down', async () => {
  const { queue, close } = rig({ rps: 1, pacing: 0.9 });
  queue.cool(0, 3_000);
  expect(queue.isCooling(0)).toBe(true);
  let went = 0;
  const turn = queue.waitTurn(0).then(() => (went = Date.now()));
  await jest.advanceTimersByTimeAsync(3_000);
  await turn;
  expect(went).toBe(1_000_000 + 3_000);
  expect(queue.isCooling(0)).toBe(false);
  close();
});

test("the next request to a region waits for the last one's answer, then the engine's second after it", async () => {
  // The engine meters a request when it reads it, before it answers: a second counted from the answer is a second
  // at the engine however late the first reached it (its departure alone could not say).
  const { queue, close } = rig({ rps: 1, pacing: 0.9 });
  const start = Date.now();
  const first = await queue.waitTurn(0);
  let secondAt = 0;
  const second = queue.waitTurn(0).then((turn) => {
    secondAt = Date.now();
    return turn;
  });
  // The first's answer takes 3 s: the paced token (1,112 ms) passes and the second still waits.
  await jest.advanceTimersByTimeAsync(3_000);
  expect(secondAt).toBe(0);
  first.end(true);
  await jest.advanceTimersByTimeAsync(1_024);
  expect(secondAt).toBe(0);
  await jest.advanceTimersByTimeAsync(1);
  expect(secondAt).toBe(start + 3_000 + 1_025);
  // A turn ended without sending (the region began cooling, the sidecar closed) adds no answer gap: the next goes a
  // paced token after the one that did not go.
  (await second).end(false);
  let thirdAt = 0;
  const third = queue.waitTurn(0).then((turn) => {
    thirdAt = Date.now();
    turn.end(true);
  });
  await jest.advanceTimersByTimeAsync(Math.ceil(1_000 / 0.9));
  await third;
  expect(thirdAt).toBe(secondAt + Math.ceil(1_000 / 0.9));
  close();
});

describe('filling a pack (packing on)', () => {
  test('with more transactions ready and to come than requests to send them in, a ready bundle waits for decisions to fill its pack', async () => {
    // A burst: 40 accepted, 1 decided, two regions with a request each.
    let undecided = 39;
    const { queue, sent, close } = rig({ rps: 1, regions: 2, fill: () => ({ perBundle: 4, undecided }) });
    queue.push(job('a', 1, 500));
    expect(sent).toEqual([]);
    // Decisions come: once a pack's worth is ready, the best goes at once (its passengers are the packer's to pick).
    await jest.advanceTimersByTimeAsync(10);
    for (const id of ['b', 'c', 'd']) {
      undecided--;
      queue.push(job(id, 1, 500));
    }
    expect(sent).toEqual(['a']);
    close();
  });

  test(`it waits ${FILL_WAIT_MS} ms at most from when the oldest ready bundle became ready`, async () => {
    const { queue, sent, close } = rig({ rps: 1, regions: 2, fill: () => ({ perBundle: 4, undecided: 39 }) });
    queue.push(job('a', 1, 500));
    await jest.advanceTimersByTimeAsync(FILL_WAIT_MS - 1);
    expect(sent).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(sent).toEqual(['a']);
    close();
  });

  test('nothing waits with requests to spare, with nothing left to decide, or without packing', () => {
    // Eight regions, three transactions in all: every one can have a request of its own.
    const spare = rig({ rps: 1, regions: 8, fill: () => ({ perBundle: 4, undecided: 2 }) });
    spare.queue.push(job('a', 1, 500));
    expect(spare.sent).toEqual(['a']);
    spare.close();
    const decided = rig({ rps: 1, regions: 1, fill: () => ({ perBundle: 4, undecided: 0 }) });
    decided.queue.push(job('a', 1, 500));
    expect(decided.sent).toEqual(['a']);
    decided.close();
    const single = rig({ rps: 1, regions: 1, fill: () => ({ perBundle: 1, undecided: 30 }) });
    single.queue.push(job('a', 1, 500));
    expect(single.sent).toEqual(['a']);
    single.close();
  });

  test('a wait armed for a later job does not hold back a ready one past its own time', async () => {
    let undecided = 0;
    const { queue, sent, close } = rig({ rps: 1, regions: 1, fill: () => ({ perBundle: 4, undecided }) });
    // A backoff 5 s away arms the queue's timer for then.
    queue.push(job('later', 1, 500, Date.now() + 5_000));
    expect(sent).toEqual([]);
    // A ready bundle that waits to fill must go when its wait ends, not when the later job is due.
    undecided = 10;
    queue.push(job('now', 1, 500));
    expect(sent).toEqual([]);
    await jest.advanceTimersByTimeAsync(FILL_WAIT_MS);
    expect(sent).toEqual(['now']);
    close();
  });
});
