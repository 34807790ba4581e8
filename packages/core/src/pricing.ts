import type { TipFloor } from './oracle';
import type { TipPercentile } from './vocabulary';

/**
 * Tip pricing per requested compute unit (DESIGN §11).
 *
 * Jito's auction ranks bundles by tip per requested CU within groups of bundles whose write locks intersect
 * (jito-labs/jito-docs `docs/source/lowlatencytxnsend.md`, "What is the auction?"). A bundle's requested CU is the
 * sum over its transactions, relay's tip transaction included. So relay prices a tip as
 * `tip per CU × the bundle's requested CU`, the tip per CU chosen by the contention on the bundle's write set.
 */

/**
 * Agave's compute-budget defaults (anza-xyz/agave `compute-budget-instruction/src/compute_budget_instruction_details.rs`,
 * `calculate_default_compute_unit_limit`; constants in `program-runtime/src/execution_budget.rs`, formerly
 * `compute_budget_limits.rs`): a transaction with no SetComputeUnitLimit requests DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT
 * per non-builtin instruction and, since SIMD-0170 ("Reserve minimal CUs for builtins"),
 * MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT per builtin instruction; every request is capped at MAX_COMPUTE_UNIT_LIMIT.
 */
export const DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT = 200_000;
/** SIMD-0170: what a builtin instruction reserves when the transaction sets no limit. */
export const MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT = 3_000;
/** Agave MAX_COMPUTE_UNIT_LIMIT: the most one transaction may request. */
export const MAX_COMPUTE_UNIT_LIMIT = 1_400_000;

export const COMPUTE_BUDGET_PROGRAM_ID = 'ComputeBudget111111111111111111111111111111';
/** ComputeBudgetInstruction::SetComputeUnitLimit(u32): discriminant 2, then the limit, u32 little-endian. */
const SET_COMPUTE_UNIT_LIMIT = 2;

/**
 * Builtin programs and precompiles that reserve 3,000 CU per instruction (Agave's non-migratable builtins). Programs
 * migrated or migrating to core BPF (Stake, Config, Address Lookup Table) count as non-builtins: on mainnet their
 * migration features decide, and 200,000 is the larger (safer for rank) reading. An approximation, stated.
 */
export const BUILTIN_PROGRAM_IDS: ReadonlySet<string> = new Set([
  '11111111111111111111111111111111',
  COMPUTE_BUDGET_PROGRAM_ID,
  'Vote111111111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111',
  'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111',
]);

/** One top-level instruction as pricing reads it. */
export interface PricedInstruction {
  /** The program's base58 id. */
  program: string;
  data: Uint8Array;
}

/** The SetComputeUnitLimit value of an instruction, or null when it is not one. */
export function computeUnitLimitOf(instruction: PricedInstruction): number | null {
  const { program, data } = instruction;
  if (program !== COMPUTE_BUDGET_PROGRAM_ID || data.length < 5 || data[0] !== SET_COMPUTE_UNIT_LIMIT)
    return null;
  return (
    ((data[1] as number) | ((data[2] as number) << 8) | ((data[3] as number) << 16)) +
    (data[4] as number) * 2 ** 24
  );
}

/**
 * A transaction's requested compute units: its SetComputeUnitLimit (the last one, as Agave keeps; capped at 1.4M) if
 * it has one, else 3,000 per builtin instruction plus 200,000 per other instruction, capped at 1.4M.
 *
 * @example
 * requestedComputeUnits([{ program: '11111111111111111111111111111111', data: new Uint8Array(12) }]); // 3000
 */
export function requestedComputeUnits(instructions: readonly PricedInstruction[]): number {
  let limit: number | null = null;
  let defaults = 0;
  for (const instruction of instructions) {
    limit = computeUnitLimitOf(instruction) ?? limit;
    defaults += BUILTIN_PROGRAM_IDS.has(instruction.program)
      ? MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT
      : DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT;
  }
  return Math.min(MAX_COMPUTE_UNIT_LIMIT, limit ?? defaults);
}

/** How contended a bundle's write set is. `unknown`: no reading (RPC could not say); priced as contended. */
export const CONTENTION_CLASSES = ['contended', 'uncontended', 'unknown'] as const;
export type ContentionClass = (typeof CONTENTION_CLASSES)[number];

/** What the contention of a write set was judged on. */
export interface ContentionSignal {
  class: ContentionClass;
  /**
   * The write set's recent price of write access, micro-lamports per CU (the targeted percentile over the slots
   * read), or null without a reading.
   */
  write_price_micro_lamports: number | null;
  /** Slots the reading covers (0: none). */
  slots: number;
}

