import { SpendLedger, storeCodec } from '../src/store/records';
import { T0, attempt, tx } from './helpers/store-records';

/** The exact rolling-window sum, by a pass over every entry (what the ledger replaces). */
function exact(ledger: Map<string, [number, number]>, cutoff: number): number {
  let total = 0;
  for (const [at, lamports] of ledger.values()) if (at >= cutoff) total += lamports;
  return total;
}

/** A small seeded PRNG so a failure replays. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

test('entries added in time order: the window sum is exact through sets, deletes, re-sets and pruning', () => {
  const random = prng(7);
  const ledger = new SpendLedger();
  let now = 0;
  let next = 0;
  for (let step = 0; step < 20_000; step++) {
    now += Math.floor(random() * 400);
    const roll = random();
    const keys = [...ledger.keys()];
    if (roll < 0.6 || keys.length === 0) ledger.set(`k${next++}`, [now, 1 + Math.floor(random() * 100_000)]);
    else if (roll < 0.85) ledger.delete(keys[Math.floor(random() * keys.length)] as string);
    else if (roll < 0.9) {
      // A later value under an existing key (its time is now): the old one stops counting.
      ledger.set(keys[Math.floor(random() * keys.length)] as string, [now, 5_000]);
    } else if (roll < 0.92) {
      for (const [key, [at]] of ledger) if (at < now - 60_000) ledger.delete(key); // prune-spend
    }
    const cutoff = now - 60_000;
    expect(ledger.spentSince(cutoff)).toBe(exact(ledger, cutoff));
  }
});

test('an entry added out of time order is over-counted (never under) until the entries before it age', () => {
  const ledger = new SpendLedger();
  ledger.set('a', [1_000, 10]);
  ledger.set('b', [5_000, 20]);
  ledger.set('late', [500, 40]); // re-counted after a release: an old time, added last
  expect(ledger.spentSince(2_000)).toBe(60); // exact is 20: 'late' still counted
  expect(exact(ledger, 2_000)).toBe(20);
  expect(ledger.spentSince(6_000)).toBe(0); // past 'b', 'late' ages too
  expect(ledger.hasOlderThan(6_000)).toBe(true);
  for (const [key, [at]] of ledger) if (at < 6_000) ledger.delete(key);
  expect(ledger.size).toBe(0);
  expect(ledger.spentSince(6_000)).toBe(0);
  expect(ledger.hasOlderThan(6_000)).toBe(false);
});

test('a random mix with out-of-order entries never reports less than the exact sum', () => {
  const random = prng(11);
  const ledger = new SpendLedger();
  let now = 10_000;
  for (let step = 0; step < 10_000; step++) {
    now += Math.floor(random() * 50);
    const keys = [...ledger.keys()];
    const roll = random();
    if (roll < 0.6 || keys.length === 0) {
      const at = random() < 0.1 ? now - Math.floor(random() * 5_000) : now;
      ledger.set(`k${step}`, [at, 1 + Math.floor(random() * 1_000)]);
    } else if (roll < 0.9) ledger.delete(keys[Math.floor(random() * keys.length)] as string);
    else for (const [key, [at]] of ledger) if (at < now - 3_000) ledger.delete(key);
    const cutoff = now - 3_000;
    expect(ledger.spentSince(cutoff)).toBeGreaterThanOrEqual(exact(ledger, cutoff));
  }
});

describe('folding: an entry that can no longer change counts by its second', () => {
  /** Every entry ever counted, folded or not: what the window must cover. */
  interface Counted {
    at: number;
    lamports: number;
    key: string | null;
  }

  test('a random mix with folds: never under the exact sum, over it by at most the cut second', () => {
    const random = prng(23);
    const ledger = new SpendLedger();
    const counted = new Map<number, Counted>();
    let now = 50_000;
    let next = 0;
    const compactions = { seen: false };
    for (let step = 0; step < 12_000; step++) {
      now += Math.floor(random() * 60);
      const live = [...counted.entries()].filter(([, c]) => c.key !== null);
      const roll = random();
      if (roll < 0.5 || live.length === 0) {
        const key = `k${next}`;
        ledger.set(key, [now, 1 + Math.floor(random() * 1_000)]);
        counted.set(next++, { at: now, lamports: (ledger.get(key) as [number, number])[1], key });
      } else if (roll < 0.65) {
        const [id, c] = live[Math.floor(random() * live.length)] as [number, Counted];
        ledger.delete(c.key as string);
        counted.delete(id);
      } else if (roll < 0.97) {
        const [, c] = live[Math.floor(random() * live.length)] as [number, Counted];
        ledger.fold(c.key as string);
        c.key = null;
      } else {
        const before = now - 61_000;
        ledger.prune(before);
        // What prune may drop: keyed entries before it, folded ones whose whole second is before it.
        for (const [id, c] of counted)
          if (c.key !== null ? c.at < before : (Math.floor(c.at / 1000) + 1) * 1000 <= before)
            counted.delete(id);
      }
      const cutoff = now - 60_000;
      const exact = [...counted.values()].filter((c) => c.at >= cutoff).reduce((n, c) => n + c.lamports, 0);
      const cutSecond = [...counted.values()]
        .filter(
          (c) => c.key === null && c.at < cutoff && Math.floor(c.at / 1000) === Math.floor(cutoff / 1000),
        )
        .reduce((n, c) => n + c.lamports, 0);
      const sum = ledger.spentSince(cutoff);
      expect(sum).toBeGreaterThanOrEqual(exact);
      expect(sum).toBeLessThanOrEqual(exact + cutSecond);
      // Places of entries gone before aging (folded, deleted) do not pile up: the order list stays O(entries).
      const order = (ledger as unknown as { order: unknown[]; head: number }).order;
      const head = (ledger as unknown as { head: number }).head;
      expect(order.length - head).toBeLessThanOrEqual(2 * ledger.size + 1025);
      if (order.length - head > 1024) compactions.seen = true;
    }
    // The window is long enough for the order list to need compacting (about 2,000 places in it at a time).
    expect(compactions.seen).toBe(true);
    // Folded entries hold no key: what is left by key is only what was never folded.
    expect(ledger.size).toBe([...counted.values()].filter((c) => c.key !== null).length);
  });

  test('a folded entry stays counted until its whole second leaves the window, then prunes', () => {
    const ledger = new SpendLedger();
    ledger.set('a#1', [10_200, 100]);
    ledger.set('b#1', [10_900, 50]);
    ledger.set('c#1', [12_000, 7]);
    ledger.fold('a#1');
    ledger.fold('b#1');
    ledger.fold('missing#1'); // nothing under that key: nothing changes
    expect(ledger.size).toBe(1);
    expect(ledger.spentSince(10_000)).toBe(157);
    expect(ledger.spentSince(10_500)).toBe(157); // 'a' is before the cut, but its second is not wholly
    expect(ledger.hasOlderThan(10_500)).toBe(false);
    expect(ledger.spentSince(11_000)).toBe(7);
    expect(ledger.hasOlderThan(11_000)).toBe(true);
    ledger.prune(11_000);
    expect(ledger.hasOlderThan(11_000)).toBe(false);
    expect(ledger.spentSince(11_000)).toBe(7);
  });

  test('a fold into a second that has aged, or before one, counts as aged', () => {
    const ledger = new SpendLedger();
    ledger.set('a#1', [10_200, 100]);
    ledger.set('c#1', [12_300, 40]);
    ledger.set('z#1', [20_000, 1]);
    ledger.fold('a#1');
    ledger.fold('c#1');
    expect(ledger.spentSince(13_000)).toBe(1); // seconds 10 and 12 have aged
    ledger.set('d#1', [10_700, 1_000]); // into aged second 10
    ledger.fold('d#1');
    expect(ledger.spentSince(13_000)).toBe(1);
    ledger.set('e#1', [11_100, 500]); // a new second between two aged ones
    ledger.fold('e#1');
    expect(ledger.spentSince(13_000)).toBe(1);
    ledger.set('f#1', [13_500, 7]); // a new second not yet aged
    ledger.fold('f#1');
    expect(ledger.spentSince(13_000)).toBe(8);
    expect(ledger.hasOlderThan(13_000)).toBe(true);
    ledger.prune(13_000);
    expect(ledger.hasOlderThan(13_000)).toBe(false);
    expect(ledger.spentSince(13_000)).toBe(8);
    expect([...ledger.folded()].map(([key]) => key)).toEqual(['folded:13']);
  });

  test('a snapshot writes each folded second at its last millisecond: a relay from before folding ages none early', () => {
    const ledger = new SpendLedger();
    ledger.set('a#1', [7_001, 5]);
    ledger.fold('a#1');
    expect([...ledger.folded()]).toEqual([['folded:7', 7_999, 5]]);
    // Read back by this relay: the same second.
    const replayed = new SpendLedger();
    replayed.set('folded:7', [7_999, 5]);
    expect(replayed.size).toBe(0);
    expect(replayed.spentSince(7_500)).toBe(5);
    expect(replayed.spentSince(8_000)).toBe(0);
  });

  test('a snapshot writes folded seconds as entries that replay folded', () => {
    const ledger = new SpendLedger();
    for (let i = 0; i < 1_000; i++) ledger.set(`t${i}#1`, [100_000 + i * 7, 10 + i]);
    for (let i = 0; i < 900; i++) ledger.fold(`t${i}#1`);
    const entries = [
      ...ledger.folded(),
      ...[...ledger].map(([key, [at, lamports]]): [string, number, number] => [key, at, lamports]),
    ];
    // 900 entries 7 ms apart over 6.3 s: 7 seconds, not 900 keys.
    expect(entries.filter(([key]) => key.startsWith('folded:'))).toHaveLength(7);
    const replayed = new SpendLedger();
    for (const [key, at, lamports] of entries) replayed.set(key, [at, lamports]);
    expect(replayed.size).toBe(100);
    for (const cutoff of [0, 100_000, 102_500, 105_000, 106_300, 107_000, 110_000])
      expect(replayed.spentSince(cutoff)).toBe(ledger.spentSince(cutoff));
  });
});

