import type { QueueEntry, QueueResponse } from '@solrelay/core';
import { queueRowState, queueStateCounts } from '../src/queue-view';

const confirmed: QueueEntry = {
  tx_id: 'tx_01A',
  state: 'confirmed',
  age_slots: 9,
  priority: 'normal',
  retries: 0,
};

test('a queue row shows the sidecar’s state, not "pending", when no newer event says otherwise', () => {
  expect(queueRowState(confirmed, undefined, 1_000)).toBe('confirmed');
  // An event received before the read was sent is older than what the read answered.
  expect(queueRowState(confirmed, { state: 'processed', seen_at: 900 }, 1_000)).toBe('confirmed');
});

test('an event received after the /queue read was sent is newer: the row shows it until the next read', () => {
  expect(queueRowState(confirmed, { state: 'finalized', seen_at: 1_100 }, 1_000)).toBe('finalized');
  expect(queueRowState(confirmed, { state: 'finalized', seen_at: 1_100 }, null)).toBe('confirmed');
});

test('the header counts each state present, in forward order', () => {
  const queue: QueueResponse = {
    pending: 4,
    by_state: { pending: 1, submitted: 2, landed: 0, processed: 0, confirmed: 1 },
    evicted_total: 0,
    entries: [],
  };
  expect(queueStateCounts(queue)).toEqual([
    { state: 'pending', count: 1 },
    { state: 'submitted', count: 2 },
    { state: 'confirmed', count: 1 },
  ]);
  expect(
    queueStateCounts({
      ...queue,
      pending: 0,
      by_state: { ...queue.by_state, pending: 0, submitted: 0, confirmed: 0 },
    }),
  ).toEqual([]);
});
