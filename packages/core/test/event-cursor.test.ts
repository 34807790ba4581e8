import { compareEventCursors, formatEventCursor, parseEventCursor } from '../src/event-cursor';

test('a cursor prints and parses back', () => {
  const cursor = { xid: 18446744073709551615n, id: 42n };
  expect(parseEventCursor(formatEventCursor(cursor))).toEqual(cursor);
  expect(parseEventCursor('755.12')).toEqual({ xid: 755n, id: 12n });
});

test.each([
  ['', 'empty'],
  ['a1b2c3d4e5f6-17', 'a ring id of the journal store'],
  ['12', 'no separator'],
  ['12.', 'no id'],
  ['.12', 'no xid'],
  ['-1.2', 'a sign'],
  ['1.0', 'row ids start at 1'],
  ['18446744073709551616.1', 'an xid past 64 bits'],
  ['1.9223372036854775808', 'an id past bigint'],
  ['1.2.3', 'three parts'],
  [' 1.2', 'whitespace'],
])('%p is not a cursor (%s)', (text) => {
  expect(parseEventCursor(text)).toBeNull();
});

test('cursors order by xid, then id', () => {
  const sorted = ['9.100', '10.3', '10.4', '11.1'].map((t) => parseEventCursor(t)!);
  const shuffled = [sorted[2]!, sorted[0]!, sorted[3]!, sorted[1]!];
  expect(shuffled.sort(compareEventCursors)).toEqual(sorted);
  expect(compareEventCursors(sorted[1]!, parseEventCursor('10.3')!)).toBe(0);
});
