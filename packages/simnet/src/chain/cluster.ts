import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import bs58 from 'bs58';
import { Faults } from '../faults';
import { Rng } from '../rng';
import { MAINNET_TIP_ACCOUNTS } from '../tip-accounts';
import { accountData, Bank, type AccountData, type AccountSnapshot, type BankAccount } from './bank';
import { isRecordedError } from './errors';
import { decodeMessage, extractMemo, feeDetails } from './message';
import { createValidators, LeaderSchedule, type Validator } from './leaders';
import { parseTransaction, verifySignatures, type ParsedTransaction } from './wire';
import type {
  AccountState,
  BlockContext,
  BlockSummary,
  BlockhashInfo,
  BundleCandidate,
  BundleExecution,
  BundleSource,
  PrioritizationFeeEntry,
  ChainRead,
  Cluster,
  ClusterEvents,
  Commitment,
  EpochInfo,
  LeaderInfo,
  SignatureStatus,
  SlotEvent,
  SubmitResult,
  TransactionErrorJson,
  TransactionEvent,
  AddressSignature,
  LoadedAddresses,
  TransactionRecord,
} from './types';

/** Agave's MAX_PROCESSING_AGE: a blockhash is usable for this many blocks after the block that produced it. */
export const BLOCKHASH_VALID_BLOCKS = 150;
/** What each prefunded tip account holds at genesis (well above the rent-exempt minimum). */
const TIP_ACCOUNT_PREFUND_LAMPORTS = 1_000_000_000;

export interface SimClusterOptions {
  /** Seed for everything random (validators, leader schedule, blockhashes, fault dice). Default 1. */
  seed?: number;
  /** Automatic slot clock period; starts on `start()`. Default 400 ms. Tests: >= 50 ms or drive `advance()`. */
  slotMs?: number;
  /**
   * Slots per epoch. Default 432, a thousandth of mainnet's 432,000, so a run of a few minutes (432 x 400 ms ≈ 3 min)
   * sees a schedule rollover. Must be a positive multiple of 4 (leader windows are 4 slots, aligned to the epoch).
   */
  slotsPerEpoch?: number;
  /** Number of seeded validators. Default 16. */
  validatorCount?: number;
  /** Share of validators running the bundle engine. Default 0.9. */
  bundleEngineShare?: number;
  /** Probability that a leader skips its slot (no block; block height does not advance). Default 0. */
  skipRate?: number;
  /** Slots from processed to confirmed. Default 2 (optimistic confirmation ≈ 2 slots on mainnet). */
  confirmationSlots?: number;
  /** Slots from processed to finalized (rooted). Default 32. */
  finalizationSlots?: number;
  faults?: Faults;
  /**
   * LiteSVM verifies signatures itself as it executes (default true). submitTransaction and bundles also verify with
   * node:crypto first, so a bad signature is refused at once; turning this off skips the second check (the bank then
   * runs ~3x faster, see the README's Performance section).
   */
  bankSigverify?: boolean;
  /** Take randomness from this generator (forked per subsystem) instead of `seed`. */
  rng?: Rng;
  /**
   * The consensus the cluster runs (see the README's "Consensus modes" for sources and assumptions):
   * - `towerbft` (default, unchanged): confirmed `confirmationSlots` and finalized `finalizationSlots` after processed.
   * - `alpenglow`: processed = notarized; one finalization certificate, `finalizationDelayMs` after processed, sets
   *   confirmed and finalized together (anza-xyz/agave PR 10063, `alpenglow_update_commitment_cache`); no vote
   *   transactions in blocks (SIMD-0326; the simnet streams none in any mode).
   * - `migration`: TowerBFT, then a vote-only window and a switch to Alpenglow (SIMD-0371), see `migration`.
   */
  consensus?: ConsensusMode;
  /** Alpenglow: milliseconds from a block's processed (notarization) to its finalization certificate. Default 120. */
  finalizationDelayMs?: number;
  /** The `migration` mode's slots. */
  migration?: MigrationOptions;
}

export type ConsensusMode = 'towerbft' | 'alpenglow' | 'migration';

/** Where a cluster is in its consensus: `vote-only` and `migrating` exist only in the `migration` mode. */
export type ConsensusPhase = 'towerbft' | 'vote-only' | 'alpenglow';

/**
 * A TowerBFT -> Alpenglow migration (SIMD-0371): after `boundarySlot` blocks carry no user transactions (vote-only);
 * the transition block T is produced `transitionAfterSlots` later, a block `certificateAfterSlots` after T gathers the
 * finalized migration certificate, and when the next slot is produced every block after T is deleted and Alpenglow
 * starts on T (its genesis). With `boundaryForkAbandoned`, the block at the boundary slot is on a fork the
 * certificate's block does not descend from: it is deleted too and Alpenglow starts on its parent (SIMD-0371's earlier
 * draft: "delete all blocks with slot greater than slot(B')", B' the latest ancestor from before the boundary). That
 * block is the only one of the window that may hold user transactions; it is never confirmed (SIMD-0371's motivation:
 * the handoff never rolls back TowerBFT-confirmed user transactions).
 */
export interface MigrationOptions {
  /**
   * The migration boundary slot. Default 64. null: none planned yet (`getAlpenglowMigrationSlot` answers null, as a
   * 4.3 node does before the migration's feature gate activates); `Cluster.scheduleMigration` announces it later.
   */
  boundarySlot?: number | null;
  /** Slots from the boundary to the transition block. Default 2 (M = boundary + 1, T = M + 1). */
  transitionAfterSlots?: number;
  /** Slots from the transition block to the block certified. Default 2. */
  certificateAfterSlots?: number;
  /** The boundary slot's block is on an abandoned fork (see above). Default false. */
  boundaryForkAbandoned?: boolean;
}

/** A migration whose boundary is known. */
type ScheduledMigration = Required<MigrationOptions> & { boundarySlot: number };

interface Block {
  slot: number;
  parent: Block | null;
  height: number;
  blockhash: string;
  leader: LeaderInfo;
  signatures: string[];
  status: Commitment | 'dead';
  /** Set when the block will be abandoned when the next slot is produced. */
  doom?: {
    reason: 'dead' | 'uncled' | 'orphaned';
    /** State of every account the block wrote, as it was before the block. */
    snapshot: AccountSnapshot;
    uncledBundleIds: string[];
    rebroadcast: ParsedTransaction[];
  };
  /** Faucet credits recorded in this block: they are not rolled back, so a dead block hands them on. */
  faucetCredits: FaucetCredit[];
  /** Executed transactions with their metadata, in block order. */
  transactions: TransactionRecord[];
  prioritizationFees: { min: number | null; writable: Map<string, number> };
  /** A unique id per block produced (Yellowstone's bank id); 0 for genesis. */
  bankId?: number;
  /**
   * Undo log, for lagging RPC nodes (`behind`): the state before this block of every account it wrote (and of every
   * airdrop it records). Kept only while `rpcLagSlots` is on, for the lag plus the finalized depth; absent otherwise.
   */
  undo?: AccountSnapshot;
}

interface StatusEntry {
  slot: number;
  err: TransactionErrorJson | null;
  /** Position in the block. */
  index: number;
}

interface FaucetCredit {
  signature: string;
  signatureBytes: Uint8Array;
  address: string;
}

interface Recorded {
  parsed: ParsedTransaction;
  err: TransactionErrorJson | null;
  execution: Execution;
}

/** What executing one transaction left behind for its status meta. */
interface Execution {
  err: TransactionErrorJson | null;
  logs: string[];
  unitsConsumed: number;
  preBalances: number[];
  postBalances: number[];
  loadedAddresses: LoadedAddresses;
}

/** Address lookup tables: a 56-byte header, then 32-byte addresses. */
const LOOKUP_TABLE_META_SIZE = 56;

/**
 * Agave's status cache holds the statuses of the last MAX_CACHE_ENTRIES (= MAX_RECENT_BLOCKHASHES, 300) rooted slots:
 * getSignatureStatuses without `searchTransactionHistory` answers from it alone.
 */