test("the store's snapshot keeps a terminal transaction's spend folded: replayed, the same sums and no key for it", () => {
  const codec = storeCodec(20_000);
  const state = codec.initial();
  for (let i = 0; i < 50; i++) {
    const id = `tx_${i}`;
    codec.apply(state, { k: 'put', tx: tx(id, `sig-${i}`) });
    codec.apply(state, { k: 'patch', id, attempt: attempt(1, `b-${i}`, { created_at: T0 + i * 100 }) });
    // The even ones finalize (their spend folds), the odd ones stay in flight (by key).
    if (i % 2 === 0)
      codec.apply(state, {
        k: 'patch',
        id,
        set: { state: 'finalized' },
        attempts: [{ n: 1, set: { stage: 'finalized' } }],
      });
  }
  expect(state.spend.size).toBe(25);
  expect(state.spend.spentSince(T0)).toBe(50 * 15_000);
  const replayed = codec.initial();
  for (const op of codec.snapshot(state)) codec.apply(replayed, op);
  expect(replayed.spend.size).toBe(25);
  for (const cutoff of [T0, T0 + 1_000, T0 + 2_450, T0 + 4_000, T0 + 5_000])
    expect(replayed.spend.spentSince(cutoff)).toBe(state.spend.spentSince(cutoff));
});

