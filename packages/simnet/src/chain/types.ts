import type { DecodedMessage } from './message';

/**
 * The contract between the simulated chain (src/chain: clock, leaders, bank, blocks, commitment) and the
 * servers that sit on it (src/rpc, src/geyser, src/engine). The chain implements `Cluster`; the servers only
 * use this interface. Extend it when a server needs more; do not break what is here.
 */

/** Solana's commitment levels, lowest first. */
export type Commitment = 'processed' | 'confirmed' | 'finalized';

/**
 * A transaction error as Solana's JSON-RPC renders it: a bare variant name ("BlockhashNotFound",
 * "AlreadyProcessed", "AccountNotFound", "InsufficientFundsForFee", "SignatureFailure", ...) or an object for
 * variants with data, e.g. `{ InstructionError: [0, { Custom: 1 }] }` or `{ InstructionError: [1, "InvalidArgument"] }`.
 */
export type TransactionErrorJson = string | Record<string, unknown>;

export interface LeaderInfo {
  /** Validator identity, base58. */
  identity: string;
  /** Whether this validator runs the bundle engine (Jito-Solana): bundles land only in its slots. */
  bundleEngine: boolean;
}

export interface EpochInfo {
  epoch: number;
  /** First slot of the epoch. */
  firstSlot: number;
  slotsInEpoch: number;
  /** The current slot's index within the epoch. */
  slotIndex: number;
  absoluteSlot: number;
  blockHeight: number;
  transactionCount: number;
}

export interface AccountState {
  lamports: number;
  /** Owner program, base58. */
  owner: string;
  data: Uint8Array;
  executable: boolean;
  rentEpoch: number;
}

export interface BlockhashInfo {
  blockhash: string;
  /** Last block height at which a transaction using this blockhash may be processed (height + 150 at issue). */
  lastValidBlockHeight: number;
  /** Slot of the block that produced it. */
  slot: number;
}

export interface SignatureStatus {
  slot: number;
  /** null once the slot is finalized (rooted), else the number of confirmed blocks built on top. */
  confirmations: number | null;
  err: TransactionErrorJson | null;
  confirmationStatus: Commitment;
}

/** A slot moving through its life. `dead` means the slot's block was abandoned: its transactions rolled back. */
export type SlotStatus = 'processed' | 'confirmed' | 'finalized' | 'dead';

export interface SlotEvent {
  slot: number;
  parent: number | null;
  status: SlotStatus;
  /** Set when status is 'dead'. */
  deadError?: string;
  /** The slot's block: its height and blockhash (absent for a dead slot's event). Added for block-meta streams. */
  blockHeight?: number;
  blockhash?: string;
  /** Number of transactions recorded in the block. */
  transactionCount?: number;
  /**
   * The bank's id (Yellowstone `SubscribeUpdateSlot.bank_id`, optional; rpcpool/yellowstone-grpc branch 4.3-transition, commit 7588b90b, geyser.proto).
   * Set only outside the default TowerBFT mode, so that mode's stream is byte-for-byte what it was.
   */
  bankId?: number;
}

/** A transaction executed in a block (success or failure, both are recorded on chain and charge the fee). */
export interface TransactionEvent {
  slot: number;
  /** First signature, base58. */
  signature: string;
  /** First signature, raw 64 bytes (the geyser stream sends bytes). */
  signatureBytes: Uint8Array;
  /** Position of the transaction in its block. */
  index: number;
  isVote: boolean;
  err: TransactionErrorJson | null;
  /** Every static account key of the message, base58, in message order (for account_include filters). */
  accountKeys: string[];
  /** The fee payer (first account key). */
  feePayer: string;
}

/** A bundle the block engine asks the leader to include: wire bytes of each transaction, in order. */
export interface BundleCandidate {
  /** The Jito bundle id (lowercase hex SHA-256 of first signatures joined by ","). */
  bundleId: string;
  transactions: Uint8Array[];
}

export type BundleExecution =
  | { bundleId: string; landed: true; slot: number; signatures: string[] }
  | {
      bundleId: string;
      landed: false;
      slot: number;
      /** Index of the transaction that failed, and why; nothing of the bundle was committed. */
      failedIndex: number;
      err: TransactionErrorJson;
      signatures: string[];
    };

export interface BlockContext {
  slot: number;
  leader: LeaderInfo;
  blockHeight: number;
}

/**
 * The block engine's hook into block production. The chain calls `bundlesForSlot` while producing each slot's
 * block (only when the leader runs the bundle engine), executes each returned bundle atomically in order, then
 * reports every outcome through `onBundleResults` in the same call frame.
 */
