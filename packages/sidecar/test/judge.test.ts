import { emptyTimeline } from '@solrelay/core';
import type { StoredAttempt } from '../src/store/records';
import {
  WINDOW_GRACE_MS,
  WINDOW_GRACE_SLOTS,
  orphanedBy,
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
  { context: undefined, landed: 100, gone: false, why: 'no context slot: the answer proves nothing' },
  { context: 99, landed: 100, gone: false, why: 'a node behind the landing' },
  { context: 103, landed: 100, gone: false, why: 'within a leader window: maybe a brief fork' },
  { context: 104, landed: 100, gone: true, why: 'a leader window past the landing' },
])('orphanedBy($context, $landed) is $gone: $why', ({ context, landed, gone }) => {
  expect(orphanedBy(context, landed)).toBe(gone);
});
