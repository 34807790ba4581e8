/**
 * Which consensus the cluster runs, told by the cluster itself (DESIGN §12): pure, fed by the sidecar's slot stream
 * and, where the node serves them, Agave 4.3's consensus RPC methods. No clock, no I/O.
 *
 * Signals, and where they come from:
 * - The commitment pattern of slot updates. Under Alpenglow one finalization certificate sets confirmed and finalized
 *   together (anza-xyz/agave PR 10063, `alpenglow_update_commitment_cache`: "Finalized just sets all these values"),
 *   ~100–150 ms after processed: a slot is finalized while the stream's processed tip is at most a few slots past it.
 *   Under TowerBFT a slot is rooted ~32 slots after processed. A few consecutive finalized slots of one pattern
 *   decide.
 * - `getAlpenglowMigrationSlot` (anza-xyz/agave PR 12735, anza-xyz/kit PR 1703): the migration boundary slot, after
 *   which blocks carry no user transactions until Alpenglow starts (SIMD-0371). null: none planned; unavailable (an
 *   older node): unknown, not "none".
 * - `getAgGenesisCert` (Agave 4.3; Helius / Alchemy docs): the first Alpenglow block's slot once migrated.
 * - A processed slot whose parent is below a slot already processed: blocks were rolled back (the migration deletes
 *   every block after its transition block, SIMD-0371), so heights read before it may step backwards.
 */

export type ConsensusKind = 'unknown' | 'towerbft' | 'alpenglow';

/*
 * The three thresholds below are relay's own margins around upstream timings, not upstream constants:
 * - Alpenglow finalizes ~100–150 ms after processed (SIMD-0326's fast path; agave PR 10063), under one 400 ms slot,
 *   so a finalized slot lags the processed tip by 0–1 slots; 4 leaves room for a late certificate or a loaded host.
 *   A certificate later than that reads as neither pattern: no evidence either way, and the migration window then
 *   closes on the next `getAgGenesisCert` poll instead (the sidecar polls it every 5 s while a window is open).
 * - TowerBFT roots a slot once 31+ confirmed blocks are built on it (stream-rpc.md, "finalized"), ≈32 slots behind
 *   processed; 12 is far below that and far above Alpenglow's lag, so no host load turns one into the other.
 * - 3 consecutive slots of one pattern decide: one slot's timing can be an outlier (a certificate delayed, a stream
 *   reconnect delivering a burst), three in a row are not.
 */
/** A finalized slot at most this many slots behind the processed tip is Alpenglow's pattern. */
export const ALPENGLOW_FINALITY_MAX_LAG_SLOTS = 4;
/** A finalized slot at least this many slots behind the processed tip is TowerBFT's (rooting ≈ 32 slots). */
export const TOWERBFT_FINALITY_MIN_LAG_SLOTS = 12;
/** Consecutive finalized slots of one pattern that decide the consensus. */
export const CONSENSUS_EVIDENCE_SLOTS = 3;

/**
 * How long relay waits before it judges an attempt lost: `slots` past the last slot of its target window, and at
 * least `ms` after it was sent (statuses take a moment to show; on a busy host slots can outrun the status poll).
 * What it must cover is how late a landing shows at `processed` after its slot was produced, which depends on relay's
 * reading (the slot stream, the status poll), not on the vote rules: under both consensuses a landing is visible at
 * `processed` once its block is replayed (Alpenglow's notarization does not delay `processed`, SIMD-0326). Measured
 * per mode (`pnpm bench finality`, "landing seen after its slot was produced": BENCHMARKS.md) and set per mode here,
 * the same values until a measurement says otherwise. The migration window has its own rule: a window lost in it
 * counts no retry at all (DESIGN §12).
 */
export interface LossGrace {
  slots: number;
  ms: number;
}
export const LOSS_GRACE: Readonly<Record<'towerbft' | 'alpenglow', LossGrace>> = {
  towerbft: { slots: 4, ms: 1_200 },
  alpenglow: { slots: 4, ms: 1_200 },
};

/** The grace for `kind`; while the consensus is unknown, the longer of the two (judging late never lies). */
export function lossGrace(kind: ConsensusKind): LossGrace {
  if (kind !== 'unknown') return LOSS_GRACE[kind];
  return {
    slots: Math.max(LOSS_GRACE.towerbft.slots, LOSS_GRACE.alpenglow.slots),
    ms: Math.max(LOSS_GRACE.towerbft.ms, LOSS_GRACE.alpenglow.ms),
  };
}

