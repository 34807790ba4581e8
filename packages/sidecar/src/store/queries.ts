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
