import { DEFAULT_POLICY, QUEUED_TX_STATES, type TxState } from '@solrelay/core';
import type { StoredTx } from '../src/store/records';
import { queueView } from '../src/views/views';

/**
 * `GET /queue` (#18): each entry carries the transaction's own state and the answer counts them by state, so a
 * transaction waiting to be sent is told apart from one already sent or on chain; `pending` stays the count of
 * every transaction not yet terminal.
 */

function tx(id: string, state: TxState, enqueuedSlot: number): StoredTx {
  return {
    tx_id: id,
    state,
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_at: 1,
    enqueued_slot: enqueuedSlot,
    expires_at_slot: enqueuedSlot + 150,
    wires: ['AA=='],
    signatures: [`sig_${id}`],
    blockhashes: ['hash'],
    nonce_accounts: [null],
    fee_payers: ['payer'],
    history: [{ state, slot: enqueuedSlot, ts: 1 }],
    attempts: [],
    retries: state === 'pending' ? 0 : 1,
    last_error: null,
    failure: null,
    landed_slot: null,
    stopped: false,
  };
}

/** Evictions as the store counts them (left the queue without landing). */
const EVICTED = { evicted: { expired: 2, failed: 1 } };

test('every entry carries its state; by_state counts each queued state; terminal transactions are left out', () => {
  const records = [
    tx('tx_01', 'confirmed', 100),
    tx('tx_02', 'pending', 110),
    tx('tx_03', 'submitted', 120),
    tx('tx_04', 'processed', 121),
    tx('tx_05', 'finalized', 90),
    tx('tx_06', 'pending', 125),
    tx('tx_07', 'expired', 95),
  ];
  const view = queueView(records, EVICTED, DEFAULT_POLICY, 130);
  expect(view.entries.map((e) => [e.tx_id, e.state, e.age_slots])).toEqual([
    ['tx_01', 'confirmed', 30],
    ['tx_02', 'pending', 20],
    ['tx_03', 'submitted', 10],
    ['tx_04', 'processed', 9],
    ['tx_06', 'pending', 5],
  ]);
  expect(view.by_state).toEqual({ pending: 2, submitted: 1, landed: 0, processed: 1, confirmed: 1 });
  expect(view.pending).toBe(5);
  expect(view.evicted_total).toBe(3);
});

test('an empty queue still reports every state, at 0, in forward order', () => {
  const view = queueView([], { evicted: {} }, DEFAULT_POLICY, 10);
  expect(Object.keys(view.by_state)).toEqual([...QUEUED_TX_STATES]);
  expect(Object.values(view.by_state)).toEqual([0, 0, 0, 0, 0]);
  expect(view).toMatchObject({ pending: 0, entries: [] });
});