export interface BundleSource {
  bundlesForSlot(ctx: BlockContext): BundleCandidate[];
  onBundleResults(ctx: BlockContext, results: BundleExecution[]): void;
  /**
   * Compute-unit prices (micro-lamports) the slot's modelled background traffic paid, which the chain does not
   * execute: the lowest in the block, and per written account its lowest. Merged into the block's
   * prioritization-fee entry (getRecentPrioritizationFees) with the executed transactions' prices. Every slot,
   * whoever leads it; null or absent: nothing to add.
   */
  backgroundPrioritizationFees?(slot: number): PrioritizationFeeEntry | null;
}

/** Agave's per-slot prioritization-fee entry: the block's lowest compute-unit price, each written account's lowest. */
export interface PrioritizationFeeEntry {
  min: number | null;
  writable: ReadonlyMap<string, number>;
}

/** Result of handing one transaction to the chain outside a bundle (RPC sendTransaction). */
export type SubmitResult =
  { ok: true; signature: string } | { ok: false; err: TransactionErrorJson; signature: string };

export interface ClusterEvents {
  /** Every slot status change, in the order they happen. */
  slot: [SlotEvent];
  /** Every transaction included in a processed block. */
  transaction: [TransactionEvent];
  /** An abandoned block's transactions were rolled back: their statuses are gone. Internal (no stream carries it):
   * tests and checkers see the chain's truth through it. */
  rollback: [
    {
      slot: number;
      signatures: string[];
      /**
       * Replay failure (announced as a dead slot), uncled (re-broadcast), orphaned (silent), or `migration`: a block
       * the TowerBFT -> Alpenglow migration deleted (SIMD-0371; silent, its slot just never finalizes).
       */
      reason: 'dead' | 'uncled' | 'orphaned' | 'migration';
      /** When the block was uncled: ids of the bundles it carried; their transactions are re-broadcast one by one. */
      uncledBundleIds?: string[];
    },
  ];
}

/** Accounts a v0 transaction loaded through its address lookup tables. */
export interface LoadedAddresses {
  writable: string[];
  readonly: string[];
}

/**
 * A transaction the chain executed in a block, with what Agave's transaction-status meta carries (getTransaction,
 * getBlock `full`). Kept as long as its block (`firstAvailableBlock`).
 */
export interface TransactionRecord {
  slot: number;
  /** Position in its block. */
  index: number;
  /** Every signature, base58; the first is the transaction's id. */
  signatures: string[];
  /** The wire bytes as executed. */
  wire: Uint8Array;
  message: DecodedMessage;
  err: TransactionErrorJson | null;
  /** Lamports charged: 5,000 per signature plus the prioritization fee. */
  fee: number;
  /** Balances before and after, over the static keys then the loaded writable and readonly addresses. */
  preBalances: number[];
  postBalances: number[];
  /** Addresses resolved through the message's lookup tables (v0; empty for legacy). */
  loadedAddresses: LoadedAddresses;
  logMessages: string[];
  computeUnitsConsumed: number;
  /** SetComputeUnitPrice in micro-lamports per CU (0 when absent). */
  computeUnitPrice: number;
}

/** One transaction in an address's history (getSignaturesForAddress). */
export interface AddressSignature {
  signature: string;
  slot: number;
  /** Position in its block. */
  index: number;
  err: TransactionErrorJson | null;
  /** SPL Memo instructions as Agave formats them (`[len] text`, joined by "; "); null when none. */
  memo: string | null;
}

/** A one-line summary of a produced block. */
export interface BlockSummary {
  slot: number;
  parentSlot: number | null;
  parentBlockhash: string | null;
  blockHeight: number;
  blockhash: string;
  leader: LeaderInfo;
  /** In block order: bundles first (each whole and contiguous), then queued and re-broadcast transactions. */
  signatures: readonly string[];
  status: Commitment | 'dead';
  /** The executed transactions with their metadata, in block order (airdrops are not transactions and are absent). */
  transactions?: readonly TransactionRecord[];
  /**
   * Prioritization fees seen in the block (Agave's prioritization-fee cache): the lowest SetComputeUnitPrice among its
   * transactions (null when it has none) and, per write-locked account, the lowest among those locking it.
   */
  prioritizationFees?: { min: number | null; writable: ReadonlyMap<string, number> };
}

/**
 * What one RPC node sees of the chain: reads evaluated at the bank of the asked commitment. A node some slots behind
 * (`SimCluster.behind`) answers from older banks: lower slots, blockhashes it has not seen yet invalid, recent
 * signatures unknown, balances, accounts and simulations as they were at its bank's slot.
 */