const STATUS_CACHE_SLOTS = 300;
/** How long signature statuses are kept for `signatureStatus` (searchTransactionHistory reaches this far). */
const STATUS_HISTORY_SLOTS = 20_000;
/** Blocks kept for `block()` lookups; older ones are finalized and only their statuses remain. */
const BLOCK_HISTORY_SLOTS = 1_000;
/** Slots of undo logs kept beyond `rpcLagSlots` + `finalizationSlots` (a lagging node's oldest bank). */
const UNDO_MARGIN_SLOTS = 8;

/**
 * The simulated chain: a slot clock, a seeded leader schedule, a LiteSVM bank, blocks with Solana's commitment
 * progression, a blockhash queue and a signature-status cache, plus the faults that make a chain hard to track
 * (skipped, dead and uncled slots, stalls, blockhash expiry).
 *
 * Slot life: when slot N is produced, a block doomed at N-1 (dead or uncled) is abandoned first and its writes are
 * restored; then the leader either skips N or builds a block on the surviving tip: bundles from the block engine
 * (atomic), then queued transactions, then the transactions of uncled bundles re-broadcast one per slot. Slots
 * N - confirmationSlots and N - finalizationSlots move to confirmed / finalized.
 */
export class SimCluster extends EventEmitter<ClusterEvents> implements Cluster {
  readonly slotsPerEpoch: number;
  readonly slotMs: number;
  readonly faults: Faults;
  /** The faucet's identity: the payer shown for airdrops. */
  readonly faucetAddress: string;

  private readonly bank: Bank;
  private readonly validatorSet: Validator[];
  private readonly schedule: LeaderSchedule;
  private readonly chainRng: Rng;
  /** Execution-drift dice: a stream of their own, so turning drift on shifts no other draw. */
  private readonly driftRng: Rng;
  private readonly hashSeed: string;
  private readonly skipRate: number;
  private readonly confirmationSlots: number;
  private readonly finalizationSlots: number;
  readonly consensus: ConsensusMode;
  private readonly finalizationDelayMs: number;
  private migration: ScheduledMigration | null;
  /** The `migration` mode with no boundary planned yet: its slots, waiting for `scheduleMigration`. */
  private unscheduledMigration: Omit<Required<MigrationOptions>, 'boundarySlot'> | null = null;
  /** The migration's progress: the transition block once produced, and whether Alpenglow has started. */
  private transitionBlock: Block | null = null;
  private alpenglowStarted = false;
  /** The boundary block, when the migration abandons it: deleted with the blocks after the transition. */
  private abandonedBoundary: { block: Block; snapshot: AccountSnapshot } | null = null;
  /** Alpenglow: blocks notarized (processed) and waiting for their finalization certificate, oldest first. */
  private readonly awaitingCertificate: Block[] = [];
  private readonly certificateTimers = new Set<NodeJS.Timeout>();
  private nextBankId = 1;

  private clockSlot = 0;
  private tip: Block;
  private confirmedTip: Block;
  private finalizedTip: Block;
  private readonly blocks = new Map<number, Block>();
  /** Processed blocks waiting for confirmation / finalization, oldest first. */
  private readonly unconfirmed: Block[] = [];
  private readonly unfinalized: Block[] = [];
  private readonly blockhashes = new Map<string, BlockhashInfo & { height: number }>();
  /** Blockhashes of blocks below this height are invalid (the expireBlockhashes fault). */
  private expiredBelowHeight = 0;
  private readonly statuses = new Map<string, StatusEntry>();
  /** Per account key, the kept transactions (and airdrops) that loaded it, oldest first (getSignaturesForAddress). */
  private readonly addressIndex = new Map<string, AddressSignature[]>();
  private readonly pending: ParsedTransaction[] = [];
  private readonly pendingSignatures = new Set<string>();
  /** Uncled bundles' transactions, each waiting for the slot it is re-broadcast into. */
  private readonly rebroadcasts: Array<{ parsed: ParsedTransaction; slot: number }> = [];
  private faucetCredits: FaucetCredit[] = [];
  private source: BundleSource | null = null;
  private timer: NodeJS.Timeout | null = null;
  private landedTransactionCount = 0;
  /** The slot being produced (0 between blocks). */
  private producingSlot = 0;
  /**
   * The state before each airdrop credited since the last block (airdrops credit at once and are recorded in the next
   * block): the start of that block's undo log. Airdrops are rare, so this is kept whether or not a node lags.
   */
  private pendingUndo: AccountSnapshot = new Map();
  /** Blocks holding an undo log, oldest first (pruned to the lag window). */
  private readonly undoBlocks: Block[] = [];
  /** Accounts created (balance 0 to more) per slot, kept while `engineBankLagSlots` is on (`createdAtSlot`). */
  private readonly created = new Map<string, number>();
  private readonly onExpireBlockhashes = (): void => {
    this.expiredBelowHeight = this.tip.height + 1;
  };

  constructor(options: SimClusterOptions = {}) {
    super();
    const rng = options.rng ?? new Rng(options.seed ?? 1);
    this.slotMs = options.slotMs ?? 400;
    this.slotsPerEpoch = options.slotsPerEpoch ?? 432;
    if (!Number.isInteger(this.slotsPerEpoch) || this.slotsPerEpoch < 4 || this.slotsPerEpoch % 4 !== 0) {
      throw new Error('slotsPerEpoch must be a positive multiple of 4');
    }
    if (!(this.slotMs > 0)) throw new Error('slotMs must be positive');
    this.skipRate = options.skipRate ?? 0;
    this.confirmationSlots = options.confirmationSlots ?? 2;
    this.finalizationSlots = options.finalizationSlots ?? 32;
    // Dead and uncled slots are declared one slot after they are produced, so they must die before confirmation.
    if (this.confirmationSlots < 2 || this.finalizationSlots < this.confirmationSlots) {
      throw new Error('need 2 <= confirmationSlots <= finalizationSlots');
    }
    this.consensus = options.consensus ?? 'towerbft';
    this.finalizationDelayMs = options.finalizationDelayMs ?? 120;
    if (this.consensus === 'migration') {
      const m = options.migration ?? {};
      const slots = {
        transitionAfterSlots: m.transitionAfterSlots ?? 2,
        certificateAfterSlots: m.certificateAfterSlots ?? 2,
        boundaryForkAbandoned: m.boundaryForkAbandoned ?? false,
      };
      if (slots.transitionAfterSlots < 1) throw new Error('migration: need transitionAfterSlots >= 1');
      if (slots.certificateAfterSlots < 1) throw new Error('migration: need certificateAfterSlots >= 1');
      const boundarySlot = m.boundarySlot === undefined ? 64 : m.boundarySlot;
      if (boundarySlot !== null && boundarySlot < 1) throw new Error('migration: need boundarySlot >= 1');
      this.migration = boundarySlot === null ? null : { boundarySlot, ...slots };
      if (boundarySlot === null) this.unscheduledMigration = slots;
    } else this.migration = null;
    this.bank = new Bank(options.bankSigverify ?? true);
    this.faults = options.faults ?? new Faults();
    this.faults.on('expireBlockhashes', this.onExpireBlockhashes);

    this.validatorSet = createValidators(
      rng.fork('validators'),
      options.validatorCount ?? 16,
      options.bundleEngineShare ?? 0.9,
    );
    this.schedule = new LeaderSchedule(
      this.validatorSet,
      this.slotsPerEpoch,
      rng.fork('leaders').int(0, 0xffffffff),
    );
    this.chainRng = rng.fork('chain');
    this.driftRng = rng.fork('execution-drift');
    this.hashSeed = String(rng.fork('blockhash').int(0, 0xffffffff));
    this.faucetAddress = bs58.encode(createHash('sha256').update(`faucet:${this.hashSeed}`).digest());

    for (const tipAccount of MAINNET_TIP_ACCOUNTS) this.bank.credit(tipAccount, TIP_ACCOUNT_PREFUND_LAMPORTS);

    const genesis: Block = {
      slot: 0,
      parent: null,
      height: 0,
      blockhash: this.blockhashFor(0, 'genesis'),
      leader: this.schedule.leaderAt(0),
      signatures: [],
      status: 'finalized',
      faucetCredits: [],
      transactions: [],
      prioritizationFees: { min: null, writable: new Map() },
    };
    this.tip = this.confirmedTip = this.finalizedTip = genesis;
    this.blocks.set(0, genesis);
    this.blockhashes.set(genesis.blockhash, {
      blockhash: genesis.blockhash,
      slot: 0,
      height: 0,
      lastValidBlockHeight: BLOCKHASH_VALID_BLOCKS,
    });
  }

