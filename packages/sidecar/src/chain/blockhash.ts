import type { StoredTx } from '../store/records';
import type { SolanaRpc } from '../upstream/solana-rpc';

/** Agave's MAX_PROCESSING_AGE: a transaction's blockhash is usable for this many blocks after its own block. */
export const BLOCKHASH_MAX_AGE_BLOCKS = 150;
/**
 * How far the block height relay had seen at intake may trail the block the user's blockhash came from (relay's
 * stream against the caller's RPC node). Past intake height + max age + this, no blockhash accepted then is usable.
 */
export const INTAKE_HEIGHT_SLACK_BLOCKS = 32;
/**
 * The same bound in slots (twice the blocks: slots can be skipped): a blockhash relay accepted at `enqueued_slot` came
 * from a slot at or below `enqueued_slot` + this. What a process that never saw the blockhash valid itself (it started
 * after the intake) takes as the slot the blockhash was known valid at.
 */
export const INTAKE_SLOT_SLACK_SLOTS = 2 * INTAKE_HEIGHT_SLACK_BLOCKS;
/**
 * A validity answer counts only from a node at most this many slots behind relay's stream: one further behind
 * answers from an old bank, where a fresh blockhash looks invalid. Its `true` is final; its `false` may still mean
 * "newer than that node's bank" (a `confirmed` blockhash can be one slot behind the tip), so the intake asks again
 * before it refuses ({@link BlockhashChecks.expiredAtIntake}).
 */
export const VALIDITY_CONTEXT_SLACK_SLOTS = 2;
/** How often, and how far apart, the intake asks again for a node at relay's slot before it gives up and accepts. */
export const INTAKE_RECHECKS = 4;
export const INTAKE_RECHECK_MS = 150;

/** Recent blocks whose blockhash relay keeps the height of: two blockhash lives, with room for forks. */
const BLOCK_HEIGHTS_KEPT = 2 * BLOCKHASH_MAX_AGE_BLOCKS + 64;

/** Blockhash and durable-nonce liveness of user transactions, read from RPC (validity cached briefly per blockhash). */
export class BlockhashChecks {
  private readonly validity = new Map<string, { valid: boolean; checkedAt: number }>();
  /** The block height of each recent block's blockhash, from the stream's block meta (insertion order: oldest first). */
  private readonly heights = new Map<string, number>();
  /** The highest block height the stream's block meta reported. */
  private latestHeight = 0;
  /** The processed slot at which relay first saw each blockhash valid (recent ones; not kept across restarts). */
  private readonly seenValidAt = new Map<string, number>();

