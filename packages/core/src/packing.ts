import { MAX_USER_TRANSACTIONS } from './bundle-id';

/**
 * Packing: which waiting transactions ride in the bundle of the one being sent. One region takes one bundle a second
 * (per IP), so a bundle that carries four callers' transactions under one tip sends four times as many a second.
 *
 * Conditions a passenger must meet (the caller checks the rest: each passed simulation, its attempt was never sent,
 * its tip is relay's):
 * - it write-locks no account that the lead or an earlier passenger write-locks, and reads none they write:
 *   transactions of one bundle run in order and atomically (jito-docs `lowlatencytxnsend.md`), and it was simulated against the state before them (a failing member
 *   sinks the whole bundle);
 * - its accounts are all static (an address-table lookup hides what it locks);
 * - the bundle stays within {@link MAX_USER_TRANSACTIONS} user transactions (plus the tip).
 *
 * Candidates are taken in the order given (the send queue's: most valuable first); one that does not fit is skipped,
 * not a reason to stop.
 */
export interface PackCandidate<T> {
  item: T;
  /** User transactions it brings. */
  transactions: number;
  /** Accounts its transactions write-lock (static keys). */
  writeLocks: readonly string[];
  /** Accounts its transactions only read (static keys, programs included). */
  readLocks?: readonly string[];
  /** Whether it has address-table lookups (its locks are not all known). */
  lookups: boolean;
}

export function choosePassengers<T>(
  lead: Pick<PackCandidate<T>, 'transactions' | 'writeLocks' | 'lookups'>,
  candidates: ReadonlyArray<PackCandidate<T>>,
  maxTransactions: number = MAX_USER_TRANSACTIONS,
): T[] {
  const limit = Math.min(MAX_USER_TRANSACTIONS, maxTransactions);
  if (lead.lookups || lead.transactions >= limit) return [];
  const locked = new Set(lead.writeLocks);
  let count = lead.transactions;
  const chosen: T[] = [];
  for (const candidate of candidates) {
    if (count >= limit) break;
    if (candidate.lookups || count + candidate.transactions > limit) continue;
    if (candidate.writeLocks.some((key) => locked.has(key))) continue;
    if (candidate.readLocks?.some((key) => locked.has(key))) continue;
    for (const key of candidate.writeLocks) locked.add(key);
    count += candidate.transactions;
    chosen.push(candidate.item);
  }
  return chosen;
}
