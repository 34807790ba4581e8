import type { TxRecord, TxState } from '../../src';

/** A minimal `GET /tx/{id}` record in `state`, for tests with a scripted sidecar. */
export function record(state: TxState, extra: Partial<TxRecord> = {}): TxRecord {
  return {
    tx_id: 'tx_1',
    state,
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_slot: 1,
    expires_at_slot: 151,
    tx_signatures: ['sig1'],
    bundle_id: null,
    history: [{ state, slot: 1, ts: 5 }],
    attempts: [],
    retries: 0,
    last_error: null,
    failure: null,
    ...extra,
  };
}
