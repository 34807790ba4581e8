import { MAX_USER_TRANSACTIONS } from './bundle-id';
import { tipPerCu } from './pricing';

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
 * - it carries no `jitodontfront` marker: the engine rejects a bundle whose marked transaction is not first
 *   (jito-docs `lowlatencytxnsend.md`, "Sandwich mitigation"), and a rider is never first;
 * - with a {@link PackTip}: the pack keeps every member's rank. The auction ranks a bundle by tip per requested CU of
 *   the whole bundle (DESIGN §11), so a rider joins only if the pack's tip over the pack's CU with it is at least
 *   the bid per CU of each member (the lead's and every rider's, its own pricing's).
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
  /** Requested CU of its user transactions (needed to ride under a {@link PackTip}). */
  computeUnits?: number;
  /** Lamports per requested CU it bids alone (its rank; needed to ride under a {@link PackTip}). */
  bidPerCu?: number;
  /** Whether one of its transactions carries the `jitodontfront` marker (it never rides). */
  dontFront?: boolean;
}

/** The pack's one tip and what the bundle requests besides the user transactions (the tip transaction's CU). */
export interface PackTip {
  tipLamports: number;
  overheadCu: number;
}

/** Whether `tip` over `computeUnits` ranks at least `bidPerCu` (tip per requested CU). */
export function ranksAtLeast(tipLamports: number, computeUnits: number, bidPerCu: number): boolean {
  return tipPerCu(tipLamports, computeUnits) >= bidPerCu;
}

export function choosePassengers<T>(
  lead: Pick<PackCandidate<T>, 'transactions' | 'writeLocks' | 'lookups' | 'computeUnits' | 'bidPerCu'>,
  candidates: ReadonlyArray<PackCandidate<T>>,
  maxTransactions: number = MAX_USER_TRANSACTIONS,
  tip: PackTip | null = null,
): T[] {
  const limit = Math.min(MAX_USER_TRANSACTIONS, maxTransactions);
  if (lead.lookups || lead.transactions >= limit) return [];
  if (tip && (lead.computeUnits === undefined || lead.bidPerCu === undefined)) return [];
  const locked = new Set(lead.writeLocks);
  let count = lead.transactions;
  let packCu = (lead.computeUnits ?? 0) + (tip?.overheadCu ?? 0);
  let rank = lead.bidPerCu ?? 0;
  const chosen: T[] = [];
  for (const candidate of candidates) {
    if (count >= limit) break;
    if (candidate.lookups || candidate.dontFront || count + candidate.transactions > limit) continue;
    if (candidate.writeLocks.some((key) => locked.has(key))) continue;
    if (candidate.readLocks?.some((key) => locked.has(key))) continue;
    if (tip) {
      if (candidate.computeUnits === undefined || candidate.bidPerCu === undefined) continue;
      const need = Math.max(rank, candidate.bidPerCu);
      if (!ranksAtLeast(tip.tipLamports, packCu + candidate.computeUnits, need)) continue;
      packCu += candidate.computeUnits;
      rank = need;
    }
    for (const key of candidate.writeLocks) locked.add(key);
    count += candidate.transactions;
    chosen.push(candidate.item);
  }
  return chosen;
}
