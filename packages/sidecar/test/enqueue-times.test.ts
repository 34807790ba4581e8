import { EnqueueTimes } from '../src/util/enqueue-times';

test('counts the transactions accepted within the window that are still undecided', () => {
  const times = new EnqueueTimes(2_000);
  times.set('a', 1_000);
  times.set('b', 1_500);
  times.set('c', 2_000);
  expect(times.undecided(2_100)).toBe(3);
  // Decided (its first attempt journaled) or ended: no longer counted, and gone from the map.
  times.delete('b');
  expect(times.undecided(2_100)).toBe(2);
  expect(times.has('b')).toBe(false);
  // Accepted more than the window ago: not counted, though still undecided (stopped, refused a tip, left to a slow
  // model or to another host): it does not hold the count up for good. Its time stays for decision latency.
  expect(times.undecided(3_200)).toBe(1);
  expect(times.get('a')).toBe(1_000);
  expect(times.undecided(10_000)).toBe(0);
  times.set('d', 10_000);
  expect(times.undecided(10_000)).toBe(1);
  times.clear();
  expect(times.undecided(10_000)).toBe(0);
  expect(times.size).toBe(0);
});

test('accepts past the window leave its count as they are set, whether or not anyone asks', () => {
  const times = new EnqueueTimes(100);
  for (let i = 0; i < 10_000; i++) times.set(`t${i}`, i);
  // Every one still undecided and kept for decision latency; only the last 100 ms count.
  expect(times.size).toBe(10_000);
  expect(times.undecided(9_999)).toBe(101);
});
