/**
 * The block engine's auction as pure functions: requested compute, grouping by lock overlap, ranking by tip per
 * requested CU, and the block's CU limits. No randomness and no clock here; `auction.ts` supplies the background
 * bids of each tick and `engine.ts` the real bundles.
 *
 * What Jito documents (jito-labs/jito-docs `docs/source/lowlatencytxnsend.md` @ b5ef793, "What is the auction?";
 * 50 ms since commit fdf4799, 2025-06-20): parallel auctions run at 50 ms ticks; bundles whose locks intersect on an
 * account as (w, w), (r, w) or (w, r) run in one auction, (r, r) or disjoint ones in separate auctions; within an
 * auction bundles are ordered by tip per requested CU; the engine forwards the highest-paying combination up to some
 * CU limit.
 *
 * Decisions where the (closed-source) engine is not documented (assumptions, stated as such):
 * - The eight tip accounts do not join auctions: every bundle must write-lock one, so counting them would put all
 *   bundles into at most eight auctions, against "parallel auctions". They still count against the per-account CU
 *   limit, as Agave's cost tracker charges every writable account.
 * - Exclusion within a lock group: the engine simulates a tick's bundles in rank order, each on the state the
 *   higher-ranked included ones leave. A bundle that write-locks a *state-contended* account (an AMM-pool-like
 *   account whose change moves the price: the `contended` set, by default the background flow's hot accounts) that a
 *   higher-ranked bundle included in the same tick already write-locks is excluded from that tick: its simulated
 *   outcome is stale (loss `outbid`, `account` = that account, `winner` = the bundle that took it). It competes
 *   again at the next tick, against the new state. Overlaps on any other account (a shared fee payer, a plain
 *   recipient, a tip account) do not exclude: sequential simulation of both succeeds, so both are taken while the
 *   CU limits allow. Bids carrying the same `opportunity` (searchers racing for one backrun/arb) also exclude each
 *   other within a tick, whatever they lock.
 * - Inside an auction, bundles are taken in rank order while they fit the CU limits ("combination ... up to some CU
 *   limit"): a lower-ranked bundle in a contended group loses when the higher ones used up the tick's share of a
 *   shared account's CU (or the block's).
 * - Arrival: every bid carries `arrivalMs`, when it reached the engine relative to the slot's start (at or before
 *   0: before the slot started). It enters the slot's auction at the tick that time falls in (tick 0 if it came
 *   earlier) and competes at every tick from there until it is included or the slot ends, whatever its kind. Equal
 *   tips per CU go to the earlier arrival, never by kind (then input order, for determinism).
 * - Block space is spread over the slot's ticks: a tick may use (what is left) / (ticks left) of the slot's bundle
 *   CU budget and of each account's write-CU limit, so early ticks do not starve later arrivals. The first bundle
 *   touching an account in a tick always fits that account's share if the slot still has room (a 1.4M-CU
 *   transaction is legal).
 */

/** Jito's auction tick (jito-docs fdf4799). */
export const AUCTION_TICK_MS = 50;
/**
 * Agave `cost-model/src/block_cost_limits.rs` (anza-xyz/agave @ 0476c47; the same constants in
 * jito-foundation/jito-solana's copy): MAX_BLOCK_UNITS_SIMD_0207 = 50M, MAX_BLOCK_UNITS_SIMD_0256 = 60M. SIMD-0256
 * (48M → 50M → 60M) is reported live in late-2025 coverage of SIMD-0370 ("currently 60 million"). The default of
 * `AuctionOptions.blockUnits`; SIMD-0286 proposes 100M ({@link SIMD_0286_BLOCK_UNITS}).
 */
export const MAX_BLOCK_UNITS = 60_000_000;
/** SIMD-0286's proposed block limit (not assumed active: pass it as `blockUnits` to model it). */
export const SIMD_0286_BLOCK_UNITS = 100_000_000;
/**
 * Same file: MAX_WRITABLE_ACCOUNT_UNITS = 12M per writable account per block, the default of
 * `AuctionOptions.accountUnits`. SIMD-0306 (status Review) would make it 40 % of the block limit:
 * {@link simd0306AccountUnits}.
 */
