// What the queue panel shows: pure, so it is tested without a browser.
import { QUEUED_TX_STATES, type QueueEntry, type QueueResponse, type TxState } from '@solrelay/core';

/** A transaction's latest state from `tx_status_changed`, and when the browser received it (epoch ms). */
export interface LiveTxState {
  state: TxState;
  seen_at: number;
}

/**
 * The state to show on a queue row: the sidecar's own (`GET /queue`), unless an event arrived after that read was
 * sent, which is newer. A poll follows every event by 200 ms, so the two never disagree for long.
 */
export function queueRowState(
  entry: QueueEntry,
  live: LiveTxState | undefined,
  queueReadAt: number | null,
): TxState {
  if (live && queueReadAt !== null && live.seen_at > queueReadAt) return live.state;
  return entry.state;
}

/** The queue's counts by state, in forward order, leaving out the states nobody is in. */
export function queueStateCounts(queue: QueueResponse): Array<{ state: TxState; count: number }> {
  return QUEUED_TX_STATES.map((state) => ({ state, count: queue.by_state[state] })).filter(
    (c) => c.count > 0,
  );
}
