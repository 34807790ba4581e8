/**
 * Where the chain is, as relay has seen it: the highest processed slot, the block height, the slots reported dead
 * and the highest slot reported finalized. Written only by the chain inputs (the facade's `onSlot`,
 * `setBlockHeight`, `onFinalizedSlot`, `onDeadSlot`); read by every stage.
 */
import { ConsensusDetector, FinalizedHeightGuard, giveUpSlot } from '@solrelay/core';

/** Slots the slot time is measured over (about 25 s at 400 ms). */
const SLOT_TIME_WINDOW = 64;

export class ChainPosition {
  slot = 0;
  blockHeight = 0;
  /** The processed slot at which `blockHeight` was last read (a reading many slots old is stale). */
  blockHeightReadAtSlot = 0;
  /** Slots reported dead (bounded): status reads that show one describe a fork that is gone. */
  readonly deadSlots = new Set<number>();
  /** Highest slot the stream reported finalized, and the processed slot we were at when it did. */
  finalizedSlot = 0;
  finalizedReportedAt = Number.NEGATIVE_INFINITY;
  /** Which consensus the cluster runs, told by the cluster itself (DESIGN §12; @solrelay/core `consensus.ts`). */
  readonly consensus = new ConsensusDetector();
  /** The finalized block height taken as proof of expiry only when it did not step backwards. */
  readonly finalizedHeightGuard = new FinalizedHeightGuard();
  /** Observed milliseconds per slot over the last slots seen; mainnet's nominal 400 until measured. */
  slotMs = 400;
  /** When recent new highest slots arrived, oldest first (at most {@link SLOT_TIME_WINDOW}). */
  private slotTimes: Array<{ slot: number; at: number }> = [];

  /**
   * Note when a new highest slot arrived and measure {@link slotMs}: the median time per slot between arrivals over
   * the window, once it holds half a window. A median ignores the bunches a catching-up stream or a paused event
   * loop delivers at once; a gap of two seconds or more (a stalled stream, a restart) starts the window over and
   * keeps the last measure meanwhile.
   */
  observeSlotTime(slot: number, at: number): void {
    const last = this.slotTimes[this.slotTimes.length - 1];
    if (last && (slot <= last.slot || at - last.at >= 2000)) this.slotTimes = [];
    this.slotTimes.push({ slot, at });
    if (this.slotTimes.length > SLOT_TIME_WINDOW) this.slotTimes.shift();
    if (this.slotTimes.length <= SLOT_TIME_WINDOW / 2) return;
    const perSlot: number[] = [];
    for (let i = 1; i < this.slotTimes.length; i++) {
      const a = this.slotTimes[i - 1] as { slot: number; at: number };
      const b = this.slotTimes[i] as { slot: number; at: number };
      perSlot.push((b.at - a.at) / (b.slot - a.slot));
    }
    perSlot.sort((x, y) => x - y);
    const median = perSlot[Math.floor(perSlot.length / 2)] as number;
    this.slotMs = Math.min(2000, Math.max(10, median));
  }

  /** A new highest processed slot: false (and nothing changes) when it is not higher than the current one. */
  advance(slot: number, blockHeight?: number): boolean {
    if (slot <= this.slot) return false;
    this.slot = slot;
    if (blockHeight !== undefined) {
      this.blockHeight = blockHeight;
      this.blockHeightReadAtSlot = slot;
    }
    return true;
  }

  setBlockHeight(height: number): void {
    if (height >= this.blockHeight) this.blockHeightReadAtSlot = this.slot;
    if (height > this.blockHeight) this.blockHeight = height;
  }

  finalized(slot: number): void {
    if (slot > this.finalizedSlot) this.finalizedSlot = slot;
    this.finalizedReportedAt = this.slot;
  }

  /**
   * The last slot an attempt of `tx` may be made: its expiry slot, moved later by the vote-only slots of a consensus
   * migration window it lived through (DESIGN §12; core `giveUpSlot`). relay's give-up point, never proof of expiry.
   */
  deadlineOf(tx: { expires_at_slot: number; enqueued_slot: number }): number {
    return giveUpSlot(tx, this.consensus.voteOnlyWindows(), this.slot);
  }

  /** Records a dead slot; true when it was not known yet. */
  markDead(slot: number): boolean {
    const fresh = !this.deadSlots.has(slot);
    this.deadSlots.add(slot);
    if (this.deadSlots.size > 1024) this.deadSlots.delete(this.deadSlots.values().next().value as number);
    return fresh;
  }
}