export interface ConsensusSnapshot {
  kind: ConsensusKind;
  /**
   * A migration window is open: the boundary is known and passed, and Alpenglow has not been seen finalizing since
   * (blocks carry no user transactions; blocks after the transition may be rolled back).
   */
  migrating: boolean;
  /**
   * No bundle should go out: the processed tip reached the boundary (a bundle sent now lands at the earliest in the
   * next slot, past the boundary, where blocks carry no user transactions) and Alpenglow has not been seen
   * finalizing past it. Opens one slot before `migrating`.
   */
  holdSends: boolean;
  /** The migration boundary slot, when the cluster announced one. */
  migrationSlot: number | null;
  /** The processed slot of the last rollback seen (a parent below a slot already processed), or null. */
  lastRollbackSlot: number | null;
}

export class ConsensusDetector {
  private kind: ConsensusKind = 'unknown';
  private streak: { kind: 'towerbft' | 'alpenglow'; count: number } | null = null;
  private processedTip = 0;
  private migrationSlot: number | null = null;
  /** The first Alpenglow block (getAgGenesisCert), once known. */
  genesisSlot: number | null = null;
  /** Alpenglow finalized a slot past the boundary (the window is over). */
  private alpenglowAfterBoundary = false;
  private lastRollbackSlot: number | null = null;
  /** The last slot of the window once it closed (see `closeWindow`). */
  private windowEndSlot: number | null = null;

  /** One slot update from the stream (processed, confirmed, finalized; others are ignored). */
  observeSlot(update: { slot: number; status: string; parent?: number | null }): void {
    if (update.status === 'processed') {
      if (update.parent != null && update.parent < this.processedTip && update.slot > this.processedTip)
        this.lastRollbackSlot = update.slot;
      if (update.slot > this.processedTip) this.processedTip = update.slot;
      return;
    }
    if (update.status !== 'finalized' || this.processedTip === 0) return;
    const lag = this.processedTip - update.slot;
    const seen =
      lag <= ALPENGLOW_FINALITY_MAX_LAG_SLOTS
        ? 'alpenglow'
        : lag >= TOWERBFT_FINALITY_MIN_LAG_SLOTS
          ? 'towerbft'
          : null;
    if (seen === null) return;
    this.streak =
      this.streak?.kind === seen ? { kind: seen, count: this.streak.count + 1 } : { kind: seen, count: 1 };
    if (this.streak.count >= CONSENSUS_EVIDENCE_SLOTS) this.kind = seen;
    // A slot Alpenglow finalized past the boundary is an Alpenglow block: the vote-only blocks ended before it.
    if (seen === 'alpenglow' && this.migrationSlot !== null && update.slot > this.migrationSlot)
      this.closeWindow(Math.min(this.processedTip, update.slot - 1));
  }

  /** `getAlpenglowMigrationSlot`: the boundary slot, null (none planned), or undefined (the node cannot say). */
  observeMigrationSlot(slot: number | null | undefined): void {
    if (slot === undefined) return;
    this.migrationSlot = slot === null || slot <= 0 ? null : slot;
    // Learned after the first Alpenglow block (a sidecar started after the switch): the window is long closed.
    if (this.migrationSlot !== null && this.genesisSlot !== null && this.processedTip > this.genesisSlot)
      this.closeWindow(this.genesisSlot - 1);
  }

  /** `getAgGenesisCert`: the first Alpenglow block's slot, null (not migrated), or undefined (the node cannot say). */
  observeGenesisSlot(slot: number | null | undefined): void {
    if (slot === undefined || slot === null) return;
    this.genesisSlot = slot;
    if (this.migrationSlot !== null && this.processedTip > slot) this.closeWindow(slot - 1);
  }

