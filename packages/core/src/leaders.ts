import { RelayError } from './errors';

/** Consecutive slots each scheduled leader holds. */
export const LEADER_WINDOW_SLOTS = 4;

/** How many slots, from the current one, reflex looks at for a bundle-engine leader (current, +1, +2). */
export const BUNDLE_ENGINE_LOOKAHEAD_SLOTS = 3;

const PAGE_SLOTS = 4096;

/** Tuning of a {@link LeaderBuffer}. */
export interface LeaderBufferOptions {
  /** Most slots held at once (rounded up to whole 4,096-slot pages). Default 1,048,576 (about 2.4 epochs). */
  maxSlots?: number;
  /** Slots kept behind the current slot before eviction. Default 1,024. */
  behindSlots?: number;
  /** Distinct identities held before the table is compacted. Default 16,384. */
  maxIdentities?: number;
}

/** A getConnectedLeaders entry: jito-ts gives `{ slots }`, raw JSON may give the list itself. */
export type ConnectedLeaderSlots = { slots: readonly (number | string)[] } | readonly (number | string)[];

/**
 * What relay knows about the leaders of the current slot and the next few (reflex's timing input).
 * `bundle_engine[i]` is for slot `slot + i`: true / false, or null when unknown.
 */
export interface LeaderView {
  slot: number;
  leader: string | null;
  bundle_engine: readonly (boolean | null)[];
}

/**
 * The leader buffer: which validator leads which slot, and which leaders run the bundle engine.
 *
 * Slots are stored in fixed pages of identity indexes, so a whole epoch's schedule costs 4 bytes a
 * slot. Memory is bounded: slots more than `behindSlots` behind the current slot are evicted on
 * {@link advance}, and when more than `maxSlots` are held the pages farthest from the current
 * slot are dropped first. Later ingests overwrite earlier ones for the same slot.
 *
 * The bundle-engine set is unknown until given; while unknown, {@link isBundleEngineLeader}
 * answers null (DESIGN §8: reflex then submits without holding).
 *
 * @example
 * const leaders = new LeaderBuffer();
 * leaders.advance(currentSlot);
 * leaders.ingestLeaderSchedule(schedule, epochFirstSlot);
 * leaders.ingestConnectedLeaders(connected);
 * leaders.nextBundleEngineSlot(currentSlot, 64);
 */
export class LeaderBuffer {
  private readonly maxPages: number;
  private readonly behindSlots: number;
  private readonly maxIdentities: number;
  private pages = new Map<number, Uint32Array>();
  private identities: string[] = [''];
  private identityIndex = new Map<string, number>();
  private bundleEngine: Set<string> | null = null;
  private bundleEngineRegions: ReadonlyMap<string, string> = new Map();
  private currentSlot = 0;
  private lowWater = 0;
  private compactAt: number;
  private rejectedPage = -1;

  constructor(options: LeaderBufferOptions = {}) {
    this.maxPages = Math.max(1, Math.ceil((options.maxSlots ?? 1_048_576) / PAGE_SLOTS));
    this.behindSlots = Math.max(0, Math.floor(options.behindSlots ?? 1_024));
    this.maxIdentities = Math.max(16, Math.floor(options.maxIdentities ?? 16_384));
    this.compactAt = this.maxIdentities;
  }

  /** The highest slot given to {@link advance}. */
  get slot(): number {
    return this.currentSlot;
  }

  /** Slots of storage held (whole pages); never above `maxSlots` rounded up to a page. */
  get capacityInUse(): number {
    return this.pages.size * PAGE_SLOTS;
  }

  /** Distinct leader identities held. */
  get identityCount(): number {
    return this.identityIndex.size;
  }

  /** True once a bundle-engine validator set has been given. */
  get bundleEngineKnown(): boolean {
    return this.bundleEngine !== null;
  }

  /** Moves the current slot forward (never back) and evicts slots too far behind it. */
  advance(slot: number): void {
    assertSlot(slot);
    if (slot <= this.currentSlot) return;
    this.currentSlot = slot;
    this.rejectedPage = -1;
    const lowWater = Math.max(0, slot - this.behindSlots);
    if (lowWater <= this.lowWater) return;
    this.lowWater = lowWater;
    for (const page of [...this.pages.keys()]) {
      if ((page + 1) * PAGE_SLOTS <= lowWater) this.pages.delete(page);
    }
  }

