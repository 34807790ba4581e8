import { isTerminalTxState } from '@solrelay/core';
import type { StoredAttempt, StoredTx } from './records';

/** An attempt is in flight when it was built and has neither landed nor settled. */
export function inFlight(tx: StoredTx): StoredAttempt | null {
  const last = tx.attempts[tx.attempts.length - 1];
  if (!last) return null;
  return last.stage === 'journaled' || last.stage === 'submitted' ? last : null;
}

/** The last attempt that ended (for escalation and same-tip retries). */
export function lastSettled(tx: StoredTx): StoredAttempt | null {
  for (let i = tx.attempts.length - 1; i >= 0; i--) {
    const a = tx.attempts[i] as StoredAttempt;
    if (a.outcome) return a;
  }
  return null;
}

/** A transaction's user signatures and its attempts' tip signatures. */
export function* signaturesOf(tx: StoredTx): Iterable<string> {
  yield* tx.signatures;
  for (const a of tx.attempts) if (a.tip_signature) yield a.tip_signature;
}

// The list queries over records held in memory (the local stores' tables, the PostgreSQL store's own records).

/** Every record not yet terminal. */
export function liveOf(records: Iterable<StoredTx>): StoredTx[] {
  const out: StoredTx[] = [];
  for (const tx of records) if (!isTerminalTxState(tx.state)) out.push(tx);
  return out;
}

/** Pending, not stopped, nothing in flight: waiting for an attempt. */
export function awaitingAttemptOf(records: Iterable<StoredTx>): StoredTx[] {
  const out: StoredTx[] = [];
  for (const tx of records) if (tx.state === 'pending' && !tx.stopped && !inFlight(tx)) out.push(tx);
  return out;
}

/** Non-terminal records whose landing slot is `slot`. */
export function landedInOf(records: Iterable<StoredTx>, slot: number): StoredTx[] {
  const out: StoredTx[] = [];
  for (const tx of records) if (tx.landed_slot === slot && !isTerminalTxState(tx.state)) out.push(tx);
  return out;
}

/** Live records, and terminal ones with an attempt that ended unleaked, built at or after `sinceSlot`. */
export function followedOf(
  records: Iterable<StoredTx>,
  sinceSlot: number,
): { live: StoredTx[]; ended: StoredTx[] } {
  const live: StoredTx[] = [];
  const ended: StoredTx[] = [];
  for (const tx of records) {
    if (!isTerminalTxState(tx.state)) live.push(tx);
    else if (tx.attempts.some((a) => a.stage === 'failed' && !a.leaked && a.created_slot >= sinceSlot))
      ended.push(tx);
  }
  return { live, ended };
}