  constructor(
    private readonly rpc: SolanaRpc,
    private readonly now: () => number,
    /** Relay's processed slot (from the stream): validity answers from nodes far behind it are not taken. */
    private readonly slot: () => number = () => 0,
    /** The highest finalized slot relay knows. */
    private readonly finalizedSlot: () => number = () => 0,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  /**
   * A block the stream reported (Yellowstone block meta, processed): its blockhash and block height. Only the stream's
   * recent blocks are known; a blockhash older than about {@link BLOCK_HEIGHTS_KEPT} blocks is not.
   */
  recordBlock(blockhash: string, blockHeight: number): void {
    this.heights.delete(blockhash);
    this.heights.set(blockhash, blockHeight);
    if (blockHeight > this.latestHeight) this.latestHeight = blockHeight;
    while (this.heights.size > BLOCK_HEIGHTS_KEPT)
      this.heights.delete(this.heights.keys().next().value as string);
  }

  /**
   * Blocks a transaction on `blockhash` still has before it cannot land: Agave takes a blockhash for
   * MAX_PROCESSING_AGE (150) blocks after its own, and `getLatestBlockhash` answers `lastValidBlockHeight` = its block
   * height + 150. Null when relay has not seen the blockhash's block on the stream (an old one, one from another fork,
   * or the stream is down): the caller falls back to its own deadline.
   */
  blocksLeft(blockhash: string): number | null {
    const height = this.heights.get(blockhash);
    return height === undefined ? null : height + BLOCKHASH_MAX_AGE_BLOCKS - this.latestHeight;
  }

  /**
   * At intake: whether the caller's blockhash is proven expired (refused with RELAY_E_TX_BLOCKHASH_EXPIRED). A `false`
   * from {@link stillValid} is asked again of a node at or past relay's slot at the intake (`minContextSlot`): that
   * node has every block up to the one the caller's blockhash came from, so its `false` means too old, not too new.
   * A node not there yet refuses (-32016); after {@link INTAKE_RECHECKS} such answers (or RPC errors) the blockhash is
   * not proven expired and the transaction is accepted: the expiry proof decides later, from the chain.
   */
  async expiredAtIntake(blockhash: string): Promise<boolean> {
    if ((await this.stillValid(blockhash)) !== false) return false;
    const atSlot = this.slot();
    if (atSlot <= 0) return true; // no stream slot to ask past: the first answer stands, as before
    for (let i = 0; i < INTAKE_RECHECKS; i++) {
      try {
        const valid = await this.rpc.isBlockhashValid(blockhash, 'processed', atSlot);
        this.validity.set(blockhash, { valid, checkedAt: this.now() });
        if (valid && !this.seenValidAt.has(blockhash)) this.seenValidAt.set(blockhash, atSlot);
        return !valid;
      } catch {
        if (i < INTAKE_RECHECKS - 1) await this.sleep(INTAKE_RECHECK_MS);
      }
    }
    return false;
  }

  /**
   * true / false from RPC at `processed` (cached briefly per blockhash), or null when RPC cannot say right now, or
   * only from a node too far behind to know the blockhash (-32016 under `minContextSlot`).
   */
  async stillValid(blockhash: string): Promise<boolean | null> {
    const cached = this.validity.get(blockhash);
    const now = this.now();
    // Both answers are kept a second only: a `false` can also mean "newer than that node's bank", which passes.
    if (cached && now - cached.checkedAt < 1000) return cached.valid;
    try {
      const minContextSlot = this.slot() - VALIDITY_CONTEXT_SLACK_SLOTS;
      const valid = await this.rpc.isBlockhashValid(blockhash, 'processed', minContextSlot);
      this.validity.set(blockhash, { valid, checkedAt: now });
      if (valid && !this.seenValidAt.has(blockhash)) this.seenValidAt.set(blockhash, this.slot());
      for (const map of [this.validity, this.seenValidAt] as Array<Map<string, unknown>>)
        if (map.size > 10_000) map.delete(map.keys().next().value as string);
      return valid;
    } catch {
      return null; // RPC down or behind: accept now, the expiry check decides later
    }
  }

  /**
   * Whether a user transaction can no longer be processed by the bank at `processed` (attempts stop): its
   * blockhash is invalid there, or its durable nonce has moved on. Not proof for `expired`: see `provablyDead`.
   */
  async anyUserBlockhashDead(tx: StoredTx): Promise<boolean> {
    for (let i = 0; i < tx.signatures.length; i++) {
      const nonce = tx.nonce_accounts[i];
      if (nonce) {
        if (await this.nonceAdvanced(tx, i, nonce)) return true;
        continue;
      }
      if ((await this.stillValid(tx.blockhashes[i] as string)) === false) return true;
    }
    return false;
  }

  /**
   * Proof that no fork can process a user transaction any more, for `expired`: its durable nonce moved on, or its
   * blockhash is dead for good. Validity at `finalized` alone is no proof: Agave evaluates it at the root bank, where
   * every blockhash newer than the root is invalid too. Either of these is:
   * - the finalized block height is past the last height the blockhash could be valid at, bounded by a fresh block
   *   height relay read when it accepted the transaction (the blockhash came from a block at or below it, give or
   *   take `INTAKE_HEIGHT_SLACK_BLOCKS`);
   * - relay saw the blockhash valid at some slot, the root has passed that slot since (so the blockhash is not newer
   *   than the root), and now it is invalid both at the root and at `processed` from a node not behind relay. A
   *   process that has not seen it valid (one started after the intake: what it saw is not kept across restarts)
   *   takes the intake's slot + `INTAKE_SLOT_SLACK_SLOTS` instead; without that, a transaction accepted with no fresh
   *   block height and then restarted over could never be proved expired and stayed pending for good.
   */
  async provablyDead(tx: StoredTx, finalizedBlockHeight: number | null): Promise<boolean> {
    for (let i = 0; i < tx.signatures.length; i++) {
      const nonce = tx.nonce_accounts[i];
      if (nonce) {
        if (await this.nonceAdvanced(tx, i, nonce)) return true;
        continue;
      }
      const intakeHeight = tx.enqueued_block_height ?? 0;
      const lastPossible = intakeHeight + BLOCKHASH_MAX_AGE_BLOCKS + INTAKE_HEIGHT_SLACK_BLOCKS;
      if (intakeHeight > 0 && finalizedBlockHeight !== null && finalizedBlockHeight > lastPossible)
        return true;
      const blockhash = tx.blockhashes[i] as string;
      const seenAt =
        this.seenValidAt.get(blockhash) ??
        (tx.enqueued_slot > 0 ? tx.enqueued_slot + INTAKE_SLOT_SLACK_SLOTS : undefined);
      if (seenAt === undefined || this.finalizedSlot() <= seenAt) continue;
      if ((await this.stillValid(blockhash)) === false && (await this.invalidAtRoot(blockhash))) return true;
    }
    return false;
  }

  private async invalidAtRoot(blockhash: string): Promise<boolean> {
    try {
      return !(await this.rpc.isBlockhashValid(blockhash, 'finalized'));
    } catch {
      return false; // unknown: not proof
    }
  }

  private async nonceAdvanced(tx: StoredTx, index: number, nonce: string): Promise<boolean> {
    try {
      const value = await this.rpc.getNonceValue(nonce);
      return value !== null && value !== tx.blockhashes[index];
    } catch {
      return false; // unknown: not proof
    }
  }
}