  // ---- clock ----

  get slot(): number {
    return this.tip.slot;
  }

  get blockHeight(): number {
    return this.tip.height;
  }

  /** The last slot the clock reached, produced or skipped. */
  get currentSlot(): number {
    return this.clockSlot;
  }

  get transactionCount(): number {
    return this.landedTransactionCount;
  }

  /** The consensus the cluster runs now (`vote-only`: the migration's window; see `ConsensusMode`). */
  get consensusPhase(): ConsensusPhase {
    if (this.consensus === 'alpenglow' || this.alpenglowStarted) return 'alpenglow';
    if (this.migration && this.clockSlot > this.migration.boundarySlot) return 'vote-only';
    return 'towerbft';
  }

  /** The migration's transition block's slot and the Alpenglow genesis slot, once known (null otherwise). */
  get migrationState(): { transitionSlot: number | null; genesisSlot: number | null } {
    return {
      transitionSlot: this.transitionBlock?.slot ?? null,
      genesisSlot: this.alpenglowStarted ? this.alpenglowGenesisSlot : null,
    };
  }

  private alpenglowGenesisSlot: number | null = null;

  /**
   * The `migration` mode started with no boundary planned (`boundarySlot: null`): announce the boundary now, as the
   * migration's feature gate activating does on a real cluster (from here `getAlpenglowMigrationSlot` answers it).
   * The boundary must lie ahead of the slot being produced, so the announcement precedes it; once, and only in that
   * mode: the default TowerBFT mode never migrates.
   */
  scheduleMigration(boundarySlot: number): void {
    if (!this.unscheduledMigration)
      throw new Error("scheduleMigration: only a 'migration' cluster started with boundarySlot null, once");
    if (!Number.isSafeInteger(boundarySlot) || boundarySlot <= this.clockSlot)
      throw new Error(
        `scheduleMigration: the boundary ${boundarySlot} must lie after slot ${this.clockSlot}`,
      );
    this.migration = { boundarySlot, ...this.unscheduledMigration };
    this.unscheduledMigration = null;
  }

  consensusInfo():
    { migrationSlot: number | null; genesisSlot: number | null; genesisBlockId: number[] } | undefined {
    if (this.consensus === 'towerbft') return undefined;
    const genesisSlot = this.consensus === 'alpenglow' ? 0 : this.alpenglowGenesisSlot;
    const block = genesisSlot === null ? undefined : this.blocks.get(genesisSlot);
    return {
      migrationSlot: this.consensus === 'alpenglow' ? 0 : (this.migration?.boundarySlot ?? null),
      genesisSlot,
      // A 32-byte array, not base-58 (the documented shape).
      genesisBlockId: block ? [...bs58.decode(block.blockhash)] : [],
    };
  }

  slotAt(commitment: Commitment): number {
    return this.blockAt(commitment).slot;
  }

  blockHeightAt(commitment: Commitment): number {
    return this.blockAt(commitment).height;
  }

  epochInfo(commitment: Commitment = 'processed'): EpochInfo {
    return this.epochInfoOf(this.blockAt(commitment));
  }

  behind(lagSlots: number): ChainRead {
    if (lagSlots <= 0) return this;
    const at = this.banksBehind(lagSlots);
    return {
      slotAt: (c) => at(c).slot,
      blockHeightAt: (c) => at(c).height,
      epochInfo: (c = 'processed') => this.epochInfoOf(at(c)),
      latestBlockhash: (c = 'confirmed') => blockhashOf(at(c)),
      isBlockhashValid: (blockhash, c = 'processed') => this.isBlockhashKnownAt(blockhash, at(c)),
      signatureStatus: (signature, options) => this.statusSeenFrom(signature, at, options),
      block: (slot) => (slot > at('processed').slot ? null : this.block(slot)),
      firstAvailableBlock: () => this.firstAvailableBlock(),
      transaction: (signature) => {
        const record = this.transaction(signature);
        return record && record.slot <= at('processed').slot ? record : null;
      },
      signaturesForAddress: (address) => {
        const tip = at('processed').slot;
        return this.signaturesForAddress(address).filter((entry) => entry.slot <= tip);
      },
      getBalance: (address, c = 'processed') => {
        const past = this.accountAsOf(address, at(c));
        return past === undefined ? this.bank.getBalance(address) : Number(past?.lamports() ?? 0n);
      },
      getAccount: (address, c = 'processed') => {
        const past = this.accountAsOf(address, at(c));
        if (past === undefined) return this.getAccount(address);
        return past ? accountStateOf(accountData(past)) : null;
      },
      simulateTransaction: (wire, options, c = 'processed') => this.simulateOn(at(c), wire, options, true),
    };
  }

  /**
   * `address` as it was in `block` (a bank on the current fork), from the undo logs of the blocks after it and of the
   * airdrops not yet in a block: undefined when none of them wrote it (the current bank holds its state then), null
   * when it did not exist. The walk stops at a block without a log (produced before `rpcLagSlots` was set, or
   * pruned): past it the simnet has no record, and the answer is the oldest state it can rebuild.
   */
  private accountAsOf(address: string, block: Block): BankAccount | null | undefined {
    let found: BankAccount | null | undefined = this.pendingUndo.get(address);
    for (let b: Block | null = this.tip; b && b.slot > block.slot; b = b.parent) {
      if (!b.undo) break;
      if (b.undo.has(address)) found = b.undo.get(address) ?? null;
    }
    return found;
  }

  /** Every account written since `block` (as `accountAsOf`), with its state in `block`. */
  private stateAsOf(block: Block): AccountSnapshot {
    const state: AccountSnapshot = new Map(this.pendingUndo);
    for (let b: Block | null = this.tip; b && b.slot > block.slot; b = b.parent) {
      if (!b.undo) break;
      for (const [address, account] of b.undo) state.set(address, account);
    }
    return state;
  }

  /**
   * The banks of a node `lag` slots behind: its processed bank is the newest block on the current fork at least
   * `lag` slots older than the tip, and its confirmed / finalized banks trail that by the usual depths.
   */
  private banksBehind(lag: number): (commitment: Commitment) => Block {
    const processed = walkBack(this.tip, this.tip.slot - lag);
    return (commitment) => {
      if (commitment === 'processed') return processed;
      const depth = commitment === 'confirmed' ? this.confirmationSlots : this.finalizationSlots;
      const real = this.blockAt(commitment);
      return walkBack(real, Math.min(real.slot, processed.slot - depth));
    };
  }

