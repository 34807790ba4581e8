import { BUNDLE_ENGINE_LOOKAHEAD_SLOTS, bundleEngineLeaderSoon, type LeaderView } from './leaders';
import type { TipFloor } from './oracle';
import { bidPerCu, tipForCu, tipPerCu, type ContentionClass, type ContentionSignal } from './pricing';
import { OUTCOME_NEXT, type AttemptOutcome } from './outcomes';
import { effectivePriority, type Policy } from './policy';
import { clampTip, escalationCeiling, tipBounds } from './policy-bounds';
import type { Priority, TipMode, TipPercentile } from './vocabulary';

/** The transaction facts reflex decides on. */
export interface ReflexTransaction {
  priority: Priority;
  /** The caller's cap from enqueue (`max_tip`), or null. */
  max_tip: number | null;
  tip: TipMode;
  enqueue_slot: number;
  /** The last slot an attempt may be made (see `expiresAtSlot`). */
  expires_at_slot: number;
  /** Retries counted so far (0 before the first attempt's outcome). */
  retries: number;
}

/** The last attempt of the transaction. */
export interface PreviousAttempt {
  tip_lamports: number;
  outcome: AttemptOutcome;
  /** The requested CU of the bundle that attempt sent (its tip per CU is what a retry reprices from). */
  compute_units?: number | null;
}

/** The bundle being priced: its requested CU (user transactions and the tip transaction) and its write set's contention. */
export interface ReflexBundle {
  compute_units: number;
  contention: ContentionSignal;
}

/** How a per-CU decision was priced (DESIGN §11); recorded on the attempt and its lifecycle entry. */
export interface TipPricing {
  /** The bundle's requested CU. */
  compute_units: number;
  /** The tip chosen, lamports per requested CU (after min-tip / max-tip clamping). */
  tip_per_cu: number;
  /** Lamports per requested CU the pricing asked for: the rank the bundle needs. */
  bid_per_cu: number;
  contention: ContentionClass;
  /** The signal that priced it, in words. */
  signal: string;
}

/** Everything reflex reads. All pure data; the current slot is an input like the rest. */
export interface ReflexInput {
  tx: ReflexTransaction;
  floor: TipFloor;
  /** Bundle-engine flags from the current slot on (null entries = unknown); only the first three are read. */
  leaders: Pick<LeaderView, 'bundle_engine'>;
  policy: Policy;
  previous: PreviousAttempt | null;
  slot: number;
  /**
   * The bundle's requested CU and contention: with it the tip is priced per requested CU (DESIGN §11); without it
   * (callers that do not know the bundle) a flat floor percentile, as before.
   */
  bundle?: ReflexBundle | null;
}

/** Why reflex would hand a decision to the LLM (DESIGN §6 "hard cases"). */
export type HardReason = 'stale_tip_data' | 'fee_too_low_retry' | 'tip_at_cap';

/** Reflex's decision. `hard` is true when `hard_reasons` is not empty. */
export type ReflexDecision =
  | {
      action: 'submit';
      tip_lamports: number;
      /** The floor statistic targeted after the priority shift. */
      percentile: TipPercentile;
      reason: string;
      hard: boolean;
      hard_reasons: HardReason[];
      /** Set when the tip was priced per requested CU (the input had a `bundle`). */
      pricing?: TipPricing | null;
    }
  | { action: 'hold'; reason: string; hard: false; hard_reasons: [] }
  | { action: 'stop'; reason: string; hard: false; hard_reasons: [] };

/** The percentile ladder priorities move along; `ema` sits at `p50`. */
export const PERCENTILE_LADDER = [
  'p25',
  'p50',
  'p75',
  'p95',
  'p99',
] as const satisfies readonly TipPercentile[];

/**
 * The floor statistic a priority targets: `normal` keeps the policy's, `high` the next one up,
 * `low` the next one down (`ema` counts as `p50`; the ends of the ladder stay put).
 *
 * @example
 * targetPercentile('p75', 'high'); // 'p95'
 */
export function targetPercentile(policyPercentile: TipPercentile, priority: Priority): TipPercentile {
  if (priority === 'normal') return policyPercentile;
  const ladder = PERCENTILE_LADDER as readonly TipPercentile[];
  const index = policyPercentile === 'ema' ? 1 : ladder.indexOf(policyPercentile);
  const shifted = priority === 'high' ? Math.min(index + 1, ladder.length - 1) : Math.max(index - 1, 0);
  return ladder[shifted] ?? policyPercentile;
}

/**
 * The deterministic reflex decision (DESIGN §6).
 *
 * - Stop when the previous outcome is not retryable, retries are exhausted, the slot is past the
 *   transaction's expiry slot, or the caller's cap is below `min-tip`.
 * - First attempt: `clamp(floor[p], min-tip, min(max-tip, caller max_tip))`, where `p` is the
 *   policy's `tip-percentile` shifted by priority (the policy's `priority` pin wins).
 * - Retry after `fee_too_low`: `min(max(floor[p], previous), previous + escalation-step)`, clamped.
 *   After `dropped`: the previous tip, clamped.
 * - `"tip":"included"` transactions carry their own tip: reflex submits with 0.
 * - Submit when the current slot's leader or one of the next two runs the bundle engine, or when
 *   that is unknown; hold when all three are known not to.
 *
 * `hard` marks the cases the agent hands to the LLM: stale tip data, a `fee_too_low` retry, a tip
 * at the cap.
 */
