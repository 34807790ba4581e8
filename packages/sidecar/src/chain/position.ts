/**
 * Where the chain is, as relay has seen it: the highest processed slot, the block height, the slots reported dead
 * and the highest slot reported finalized. Written only by the chain inputs (the facade's `onSlot`,
 * `setBlockHeight`, `onFinalizedSlot`, `onDeadSlot`); read by every stage.
 */
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

  /** Records a dead slot; true when it was not known yet. */
  markDead(slot: number): boolean {
    const fresh = !this.deadSlots.has(slot);
    this.deadSlots.add(slot);
    if (this.deadSlots.size > 1024) this.deadSlots.delete(this.deadSlots.values().next().value as number);
    return fresh;
  }
}