  private epochInfoOf(block: Block): EpochInfo {
    const epoch = Math.floor(block.slot / this.slotsPerEpoch);
    const firstSlot = epoch * this.slotsPerEpoch;
    return {
      epoch,
      firstSlot,
      slotsInEpoch: this.slotsPerEpoch,
      slotIndex: block.slot - firstSlot,
      absoluteSlot: block.slot,
      blockHeight: block.height,
      transactionCount: this.landedTransactionCount,
    };
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      // A throwing listener must not take the whole simnet down from a timer callback (an uncaught exception).
      try {
        this.produceSlot();
      } catch (error) {
        process.emitWarning(
          `simnet: producing slot ${this.clockSlot} failed: ${(error as Error).stack ?? error}`,
        );
      }
    }, this.slotMs);
    // The clock alone must not keep a process alive; servers and callers do.
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const timer of this.certificateTimers) clearTimeout(timer);
    this.certificateTimers.clear();
  }

  get running(): boolean {
    return this.timer !== null;
  }

  advance(n = 1): void {
    for (let i = 0; i < n; i++) this.produceSlot();
  }

  /** Stop the clock and detach from the fault hub. */
  close(): void {
    this.stop();
    this.faults.off('expireBlockhashes', this.onExpireBlockhashes);
  }

  // ---- leaders ----

  leaderAt(slot: number): LeaderInfo | null {
    if (!this.isScheduleKnown(slot)) return null;
    return this.schedule.leaderAt(slot);
  }

  leaderSchedule(slot: number): Record<string, number[]> | null {
    if (!this.isScheduleKnown(slot)) return null;
    return this.schedule.scheduleByIdentity(Math.floor(slot / this.slotsPerEpoch));
  }

  validators(): Array<LeaderInfo & { stake: number }> {
    return this.validatorSet.map((v) => ({ ...v }));
  }

  /** Schedules are known for every past epoch, the current one and the next (Solana's leader_schedule_slot_offset). */
  private isScheduleKnown(slot: number): boolean {
    if (!Number.isInteger(slot) || slot < 0) return false;
    const epoch = Math.floor(slot / this.slotsPerEpoch);
    return epoch <= Math.floor(this.clockSlot / this.slotsPerEpoch) + 1;
  }

  // ---- blockhashes and statuses ----

  /**
   * The blockhash of the block at `commitment`. Defaults to confirmed: a processed block may still die, and its
   * blockhash with it.
   */
  latestBlockhash(commitment: Commitment = 'confirmed'): BlockhashInfo {
    return blockhashOf(this.blockAt(commitment));
  }

  isBlockhashValid(blockhash: string, commitment: Commitment = 'processed'): boolean {
    return this.isBlockhashKnownAt(blockhash, this.blockAt(commitment));
  }

  /** Agave's `is_blockhash_valid` on `bank`: in its blockhash queue (not newer than it) and not past its age. */
  private isBlockhashKnownAt(blockhash: string, bank: Block): boolean {
    const info = this.blockhashes.get(blockhash);
    return !!info && info.height <= bank.height && this.isBlockhashUsableAt(blockhash, bank.height);
  }

  blockhashInfo(blockhash: string): BlockhashInfo | null {
    const info = this.blockhashes.get(blockhash);
    return info
      ? { blockhash: info.blockhash, slot: info.slot, lastValidBlockHeight: info.lastValidBlockHeight }
      : null;
  }

  signatureStatus(signature: string, options?: { statusCacheOnly?: boolean }): SignatureStatus | null {
    return this.statusSeenFrom(signature, (c) => this.blockAt(c), options);
  }

  private statusSeenFrom(
    signature: string,
    at: (commitment: Commitment) => Block,
    options: { statusCacheOnly?: boolean } = {},
  ): SignatureStatus | null {
    const entry = this.statuses.get(signature);
    if (!entry) return null;
    const tip = at('processed');
    if (entry.slot > tip.slot) return null; // the node has not seen that block yet
    const root = at('finalized');
    if (options.statusCacheOnly && entry.slot < root.slot - STATUS_CACHE_SLOTS) return null;
    const block = this.blocks.get(entry.slot);
    // Blocks older than the kept history are finalized.
    const status: Commitment =
      !block || entry.slot <= root.slot
        ? 'finalized'
        : entry.slot <= at('confirmed').slot
          ? 'confirmed'
          : 'processed';
    return {
      slot: entry.slot,
      confirmations: status === 'finalized' || !block ? null : Math.max(0, tip.height - block.height),
      err: entry.err,
      confirmationStatus: status,
    };
  }

  firstAvailableBlock(): number {
    for (const slot of this.blocks.keys()) return slot;
    return 0;
  }

  block(slot: number): BlockSummary | null {
    const block = this.blocks.get(slot);
    if (!block) return null;
    return {
      slot: block.slot,
      parentSlot: block.parent?.slot ?? null,
      parentBlockhash: block.parent?.blockhash ?? null,
      blockHeight: block.height,
      blockhash: block.blockhash,
      leader: block.leader,
      signatures: block.signatures,
      status: block.status,
      transactions: block.transactions,
      prioritizationFees: block.prioritizationFees,
    };
  }

  transaction(signature: string): TransactionRecord | null {
    const entry = this.statuses.get(signature);
    if (!entry) return null;
    const block = this.blocks.get(entry.slot);
    if (!block || block.status === 'dead') return null;
    const record = block.transactions[entry.index];
    return record && record.signatures[0] === signature ? record : null;
  }

  signaturesForAddress(address: string): readonly AddressSignature[] {
    return this.addressIndex.get(address) ?? [];
  }

  private isBlockhashUsableAt(blockhash: string, height: number): boolean {
    const info = this.blockhashes.get(blockhash);
    return !!info && info.height >= this.expiredBelowHeight && height <= info.lastValidBlockHeight;
  }

  // ---- transactions ----

  submitTransaction(wire: Uint8Array): SubmitResult {
    let parsed: ParsedTransaction;
    try {
      parsed = parseTransaction(wire);
    } catch {
      return { ok: false, err: 'SanitizeFailure', signature: '' };
    }
    const { signature } = parsed;
    if (!verifySignatures(parsed)) return { ok: false, err: 'SignatureFailure', signature };
    if (!this.isBlockhashValid(parsed.recentBlockhash))
      return { ok: false, err: 'BlockhashNotFound', signature };
    if (this.statuses.has(signature)) return { ok: false, err: 'AlreadyProcessed', signature };
    // A resend of a queued transaction is accepted and deduplicated, as a leader's sigverify stage would.
    if (this.pendingSignatures.has(signature)) return { ok: true, signature };
    this.pending.push(parsed);
    this.pendingSignatures.add(signature);
    return { ok: true, signature };
  }

  /** On the current bank at every commitment (the simnet keeps one bank); a node `behind` simulates on its own. */
  simulateTransaction(
    wire: Uint8Array,
    options: { sigVerify?: boolean; replaceRecentBlockhash?: boolean } = {},
  ): { err: TransactionErrorJson | null; logs: string[]; unitsConsumed: number } {
    return this.simulateOn(this.tip, wire, options, false);
  }

  /**
   * Simulate on the bank of `block`: the tip's is the current bank; an older one (a lagging node's) is rebuilt from
   * the undo logs for the simulation (the accounts written since are set back, then restored), and its blockhash
   * queue is the one that block knew. `lagging`: a node behind, which has not seen the airdrops credited since the
   * tip either.
   */
  private simulateOn(
    block: Block,
    wire: Uint8Array,
    options: { sigVerify?: boolean; replaceRecentBlockhash?: boolean } = {},
    lagging: boolean,
  ): { err: TransactionErrorJson | null; logs: string[]; unitsConsumed: number } {
    let parsed: ParsedTransaction;
    try {
      parsed = parseTransaction(wire);
    } catch {
      return { err: 'SanitizeFailure', logs: [], unitsConsumed: 0 };
    }
    if (options.sigVerify && !verifySignatures(parsed))
      return { err: 'SignatureFailure', logs: [], unitsConsumed: 0 };
    let input = parsed.wire;
    if (options.replaceRecentBlockhash) {
      input = Uint8Array.from(parsed.wire);
      input.set(bs58.decode(block.blockhash), parsed.blockhashOffset);
    } else if (!this.isBlockhashKnownAt(parsed.recentBlockhash, block)) {
      return { err: 'BlockhashNotFound', logs: [], unitsConsumed: 0 };
    }
    // Signatures were checked above when asked; a replaced blockhash would fail the SVM's own check.
    if (!lagging) return this.bank.simulate(input, false);
    const past = this.stateAsOf(block);
    const now: AccountSnapshot = new Map();
    this.bank.capture(past.keys(), now);
    this.bank.restore(past);
    try {
      return this.bank.simulate(input, false);
    } finally {
      this.bank.restore(now);
    }
  }

  /** The current bank's balance at every commitment (one bank); a node `behind` answers from its own slot. */
  getBalance(address: string): number {
    return this.bank.getBalance(address);
  }

  getAccount(address: string): AccountState | null {
    const account = this.bank.getAccount(address);
    return account ? accountStateOf(account) : null;
  }

  /**
   * Faucet: the lamports are credited at once (so a test can spend them immediately) and the airdrop's signature is
   * recorded in the next block, moving through the commitment levels like any transaction. Airdrops are never rolled
   * back; if their block dies they are recorded again in the next one.
   */
  airdrop(address: string, lamports: number): string {
    if (!Number.isSafeInteger(lamports) || lamports <= 0)
      throw new Error('airdrop lamports must be a positive integer');
    if (this.faults.current.engineBankLagSlots > 0 && this.bank.getBalance(address) === 0)
      this.created.set(address, Math.max(this.slot, this.clockSlot));
    this.bank.capture([address], this.pendingUndo);
    this.bank.credit(address, lamports);
    // A block about to die restores what it wrote; fold the credit into that restore point so it survives.
    const snapshot = this.tip.doom?.snapshot;
    if (snapshot?.has(address))
      snapshot.set(address, this.bank.credited(snapshot.get(address) ?? null, lamports));
    const boundary = this.abandonedBoundary?.snapshot;
    if (boundary?.has(address))
      boundary.set(address, this.bank.credited(boundary.get(address) ?? null, lamports));
    const signatureBytes = new Uint8Array(64);
    for (let i = 0; i < 64; i++) signatureBytes[i] = this.chainRng.int(0, 255);
    const signature = bs58.encode(signatureBytes);
    this.faucetCredits.push({ signature, signatureBytes, address });
    return signature;
  }

  setBundleSource(source: BundleSource | null): void {
    this.source = source;
  }

  // ---- block production ----

  private blockAt(commitment: Commitment): Block {
    return commitment === 'processed'
      ? this.tip
      : commitment === 'confirmed'
        ? this.confirmedTip
        : this.finalizedTip;
  }

  private blockhashFor(slot: number, parentHash: string): string {
    return bs58.encode(createHash('sha256').update(`${this.hashSeed}:${slot}:${parentHash}`).digest());
  }

  private produceSlot(): void {
    if (this.faults.current.slotStall) {
      this.faults.count('slotsStalled');
      return;
    }
    const slot = ++this.clockSlot;
    // Alpenglow: certificates due by now arrive before the next slot (the manual clock's only way to deliver them).
    this.deliverCertificates();
    if (this.tip.doom) this.abandonTip();
    if (this.migration) this.migrate();

    const leader = this.schedule.leaderAt(slot);
    // SIMD-0371: after the boundary slot, until Alpenglow starts, blocks carry no user transactions.
    const voteOnly = this.consensusPhase === 'vote-only';
    if (this.chainRng.chance(this.skipRate)) {
      this.progressCommitment(slot);
      return;
    }
    const faults = this.faults.current;
    const willDie = this.chainRng.chance(faults.deadSlotRate);
    const uncleDrawn = this.chainRng.chance(faults.uncleRate);
    const orphanDrawn = this.chainRng.chance(faults.orphanedBlockRate);
    const boundaryAbandoned =
      this.migration?.boundaryForkAbandoned === true && slot === this.migration.boundarySlot;
    const snapshot: AccountSnapshot | null =
      willDie || uncleDrawn || orphanDrawn || boundaryAbandoned ? new Map() : null;
    // A lagging node's reads rebuild older banks from undo logs: recorded only while one may lag. A vote-only block
    // writes nothing and records no airdrop, so the airdrops' log waits for the next block.
    const undo: AccountSnapshot | undefined = !this.recordsUndo()
      ? undefined
      : voteOnly
        ? new Map()
        : this.pendingUndo;
    if (!voteOnly) this.pendingUndo = new Map();

    const parent = this.tip;
    const height = parent.height + 1;
    const context: BlockContext = { slot, leader, blockHeight: height };
    this.producingSlot = slot;
    this.forgetOldCreations(slot);
    const recorded: Recorded[] = [];
    const inBlock = new Set<string>();

    // 1. Bundles, only in slots of a bundle-engine leader.
    const bundleResults: BundleExecution[] = [];
    const landedBundles: Array<{ bundleId: string; transactions: ParsedTransaction[] }> = [];
    if (leader.bundleEngine && this.source && !voteOnly) {
      for (const candidate of this.source.bundlesForSlot(context)) {
        const outcome = this.executeBundle(candidate, slot, height, inBlock, snapshot, undo);
        bundleResults.push(outcome.result);
        if (outcome.result.landed) {
          landedBundles.push({ bundleId: candidate.bundleId, transactions: outcome.transactions });
          outcome.transactions.forEach((parsed, i) =>
            recorded.push({ parsed, err: null, execution: outcome.executions[i] as Execution }),
          );
        }
      }
    }

    // 2. Queued transactions, then 3. re-broadcast transactions of uncled bundles due in this slot. A vote-only block
    // packs none: they stay queued (an RPC node keeps forwarding what it was sent until its blockhash expires).
    const queue = voteOnly ? [] : this.pending.splice(0);
    if (!voteOnly) this.pendingSignatures.clear();
    while (
      !voteOnly &&
      this.rebroadcasts.length > 0 &&
      (this.rebroadcasts[0] as { slot: number }).slot <= slot
    ) {
      queue.push((this.rebroadcasts.shift() as { parsed: ParsedTransaction }).parsed);
    }
    for (const parsed of queue) {
      // Expired or duplicate transactions are dropped by the leader: no fee, no status.
      if (!this.isBlockhashUsableAt(parsed.recentBlockhash, height)) continue;
      if (inBlock.has(parsed.signature) || this.statuses.has(parsed.signature)) continue;
      if (snapshot) this.bank.capture(parsed.writableKeys, snapshot);
      if (undo) this.bank.capture(parsed.writableKeys, undo);
      const execution = this.drifts() ? this.executeDrifted(parsed) : this.executeWithMeta(parsed);
      const { err } = execution;
      if (err !== null && !isRecordedError(err)) continue;
      inBlock.add(parsed.signature);
      recorded.push({ parsed, err, execution });
    }

    const block: Block = {
      slot,
      parent,
      height,
      blockhash: this.blockhashFor(slot, parent.blockhash),
      leader,
      signatures: recorded.map((r) => r.parsed.signature),
      status: 'processed',
      faucetCredits: voteOnly ? [] : this.faucetCredits,
      transactions: recorded.map(({ parsed, err, execution }, index) =>
        transactionRecord(slot, index, parsed, err, execution),
      ),
      prioritizationFees: { min: null, writable: new Map() },
    };
    if (!voteOnly) this.faucetCredits = [];
    block.bankId = this.nextBankId++;
    if (undo) {
      block.undo = undo;
      this.undoBlocks.push(block);
    }
    this.pruneUndo(slot);
    block.prioritizationFees = mergePrioritizationFees(
      prioritizationFeesOf(block.transactions),
      this.source?.backgroundPrioritizationFees?.(slot) ?? null,
    );
    // Replay failure first, then an uncle (only a block with bundles has anything to re-broadcast), then an orphan.
    const reason = willDie
      ? 'dead'
      : uncleDrawn && landedBundles.length > 0
        ? 'uncled'
        : orphanDrawn
          ? 'orphaned'
          : null;
    if (snapshot && reason) {
      const uncled = reason === 'uncled';
      block.doom = {
        reason,
        snapshot,
        uncledBundleIds: uncled ? landedBundles.map((b) => b.bundleId) : [],
        rebroadcast: uncled ? landedBundles.flatMap((b) => b.transactions) : [],
      };
    }

    this.tip = block;
    this.blocks.set(slot, block);
    if (this.consensusPhase === 'alpenglow') this.awaitingCertificate.push(block);
    else {
      this.unconfirmed.push(block);
      this.unfinalized.push(block);
    }
    if (this.migration) this.noteMigrationBlock(block, boundaryAbandoned ? snapshot : null);
    this.blockhashes.set(block.blockhash, {
      blockhash: block.blockhash,
      slot,
      height,
      lastValidBlockHeight: height + BLOCKHASH_VALID_BLOCKS,
    });
    recorded.forEach(({ parsed, err }, index) => this.statuses.set(parsed.signature, { slot, err, index }));
    for (const record of block.transactions) {
      this.indexAddresses(keysOf(record), {
        signature: record.signatures[0] as string,
        slot,
        index: record.index,
        err: record.err,
        memo: extractMemo(record.message),
      });
    }
    for (const credit of block.faucetCredits) {
      const index = block.signatures.length;
      this.statuses.set(credit.signature, { slot, err: null, index });
      block.signatures.push(credit.signature);
      this.indexAddresses(this.faucetKeys(credit), {
        signature: credit.signature,
        slot,
        index,
        err: null,
        memo: null,
      });
    }
    this.landedTransactionCount += block.signatures.length;

    // Transactions stream as they execute, before the slot's own processed status.
    recorded.forEach(({ parsed, err }, index) =>
      this.emit('transaction', transactionEvent(slot, index, parsed, err)),
    );
    block.faucetCredits.forEach((credit, i) =>
      this.emit('transaction', {
        slot,
        signature: credit.signature,
        signatureBytes: credit.signatureBytes,
        index: recorded.length + i,
        isVote: false,
        err: null,
        accountKeys: this.faucetKeys(credit),
        feePayer: this.faucetAddress,
      }),
    );
    this.emitSlot(block, 'processed');
    if (this.source && bundleResults.length > 0) this.source.onBundleResults(context, bundleResults);
    if (this.consensusPhase === 'alpenglow') this.scheduleCertificate();

    this.progressCommitment(slot);
    if (slot % 100 === 0) this.prune(slot);
  }

  private executeBundle(
    candidate: BundleCandidate,
    slot: number,
    height: number,
    inBlock: Set<string>,
    blockSnapshot: AccountSnapshot | null,
    blockUndo: AccountSnapshot | undefined,
  ): { result: BundleExecution; transactions: ParsedTransaction[]; executions: Execution[] } {
    const transactions: ParsedTransaction[] = [];
    const executions: Execution[] = [];
    const signatures: string[] = [];
    const refuse = (failedIndex: number, err: TransactionErrorJson) => ({
      result: { bundleId: candidate.bundleId, landed: false as const, slot, failedIndex, err, signatures },
      transactions: [],
      executions: [],
    });
    // Sanitize every transaction first, as the validator's bundle sanitizer does: nothing runs if one is bad.
    for (const [index, wire] of candidate.transactions.entries()) {
      let parsed: ParsedTransaction;
      try {
        parsed = parseTransaction(wire);
      } catch {
        return refuse(index, 'SanitizeFailure');
      }
      signatures.push(parsed.signature);
      transactions.push(parsed);
    }
    for (const [index, parsed] of transactions.entries()) {
      if (!verifySignatures(parsed)) return refuse(index, 'SignatureFailure');
      if (!this.isBlockhashUsableAt(parsed.recentBlockhash, height))
        return refuse(index, 'BlockhashNotFound');
      const duplicate = signatures.indexOf(parsed.signature) !== index;
      if (duplicate || inBlock.has(parsed.signature) || this.statuses.has(parsed.signature)) {
        return refuse(index, 'AlreadyProcessed');
      }
    }
    const bundleSnapshot: AccountSnapshot = new Map();
    this.bank.capture(
      transactions.flatMap((t) => t.writableKeys),
      bundleSnapshot,
    );
    for (const [index, parsed] of transactions.entries()) {
      const execution = this.drifts() ? this.executeDrifted(parsed) : this.executeWithMeta(parsed);
      executions.push(execution);
      const { err } = execution;
      if (err !== null) {
        this.bank.restore(bundleSnapshot);
        return refuse(index, err);
      }
    }
    for (const target of [blockSnapshot, blockUndo])
      if (target)
        for (const [address, account] of bundleSnapshot)
          if (!target.has(address)) target.set(address, account);
    for (const parsed of transactions) inBlock.add(parsed.signature);
    return {
      result: { bundleId: candidate.bundleId, landed: true, slot, signatures },
      transactions,
      executions,
    };
  }

  /** Whether the next transaction drifts (`executionDriftRate`). */
  private drifts(): boolean {
    return this.driftRng.chance(this.faults.current.executionDriftRate);
  }

  /**
   * A transaction whose state moved between its simulation and its inclusion: run as usual, and if it succeeded,
   * undone and failed as its own program would fail it (a slippage or stale-state check), its fee charged to the fee
   * payer and nothing else applied. The error is `{InstructionError: [last instruction, {Custom: 1}]}`; the code is
   * arbitrary (the simnet's), the shape is what an on-chain check produces.
   */
  private executeDrifted(parsed: ParsedTransaction): Execution {
    const before: AccountSnapshot = new Map();
    this.bank.capture(parsed.writableKeys, before);
    const execution = this.executeWithMeta(parsed);
    if (execution.err !== null) return execution;
    this.bank.restore(before);
    const message = decodeMessage(parsed);
    const payer = parsed.accountKeys[0] as string;
    this.bank.credit(payer, -feeDetails(message).fee);
    this.faults.count('executionDrifts');
    const keys = [
      ...parsed.accountKeys,
      ...execution.loadedAddresses.writable,
      ...execution.loadedAddresses.readonly,
    ];
    return {
      ...execution,
      err: { InstructionError: [Math.max(0, message.instructions.length - 1), { Custom: 1 }] },
      logs: [...execution.logs, 'Program log: simnet execution drift: state moved since simulation'],
      postBalances: keys.map((key) => this.bank.getBalance(key)),
    };
  }

  /** Execute one transaction, capturing the balances and lookup-table addresses its status meta reports. */
  private executeWithMeta(parsed: ParsedTransaction): Execution {
    const loadedAddresses = this.resolveLookupTables(parsed);
    const keys = [...parsed.accountKeys, ...loadedAddresses.writable, ...loadedAddresses.readonly];
    const preBalances = keys.map((key) => this.bank.getBalance(key));
    const { err, logs, unitsConsumed } = this.bank.execute(parsed);
    const postBalances = keys.map((key) => this.bank.getBalance(key));
    if (err === null && this.faults.current.engineBankLagSlots > 0)
      keys.forEach((key, i) => {
        if (preBalances[i] === 0 && (postBalances[i] ?? 0) > 0) this.created.set(key, this.producingSlot);
      });
    return { err, logs, unitsConsumed, preBalances, postBalances, loadedAddresses };
  }

  createdAtSlot(address: string): number | null {
    return this.created.get(address) ?? null;
  }

  /** Whether blocks record undo logs: while lagging nodes answer (`rpcLagSlots`). */
  private recordsUndo(): boolean {
    return this.faults.current.rpcLagSlots > 0;
  }

  /** Drop undo logs older than a lagging node's oldest bank (its finalized one), all of them once no node lags. */
  private pruneUndo(slot: number): void {
    const lag = this.faults.current.rpcLagSlots;
    const keep = lag > 0 ? lag + this.finalizationSlots + UNDO_MARGIN_SLOTS : -1;
    while (this.undoBlocks.length > 0 && (this.undoBlocks[0] as Block).slot < slot - keep)
      (this.undoBlocks.shift() as Block).undo = undefined;
  }

  /**
   * Blocks leave the fork (`blocks`, newest first): their writes are undone or were none, except airdrops, which are
   * handed on to the next block. The state before them becomes the start of the next block's undo log (the oldest
   * capture of an address wins); without their logs the pending one is dropped (no record reaches back).
   */
  private forgetUndo(blocks: Block[]): void {
    const merged: AccountSnapshot = new Map();
    for (const block of [...blocks].reverse()) {
      if (!block.undo) {
        this.pendingUndo = new Map();
        return;
      }
      for (const [address, account] of block.undo) if (!merged.has(address)) merged.set(address, account);
    }
    for (const [address, account] of this.pendingUndo) if (!merged.has(address)) merged.set(address, account);
    for (const block of blocks) {
      block.undo = undefined;
      removeBlock(this.undoBlocks, block);
    }
    this.pendingUndo = merged;
  }

  /** Creations older than any lag a test sets (a few hundred slots) are forgotten, so the record stays small. */
  private forgetOldCreations(slot: number): void {
    if (this.created.size === 0 || slot % 64 !== 0) return;
    for (const [address, at] of this.created) if (at < slot - 512) this.created.delete(address);
  }

  /** A v0 message's lookup-table addresses as the bank holds them now (missing tables or indexes resolve to none). */
  private resolveLookupTables(parsed: ParsedTransaction): LoadedAddresses {
    const loaded: LoadedAddresses = { writable: [], readonly: [] };
    if (((parsed.messageBytes[0] ?? 0) & 0x80) === 0) return loaded;
    const lookups = decodeMessage(parsed).addressTableLookups;
    for (const lookup of lookups) {
      const data = this.bank.getAccount(lookup.accountKey)?.data;
      if (!data) continue;
      const addressAt = (i: number): string | null => {
        const start = LOOKUP_TABLE_META_SIZE + 32 * i;
        return start + 32 <= data.length ? bs58.encode(data.subarray(start, start + 32)) : null;
      };
      for (const i of lookup.writableIndexes) {
        const address = addressAt(i);
        if (address) loaded.writable.push(address);
      }
      for (const i of lookup.readonlyIndexes) {
        const address = addressAt(i);
        if (address) loaded.readonly.push(address);
      }
    }
    return loaded;
  }

  private faucetKeys(credit: FaucetCredit): string[] {
    return [this.faucetAddress, credit.address, '11111111111111111111111111111111'];
  }

  private indexAddresses(keys: Iterable<string>, entry: AddressSignature): void {
    for (const key of new Set(keys)) {
      let list = this.addressIndex.get(key);
      if (!list) {
        list = [];
        this.addressIndex.set(key, list);
      }
      list.push(entry);
    }
  }

  /** Every account key a block's transactions and airdrops loaded. */
  private blockKeys(block: Block): Set<string> {
    const keys = new Set<string>();
    for (const record of block.transactions) for (const key of keysOf(record)) keys.add(key);
    for (const credit of block.faucetCredits) for (const key of this.faucetKeys(credit)) keys.add(key);
    return keys;
  }

  /** Drop a block's entries from the address index: the newest (abandoned tip) or the oldest (pruned). */
  private unindexBlock(block: Block, end: 'newest' | 'oldest'): void {
    for (const key of this.blockKeys(block)) {
      const list = this.addressIndex.get(key);
      if (!list) continue;
      if (end === 'newest') while (list.length > 0 && list[list.length - 1]?.slot === block.slot) list.pop();
      else while (list.length > 0 && (list[0] as AddressSignature).slot <= block.slot) list.shift();
      if (list.length === 0) this.addressIndex.delete(key);
    }
  }

  /** The tip block dies: undo its writes, forget its signatures and blockhash, fall back to its parent. */
  private abandonTip(): void {
    const block = this.tip;
    const doom = block.doom;
    const parent = block.parent;
    if (!doom || !parent) return;
    this.bank.restore(doom.snapshot);
    this.forgetUndo([block]);
    this.unindexBlock(block, 'newest');
    const forgotten = block.signatures.filter((s) => !block.faucetCredits.some((c) => c.signature === s));
    for (const signature of block.signatures) this.statuses.delete(signature);
    this.landedTransactionCount -= block.signatures.length;
    this.blockhashes.delete(block.blockhash);
    this.faucetCredits.unshift(...block.faucetCredits);
    block.status = 'dead';
    block.doom = undefined;
    this.tip = parent;
    removeBlock(this.unconfirmed, block);
    removeBlock(this.unfinalized, block);
    // Re-broadcast an uncled block's bundle transactions one per slot, as ordinary transactions (no atomicity).
    doom.rebroadcast.forEach((parsed, i) => this.rebroadcasts.push({ parsed, slot: this.clockSlot + i }));
    this.faults.count(
      doom.reason === 'dead' ? 'deadSlots' : doom.reason === 'uncled' ? 'uncledBlocks' : 'orphanedBlocks',
    );
    // Only a replay failure is announced (Yellowstone's SLOT_DEAD); a block left on an abandoned fork, uncled or
    // not, gets no message: its slot just never confirms.
    if (doom.reason === 'dead')
      this.emit('slot', {
        slot: block.slot,
        parent: parent.slot,
        status: 'dead',
        deadError: 'slot marked dead',
      });
    this.emit('rollback', {
      slot: block.slot,
      signatures: forgotten,
      reason: doom.reason,
      ...(doom.reason === 'uncled' ? { uncledBundleIds: doom.uncledBundleIds } : {}),
    });
  }

  private progressCommitment(slot: number): void {
    const { confirmCap, rootCap } = this.migrationCaps();
    while (
      this.unconfirmed.length > 0 &&
      (this.unconfirmed[0] as Block).slot <= slot - this.confirmationSlots &&
      (this.unconfirmed[0] as Block).slot <= confirmCap
    ) {
      const block = this.unconfirmed.shift() as Block;
      block.status = 'confirmed';
      this.confirmedTip = block;
      this.emitSlot(block, 'confirmed');
    }
    while (
      this.unfinalized.length > 0 &&
      (this.unfinalized[0] as Block).slot <= slot - this.finalizationSlots &&
      (this.unfinalized[0] as Block).slot <= rootCap
    ) {
      const block = this.unfinalized.shift() as Block;
      block.status = 'finalized';
      this.finalizedTip = block;
      this.emitSlot(block, 'finalized');
    }
  }

  // ---- consensus: Alpenglow certificates and the migration ----

  /** Alpenglow: the finalization certificate of the newest notarized block arrives `finalizationDelayMs` from now. */
  private scheduleCertificate(): void {
    if (!this.timer) return; // manual clock: delivered when the next slot is produced
    const timer = setTimeout(() => {
      this.certificateTimers.delete(timer);
      try {
        this.deliverCertificates();
      } catch (error) {
        process.emitWarning(`simnet: finalization certificate failed: ${(error as Error).stack ?? error}`);
      }
    }, this.finalizationDelayMs);
    timer.unref();
    this.certificateTimers.add(timer);
  }

  /**
   * Every block waiting for its certificate is finalized: confirmed and finalized are set together (agave PR 10063:
   * "Finalized just sets all these values"), so the stream shows `confirmed` then `finalized` for the slot at once. A
   * block doomed to die never gets one (it is abandoned when the next slot is produced).
   */
  private deliverCertificates(): void {
    while (this.awaitingCertificate.length > 0) {
      const block = this.awaitingCertificate.shift() as Block;
      if (block.doom || block.status !== 'processed') continue;
      block.status = 'finalized';
      this.confirmedTip = block;
      this.finalizedTip = block;
      this.emitSlot(block, 'confirmed');
      this.emitSlot(block, 'finalized');
    }
  }

  /** Migration: how far TowerBFT may confirm and root while the window is open (no cap otherwise). */
  private migrationCaps(): { confirmCap: number; rootCap: number } {
    const m = this.migration;
    if (!m || this.alpenglowStarted || this.clockSlot <= m.boundarySlot - this.confirmationSlots)
      return { confirmCap: Number.POSITIVE_INFINITY, rootCap: Number.POSITIVE_INFINITY };
    // Nothing past the Alpenglow genesis is rooted by TowerBFT (assumed: the SIMD deletes every block after it), and
    // an abandoned boundary block is never confirmed.
    const genesisCap = m.boundaryForkAbandoned
      ? m.boundarySlot - 1
      : (this.transitionBlock?.slot ?? m.boundarySlot);
    return {
      confirmCap: m.boundaryForkAbandoned ? m.boundarySlot - 1 : Number.POSITIVE_INFINITY,
      rootCap: genesisCap,
    };
  }

  private noteMigrationBlock(block: Block, boundarySnapshot: AccountSnapshot | null): void {
    const m = this.migration as ScheduledMigration;
    if (boundarySnapshot) this.abandonedBoundary = { block, snapshot: boundarySnapshot };
    if (
      !this.transitionBlock &&
      !this.alpenglowStarted &&
      block.slot >= m.boundarySlot + m.transitionAfterSlots
    )
      this.transitionBlock = block;
  }

  /**
   * Migration, before slot `slot` is produced: once the certified block (`certificateAfterSlots` after the transition
   * block) exists, every block after the Alpenglow genesis is deleted (statuses and blockhashes forgotten, writes of an
   * abandoned boundary block undone; silent on the stream, as a block left on an abandoned fork), the genesis is
   * finalized, and Alpenglow runs from this slot on.
   */
  private migrate(): void {
    const m = this.migration as ScheduledMigration;
    const transition = this.transitionBlock;
    if (this.alpenglowStarted || !transition || this.tip.slot < transition.slot + m.certificateAfterSlots)
      return;
    const boundary = this.abandonedBoundary;
    const genesis =
      boundary && boundary.block.status !== 'dead' ? (boundary.block.parent as Block) : transition;
    const deleted: Block[] = [];
    for (let b: Block | null = this.tip; b && b.slot > genesis.slot; b = b.parent) deleted.push(b);
    if (boundary && boundary.block.status !== 'dead') this.bank.restore(boundary.snapshot);
    this.forgetUndo(deleted);
    for (const block of deleted) {
      const signatures = block.signatures.filter((s) => !block.faucetCredits.some((c) => c.signature === s));
      this.unindexBlock(block, 'newest');
      for (const signature of block.signatures) this.statuses.delete(signature);
      this.landedTransactionCount -= block.signatures.length;
      this.blockhashes.delete(block.blockhash);
      this.faucetCredits.unshift(...block.faucetCredits);
      block.status = 'dead';
      removeBlock(this.unconfirmed, block);
      removeBlock(this.unfinalized, block);
      this.emit('rollback', { slot: block.slot, signatures, reason: 'migration' });
    }
    this.abandonedBoundary = null;
    this.tip = genesis;
    // The genesis is final under Alpenglow; blocks below it not yet rooted are rooted with it.
    this.unconfirmed.length = 0;
    while (this.unfinalized.length > 0 && (this.unfinalized[0] as Block).slot <= genesis.slot) {
      const block = this.unfinalized.shift() as Block;
      block.status = 'finalized';
    }
    this.unfinalized.length = 0;
    if (genesis.status !== 'finalized') {
      genesis.status = 'finalized';
      if (this.confirmedTip.slot !== genesis.slot) this.emitSlot(genesis, 'confirmed');
      this.emitSlot(genesis, 'finalized');
    }
    this.confirmedTip = genesis;
    this.finalizedTip = genesis;
    this.alpenglowStarted = true;
    this.alpenglowGenesisSlot = genesis.slot;
  }

  private emitSlot(block: Block, status: Commitment): void {
    const event: SlotEvent = {
      slot: block.slot,
      parent: block.parent?.slot ?? null,
      status,
      blockHeight: block.height,
      blockhash: block.blockhash,
      transactionCount: block.signatures.length,
      ...(this.consensus !== 'towerbft' && block.bankId !== undefined ? { bankId: block.bankId } : {}),
    };
    this.emit('slot', event);
  }

  private prune(slot: number): void {
    for (const [blockSlot] of this.blocks) {
      if (blockSlot >= slot - BLOCK_HISTORY_SLOTS) break;
      const block = this.blocks.get(blockSlot) as Block;
      this.unindexBlock(block, 'oldest');
      block.parent = null; // let the chain of parents be collected
      this.blocks.delete(blockSlot);
    }
    for (const [signature, entry] of this.statuses) {
      if (entry.slot >= slot - STATUS_HISTORY_SLOTS) break;
      this.statuses.delete(signature);
    }
    for (const [hash, info] of this.blockhashes) {
      if (info.lastValidBlockHeight >= this.tip.height - BLOCKHASH_VALID_BLOCKS) break;
      this.blockhashes.delete(hash);
    }
  }
}