export interface ChainRead {
  slotAt(commitment: Commitment): number;
  blockHeightAt(commitment: Commitment): number;
  epochInfo(commitment?: Commitment): EpochInfo;
  /** The blockhash of the bank at `commitment` (default confirmed). */
  latestBlockhash(commitment?: Commitment): BlockhashInfo;
  /**
   * Usable by a transaction processed on the bank at `commitment` (default processed): known to that bank (a
   * blockhash newer than it is not, so a fresh one is invalid at `finalized`) and not past its last valid height.
   */
  isBlockhashValid(blockhash: string, commitment?: Commitment): boolean;
  /**
   * A signature's status as this node sees it; null when unknown. `statusCacheOnly` (JSON-RPC without
   * `searchTransactionHistory`): only the status cache answers, which holds the last ~300 rooted slots.
   */
  signatureStatus(signature: string, options?: { statusCacheOnly?: boolean }): SignatureStatus | null;
  /** A produced block by slot (recent history only, dead ones included); null for skipped, unknown or pruned slots. */
  block(slot: number): BlockSummary | null;
  /** The oldest slot whose block is still kept (getBlock answers "cleaned up" below it). */
  firstAvailableBlock(): number;
  /**
   * A transaction executed in a kept block of the current fork that this node has seen (any commitment: the caller
   * compares `slot` with its bank); null when unknown, abandoned, pruned or an airdrop.
   */
  transaction(signature: string): TransactionRecord | null;
  /**
   * Every kept transaction (and airdrop) on the current fork that this node has seen and that loaded `address`
   * (static keys and lookup-table addresses), oldest first: block order within a slot.
   */
  signaturesForAddress(address: string): readonly AddressSignature[];
  /**
   * Lamports of `address` in the bank at `commitment`. The cluster itself answers from its one current bank at every
   * commitment; a node behind (`SimCluster.behind`) answers from the state as it was at its bank's slot.
   */
  getBalance(address: string, commitment?: Commitment): number;
  /**
   * Full account state (getAccountInfo) in the bank at `commitment` (as `getBalance`); null when the account does not
   * exist there. Optional so fakes may omit it.
   */
  getAccount?(address: string, commitment?: Commitment): AccountState | null;
  /** Execute without committing (simulateTransaction) on the bank at `commitment` (as `getBalance`). */
  simulateTransaction(
    wire: Uint8Array,
    options?: { sigVerify?: boolean; replaceRecentBlockhash?: boolean },
    commitment?: Commitment,
  ): { err: TransactionErrorJson | null; logs: string[]; unitsConsumed: number };
}

export interface Cluster extends ChainRead {
  /**
   * The consensus facts Agave 4.3's RPC serves (`getAlpenglowMigrationSlot`, `getAgGenesisCert`); undefined in the
   * default TowerBFT mode (a node older than 4.3: -32601).
   */
  consensusInfo?():
    { migrationSlot: number | null; genesisSlot: number | null; genesisBlockId: number[] } | undefined;
  /** The same reads as a node `lagSlots` behind the tip would answer them (lagSlots 0: this cluster). */
  behind(lagSlots: number): ChainRead;
  /** Highest processed slot. */
  readonly slot: number;
  readonly blockHeight: number;
  readonly slotsPerEpoch: number;

  /** Leader of a slot (any epoch whose schedule is known: previous, current, next). null when unknown. */
  leaderAt(slot: number): LeaderInfo | null;
  /** Leader schedule of the epoch containing `slot`: identity -> slot indexes relative to the epoch's first slot. */
  leaderSchedule(slot: number): Record<string, number[]> | null;
  /** Every validator: identity, stake in lamports, bundle-engine flag. */
  validators(): Array<LeaderInfo & { stake: number }>;

  blockhashInfo(blockhash: string): BlockhashInfo | null;

  /** Queue a transaction (wire bytes) for the next block produced, any leader. Validation errors come back at once
   * (bad signature, unknown / expired blockhash, already processed); execution errors are recorded in the block. */
  submitTransaction(wire: Uint8Array): SubmitResult;
  /** Credit lamports from the faucet; returns the airdrop transaction's signature. */
  airdrop(address: string, lamports: number): string;
  /**
   * The slot in which `address` last came into existence (its balance went from 0 to more), as recorded while the
   * `engineBankLagSlots` fault is on (null when not recorded). Optional so fakes may omit it.
   */
  createdAtSlot?(address: string): number | null;

  /** The block engine registers here; at most one source. */
  setBundleSource(source: BundleSource | null): void;

  on<K extends keyof ClusterEvents>(event: K, listener: (...args: ClusterEvents[K]) => void): this;
  off<K extends keyof ClusterEvents>(event: K, listener: (...args: ClusterEvents[K]) => void): this;

  /** Manual clock: produce `n` slots now (tests). Works whether or not the automatic clock runs. */
  advance(n?: number): void;
  /** Start / stop the automatic slot clock. */
  start(): void;
  stop(): void;
}
