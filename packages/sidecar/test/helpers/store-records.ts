import type { StoredAttempt, StoredTx } from '../../src/store/records';
import type { TxEvent } from '../../src/store/store';

// Records for the store tests: a pending transaction, an attempt, a status event, each with fields to override.

export const T0 = 1_700_000_000_000;

export function tx(id: string, first: string, extra: Partial<StoredTx> = {}): StoredTx {
  return {
    tx_id: id,
    state: 'pending',
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_at: T0,
    enqueued_slot: 1000,
    expires_at_slot: 1150,
    wires: ['AQID'],
    signatures: [first],
    blockhashes: ['11111111111111111111111111111111'],
    nonce_accounts: [null],
    fee_payers: ['payer'],
    history: [{ state: 'pending', slot: 1000, ts: T0 }],
    attempts: [],
    retries: 0,
    last_error: null,
    failure: null,
    landed_slot: null,
    stopped: false,
    ...extra,
  };
}

export function attempt(n: number, bundle: string, extra: Partial<StoredAttempt> = {}): StoredAttempt {
  return {
    attempt: n,
    bundle_id: bundle,
    tip_lamports: 10_000,
    tip_tx: 'BAUG',
    tip_signature: `tip-${bundle}`,
    tip_account: 'tip-account',
    tipper: 'tipper',
    tip_last_valid_block_height: 1050,
    bundle_signatures: ['sig', `tip-${bundle}`],
    created_at: T0 + 1000,
    created_slot: 1002,
    slot_submitted: null,
    target_slot: null,
    window_end_slot: null,
    leader: null,
    stage: 'journaled',
    outcome: null,
    slot_landed: null,
    floor_at_submit: { p25: 1, p50: 2, p75: 3, p95: 4, p99: 5, ema: 2, stale: false },
    decision: {
      mode: 'reflex',
      bypass: false,
      escalated: false,
      reason: 'test',
      trace: null,
      source: 'agent',
    },
    reserved_lamports: 15_000,
    released: false,
    leaked: false,
    timeline: {
      submitted: null,
      landed: null,
      processed: null,
      confirmed: null,
      finalized: null,
      failed: null,
    },
    send_errors: 0,
    ...extra,
  };
}

export function status(txId: string, state: StoredTx['state']): TxEvent {
  return {
    kind: 'tx_status_changed',
    data: { tx_id: txId, state, bundle_id: null, tx_signatures: [], failure: null, ts: T0 },
  };
}
