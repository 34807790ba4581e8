import { createHash } from 'node:crypto';
import bs58 from 'bs58';
import { Rng } from '../rng';
import type { LeaderInfo } from './types';

/** Solana hands a leader NUM_CONSECUTIVE_LEADER_SLOTS = 4 slots in a row. */
export const LEADER_WINDOW_SLOTS = 4;

export interface Validator extends LeaderInfo {
  /** Activated stake in lamports. */
  stake: number;
}

/**
 * A seeded validator set. Identities are 32 seeded bytes in base58 (they only ever name a leader; nothing signs
 * with them). Stake follows a rough power law like mainnet's, and `bundleEngineShare` of the stake-ordered set
 * (rounded, picked at random) runs the bundle engine.
 */
export function createValidators(rng: Rng, count: number, bundleEngineShare: number): Validator[] {
  if (!Number.isInteger(count) || count < 1) throw new Error('validatorCount must be a positive integer');
  if (!(bundleEngineShare >= 0 && bundleEngineShare <= 1))
    throw new Error('bundleEngineShare must be in [0, 1]');
  const validators: Validator[] = [];
  for (let i = 0; i < count; i++) {
    const seed = new Uint8Array(32);
    for (let b = 0; b < 32; b++) seed[b] = rng.int(0, 255);
    // Pareto-ish: a few whales, a long tail. 1k..~1M SOL.
    const sol = Math.floor(1_000 / Math.pow(1 - rng.next() * 0.999, 0.9));
    validators.push({ identity: bs58.encode(seed), stake: sol * 1_000_000_000, bundleEngine: false });
  }
  const engineCount = Math.round(count * bundleEngineShare);
  const order = validators.map((_, index) => index);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  for (const index of order.slice(0, engineCount)) (validators[index] as Validator).bundleEngine = true;
  return validators;
}

/**
 * Leader schedules per epoch: each 4-slot window goes to a validator drawn with probability proportional to stake,
 * from a generator seeded by (schedule seed, epoch). An epoch's schedule therefore never depends on when it was
 * first asked for, and the same seed always yields the same schedule.
 */
export class LeaderSchedule {
  private readonly cache = new Map<number, LeaderInfo[]>();
  private readonly cumulativeStake: number[];
  private readonly totalStake: number;

  constructor(
    private readonly validators: readonly Validator[],
    private readonly slotsPerEpoch: number,
    private readonly scheduleSeed: number,
  ) {
    let total = 0;
    this.cumulativeStake = validators.map((v) => (total += v.stake));
    this.totalStake = total;
  }

  /** The leader of every slot of `epoch`, by slot index. */
  epochLeaders(epoch: number): LeaderInfo[] {
    let leaders = this.cache.get(epoch);
    if (leaders) return leaders;
    const digest = createHash('sha256').update(`leader-schedule:${this.scheduleSeed}:${epoch}`).digest();
    const rng = new Rng(digest.readUInt32LE(0));
    leaders = [];
    for (let index = 0; index < this.slotsPerEpoch; index += LEADER_WINDOW_SLOTS) {
      const leader = this.drawByStake(rng);
      for (let k = 0; k < LEADER_WINDOW_SLOTS && index + k < this.slotsPerEpoch; k++) leaders.push(leader);
    }
    // Old epochs are recomputable on demand; keep the cache small.
    if (this.cache.size > 8) this.cache.delete(this.cache.keys().next().value as number);
    this.cache.set(epoch, leaders);
    return leaders;
  }

  leaderAt(slot: number): LeaderInfo {
    const epoch = Math.floor(slot / this.slotsPerEpoch);
    return this.epochLeaders(epoch)[slot - epoch * this.slotsPerEpoch] as LeaderInfo;
  }

  /** identity -> slot indexes relative to the epoch's first slot (getLeaderSchedule's shape). */
  scheduleByIdentity(epoch: number): Record<string, number[]> {
    const schedule: Record<string, number[]> = {};
    this.epochLeaders(epoch).forEach((leader, index) => (schedule[leader.identity] ??= []).push(index));
    return schedule;
  }

  private drawByStake(rng: Rng): LeaderInfo {
    const target = rng.next() * this.totalStake;
    let lo = 0;
    let hi = this.cumulativeStake.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.cumulativeStake[mid] as number) > target) hi = mid;
      else lo = mid + 1;
    }
    const validator = this.validators[lo] as Validator;
    return { identity: validator.identity, bundleEngine: validator.bundleEngine };
  }
}
