import { MIN_SPAN_S, formatTickTime, tipTimeRange } from '../src/chart-time';

test('the x range follows the data once it spans MIN_SPAN_S (no fixed window a fresh page leaves empty)', () => {
  expect(tipTimeRange(1_000, 1_000 + MIN_SPAN_S, 5_000)).toEqual([1_000, 1_000 + MIN_SPAN_S]);
  expect(tipTimeRange(1_000, 1_030, 5_000)).toEqual([1_000, 1_030]);
  expect(tipTimeRange(1_000, 1_900, 5_000)).toEqual([1_000, 1_900]);
});

test('a short or empty history gets MIN_SPAN_S ending at its newest sample, or now', () => {
  expect(tipTimeRange(1_000, 1_000, 5_000)).toEqual([1_000 - MIN_SPAN_S, 1_000]);
  expect(tipTimeRange(1_000, 1_001, 5_000)).toEqual([1_001 - MIN_SPAN_S, 1_001]);
  expect(tipTimeRange(null, null, 5_000)).toEqual([5_000 - MIN_SPAN_S, 5_000]);
});

test('tick labels are one short line of local time, HH:MM:SS', () => {
  const at = new Date(2026, 10, 21, 9, 5, 7).getTime() / 1_000;
  expect(formatTickTime(at)).toBe('09:05:07');
  expect(formatTickTime(at + 3_600 * 5 + 60)).toBe('14:06:07');
});