  /**
   * The cluster runs Alpenglow past the boundary: the window is closed. The first Alpenglow block (`getAgGenesisCert`)
   * is exact: the window ends the slot before it, whatever was guessed before. Without it, the lowest bound the evidence
   * gives: a slot Alpenglow finalized, and a rollback past the boundary (the first block built after the deleted ones),
   * each bound it from above, and only move it earlier; the processed tip when Alpenglow was first seen is the last
   * resort. (Before, the window always ended at that tip, so a sidecar started long after the switch counted every
   * slot since the boundary as vote-only: issue-31 final review M1.)
   */
  private closeWindow(end: number): void {
    this.alpenglowAfterBoundary = true;
    if (this.genesisSlot !== null && this.migrationSlot !== null && this.genesisSlot > this.migrationSlot) {
      this.windowEndSlot = this.genesisSlot - 1;
      return;
    }
    let last = Math.min(end, this.processedTip);
    if (
      this.migrationSlot !== null &&
      this.lastRollbackSlot !== null &&
      this.lastRollbackSlot > this.migrationSlot
    )
      last = Math.min(last, this.lastRollbackSlot - 1);
    this.windowEndSlot = this.windowEndSlot === null ? last : Math.min(this.windowEndSlot, last);
  }

  snapshot(): ConsensusSnapshot {
    const boundaryPassed = this.migrationSlot !== null && this.processedTip > this.migrationSlot;
    return {
      kind: this.kind,
      migrating: boundaryPassed && !this.alpenglowAfterBoundary,
      holdSends:
        this.migrationSlot !== null &&
        this.processedTip >= this.migrationSlot &&
        !this.alpenglowAfterBoundary,
      migrationSlot: this.migrationSlot,
      lastRollbackSlot: this.lastRollbackSlot,
    };
  }

  /**
   * The migration's vote-only window as seen so far: from the slot after the boundary to the processed tip when
   * Alpenglow was first seen past it (`last` null while still open); none before the processed tip passes the
   * boundary. An array: `giveUpSlot` takes any number of windows.
   */
  voteOnlyWindows(): SlotSpan[] {
    if (this.migrationSlot === null || this.processedTip <= this.migrationSlot) return [];
    const first = this.migrationSlot + 1;
    if (this.windowEndSlot !== null && this.windowEndSlot < first) return [];
    return [{ first, last: this.windowEndSlot }];
  }

  /** Whether a slot lies in the migration window (after the boundary, before Alpenglow finalized past it). */
  inMigrationWindow(slot: number): boolean {
    if (this.migrationSlot === null || slot <= this.migrationSlot) return false;
    return this.windowEndSlot === null || slot <= this.windowEndSlot;
  }
}

/** A run of slots, first to last inclusive; `last` null while it is still going on. */
export interface SlotSpan {
  first: number;
  last: number | null;
}

/**
 * Relay's give-up slot for a transaction: the last slot an attempt may be made (`expires_at_slot`, DESIGN §5
 * `expiry-slots`), not counting the vote-only slots of a consensus migration window that the transaction lived
 * through (DESIGN §12; issue-31 review m5). Those blocks pack no user transactions (SIMD-0371), so a slot there was
 * no chance to land and does not use up the transaction's time. Each window slot after its enqueue slot and at or
 * before the deadline moves the deadline one slot later (a window that starts before the deadline is counted whole,
 * and a later window is then measured against the moved deadline). A window still open counts up to `slot`, the
 * current slot, so the deadline is not reached while it lasts.
 *
 * This is when relay stops trying, never a proof: `expired` still needs the blockhash dead by block height (DESIGN
 * §2), whatever this returns. Pure: no clock, no I/O.
 */
export function giveUpSlot(
  tx: { expires_at_slot: number; enqueued_slot: number },
  windows: readonly SlotSpan[],
  slot: number,
): number {
  let deadline = tx.expires_at_slot;
  for (const window of [...windows].sort((a, b) => a.first - b.first)) {
    const first = Math.max(window.first, tx.enqueued_slot + 1);
    const last = window.last ?? slot;
    if (last < first) continue;
    if (first > deadline) break;
    deadline += last - first + 1;
  }
  return deadline;
}

/**
 * The finalized block height as proof of expiry: a reading below one already taken means blocks were rolled back
 * (DESIGN §12: never take a finalized height that steps backwards as proof), so it proves nothing, and neither
 * does any reading while a migration window is open. Returns the height to use, or null.
 */
export class FinalizedHeightGuard {
  private highest = 0;
  private regressed = false;

  accept(height: number | null, migrating: boolean): number | null {
    if (height === null) return null;
    if (height < this.highest) {
      this.regressed = true;
      this.highest = height;
      return null;
    }
    this.highest = height;
    // After a regression, the next reading at or above the low point proves again (a fresh, monotone series).
    if (this.regressed) {
      this.regressed = false;
      return null;
    }
    return migrating ? null : height;
  }
}