  /**
   * Takes a `getLeaderSchedule` answer: identity → slot indexes relative to the epoch's first slot.
   */
  ingestLeaderSchedule(schedule: Readonly<Record<string, readonly number[]>>, epochFirstSlot: number): void {
    assertSlot(epochFirstSlot);
    for (const [identity, indexes] of Object.entries(schedule)) {
      for (const index of indexes) this.setLeader(epochFirstSlot + index, identity);
    }
  }

  /** Takes a `getSlotLeaders(startSlot, n)` answer: one identity per slot from `startSlot`. */
  ingestSlotLeaders(startSlot: number, leaders: readonly string[]): void {
    assertSlot(startSlot);
    leaders.forEach((identity, offset) => this.setLeader(startSlot + offset, identity));
  }

  /** Takes one identity per leader window (`slotsPerWindow` slots each, 4 on Solana) from `startSlot`. */
  ingestLeaderWindows(
    startSlot: number,
    windows: readonly string[],
    slotsPerWindow = LEADER_WINDOW_SLOTS,
  ): void {
    assertSlot(startSlot);
    windows.forEach((identity, window) => {
      for (let i = 0; i < slotsPerWindow; i += 1)
        this.setLeader(startSlot + window * slotsPerWindow + i, identity);
    });
  }

  /**
   * Takes a Jito `getConnectedLeaders` answer: identity → upcoming slots of validators connected
   * to the block engine. Their slots are recorded, and by default the identities replace the
   * bundle-engine set (the answer is a full snapshot).
   */
  ingestConnectedLeaders(
    connected: Readonly<Record<string, ConnectedLeaderSlots>>,
    options: { replaceBundleEngineSet?: boolean } = {},
  ): void {
    for (const [identity, entry] of Object.entries(connected)) {
      const slots = Array.isArray(entry) ? entry : (entry as { slots: readonly (number | string)[] }).slots;
      for (const slot of slots) this.setLeader(Number(slot), identity);
    }
    if (options.replaceBundleEngineSet ?? true) this.setBundleEngineValidators(Object.keys(connected));
    else for (const identity of Object.keys(connected)) this.bundleEngine?.add(identity);
  }

  /**
   * Sets the bundle-engine validator set; null makes it unknown again (leader data unreachable). `regions` maps each
   * validator to the block-engine region it is connected to, when the engine said (GetConnectedLeadersRegioned).
   */
  setBundleEngineValidators(
    identities: Iterable<string> | null,
    regions: ReadonlyMap<string, string> = new Map(),
  ): void {
    this.bundleEngine = identities === null ? null : new Set(identities);
    this.bundleEngineRegions = identities === null ? new Map() : new Map(regions);
  }

  /** The block-engine region `slot`'s leader is connected to, or null when unknown or not a bundle-engine leader. */
  regionAt(slot: number): string | null {
    const leader = this.leaderAt(slot);
    return leader === null ? null : (this.bundleEngineRegions.get(leader) ?? null);
  }

  /** The leader of `slot`, or null when not held. */
  leaderAt(slot: number): string | null {
    if (!Number.isSafeInteger(slot) || slot < this.lowWater) return null;
    const page = this.pages.get(Math.floor(slot / PAGE_SLOTS));
    const index = page?.[slot % PAGE_SLOTS] ?? 0;
    return index === 0 ? null : (this.identities[index] ?? null);
  }

  /** Whether `slot`'s leader runs the bundle engine: true, false, or null when the leader or the set is unknown. */
  isBundleEngineLeader(slot: number): boolean | null {
    if (this.bundleEngine === null) return null;
    const leader = this.leaderAt(slot);
    return leader === null ? null : this.bundleEngine.has(leader);
  }

  /**
   * The first slot in `[from, from + lookahead)` whose leader is known to run the bundle engine, or
   * null when none is known there.
   */
  nextBundleEngineSlot(from: number, lookahead: number): number | null {
    if (this.bundleEngine === null) return null;
    const end = from + Math.max(0, Math.floor(lookahead));
    for (let slot = Math.max(from, this.lowWater); slot < end; slot += 1) {
      if (this.isBundleEngineLeader(slot) === true) return slot;
    }
    return null;
  }

  /** The leader view reflex takes, for `slot` and the `span - 1` slots after it. */
  leaderView(slot: number, span = BUNDLE_ENGINE_LOOKAHEAD_SLOTS): LeaderView {
    const bundleEngine: (boolean | null)[] = [];
    for (let i = 0; i < span; i += 1) bundleEngine.push(this.isBundleEngineLeader(slot + i));
    return { slot, leader: this.leaderAt(slot), bundle_engine: bundleEngine };
  }