export const MAX_WRITABLE_ACCOUNT_UNITS = 12_000_000;
/** SIMD-0306's per-writable-account limit for a block limit: 40 % of it (24M at 60M, 40M at 100M). */
export function simd0306AccountUnits(blockUnits: number): number {
  return Math.round(blockUnits * 0.4);
}
/**
 * Agave compute budget (`compute-budget-instruction/src/compute_budget_instruction_details.rs`, constants in
 * `program-runtime/src/execution_budget.rs`; mirrored in fluentlabs-xyz/fluentbase `compute_budget_limits.rs`):
 * DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT, what each non-builtin instruction reserves when the transaction sets no
 * SetComputeUnitLimit.
 */
export const DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT = 200_000;
/** SIMD-0170 MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT: what a builtin instruction reserves without a limit. */
export const MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT = 3_000;
/** Agave MAX_COMPUTE_UNIT_LIMIT per transaction (same files). */
export const MAX_COMPUTE_UNIT_LIMIT = 1_400_000;

/** The block's CU limits an auction enforces (both configuration: see `AuctionOptions`). */
export interface BlockLimits {
  /** CU per block (default {@link MAX_BLOCK_UNITS}). */
  blockUnits: number;
  /** CU per writable account per block (default {@link MAX_WRITABLE_ACCOUNT_UNITS}). */
  accountUnits: number;
}

export const DEFAULT_BLOCK_LIMITS: Readonly<BlockLimits> = {
  blockUnits: MAX_BLOCK_UNITS,
  accountUnits: MAX_WRITABLE_ACCOUNT_UNITS,
};

export const COMPUTE_BUDGET_PROGRAM = 'ComputeBudget111111111111111111111111111111';

/**
 * Builtins that reserve 3,000 CU each (non-migratable builtins and precompiles, per Agave's
 * compute_budget_instruction_details). Programs migrated or migrating to core BPF (Stake, Config, Address Lookup
 * Table) are treated as non-builtins: an approximation of the mainnet feature set.
 */
export const BUILTIN_PROGRAMS: ReadonlySet<string> = new Set([
  '11111111111111111111111111111111',
  COMPUTE_BUDGET_PROGRAM,
  'Vote111111111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111',
  'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111',
]);

/**
 * A transaction's requested compute units: its SetComputeUnitLimit value if it has one (capped at 1.4M), else
 * 3,000 per builtin instruction plus 200,000 per other instruction, capped at 1.4M (verified in anza-xyz/agave
 * `compute-budget-instruction/src/compute_budget_instruction_details.rs`, `calculate_default_compute_unit_limit`:
 * non-migratable and not-yet-migrated builtins × MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT plus non-builtin
 * instructions × DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT, then at most MAX_COMPUTE_UNIT_LIMIT; SIMD-0170).
 */
export function requestedComputeUnits(instructionPrograms: readonly string[], limit: number | null): number {
  if (limit !== null) return Math.min(MAX_COMPUTE_UNIT_LIMIT, limit);
  let units = 0;
  for (const program of instructionPrograms) {
    units += BUILTIN_PROGRAMS.has(program)
      ? MAX_BUILTIN_ALLOCATION_COMPUTE_UNIT_LIMIT
      : DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT;
  }
  return Math.min(MAX_COMPUTE_UNIT_LIMIT, units);
}

/** Auction ticks in one slot: one per started 50 ms, at least one (a 400 ms slot has 8). */
export function ticksPerSlot(slotMs: number): number {
  return Math.max(1, Math.floor(slotMs / AUCTION_TICK_MS));
}

export type BidKind = 'real' | 'background';

/** One bundle as the auction sees it. */
export interface Bid {
  id: string;
  kind: BidKind;
  tipLamports: number;
  /** Sum of its transactions' requested compute units. */
  computeUnits: number;
  /** Accounts it write-locks (static keys; tip accounts included, they are filtered where it matters). */
  writeLocks: readonly string[];
  /** Accounts it only reads. */
  readLocks: readonly string[];
  /** Bids with the same opportunity exclude each other within a tick (searchers racing for one arb). */
  opportunity?: string;
  /**
   * When it reached the engine, ms after the slot's start (default 0; negative: before the slot started). It enters
   * the slot's auction at the tick this falls in and wins ties in tip per CU against later arrivals.
   */
  arrivalMs?: number;
  /** Competes at its arrival tick only, and is gone after it if it did not win (Jito's one-auction lifetime). */
  oneTick?: boolean;
}

