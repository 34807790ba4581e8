import { emptyTimeline } from '@solrelay/core';
import type { StoredAttempt } from '../src/store/records';
import {
  WINDOW_GRACE_MS,
  WINDOW_GRACE_SLOTS,
  landingGoneBy,
  commitmentRank,
  progress,
  windowPassed,
} from '../src/track/judge';

/** The pure verdicts the tracker applies through settlement: table-driven, no I/O, no clock. */

test.each([
  [undefined, 0],
  ['processed', 0],
  ['confirmed', 1],
  ['finalized', 2],
])('commitmentRank(%s) = %d', (status, rank) => {
  expect(commitmentRank(status)).toBe(rank);
});

test.each([
  // every user signature's own status; the lowest commitment wins, the highest slot is the landing slot
  [[{ slot: 10 }], { slot: 10, target: 'processed' }],
  [[{ slot: 10, confirmationStatus: 'confirmed' }], { slot: 10, target: 'confirmed' }],
  [[{ slot: 10, confirmationStatus: 'finalized' }], { slot: 10, target: 'finalized' }],
  [
    [
      { slot: 10, confirmationStatus: 'finalized' },
      { slot: 12, confirmationStatus: 'confirmed' },
    ],
    { slot: 12, target: 'confirmed' },
  ],
  [
    [
      { slot: 11, confirmationStatus: 'processed' },
      { slot: 10, confirmationStatus: 'finalized' },
    ],
    { slot: 11, target: 'processed' },
  ],
])('progress(%j) = %j', (statuses, expected) => {
  expect(progress(statuses)).toEqual(expected);
});

function flying(set: Partial<StoredAttempt>): StoredAttempt {
  return {
    stage: 'submitted',
    window_end_slot: 100,
    created_at: 0,
    timeline: { ...emptyTimeline(), submitted: { slot: 95, ts: 1000 } },
    ...set,
  } as StoredAttempt;
}

const late = { slot: 100 + WINDOW_GRACE_SLOTS + 1, ts: 1000 + WINDOW_GRACE_MS };
test.each([
  ['window and grace passed', flying({}), late, true],
  ['still inside the slot grace', flying({}), { slot: 100 + WINDOW_GRACE_SLOTS, ts: 99_999 }, false],
  ['slots passed but not the time grace', flying({}), { slot: 200, ts: 1000 + WINDOW_GRACE_MS - 1 }, false],
  ['not sent yet (journaled)', flying({ stage: 'journaled' }), late, false],
  ['no known window', flying({ window_end_slot: null }), late, false],
  [
    'time measured from creation when the submitted time is unknown',
    flying({ timeline: emptyTimeline(), created_at: 500 }),
    { slot: 200, ts: 500 + WINDOW_GRACE_MS },
    true,
  ],
])('windowPassed: %s', (_name, attempt, readAt, expected) => {
  expect(windowPassed(attempt, readAt)).toBe(expected);
});

test.each([
  { finalized: 130, context: undefined, gone: false, why: 'no context slot: the answer proves nothing' },
  {
    finalized: 100,
    context: 140,
    gone: false,
    why: 'the root has not passed the landing: maybe another fork',
  },
  { finalized: 131, context: 120, gone: false, why: 'a node behind the root we know' },
  { finalized: 101, context: 101, gone: true, why: 'rooted past the landing, read from a node at the root' },
])('landingGoneBy(100, $finalized, $context) is $gone: $why', ({ finalized, context, gone }) => {
  expect(landingGoneBy(100, finalized, context)).toBe(gone);
});

test('windowPassed takes the grace it is given (per consensus): a longer one judges later', () => {
  const flying = {
    stage: 'submitted',
    window_end_slot: 100,
    timeline: { submitted: { slot: 95, ts: 1_000 } },
    created_at: 1_000,
  } as unknown as Parameters<typeof windowPassed>[0];
  const at = { slot: 105, ts: 2_500 };
  expect(windowPassed(flying, at, { slots: 4, ms: 1_200 })).toBe(true);
  expect(windowPassed(flying, at, { slots: 5, ms: 1_200 })).toBe(false);
  expect(windowPassed(flying, at, { slots: 4, ms: 1_600 })).toBe(false);
});