  private setLeader(slot: number, identity: string): void {
    if (!Number.isSafeInteger(slot) || slot < 0 || slot < this.lowWater) return;
    const pageNumber = Math.floor(slot / PAGE_SLOTS);
    let page = this.pages.get(pageNumber);
    if (!page) {
      if (pageNumber === this.rejectedPage) return;
      if (this.pages.size >= this.maxPages) {
        const victim = this.farthestPage(pageNumber);
        if (victim === pageNumber) {
          // Remembered so the rest of this page's slots are refused without rescanning.
          this.rejectedPage = pageNumber;
          return;
        }
        this.pages.delete(victim);
      }
      page = new Uint32Array(PAGE_SLOTS);
      this.pages.set(pageNumber, page);
      this.rejectedPage = -1;
    }
    page[slot % PAGE_SLOTS] = this.intern(identity);
  }

  /** The page farthest from the current slot among those held and `candidate`; ties pick the later page. */
  private farthestPage(candidate: number): number {
    const currentPage = Math.floor(this.currentSlot / PAGE_SLOTS);
    let farthest = candidate;
    let farthestDistance = Math.abs(candidate - currentPage);
    for (const page of this.pages.keys()) {
      const distance = Math.abs(page - currentPage);
      // On a tie the later page goes: the slots just behind the current one are still being reported on.
      if (distance > farthestDistance || (distance === farthestDistance && page > farthest)) {
        farthest = page;
        farthestDistance = distance;
      }
    }
    return farthest;
  }

  private intern(identity: string): number {
    const known = this.identityIndex.get(identity);
    if (known !== undefined) return known;
    if (this.identities.length > this.compactAt) this.compactIdentities();
    const index = this.identities.length;
    this.identities.push(identity);
    this.identityIndex.set(identity, index);
    return index;
  }

  /** Rebuilds the identity table from the pages still held, so evicted identities do not pile up. */
  private compactIdentities(): void {
    const identities: string[] = [''];
    const identityIndex = new Map<string, number>();
    const remap = new Map<number, number>();
    for (const page of this.pages.values()) {
      for (let i = 0; i < page.length; i += 1) {
        const old = page[i] ?? 0;
        if (old === 0) continue;
        let next = remap.get(old);
        if (next === undefined) {
          const identity = this.identities[old] ?? '';
          next = identities.length;
          identities.push(identity);
          identityIndex.set(identity, next);
          remap.set(old, next);
        }
        page[i] = next;
      }
    }
    this.identities = identities;
    this.identityIndex = identityIndex;
    // If most identities are still live, compacting again soon would be wasted work.
    this.compactAt = Math.max(this.maxIdentities, 2 * identities.length);
  }
}

/** Reads a leader view: true when a bundle-engine leader holds the current slot or one of the next two, false when all are known not to, null when unknown. */
export function bundleEngineLeaderSoon(view: Pick<LeaderView, 'bundle_engine'>): boolean | null {
  if (view.bundle_engine.some((flag) => flag === true)) return true;
  if (view.bundle_engine.length > 0 && view.bundle_engine.every((flag) => flag === false)) return false;
  return null;
}

/**
 * Builds a leader view from what `slot_update` / `/status` carry (the agent has no leader buffer):
 * the next bundle-engine slot, or null with `known` telling "none soon" from "unknown".
 */
export function leaderViewFromNextSlot(input: {
  slot: number;
  leader: string | null;
  next_bundle_engine_slot: number | null;
  bundle_engine_known: boolean;
  span?: number;
}): LeaderView {
  const span = input.span ?? BUNDLE_ENGINE_LOOKAHEAD_SLOTS;
  const flags: (boolean | null)[] = [];
  for (let i = 0; i < span; i += 1) {
    const slot = input.slot + i;
    if (!input.bundle_engine_known) flags.push(null);
    else if (input.next_bundle_engine_slot === slot) flags.push(true);
    else if (input.next_bundle_engine_slot === null || input.next_bundle_engine_slot > slot)
      flags.push(false);
    else flags.push(null);
  }
  return { slot: input.slot, leader: input.leader, bundle_engine: flags };
}

function assertSlot(slot: number): void {
  if (!Number.isSafeInteger(slot) || slot < 0) {
    throw new RelayError('RELAY_E_INTERNAL_ERROR', { reason: `not a slot: ${String(slot)}` });
  }
}
