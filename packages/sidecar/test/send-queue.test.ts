import { DEFAULT_POLICY, type Policy } from '@solrelay/core';
import { FILL_WAIT_MS, HOLD_RECHECK_MS, SendQueue, type RegionTurn, type SendJob } from '../src/send/queue';

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
  fill?: { perBundle: number; undecided: () => number; canCarry?: (job: SendJob) => boolean };
  /** The sender (default: records the job and returns at once, its turn ended unsent by the queue). */
  send?: (job: SendJob, turn: RegionTurn) => Promise<void>;
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
    ...(options.fill ? { fill: { canCarry: () => true, ...options.fill } } : {}),
    send: (job: SendJob, turn: RegionTurn) => {
      sent.push(job.txId);
      routed.push(`${job.txId}@${turn.region}`);
      return options.send ? options.send(job, turn) : Promise.resolve();
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

test('each token goes to the highest priority, then the nearest deadline, then the earliest notBefore', async () => {
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
  for (let i = 0; i < 6; i++) await jest.advanceTimersByTimeAsync(1000);
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

test('waits for a token: one send per 1/rps second, none early', async () => {
  const { queue, sent, close } = rig({ rps: 2 }); // burst 2, then one token every 500 ms
  for (const id of ['a', 'b', 'c', 'd']) queue.push(job(id, 1, 100));
  expect(sent).toEqual(['a', 'b']);
  await jest.advanceTimersByTimeAsync(499);
  expect(sent).toEqual(['a', 'b']);
  await jest.advanceTimersByTimeAsync(1);
  expect(sent).toEqual(['a', 'b', 'c']);
  await jest.advanceTimersByTimeAsync(499);
  expect(sent).toEqual(['a', 'b', 'c']);
  await jest.advanceTimersByTimeAsync(1);
  expect(sent).toEqual(['a', 'b', 'c', 'd']);
  close();
});

test('a job waits for its notBefore (a backoff) even with tokens to spare; a later, more urgent one goes first', async () => {
  const { queue, sent, close } = rig({ rps: 10 });
  const tx = { tx_id: 'backoff', priority: 'high' as const, expires_at_slot: 50 };
  queue.queueSend(tx, 1, 300);
  expect(sent).toEqual([]);
  await jest.advanceTimersByTimeAsync(299);
  expect(sent).toEqual([]);
  queue.queueSend({ tx_id: 'now', priority: 'low', expires_at_slot: 500 }, 1);
  expect(sent).toEqual(['now']);
  await jest.advanceTimersByTimeAsync(1);
  expect(sent).toEqual(['now', 'backoff']);
  close();
});

test("queueSend ranks by the policy's priority when it overrides the transaction's", async () => {
  const { queue, sent, close } = rig({ rps: 1, policy: { priority: 'low' } });
  queue.push(job('blocker', 0, 1));
  queue.queueSend({ tx_id: 'high-by-caller', priority: 'high', expires_at_slot: 300 }, 1);
  queue.queueSend({ tx_id: 'normal-by-caller', priority: 'normal', expires_at_slot: 200 }, 1);
  await jest.advanceTimersByTimeAsync(2000);
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

test('takeReady hands the packer the most valuable ready jobs it accepts, and removes only those', async () => {
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
  await jest.advanceTimersByTimeAsync(1_000);
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

/** A sender that waits for its turn, notes when it left, and ends the turn when `answer` says (at once: true). */
function leaving(wentAt: Array<[string, number, number]>, answer?: (job: SendJob) => Promise<boolean>) {
  return async (job: SendJob, turn: RegionTurn) => {
    await turn.ready();
    wentAt.push([job.txId, turn.region, Date.now()]);
    turn.end(answer ? await answer(job) : true);
  };
}

describe("a region's requests", () => {
  test('leave a paced token apart, counted from when the previous one really left (the event loop busy)', async () => {
    // Real timers: the point is a timer that fires late because the thread was busy, which fake timers cannot show.
    // Asserted is a lower bound on the gap only, which a loaded machine can only widen.
    jest.useRealTimers();
    const wentAt: Array<[string, number, number]> = [];
    // rps 4: four requests may be out at once; unanswered (ended unsent) so only the departures' pacing counts.
    const { queue, close } = rig({
      rps: 4,
      pacing: 1,
      send: leaving(wentAt, () => Promise.resolve(false)),
    });
    queue.push(job('a', 1, 500));
    await waitFor(() => wentAt.length === 1);
    queue.push(job('b', 1, 500));
    queue.push(job('c', 1, 500));
    // The thread is busy through b's due time (250 ms after a) and 200 ms past it.
    const busyUntil = Date.now() + 450;
    while (Date.now() < busyUntil) {
      // a burst's synchronous work
    }
    await waitFor(() => wentAt.length === 3);
    const [first, second, third] = wentAt.map((w) => w[2]) as [number, number, number];
    expect(second - first).toBeGreaterThanOrEqual(450);
    // Counted from when b went, not from when it was due (which would leave only ~50 ms). Noted by the sender just after
    // the queue took b's moment: the whole-millisecond clock may tick in between, so one millisecond less at least.
    expect(third - second).toBeGreaterThanOrEqual(249);
    close();
  });

  test("the next waits for the last one's answer, then the engine's second after it", async () => {
    // The engine meters a request before it answers: a second counted from the answer is a second at the engine
    // however late the first reached it (its departure alone could not say).
    const wentAt: Array<[string, number, number]> = [];
    let answerFirst!: (sent: boolean) => void;
    const { queue, close } = rig({
      rps: 1,
      pacing: 0.9,
      send: leaving(wentAt, (j) =>
        j.txId === 'a' ? new Promise((resolve) => (answerFirst = resolve)) : Promise.resolve(true),
      ),
    });
    const start = Date.now();
    queue.push(job('a', 1, 500));
    queue.push(job('b', 1, 500));
    await jest.advanceTimersByTimeAsync(0);
    expect(wentAt).toEqual([['a', 0, start]]);
    // a's answer takes 3 s: its token refills (1,112 ms) and b is still not given the region.
    await jest.advanceTimersByTimeAsync(3_000);
    expect(wentAt).toHaveLength(1);
    answerFirst(true);
    await jest.advanceTimersByTimeAsync(1_024);
    expect(wentAt).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(wentAt).toEqual([
      ['a', 0, start],
      ['b', 0, start + 3_000 + 1_025],
    ]);
    close();
  });

  test('one region with a request out takes no other job: the next goes to a region that has none', async () => {
    const wentAt: Array<[string, number, number]> = [];
    const answers: Array<(sent: boolean) => void> = [];
    const { queue, close } = rig({
      rps: 1,
      regions: 2,
      preferredRegion: () => 0,
      send: leaving(wentAt, () => new Promise((resolve) => answers.push(resolve))),
    });
    queue.push(job('a', 1, 500));
    await jest.advanceTimersByTimeAsync(0);
    // Region 0 (preferred) has a's request out: b goes to region 1 at once.
    queue.push(job('b', 1, 500));
    await jest.advanceTimersByTimeAsync(0);
    expect(wentAt.map(([id, region]) => `${id}@${region}`)).toEqual(['a@0', 'b@1']);
    // Both out: c waits for an answer (not for a token), then goes where the answer came from.
    queue.push(job('c', 1, 500));
    await jest.advanceTimersByTimeAsync(5_000);
    expect(wentAt).toHaveLength(2);
    (answers[1] as (sent: boolean) => void)(true);
    await jest.advanceTimersByTimeAsync(1_025);
    expect(wentAt.map(([id, region]) => `${id}@${region}`)).toEqual(['a@0', 'b@1', 'c@1']);
    close();
  });

  test('a send that returns without ending its turn (nothing to send) frees the region at once', async () => {
    const wentAt: Array<[string, number, number]> = [];
    const { queue, close } = rig({
      rps: 1,
      regions: 1,
      send: (j, turn) => (j.txId === 'nothing' ? Promise.resolve() : leaving(wentAt)(j, turn)),
    });
    queue.push(job('nothing', 1, 500));
    await jest.advanceTimersByTimeAsync(0);
    // No request went: the next needs only the region's token (1 s at rps 1), not an answer that never comes.
    queue.push(job('a', 1, 500));
    await jest.advanceTimersByTimeAsync(1_000);
    expect(wentAt.map(([id]) => id)).toEqual(['a']);
    close();
  });

  test("with a budget above one a second (a UUID's), as many requests are out at once, each the engine's second after the answer that many before", async () => {
    const wentAt: Array<[string, number, number]> = [];
    const answers: Array<(sent: boolean) => void> = [];
    const { queue, close } = rig({
      rps: 3,
      pacing: 1,
      regions: 1,
      send: leaving(wentAt, () => new Promise((resolve) => answers.push(resolve))),
    });
    const start = Date.now();
    for (const id of ['a', 'b', 'c', 'd']) queue.push(job(id, 1, 500));
    await jest.advanceTimersByTimeAsync(1_000);
    // Three out, paced a third of a second apart; d waits for an answer.
    expect(wentAt.map(([id, , at]) => [id, at - start])).toEqual([
      ['a', 0],
      ['b', 334],
      ['c', 668],
    ]);
    // b and c still out (the engine may meter them any moment) and a answered less than a second ago: three in the
    // engine's second, so d waits; with b and c answered too, d goes a second after a's answer.
    (answers[0] as (sent: boolean) => void)(true);
    const answeredAt = Date.now();
    await jest.advanceTimersByTimeAsync(500);
    expect(wentAt.map(([id]) => id)).toEqual(['a', 'b', 'c']);
    (answers[1] as (sent: boolean) => void)(true);
    (answers[2] as (sent: boolean) => void)(true);
    await jest.advanceTimersByTimeAsync(524);
    expect(wentAt.map(([id]) => id)).toEqual(['a', 'b', 'c']);
    await jest.advanceTimersByTimeAsync(1);
    expect(wentAt.at(-1)).toEqual(['d', 0, answeredAt + 1_025]);
    close();
  });
});

test('a region cooling after a 429 takes no job until the cool-down ends', async () => {
  const wentAt: Array<[string, number, number]> = [];
  const { queue, close } = rig({ rps: 1, pacing: 0.9, send: leaving(wentAt) });
  queue.cool(0, 3_000);
  expect(queue.isCooling(0)).toBe(true);
  queue.push(job('a', 1, 500));
  await jest.advanceTimersByTimeAsync(2_999);
  expect(wentAt).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(wentAt).toEqual([['a', 0, 1_000_000 + 3_000]]);
  expect(queue.isCooling(0)).toBe(false);
  close();
});

/** Real timers: wait for a condition (the turns' own timers run). */
async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('filling a pack (packing on)', () => {
  test('with more transactions ready and to come than requests to send them in, a ready bundle waits for decisions to fill its pack', async () => {
    // A burst: 40 accepted, 1 decided, two regions with a request each.
    let undecided = 39;
    const { queue, sent, close } = rig({
      rps: 1,
      regions: 2,
      fill: { perBundle: 4, undecided: () => undecided },
    });
    queue.push(job('a', 1, 500));
    // Decisions come: until a pack's worth is ready nothing goes; then the best goes at once (its passengers are the
    // packer's to pick).
    for (const id of ['b', 'c']) {
      await jest.advanceTimersByTimeAsync(10);
      undecided--;
      queue.push(job(id, 1, 500));
      expect(sent).toEqual([]);
    }
    await jest.advanceTimersByTimeAsync(10);
    undecided--;
    queue.push(job('d', 1, 500));
    expect(sent).toEqual(['a']);
    close();
  });

  test(`it waits ${FILL_WAIT_MS} ms at most from when the oldest ready bundle became ready`, async () => {
    const { queue, sent, close } = rig({
      rps: 1,
      regions: 2,
      fill: { perBundle: 4, undecided: () => 39 },
    });
    queue.push(job('a', 1, 500));
    await jest.advanceTimersByTimeAsync(FILL_WAIT_MS - 1);
    expect(sent).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(sent).toEqual(['a']);
    close();
  });

  test('nothing waits with requests to spare, with nothing left to decide, without packing, or for a bundle that cannot carry', () => {
    // Eight regions, three transactions in all: every one can have a request of its own.
    const spare = rig({ rps: 1, regions: 8, fill: { perBundle: 4, undecided: () => 2 } });
    spare.queue.push(job('a', 1, 500));
    expect(spare.sent).toEqual(['a']);
    spare.close();
    const decided = rig({ rps: 1, regions: 1, fill: { perBundle: 4, undecided: () => 0 } });
    decided.queue.push(job('a', 1, 500));
    expect(decided.sent).toEqual(['a']);
    decided.close();
    const single = rig({ rps: 1, regions: 1, fill: { perBundle: 1, undecided: () => 30 } });
    single.queue.push(job('a', 1, 500));
    expect(single.sent).toEqual(['a']);
    single.close();
    // A resend (its bytes fixed) or a bundle with the caller's own tip carries no riders: no reason to wait.
    const resend = rig({
      rps: 1,
      regions: 1,
      fill: { perBundle: 4, undecided: () => 30, canCarry: () => false },
    });
    resend.queue.push(job('a', 1, 500));
    expect(resend.sent).toEqual(['a']);
    resend.close();
  });

  test('a wait armed for a later job does not hold back a ready one past its own time', async () => {
    let undecided = 0;
    const { queue, sent, close } = rig({
      rps: 1,
      regions: 1,
      fill: { perBundle: 4, undecided: () => undecided },
    });
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