/** The tick a bid enters a slot of `ticks` ticks: the 50 ms it arrived in, 0 if before the slot, at most the last. */
export function arrivalTick(bid: Pick<Bid, 'arrivalMs'>, ticks: number): number {
  const tick = Math.floor((bid.arrivalMs ?? 0) / AUCTION_TICK_MS);
  return Math.min(Math.max(0, ticks - 1), Math.max(0, tick));
}

/** Tip per requested CU: the rank within an auction. */
export function tipPerCu(bid: Pick<Bid, 'tipLamports' | 'computeUnits'>): number {
  return bid.tipLamports / Math.max(1, bid.computeUnits);
}

/**
 * Lamports a bid of `computeUnits` requested CU must tip to meet a competitor pinned at `lamportsPerCu`:
 * ceil(lamportsPerCu × computeUnits). The product is first rounded to 9 decimals, so a rank set as lamports over
 * some CU (5,000 / 201,400) asks exactly those lamports of that CU, not one more for a floating-point residue.
 */
export function pinnedTipFor(lamportsPerCu: number, computeUnits: number): number {
  return Math.ceil(Math.round(lamportsPerCu * computeUnits * 1e9) / 1e9);
}

/** Higher tip per CU first; ties go to the earlier arrival (`arrivalMs`), then keep the input order. */
export function rankBids<T extends Bid>(bids: readonly T[]): T[] {
  return bids
    .map((bid, index) => ({ bid, index, rank: tipPerCu(bid), arrival: bid.arrivalMs ?? 0 }))
    .sort((a, b) => b.rank - a.rank || a.arrival - b.arrival || a.index - b.index)
    .map((entry) => entry.bid);
}

/**
 * Auctions of one tick: bids whose locks intersect on an account as (w, w), (r, w) or (w, r), transitively
 * (union-find), form one group; `ignored` accounts (the tip accounts) join nothing. Groups come back in order of
 * their first bid, each ranked by tip per CU.
 */
export function groupBids<T extends Bid>(
  bids: readonly T[],
  ignored: ReadonlySet<string> = new Set(),
): T[][] {
  const parent = bids.map((_, index) => index);
  const find = (i: number): number => {
    while (parent[i] !== i) {
      const up = parent[parent[i] as number] as number;
      parent[i] = up;
      i = up;
    }
    return i;
  };
  const union = (a: number, b: number) => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
  };
  const writers = new Map<string, number[]>();
  const readers = new Map<string, number[]>();
  bids.forEach((bid, index) => {
    for (const key of bid.writeLocks) if (!ignored.has(key)) push(writers, key, index);
    for (const key of bid.readLocks) if (!ignored.has(key)) push(readers, key, index);
  });
  for (const [key, ws] of writers) {
    const first = ws[0] as number;
    for (const w of ws) union(first, w);
    for (const r of readers.get(key) ?? []) union(first, r);
  }
  const groups = new Map<number, T[]>();
  bids.forEach((bid, index) => push(groups, find(index), bid));
  return [...groups.values()].map((group) => rankBids(group));
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** A slot's CU budget as ticks spend it. */
export class SlotBudget {
  private blockLeft: number;
  private readonly accountUsed = new Map<string, number>();
  /** The last (lowest-ranked) bid included on each account so far in the slot. */
  readonly lastWriter = new Map<string, Bid>();
  private ticksLeft: number;

  constructor(
    /** CU the slot leaves for bundles. */
    readonly blockUnits: number,
    readonly ticks: number,
    readonly accountLimit = MAX_WRITABLE_ACCOUNT_UNITS,
    /** CU of accounts already written by non-bundle transactions of the slot. */
    accountPrefill: ReadonlyMap<string, number> = new Map(),
  ) {
    this.blockLeft = blockUnits;
    this.ticksLeft = Math.max(1, ticks);
    for (const [key, units] of accountPrefill) this.accountUsed.set(key, Math.min(accountLimit, units));
  }

  /** CU left in the slot. */
  get remaining(): number {
    return this.blockLeft;
  }

  accountUnitsUsed(account: string): number {
    return this.accountUsed.get(account) ?? 0;
  }

