import { SIGNATURE_FEE_LAMPORTS } from '../engine/tip-tx';
import { encodeBase58 } from '@solrelay/core';
import type { StoredAttempt, StoredTx } from '../store/records';
import { tipStillLive } from '../chain/tip-life';

/**
 * The pure arithmetic of a tipper's funds: which attempts may still take from a tipper after a balance read, and
 * what that reserves. No I/O and no clock (the chain position and the read's slot are inputs); `tippers.ts` keeps
 * the state.
 */

/** Rent-exempt minimum of a 0-byte system account: a tipper must keep it (a transfer below it fails). */
export const RENT_EXEMPT_MINIMUM = 890_880;

/** Where the first account key (the fee payer: the tipper) starts in a one-signature legacy transaction's bytes. */
const FIRST_KEY_OFFSET = 1 + 64 + 3 + 1;

const LANDED_STAGES: ReadonlySet<StoredAttempt['stage']> = new Set([
  'landed',
  'processed',
  'confirmed',
  'finalized',
]);

/** What an attempt's tip transaction takes from its tipper when it executes: the tip and the signature fee. */
export function tipCost(tipLamports: number): number {
  return tipLamports + SIGNATURE_FEE_LAMPORTS;
}

/**
 * The tipper that signed an attempt's tip transaction: recorded on the attempt, or (attempts journaled before the
 * pool) its fee payer read from the tip transaction's bytes. Null without a tip transaction.
 */
export function tipperOf(a: StoredAttempt): string | null {
  if (a.tipper !== undefined) return a.tipper;
  if (!a.tip_tx) return null;
  const wire = Buffer.from(a.tip_tx, 'base64');
  if (wire.length < FIRST_KEY_OFFSET + 32) return null;
  return encodeBase58(wire.subarray(FIRST_KEY_OFFSET, FIRST_KEY_OFFSET + 32));
}

/**
 * Whether an attempt's tip may still take from its tipper after a balance read describing slot `readSlot`:
 * - one built or sent and not settled: yes (it may land any moment);
 * - one on chain (landed with its bundle, or leaked alone): only if it landed after the read's slot;
 * - one settled lost: while its tip transaction may still land alone (an uncled block's transactions are
 *   re-broadcast one by one), i.e. while its blockhash lives.
 * Counting too much only makes a transaction wait for the next read; counting too little would send a tip the
 * tipper cannot pay, so every doubt counts.
 */
export function mayStillDebit(
  a: StoredAttempt,
  readSlot: number,
  chain: { slot: number; blockHeight: number },
): boolean {
  if (!a.tip_signature) return false;
  if (a.leaked || LANDED_STAGES.has(a.stage)) return a.slot_landed === null || a.slot_landed > readSlot;
  if (a.stage === 'journaled' || a.stage === 'submitted') return true;
  return tipStillLive(a, chain);
}

export interface TipperLoad {
  /** Tips and fees that may still take from the tipper after its read. */
  reserved: number;
  /** Its attempts built or sent and not settled. */
  inFlight: number;
}

/**
 * Per tipper (those in `readSlots`, each with the slot its balance read describes), what the records' attempts
 * may still take from it, and how many are in flight.
 */
export function tipperLoads(
  records: Iterable<Pick<StoredTx, 'attempts'>>,
  readSlots: ReadonlyMap<string, number>,
  chain: { slot: number; blockHeight: number },
): Map<string, TipperLoad> {
  const loads = new Map<string, TipperLoad>();
  for (const key of readSlots.keys()) loads.set(key, { reserved: 0, inFlight: 0 });
  for (const tx of records) {
    for (const a of tx.attempts) {
      if (!a.tip_signature) continue;
      const tipper = tipperOf(a);
      const load = tipper === null ? undefined : loads.get(tipper);
      if (!load || !mayStillDebit(a, readSlots.get(tipper as string) as number, chain)) continue;
      load.reserved += tipCost(a.tip_lamports);
      if (a.stage === 'journaled' || a.stage === 'submitted') load.inFlight++;
    }
  }
  return loads;
}

/** What a tipper can still give a new tip and its fee: balance - reserved - rent-exempt minimum. */
export function availableOf(balance: number, reserved: number): number {
  return balance - reserved - RENT_EXEMPT_MINIMUM;
}

/** In words: what a tipper holds, what is reserved and kept, and what `need` lacks (for errors and /status). */
export function describeShortfall(
  pubkey: string,
  balance: number,
  reserved: number,
  inFlight: number,
  need: number,
): string {
  const shortfall = need - availableOf(balance, reserved);
  return (
    `tipper ${pubkey} holds ${balance} lamports, of which ${reserved} are reserved for tips that may still land ` +
    `(${inFlight} in flight) and ${RENT_EXEMPT_MINIMUM} must stay (rent-exempt minimum); ` +
    `a tip and its fee of ${need} lamports is short by ${shortfall}`
  );
}
