import type { LeaderBuffer } from '@solrelay/core';

/** The bundle-engine window an attempt sent now can land in: its first slot (null if unknown) and its last. */
export interface TargetWindow {
  slot: number | null;
  end: number;
}

/** With no bundle-engine leader data, an attempt is judged after this many slots. */
export const UNKNOWN_WINDOW_SLOTS = 8;

/**
 * The first bundle-engine leader slot at or after `from` (within 64 slots) through the last consecutive slot of that
 * leader (at most 16 more), or `from`..`from + UNKNOWN_WINDOW_SLOTS` with no first slot when none is known.
 */
export function bundleEngineWindow(leaders: LeaderBuffer, from: number): TargetWindow {
  const next = leaders.nextBundleEngineSlot(from, 64);
  if (next === null) return { slot: null, end: from + UNKNOWN_WINDOW_SLOTS };
  const leader = leaders.leaderAt(next);
  let end = next;
  while (end - next < 16 && leaders.leaderAt(end + 1) === leader && leader !== null) end++;
  return { slot: next, end };
}

/**
 * The slots a bundle sent at `sentSlot` really competed in: the block engine auctions a bundle only in slots still
 * to be produced, so in the first bundle-engine leader window after the send slot (jito-labs' engine: the next
 * leader; the simnet's engine: `findWindow`, from the slot after its current one), not in relay's own target window,
 * which starts at the send slot itself when that slot's leader runs the engine. Returns the first and last slot.
 */
export function auctionWindow(leaders: LeaderBuffer, sentSlot: number): { first: number; last: number } {
  const w = bundleEngineWindow(leaders, sentSlot + 1);
  return { first: w.slot ?? sentSlot + 1, last: w.end };
}
