import {
  QUEUED_TX_STATES,
  RelayError,
  effectivePriority,
  isTerminalTxState,
  type Policy,
  type QueueResponse,
  type TxRecord,
} from '@solrelay/core';
import { tipperOf } from '../operator/tipper-funds';
import type { StoredTx } from '../store/records';
import type { StoreCounts } from '../store/store';

/** Read-only views of the store for the API (`GET /tx/{id}`, `GET /queue`) and the stream's filter. */

export function txRecordOf(tx: StoredTx | undefined, txId: string): TxRecord {
  if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: txId });
  return toTxRecord(tx);
}

/**
 * `GET /queue`: every transaction not yet terminal, each with its state, and the count per state, so one waiting to
 * be sent (`pending`) is told apart from one sent or on chain. `pending` stays the count of them all (its name in
 * the spec, read by callers that wait for an empty queue).
 */
export function queueView(
  live: readonly StoredTx[],
  counts: Pick<StoreCounts, 'evicted'>,
  policy: Policy,
  slot: number,
): QueueResponse {
  const entries: QueueResponse['entries'] = [];
  const by_state = Object.fromEntries(QUEUED_TX_STATES.map((s) => [s, 0])) as QueueResponse['by_state'];
  for (const tx of live) {
    if (isTerminalTxState(tx.state)) continue;
    by_state[tx.state] += 1;
    entries.push({
      tx_id: tx.tx_id,
      state: tx.state,
      age_slots: Math.max(0, slot - tx.enqueued_slot),
      priority: effectivePriority(policy, tx.priority),
      retries: tx.retries,
    });
  }
  entries.sort((a, b) => (a.tx_id < b.tx_id ? -1 : 1));
  const evicted_total = Object.values(counts.evicted).reduce((a, b) => a + b, 0);
  return { pending: entries.length, by_state, evicted_total, entries };
}

/**
 * What the stream must watch besides this host's own tippers (a transaction-status filter on each):
 * - fee payers of live `"tip":"included"` transactions: they carry no relay tip transaction, so the stream sees
 *   them land only through their payers (DESIGN §8);
 * - in a fleet, other hosts' tippers: those that signed an unsettled attempt this host holds (adopted from another
 *   host), and `fleetTippers`, those of other hosts' attempts whose tips may still take (DESIGN §10, "Tippers": each
 *   host's filter covers every tipper of the fleet, so an adopted tip's landing is seen as it happens).
 */
export function streamAccounts(
  live: readonly StoredTx[],
  ownTippers: readonly string[],
  fleetTippers: readonly string[] = [],
): string[] {
  const own = new Set(ownTippers);
  const accounts = new Set<string>();
  for (const tx of live) {
    if (isTerminalTxState(tx.state)) continue;
    if (tx.tip === 'included') for (const payer of tx.fee_payers) accounts.add(payer);
    for (const attempt of tx.attempts) {
      if (attempt.stage === 'finalized' || attempt.stage === 'failed') continue;
      const tipper = tipperOf(attempt);
      if (tipper !== null && !own.has(tipper)) accounts.add(tipper);
    }
  }
  for (const tipper of fleetTippers) if (!own.has(tipper)) accounts.add(tipper);
  return [...accounts];
}

export function toTxRecord(tx: StoredTx): TxRecord {
  return {
    tx_id: tx.tx_id,
    state: tx.state,
    priority: tx.priority,
    tip: tx.tip,
    max_tip: tx.max_tip,
    enqueued_slot: tx.enqueued_slot,
    expires_at_slot: tx.expires_at_slot,
    tx_signatures: [...tx.signatures],
    bundle_id: tx.attempts[tx.attempts.length - 1]?.bundle_id ?? null,
    history: tx.history.map((h) => ({ ...h })),
    attempts: tx.attempts.map((a) => ({
      attempt: a.attempt,
      bundle_id: a.bundle_id,
      tip_lamports: a.tip_lamports,
      slot_submitted: a.slot_submitted ?? a.created_slot,
      stage: a.stage === 'journaled' ? 'submitted' : a.stage,
      outcome: a.outcome,
      tipper: tipperOf(a),
      compute_units: a.decision.pricing?.compute_units ?? null,
      tip_per_cu: a.decision.pricing?.tip_per_cu ?? null,
      bid_per_cu: a.decision.pricing?.bid_per_cu ?? null,
      priced_by: a.decision.pricing?.signal ?? null,
      region: a.region ?? null,
    })),
    retries: tx.retries,
    last_error: tx.last_error,
    failure: tx.failure,
  };
}
