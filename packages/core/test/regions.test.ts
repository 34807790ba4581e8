import { chooseRegion } from '../src/regions';

test('the preferred region when it can take a request now', () => {
  expect(chooseRegion([0, 0, 0], 1)).toEqual({ region: 1, waitMs: 0 });
});

test('otherwise the next ready region after it, wrapping around', () => {
  expect(chooseRegion([0, 300, 500, 0], 1)).toEqual({ region: 3, waitMs: 0 });
  expect(chooseRegion([0, 300, 500, 900], 2)).toEqual({ region: 0, waitMs: 0 });
});

test('no preference (or an unknown one) starts at the first region', () => {
  expect(chooseRegion([400, 0, 0], null)).toEqual({ region: 1, waitMs: 0 });
  expect(chooseRegion([0, 0], 7)).toEqual({ region: 0, waitMs: 0 });
});

test('none ready: the one ready soonest, the preferred on a tie', () => {
  expect(chooseRegion([700, 200, 900], 0)).toEqual({ region: 1, waitMs: 200 });
  expect(chooseRegion([200, 200, 900], 1)).toEqual({ region: 1, waitMs: 200 });
});

test('at least one region is needed', () => {
  expect(() => chooseRegion([], null)).toThrow(/at least one region/);
});
