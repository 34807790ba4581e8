import type { StoredAttempt, StoredTx } from '../store/records';

/** How long a tip transaction can still land: what the tracker follows and the tipper pool keeps reserved. */

/** Slots after which a tip transaction's blockhash is surely dead (150 blocks, with room for skipped slots). */
export const TIP_LANDING_HORIZON_SLOTS = 300;
/** After its blockhash dies, a tip that landed just before is still read this many blocks: until it is confirmed. */
export const LATE_TIP_CONFIRM_BLOCKS = 32;

/**
 * Whether an attempt's tip transaction may still land (or have landed unseen): its blockhash is alive, or died so
 * recently that a landing just before could still be unconfirmed. Without a recorded last valid block height, by
 * slots since it was built.
 */
export function tipStillLive(a: StoredAttempt, chain: { slot: number; blockHeight: number }): boolean {
  return a.tip_last_valid_block_height === null
    ? chain.slot - a.created_slot <= TIP_LANDING_HORIZON_SLOTS
    : chain.blockHeight <= a.tip_last_valid_block_height + LATE_TIP_CONFIRM_BLOCKS;
}

/**
 * DESIGN §10, rule 3: an attempt built by another host's session (a transaction adopted by the takeover sweep, its
 * attempts numbered up to `inherited_attempts`) whose tip may still land. It stays unsettled until its tip is provably
 * dead: the earlier owner, perhaps only paused, may still send its bytes, and a new tip beside it could be a second.
 */
export function inheritedTipMayLand(
  tx: Pick<StoredTx, 'inherited_attempts'>,
  a: StoredAttempt,
  chain: { slot: number; blockHeight: number },
): boolean {
  return a.attempt <= (tx.inherited_attempts ?? 0) && a.tip_signature !== null && tipStillLive(a, chain);
}