export function decideReflex(input: ReflexInput): ReflexDecision {
  const { tx, floor, policy, previous, slot } = input;
  if (previous && OUTCOME_NEXT[previous.outcome] === 'fail') {
    return stop(`${previous.outcome} is not retryable`);
  }
  if (previous && tx.retries > policy['max-retries']) {
    return stop(`retries exhausted (${tx.retries} > max-retries ${policy['max-retries']})`);
  }
  if (slot > tx.expires_at_slot) return stop(`past expiry slot ${tx.expires_at_slot}`);

  const bounds = tipBounds(policy, tx.max_tip);
  if (tx.tip === 'auto' && bounds.max < bounds.min) {
    return stop(`caller max_tip ${bounds.max} is below min-tip ${bounds.min}`);
  }

  // DESIGN §6: the current slot and the next two only, whatever span the caller's view covers.
  const flags = input.leaders.bundle_engine.slice(0, BUNDLE_ENGINE_LOOKAHEAD_SLOTS);
  const soon = bundleEngineLeaderSoon({ bundle_engine: flags });
  if (soon === false) {
    const span = flags.length;
    return {
      action: 'hold',
      reason: `no bundle-engine leader in slots ${slot}..${slot + span - 1}`,
      hard: false,
      hard_reasons: [],
    };
  }
  const timing = soon === null ? 'bundle-engine leaders unknown' : 'bundle-engine leader within 2 slots';

  const percentile = targetPercentile(policy['tip-percentile'], effectivePriority(policy, tx.priority));
  const target = floor[percentile];
  const hardReasons: HardReason[] = [];
  if (floor.stale) hardReasons.push('stale_tip_data');
  if (previous?.outcome === 'fee_too_low') hardReasons.push('fee_too_low_retry');

  if (tx.tip === 'included') {
    return submit(0, percentile, `caller-included tip; ${timing}`, hardReasons);
  }

  if (input.bundle) return decidePerCu(input, input.bundle, percentile, timing, hardReasons);

  let desired: number;
  let tip: number;
  let why: string;
  if (!previous) {
    desired = target;
    tip = clampTip(desired, policy, tx.max_tip);
    why = `first attempt at ${percentile} (floor ${target})`;
  } else if (previous.outcome === 'fee_too_low') {
    desired = Math.max(target, previous.tip_lamports);
    const stepped = Math.min(desired, previous.tip_lamports + policy['escalation-step']);
    tip = Math.min(clampTip(stepped, policy, tx.max_tip), escalationCeiling(previous.tip_lamports, policy));
    why = `fee_too_low retry: ${previous.tip_lamports} -> ${tip} (${percentile} floor ${target}, step ${policy['escalation-step']})`;
  } else {
    desired = previous.tip_lamports;
    tip = clampTip(desired, policy, tx.max_tip);
    why = `${previous.outcome} retry at the same tip ${tip}`;
  }
  if (desired >= bounds.max && tip === bounds.max) hardReasons.push('tip_at_cap');
  return submit(tip, percentile, `${why}; ${timing}`, hardReasons);
}

/**
 * The per-CU price (DESIGN §11): `bid per CU × the bundle's requested CU`, clamped to policy and the caller's cap. A
 * retry reprices from the previous attempt's tip per CU over this bundle's CU (a bundle whose CU changed keeps its
 * rank, not its lamports): after `fee_too_low` up to the higher of that and today's bid, at most `escalation-step`
 * more; after another retryable outcome the higher of the two. Every retry stays under the escalation ceiling.
 */
function decidePerCu(
  input: ReflexInput,
  bundle: ReflexBundle,
  percentile: TipPercentile,
  timing: string,
  hardReasons: HardReason[],
): ReflexDecision {
  const { tx, floor, policy, previous } = input;
  const cu = Math.max(1, bundle.compute_units);
  const bid = bidPerCu(floor, percentile, bundle.contention);
  const target = tipForCu(bid.per_cu, cu);
  const priced = `${round(bid.per_cu)} lamports/CU x ${cu} CU = ${target} (${bid.signal})`;
  let desired: number;
  let tip: number;
  let why: string;
  if (!previous) {
    desired = target;
    tip = clampTip(desired, policy, tx.max_tip);
    why = `first attempt at ${priced}`;
  } else {
    const same = tipForCu(tipPerCu(previous.tip_lamports, previous.compute_units ?? cu), cu);
    desired = Math.max(target, same);
    const stepped =
      previous.outcome === 'fee_too_low' ? Math.min(desired, same + policy['escalation-step']) : desired;
    tip = Math.min(clampTip(stepped, policy, tx.max_tip), escalationCeiling(previous.tip_lamports, policy));
    why = `${previous.outcome} retry repriced per CU: ${previous.tip_lamports} -> ${tip} (previous rank over ${cu} CU ${same}; now ${priced})`;
  }
  const bounds = tipBounds(policy, tx.max_tip);
  if (desired >= bounds.max && tip === bounds.max) hardReasons.push('tip_at_cap');
  return submit(tip, percentile, `${why}; ${timing}`, hardReasons, {
    compute_units: cu,
    tip_per_cu: tipPerCu(tip, cu),
    bid_per_cu: bid.per_cu,
    contention: bundle.contention.class,
    signal: bid.signal,
  });
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

function submit(
  tip: number,
  percentile: TipPercentile,
  reason: string,
  hardReasons: HardReason[],
  pricing: TipPricing | null = null,
): ReflexDecision {
  return {
    action: 'submit',
    tip_lamports: tip,
    percentile,
    reason,
    hard: hardReasons.length > 0,
    hard_reasons: hardReasons,
    pricing,
  };
}

function stop(reason: string): ReflexDecision {
  return { action: 'stop', reason, hard: false, hard_reasons: [] };
}