test('an attempt still open when its transaction ended keeps its entry by key: released later, it stops counting', () => {
  const codec = storeCodec(20_000);
  const state = codec.initial();
  codec.apply(state, { k: 'put', tx: tx('tx_a', 'sig-a') });
  // Attempt 1 in doubt (submitted), attempt 2 lands and finalizes the transaction.
  codec.apply(state, { k: 'patch', id: 'tx_a', attempt: attempt(1, 'b1', { stage: 'submitted' }) });
  codec.apply(state, { k: 'patch', id: 'tx_a', attempt: attempt(2, 'b2', { created_at: T0 + 1_500 }) });
  codec.apply(state, {
    k: 'patch',
    id: 'tx_a',
    set: { state: 'finalized' },
    attempts: [{ n: 2, set: { stage: 'finalized' } }],
  });
  expect(state.spend.spentSince(T0)).toBe(30_000);
  expect(state.spend.size).toBe(1); // attempt 1 by key, attempt 2 folded
  codec.apply(state, {
    k: 'patch',
    id: 'tx_a',
    attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped', released: true } }],
  });
  expect(state.spend.spentSince(T0)).toBe(15_000);
  // Its tip found paid after all: counted again once, and folded now that it is settled.
  codec.apply(state, {
    k: 'patch',
    id: 'tx_a',
    attempts: [{ n: 1, set: { leaked: true, released: false } }],
  });
  expect(state.spend.spentSince(T0)).toBe(30_000);
  expect(state.spend.size).toBe(0);
});
