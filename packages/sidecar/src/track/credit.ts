import type { StoredAttempt, StoredTx } from '../store/records';

type Creditable = Pick<StoredTx, 'signatures' | 'attempts' | 'tip'>;
type Statuses = ReadonlyMap<string, { slot: number }>;

/** The slot all user transactions landed in, or null (not all on chain, or split over slots: no bundle did that). */
function userSlot(tx: Creditable, statuses: Statuses): number | null {
  const slots = tx.signatures.map((s) => statuses.get(s)?.slot);
  const slot = slots[0];
  return slot !== undefined && slots.every((s) => s === slot) ? slot : null;
}

/**
 * The attempts whose tip sits in the user transactions' slot (not already found leaked), oldest first. One of them
 * is the bundle that landed, or none is (the user transactions landed some other way). When there are two or
 * more, statuses alone cannot tell which: the block's order can (`creditedAttempt` with `blockOrder`).
 */
export function tipsInUserSlot(tx: Creditable, statuses: Statuses): StoredAttempt[] {
  const slot = userSlot(tx, statuses);
  if (slot === null) return [];
  return tx.attempts.filter(
    (a) => a.tip_signature !== null && !a.leaked && statuses.get(a.tip_signature)?.slot === slot,
  );
}

/**
 * Whether statuses alone cannot say which bundle landed, and the block's order must: two or more tips share the user
 * transactions' slot, or the one there belongs to an attempt whose bundle landed before in a slot that died or was
 * uncled. (An uncled landing relay never read leaves no such mark: then the tip is credited from statuses, a known
 * gap: sidecar README, leaked tips.) An uncled block's transactions are re-broadcast one by one, so its user transaction and
 * its tip can both reappear in one slot without being a bundle there (seen in the fault matrix under load: relay
 * credited such a tip, the chain shows it apart from the user transaction).
 */
export function blockOrderNeeded(tx: Creditable, statuses: Statuses): boolean {
  const sharing = tipsInUserSlot(tx, statuses);
  if (sharing.length >= 2) return true;
  const slot = userSlot(tx, statuses);
  return sharing.some((a) => a.slot_landed !== null && a.slot_landed !== slot);
}

/**
 * Which attempt's bundle carried the user transactions on chain.
 *
 * With `blockOrder` (the signatures of the user transactions' block, in order): the attempt whose tip comes right
 * after the user transactions, which must sit contiguous and in order. A bundle executes whole and contiguous, so
 * that is the one; a tip anywhere else in the block landed alone (re-broadcast from an uncled block) and is no
 * bundle. Only `blockOrder` is proof when
 * two or more tips share the user transactions' slot.
 *
 * From statuses alone: the latest attempt whose tip landed in the very slot the user transactions landed in. An
 * attempt whose bundle already landed once, in a slot that later died or was uncled, is preferred against: its one
 * atomic landing is gone, and its tip can only show again re-broadcast on its own. It is credited only when no
 * other attempt's tip is there.
 *
 * `"tip":"included"` transactions have no tip transaction: the latest attempt that went out is credited.
 */
export function creditedAttempt(
  tx: Creditable,
  statuses: Statuses,
  blockOrder?: readonly string[],
): StoredAttempt | null {
  const candidates = tipsInUserSlot(tx, statuses);
  if (blockOrder) {
    // The bundle's part in the block: its signatures contiguous and in order (the user transactions, any packed
    // passengers', then its tip).
    const start = blockOrder.indexOf(tx.signatures[0] as string);
    const found =
      start < 0
        ? undefined
        : candidates.find((a) => a.bundle_signatures.every((s, i) => blockOrder[start + i] === s));
    if (found) return found;
    if (tx.tip !== 'included') return null;
  } else if (candidates.length > 0) {
    const slot = userSlot(tx, statuses);
    const landedElsewhere = (a: StoredAttempt) => a.slot_landed !== null && a.slot_landed !== slot;
    const latest = (pick: (a: StoredAttempt) => boolean) => [...candidates].reverse().find(pick) ?? null;
    // Only if no other candidate is there: the same bundle landing whole a second time is not ruled out.
    return latest((a) => !landedElsewhere(a)) ?? latest(() => true);
  }
  if (tx.tip !== 'included') return null;
  for (let i = tx.attempts.length - 1; i >= 0; i--) {
    const a = tx.attempts[i] as StoredAttempt;
    if (a.stage !== 'journaled') return a;
  }
  return null;
}