/** getRecentPrioritizationFees answers micro-lamports per CU (SetComputeUnitPrice's unit). */
export const MICRO_LAMPORTS_PER_LAMPORT = 1_000_000;

/**
 * Contention from `getRecentPrioritizationFees` on the bundle's write set: one reading per recent slot, the higher of
 * the block's lowest price and each asked account's lowest price among the transactions that write-locked it (Agave
 * `runtime/src/prioritization_fee_cache.rs`). A write set nobody paid to write reads the block's lowest, 0 on mainnet
 * (blocks always carry transactions that set no price: an assumption). The set is contended when at least half of the
 * slots read priced it (their median is above 0). `percentile` picks the price among the readings (p25…p99; `ema`
 * reads as p50).
 */
export function classifyContention(
  readings: readonly number[] | null,
  percentile: TipPercentile,
): ContentionSignal {
  if (!readings || readings.length === 0)
    return { class: 'unknown', write_price_micro_lamports: null, slots: 0 };
  const sorted = [...readings].sort((a, b) => a - b);
  const median = nearestRank(sorted, 50);
  return {
    class: median > 0 ? 'contended' : 'uncontended',
    write_price_micro_lamports: nearestRank(sorted, percentileRank(percentile)),
    slots: sorted.length,
  };
}

function percentileRank(percentile: TipPercentile): number {
  return percentile === 'ema' ? 50 : Number(percentile.slice(1));
}

function nearestRank(sorted: readonly number[], rank: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((rank / 100) * sorted.length) - 1));
  return sorted[index] ?? 0;
}

/**
 * The compute a tip-floor percentile is read against. Jito's `tip_floor` percentiles are lamports per landed bundle
 * over bundles of every size and carry no CU (jito.md, "Ranking unit"). relay assumes the typical landed bundle
 * requests what one transaction with one non-builtin instruction and no limit does: 200,000 CU. An assumption: a
 * lower reference would bid more per CU, a higher one less.
 */
export const FLOOR_REFERENCE_CU = DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT;

/** The bottom of the percentile ladder: what an uncontended bundle bids per reference CU. */
const UNCONTENDED_PERCENTILE: TipPercentile = 'p25';

/** A bid per requested CU and what priced it. */
export interface CuBid {
  /** Lamports per requested CU the bundle needs to hold its rank. */
  per_cu: number;
  /** Human-readable: the signal and the numbers that priced it. */
  signal: string;
}

/**
 * The tip per requested CU a bundle bids:
 * - uncontended (its write set read 0 in most recent slots): the tip floor's p25 per {@link FLOOR_REFERENCE_CU}. It
 *   competes only for the block's space, so it bids near `min-tip` (which a light bundle's tip is then clamped up to);
 * - contended or unknown: the higher of the targeted floor percentile per reference CU and the write set's recent price
 *   of write access (micro-lamports per CU / 10^6: one price of write access per account and slot, in either currency,
 *   an assumption; Jito's docs split sendTransaction spend 70/30 between priority fee and tip, the same order).
 */
export function bidPerCu(floor: TipFloor, percentile: TipPercentile, contention: ContentionSignal): CuBid {
  if (contention.class === 'uncontended') {
    const reference = floor[UNCONTENDED_PERCENTILE];
    return {
      per_cu: reference / FLOOR_REFERENCE_CU,
      signal: `uncontended write set (prioritization fees 0 in most of ${contention.slots} slots): floor ${UNCONTENDED_PERCENTILE} ${reference} per ${FLOOR_REFERENCE_CU} CU`,
    };
  }
  const floorPerCu = floor[percentile] / FLOOR_REFERENCE_CU;
  const writePerCu = (contention.write_price_micro_lamports ?? 0) / MICRO_LAMPORTS_PER_LAMPORT;
  const head =
    contention.class === 'unknown'
      ? 'contention unknown (no prioritization-fee reading), priced as contended'
      : `contended write set (prioritization fees ${percentile} ${contention.write_price_micro_lamports} µlamports/CU over ${contention.slots} slots)`;
  if (writePerCu > floorPerCu)
    return { per_cu: writePerCu, signal: `${head}: write-set price ${round(writePerCu)} lamports/CU` };
  return {
    per_cu: floorPerCu,
    signal: `${head}: floor ${percentile} ${floor[percentile]} per ${FLOOR_REFERENCE_CU} CU`,
  };
}

/** Lamports for `perCu` over `computeUnits`, rounded up (a bid never falls below its rank by rounding). */
export function tipForCu(perCu: number, computeUnits: number): number {
  return Math.ceil(perCu * Math.max(1, computeUnits) - 1e-9);
}

/** A tip's lamports per requested CU. */
export function tipPerCu(tipLamports: number, computeUnits: number): number {
  return tipLamports / Math.max(1, computeUnits);
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}