  /** Open the next tick: its shares of the block and of each account. */
  openTick(): TickBudget {
    const ticksLeft = Math.max(1, this.ticksLeft);
    this.ticksLeft = Math.max(1, this.ticksLeft - 1);
    const blockShare = this.blockLeft / ticksLeft;
    let blockUsed = 0;
    const tickAccountUsed = new Map<string, number>();
    return {
      fits: (bid) => {
        if (bid.computeUnits > this.blockLeft) return 'block';
        if (blockUsed > 0 && blockUsed + bid.computeUnits > blockShare) return 'block';
        for (const key of bid.writeLocks) {
          const used = this.accountUsed.get(key) ?? 0;
          if (used + bid.computeUnits > this.accountLimit) return key;
          const inTick = tickAccountUsed.get(key) ?? 0;
          if (inTick > 0 && inTick + bid.computeUnits > (this.accountLimit - used + inTick) / ticksLeft)
            return key;
        }
        return null;
      },
      take: (bid) => {
        blockUsed += bid.computeUnits;
        this.blockLeft -= bid.computeUnits;
        for (const key of new Set(bid.writeLocks)) {
          this.accountUsed.set(key, (this.accountUsed.get(key) ?? 0) + bid.computeUnits);
          this.lastWriter.set(key, bid);
          tickAccountUsed.set(key, (tickAccountUsed.get(key) ?? 0) + bid.computeUnits);
        }
      },
    };
  }
}

export interface TickBudget {
  /** null when the bid fits; else what is full: 'block' or the account. */
  fits(bid: Bid): string | null;
  take(bid: Bid): void;
}

/** Why a bid was not included at a tick, and the bid that took its place when there was one. */
export interface TickLoss {
  reason: 'outbid' | 'block_full' | 'pinned';
  /** The account whose CU ran out or whose state a higher-ranked bid changed (outbid), or the opportunity taken. */
  account: string | null;
  /** The lowest-ranked included bid that used the space, or the one that took the account's state or opportunity. */
  winner: Bid | null;
}

export interface TickOutcome<T extends Bid> {
  included: T[];
  lost: Map<string, TickLoss>;
  /** Auctions of the tick, each ranked. */
  groups: T[][];
}

/** What an auction applies besides the bids and the block: see the module comment. */
export interface AuctionRules {
  /** Accounts that join no auction (the tip accounts). */
  ignored?: ReadonlySet<string>;
  /** State-contended accounts: a second writer in one tick is excluded (see the module comment). */
  contended?: ReadonlySet<string>;
  /**
   * The admin's fixed clearing tip: a competitor bidding that many lamports at the same requested CU in every
   * auction, so any bid below it loses.
   */
  pinnedTip?: number | null;
  /**
   * The admin's fixed clearing tip per requested CU (lamports per CU): a competitor at that rank in every auction,
   * so a bid loses when it tips less than {@link pinnedTipFor} its own requested CU. Light and heavy bundles then
   * meet the same rank, as Jito ranks by tip per requested CU.
   */
  pinnedTipPerCu?: number | null;
  /** Most real bids this tick (resolveSlot: this slot) may include; the rest wait without taking space. */
  maxReal?: number;
}

/**
 * One tick: group, rank, then take bids in rank order (highest tip per CU across all groups first, which keeps
 * each group's order), each simulated on the state the ones before it leave: excluded when it writes a contended
 * account an included bid of this tick writes (or races for a taken opportunity), else taken while it fits the
 * tick's CU shares.
 */
