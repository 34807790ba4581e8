import type { StoredAttempt, StoredTx } from '../store/records';

/**
 * Which attempt's bundle carried the user transactions on chain, from their statuses: the latest attempt whose tip
 * landed in the very slot the user transactions landed in (a bundle lands whole, in one block). A tip that landed
 * alone (leaked) is no bundle.
 *
 * An attempt whose bundle already landed once, in a slot that later died or was uncled, is no candidate either: its
 * one atomic landing is gone, and its tip can only show again as a transaction re-broadcast on its own. Such a tip
 * can land in the same slot as another attempt's whole bundle (seen in the fault matrix under load: the later,
 * uncled attempt was credited and the bundle that really landed was reported leaked). It is credited only when no
 * other attempt's tip is there.
 *
 * `"tip":"included"` transactions have no tip transaction: the latest attempt that went out is credited.
 */
export function creditedAttempt(
  tx: Pick<StoredTx, 'signatures' | 'attempts' | 'tip'>,
  statuses: ReadonlyMap<string, { slot: number }>,
): StoredAttempt | null {
  const slots = tx.signatures.map((s) => statuses.get(s)?.slot);
  const slot = slots[0];
  const together = slot !== undefined && slots.every((s) => s === slot);
  const tipHere = (a: StoredAttempt) =>
    together && a.tip_signature !== null && !a.leaked && statuses.get(a.tip_signature)?.slot === slot;
  const landedElsewhere = (a: StoredAttempt) => a.slot_landed !== null && a.slot_landed !== slot;
  const latest = (pick: (a: StoredAttempt) => boolean) => [...tx.attempts].reverse().find(pick) ?? null;
  // Only if no other candidate is there: the same bundle landing whole a second time is not ruled out.
  const credited = latest((a) => tipHere(a) && !landedElsewhere(a)) ?? latest(tipHere);
  if (credited) return credited;
  if (tx.tip !== 'included') return null;
  for (let i = tx.attempts.length - 1; i >= 0; i--) {
    const a = tx.attempts[i] as StoredAttempt;
    if (a.stage !== 'journaled') return a;
  }
  return null;
}
