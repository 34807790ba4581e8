import { MAX_USER_TRANSACTIONS } from './bundle-id';
import {
  COMPUTE_BUDGET_PROGRAM_ID,
  requestedComputeUnits,
  tipPerCu,
  MICRO_LAMPORTS_PER_LAMPORT,
  type PricedInstruction,
} from './pricing';

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
  /** Lamports it would tip alone (what a raised pack tip may take from it; see {@link PackTip.maxLamports}). */
  tipLamports?: number;
  /**
   * Lamports its transactions take from each fee payer, when fees and System transfers from the payer are all they
   * can take ({@link feePayerDebit}); absent when not known. Only with it may it share a fee payer with the pack.
   */
  payerDebits?: Readonly<Record<string, number>>;
}

/** The pack's one tip and what the bundle requests besides the user transactions (the tip transaction's CU). */
export interface PackTip {
  /** The lead's own tip: the pack's tip is never below it. */
  tipLamports: number;
  overheadCu: number;
  /**
   * The most the pack's tip may be raised to so that riders keep their rank (the lead's `max-tip` bound). Absent: the
   * tip stays the lead's and only riders that rank under it join. A raise never passes what the members would tip
   * alone together (the lead's tip plus each rider's {@link PackCandidate.tipLamports}): a pack costs no more than
   * sending each alone, and saves their tip transactions' CU and the engine's bundle budget.
   */
  maxLamports?: number;
}

/** The riders chosen and the pack's tip: the lead's, or raised to rank every member at its own bid. */
export interface PackPlan<T> {
  passengers: T[];
  tipLamports: number;
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
  return planPack(lead, candidates, maxTransactions, tip).passengers;
}

/**
 * {@link choosePassengers}, and the pack's tip: with a {@link PackTip} whose `maxLamports` allows it, a rider that
 * the lead's tip cannot rank joins when the tip raised to `ceil(rank × pack CU)` stays within `maxLamports` and
 * within the members' own tips together; the plan's tip is the highest such raise (the lead's tip when none).
 */
export function planPack<T>(
  lead: Pick<
    PackCandidate<T>,
    'transactions' | 'writeLocks' | 'lookups' | 'computeUnits' | 'bidPerCu' | 'payerDebits'
  >,
  candidates: ReadonlyArray<PackCandidate<T>>,
  maxTransactions: number = MAX_USER_TRANSACTIONS,
  tip: PackTip | null = null,
  /**
   * What each fee payer can spend (its balance less the rent-exempt minimum): members may share a fee payer only
   * while their debits from it together stay within this (see {@link sharesOnlyPayers}). Absent: none share.
   */
  payerFunds?: ReadonlyMap<string, number>,
): PackPlan<T> {
  const limit = Math.min(MAX_USER_TRANSACTIONS, maxTransactions);
  const none: PackPlan<T> = { passengers: [], tipLamports: tip?.tipLamports ?? 0 };
  if (lead.lookups || lead.transactions >= limit) return none;
  if (tip && (lead.computeUnits === undefined || lead.bidPerCu === undefined)) return none;
  const locked = new Set(lead.writeLocks);
  /** Debits from each fee payer of the pack so far, for the payers whose every member's debit is known. */
  const debits = new Map<string, number>(Object.entries(lead.payerDebits ?? {}));
  let count = lead.transactions;
  let packCu = (lead.computeUnits ?? 0) + (tip?.overheadCu ?? 0);
  let rank = lead.bidPerCu ?? 0;
  let tipLamports = tip?.tipLamports ?? 0;
  /** What the members chosen so far would tip alone, together. */
  let ownTips = tipLamports;
  const chosen: T[] = [];
  for (const candidate of candidates) {
    if (count >= limit) break;
    if (candidate.lookups || candidate.dontFront || count + candidate.transactions > limit) continue;
    const shared = candidate.writeLocks.filter((key) => locked.has(key));
    if (shared.length > 0 && !sharesOnlyPayers(shared, candidate, debits, payerFunds)) continue;
    if (candidate.readLocks?.some((key) => locked.has(key))) continue;
    if (tip) {
      if (candidate.computeUnits === undefined || candidate.bidPerCu === undefined) continue;
      const need = Math.max(rank, candidate.bidPerCu);
      const cu = packCu + candidate.computeUnits;
      let next = tipLamports;
      if (!ranksAtLeast(tipLamports, cu, need)) {
        const ceiling = Math.min(tip.maxLamports ?? tip.tipLamports, ownTips + (candidate.tipLamports ?? 0));
        const raised = Math.ceil(need * cu);
        if (raised > ceiling || !ranksAtLeast(raised, cu, need)) continue;
        next = raised;
      }
      packCu = cu;
      rank = need;
      tipLamports = next;
      ownTips += candidate.tipLamports ?? 0;
    }
    // The payers' debits so far: a shared payer's add up; a key written by a member whose debit from it is not known
    // (not its fee payer, or an instruction that may take more) can no longer be shared.
    for (const key of candidate.writeLocks) {
      const own = candidate.payerDebits?.[key];
      if (own === undefined) debits.delete(key);
      else debits.set(key, (shared.includes(key) ? (debits.get(key) ?? 0) : 0) + own);
      locked.add(key);
    }
    count += candidate.transactions;
    chosen.push(candidate.item);
  }
  return { passengers: chosen, tipLamports };
}

