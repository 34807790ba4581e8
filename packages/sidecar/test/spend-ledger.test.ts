import { SpendLedger } from '../src/store/records';

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