/** The newest block at or below `maxSlot` on `from`'s fork (or the oldest one kept, when history runs out). */
function walkBack(from: Block, maxSlot: number): Block {
  let block = from;
  while (block.slot > maxSlot && block.parent) block = block.parent;
  return block;
}

/** An account as `getAccount` shows it: null for one with no lamports and no data (LiteSVM keeps those). */
function accountStateOf(account: AccountData): AccountState | null {
  if (account.lamports === 0 && account.data.length === 0) return null;
  return {
    lamports: account.lamports,
    owner: bs58.encode(account.owner),
    data: account.data,
    executable: account.executable,
    rentEpoch: account.rentEpoch,
  };
}

function blockhashOf(block: Block): BlockhashInfo {
  return {
    blockhash: block.blockhash,
    slot: block.slot,
    lastValidBlockHeight: block.height + BLOCKHASH_VALID_BLOCKS,
  };
}

function transactionRecord(
  slot: number,
  index: number,
  parsed: ParsedTransaction,
  err: TransactionErrorJson | null,
  execution: Execution,
): TransactionRecord {
  const message = decodeMessage(parsed);
  const { fee, computeUnitPrice } = feeDetails(message);
  return {
    slot,
    index,
    signatures: [parsed.signature, ...parsed.signatures.slice(1).map((signature) => bs58.encode(signature))],
    wire: parsed.wire,
    message,
    err,
    fee,
    preBalances: execution.preBalances,
    postBalances: execution.postBalances,
    loadedAddresses: execution.loadedAddresses,
    logMessages: execution.logs,
    computeUnitsConsumed: execution.unitsConsumed,
    computeUnitPrice,
  };
}