/**
 * Whether a candidate whose write locks meet the pack's only at `shared` may still ride (DESIGN §11: transactions that
 * share only their fee payer, one owner's, ride together when the pack runs as a sequence). Every shared key must be
 * a fee payer of the candidate and of the pack whose debits are all known, and the payer must afford them together:
 * the members' debits from it (fees and System transfers, nothing else) add up in bundle order, so the payer's
 * spendable lamports covering their sum is the sequence succeeding where each alone did.
 */
export function sharesOnlyPayers(
  shared: readonly string[],
  candidate: Pick<PackCandidate<unknown>, 'payerDebits'>,
  debits: ReadonlyMap<string, number>,
  payerFunds: ReadonlyMap<string, number> | undefined,
): boolean {
  if (!payerFunds || !candidate.payerDebits) return false;
  return shared.every((key) => {
    const own = candidate.payerDebits?.[key];
    const before = debits.get(key);
    const funds = payerFunds.get(key);
    return own !== undefined && before !== undefined && funds !== undefined && before + own <= funds;
  });
}

/** Agave's fee per signature (lamports). */
export const LAMPORTS_PER_SIGNATURE = 5_000;
export const SYSTEM_PROGRAM_ID = '11111111111111111111111111111111';
/** SystemInstruction::Transfer: u32 discriminant 2, then the lamports, u64 little-endian. */
const SYSTEM_TRANSFER = 2;
/** ComputeBudgetInstruction::SetComputeUnitPrice(u64 micro-lamports): discriminant 3. */
const SET_COMPUTE_UNIT_PRICE = 3;
/** SPL Memo (v1 and v2): they only log. */
const MEMO_PROGRAM_IDS: ReadonlySet<string> = new Set([
  'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr',
  'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo',
]);

/** One top-level instruction with its accounts (base58), as {@link feePayerDebit} reads it. */
export interface DebitInstruction extends PricedInstruction {
  accounts: readonly string[];
}

/**
 * The lamports a transaction takes from its fee payer when that is fully known from its bytes: the fee (5,000 per
 * signature, plus the prioritization fee: SetComputeUnitPrice micro-lamports times the requested CU, rounded up; Agave
 * `FeeStructure` / `get_prioritization_fee`) and every System transfer from the payer. Null when it has any other
 * instruction (a program may take more, or less, depending on state) or a malformed one.
 */
export function feePayerDebit(
  payer: string,
  signatures: number,
  instructions: readonly DebitInstruction[],
): number | null {
  let debit = signatures * LAMPORTS_PER_SIGNATURE;
  let microLamportsPerCu = 0n;
  for (const { program, data, accounts } of instructions) {
    if (program === COMPUTE_BUDGET_PROGRAM_ID) {
      if (data[0] === SET_COMPUTE_UNIT_PRICE) {
        if (data.length < 9) return null;
        microLamportsPerCu = viewOf(data).getBigUint64(1, true);
      }
      continue;
    }
    if (MEMO_PROGRAM_IDS.has(program)) continue;
    if (program !== SYSTEM_PROGRAM_ID || data.length < 12) return null;
    const view = viewOf(data);
    if (view.getUint32(0, true) !== SYSTEM_TRANSFER) return null;
    const lamports = Number(view.getBigUint64(4, true));
    if (accounts[0] === payer) debit += lamports;
    else return null; // from another account: not the payer's alone to judge
  }
  // In integers, as Agave computes it (u128): ceil(price x limit / 10^6).
  const micro = microLamportsPerCu * BigInt(requestedComputeUnits(instructions));
  const perLamport = BigInt(MICRO_LAMPORTS_PER_LAMPORT);
  return debit + Number((micro + perLamport - 1n) / perLamport);
}

function viewOf(data: Uint8Array): DataView {
  return new DataView(data.buffer, data.byteOffset, data.byteLength);
}