export function runTick<T extends Bid>(
  bids: readonly T[],
  budget: SlotBudget,
  rules: AuctionRules = {},
): TickOutcome<T> {
  const {
    ignored = new Set<string>(),
    contended = new Set<string>(),
    pinnedTip = null,
    pinnedTipPerCu = null,
  } = rules;
  const maxReal = rules.maxReal ?? Number.POSITIVE_INFINITY;
  const tick = budget.openTick();
  const groups = groupBids(bids, ignored);
  const lost = new Map<string, TickLoss>();
  const included: T[] = [];
  const opportunities = new Map<string, T>();
  /** Contended accounts already written by a bid included this tick, and by which. */
  const stateTaken = new Map<string, T>();
  let lastIncluded: T | null = null;
  let realIncluded = 0;
  for (const bid of rankBids(groups.flat())) {
    if (bid.kind === 'real' && realIncluded >= maxReal) {
      lost.set(bid.id, { reason: 'block_full', account: null, winner: lastIncluded });
      continue;
    }
    if (
      (pinnedTip !== null && bid.tipLamports < pinnedTip) ||
      (pinnedTipPerCu !== null && bid.tipLamports < pinnedTipFor(pinnedTipPerCu, bid.computeUnits))
    ) {
      lost.set(bid.id, { reason: 'pinned', account: null, winner: null });
      continue;
    }
    const race = bid.opportunity === undefined ? undefined : opportunities.get(bid.opportunity);
    if (race) {
      lost.set(bid.id, { reason: 'outbid', account: bid.opportunity ?? null, winner: race });
      continue;
    }
    const stale = bid.writeLocks.find((key) => stateTaken.has(key));
    if (stale !== undefined) {
      lost.set(bid.id, { reason: 'outbid', account: stale, winner: stateTaken.get(stale) ?? null });
      continue;
    }
    const full = tick.fits(bid);
    if (full !== null) {
      lost.set(
        bid.id,
        full === 'block'
          ? { reason: 'block_full', account: null, winner: lastIncluded }
          : { reason: 'outbid', account: full, winner: budget.lastWriter.get(full) ?? null },
      );
      continue;
    }
    tick.take(bid);
    included.push(bid);
    if (bid.kind === 'real') realIncluded++;
    lastIncluded = bid;
    if (bid.opportunity !== undefined) opportunities.set(bid.opportunity, bid);
    for (const key of bid.writeLocks) if (contended.has(key) && !ignored.has(key)) stateTaken.set(key, bid);
  }
  return { included, lost, groups };
}

export interface SlotResolution<T extends Bid> {
  /** Included bids with the tick that took them. */
  included: Array<{ bid: T; tick: number }>;
  /** Each bid never included: its last tick's loss. */
  lost: Map<string, TickLoss & { tick: number }>;
  /** Per tick, the lowest tip per CU included among contended groups (more than one bid) and uncontended ones. */
  lowestWinning: { contended: number | null; uncontended: number | null };
}

/**
 * Every tick of one slot of `ticks` ticks. Each bid, real or background, enters at its {@link arrivalTick} and
 * competes at every tick from there until it is included or the slot ends (a `oneTick` bid: at its arrival tick
 * only). Returns who landed and who lost.
 */
export function resolveSlot<T extends Bid>(
  bids: readonly T[],
  ticks: number,
  budget: SlotBudget,
  rules: AuctionRules = {},
): SlotResolution<T> {
  const maxReal = rules.maxReal ?? Number.POSITIVE_INFINITY;
  const included: Array<{ bid: T; tick: number }> = [];
  const lost = new Map<string, TickLoss & { tick: number }>();
  const arrivals: T[][] = Array.from({ length: Math.max(1, ticks) }, () => []);
  for (const bid of bids) arrivals[arrivalTick(bid, arrivals.length)]?.push(bid);
  let waiting: T[] = [];
  let realIncluded = 0;
  let contended: number | null = null;
  let uncontended: number | null = null;
  arrivals.forEach((arriving, tick) => {
    waiting = [...waiting, ...arriving];
    const outcome = runTick(waiting, budget, { ...rules, maxReal: maxReal - realIncluded });
    const taken = new Set<string>();
    for (const bid of outcome.included) {
      if (bid.kind === 'real') realIncluded++;
      taken.add(bid.id);
      included.push({ bid, tick });
      lost.delete(bid.id);
    }
    for (const group of outcome.groups) {
      const winners = group.filter((bid) => taken.has(bid.id));
      const lowest = winners.length ? tipPerCu(winners[winners.length - 1] as T) : null;
      if (lowest === null) continue;
      if (group.length > 1) contended = contended === null ? lowest : Math.min(contended, lowest);
      else uncontended = uncontended === null ? lowest : Math.min(uncontended, lowest);
    }
    for (const [id, loss] of outcome.lost) lost.set(id, { ...loss, tick });
    waiting = waiting.filter((bid) => !taken.has(bid.id) && bid.oneTick !== true);
  });
  return { included, lost, lowestWinning: { contended, uncontended } };
}