/** Static keys, then lookup-table addresses: what the transaction loaded. */
function keysOf(record: TransactionRecord): string[] {
  return [
    ...record.message.accountKeys,
    ...record.loadedAddresses.writable,
    ...record.loadedAddresses.readonly,
  ];
}

/** The message's writable keys (header rules for static keys; every writable lookup address). */
function writableKeysOf(record: TransactionRecord): string[] {
  const { header, accountKeys } = record.message;
  const writable = accountKeys.filter((_, i) =>
    i < header.numRequiredSignatures
      ? i < header.numRequiredSignatures - header.numReadonlySignedAccounts
      : i < accountKeys.length - header.numReadonlyUnsignedAccounts,
  );
  return [...writable, ...record.loadedAddresses.writable];
}

/** Agave's per-slot prioritization-fee entry: the block's lowest compute-unit price, and each writable account's. */
function prioritizationFeesOf(records: readonly TransactionRecord[]): Block['prioritizationFees'] {
  let min: number | null = null;
  const writable = new Map<string, number>();
  for (const record of records) {
    const price = record.computeUnitPrice;
    min = min === null ? price : Math.min(min, price);
    for (const key of writableKeysOf(record)) {
      const current = writable.get(key);
      writable.set(key, current === undefined ? price : Math.min(current, price));
    }
  }
  return { min, writable };
}

/** The executed transactions' entry with the background's: the lowest price wins, in the block and per account. */
function mergePrioritizationFees(
  own: Block['prioritizationFees'],
  background: PrioritizationFeeEntry | null,
): Block['prioritizationFees'] {
  if (!background) return own;
  const lowest = (a: number | null | undefined, b: number | null | undefined) =>
    a === null || a === undefined ? (b ?? null) : b === null || b === undefined ? a : Math.min(a, b);
  const writable = new Map(own.writable);
  for (const [key, price] of background.writable)
    writable.set(key, lowest(writable.get(key), price) ?? price);
  return { min: lowest(own.min, background.min), writable };
}

function removeBlock(list: Block[], block: Block): void {
  const index = list.indexOf(block);
  if (index >= 0) list.splice(index, 1);
}

function transactionEvent(
  slot: number,
  index: number,
  parsed: ParsedTransaction,
  err: TransactionErrorJson | null,
): TransactionEvent {
  return {
    slot,
    signature: parsed.signature,
    signatureBytes: parsed.signatureBytes,
    index,
    isVote: false,
    err,
    accountKeys: parsed.accountKeys,
    feePayer: parsed.accountKeys[0] ?? '',
  };
}
