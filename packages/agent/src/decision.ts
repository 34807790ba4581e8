/**
 * The agent's pure decision logic: per-transaction state, the reflex input it feeds to core, which tier decides,
 * the snapshot the model reads, and the checks a model's answer must pass. No I/O here; `agent.ts` does that.
 */
import {
  checkSubmitAgainstPolicy,
  decideReflex,
  escalationCeiling,
  giveUpSlot,
  leaderViewFromNextSlot,
  tipBounds,
  type AttemptOutcome,
  type ContentionSignal,
  type DecisionMode,
  type LeaderView,
  type Policy,
  type PolicyViolation,
  type Priority,
  type ReflexBundle,
  type ReflexDecision,
  type SlotSpan,
  type SlotUpdateEvent,
  type TipFloor,
  type TipMode,
} from '@solrelay/core';
import type { DecisionSnapshot } from './snapshot';

/** Where a transaction stands from the agent's point of view. */
export type TrackedStatus =
  /** Pending at the sidecar with no attempt in flight: needs (or waits for) a decision. */
  | 'pending'
  /** An attempt was asked for; waiting for `bundle_settled`. */
  | 'submitted';

/** What the agent knows about one non-terminal transaction (from `tx_enqueued`, `bundle_settled` or `/tx/{id}`). */
export interface TrackedTx {
  tx_id: string;
  priority: Priority;
  max_tip: number | null;
  tip: TipMode;
  enqueue_slot: number;
  expires_at_slot: number;
  retries: number;
  /** The last attempt: its tip, outcome and requested CU as sent (null when the sidecar did not say). */
  previous: { tip_lamports: number; outcome: AttemptOutcome; compute_units?: number | null } | null;
  /**
   * The requested CU of the bundle reflex prices (user transactions plus relay's tip transaction at most), from
   * `tx_enqueued` / `bundle_settled`; null when the sidecar did not say (an older sidecar, an included tip, a record
   * rebuilt from `/tx/{id}`): reflex then bids the flat percentile.
   */
  compute_units: number | null;
  /** The write set's contention the sidecar last told (enqueue or the last settle); null: none read yet. */
  contention: ContentionSignal | null;
  status: TrackedStatus;
  /** No new decision before this slot (after a model `hold` or a refused submit). */
  cooldown_until_slot: number;
  /** When the current decision cycle started (enqueue or settle), for enqueue→submit latency. */
  cycle_started_ms: number;
}

/** The world a decision reads: the sidecar's current slot, leader outlook, tip floor and policy. */
export interface DecisionWorld {
  slot: number;
  leaders: LeaderView;
  /** What the last `slot_update` said about the leader (for the model's snapshot). */
  leader: { identity: string | null; bundle_engine: boolean | null; next_bundle_engine_slot: number | null };
  floor: TipFloor;
  policy: Policy;
  /** The consensus migration's vote-only slots the sidecar reported (`slot_update`), if any: they move deadlines. */
  vote_only_windows?: readonly SlotSpan[];
}

/**
 * The reflex leader view from a `slot_update`. The sidecar knows the bundle-engine set when it says whether the
 * slot's leader runs it or names the next such slot; otherwise the view is "unknown" and reflex submits without
 * holding (DESIGN §8).
 */
export function leaderViewFromSlotUpdate(
  event: Pick<SlotUpdateEvent, 'slot' | 'leader' | 'bundle_engine_leader' | 'next_bundle_engine_slot'>,
): LeaderView {
  return leaderViewFromNextSlot({
    slot: event.slot,
    leader: event.leader,
    next_bundle_engine_slot: event.next_bundle_engine_slot,
    bundle_engine_known: event.bundle_engine_leader !== null || event.next_bundle_engine_slot !== null,
  });
}

/** No contention reading: priced as contended, as the sidecar's fallback prices a write set RPC could not read. */
const NO_CONTENTION_READING: ContentionSignal = {
  class: 'unknown',
  write_price_micro_lamports: null,
  slots: 0,
};

/**
 * The bundle reflex prices per requested CU (DESIGN §11), as the sidecar's fallback builds it: the CU the sidecar
 * counted and the contention it read (`unknown` without a reading). Null without a CU count (flat percentile).
 */
export function bundleFor(tx: Pick<TrackedTx, 'compute_units' | 'contention'>): ReflexBundle | null {
  if (tx.compute_units === null) return null;
  return { compute_units: tx.compute_units, contention: tx.contention ?? { ...NO_CONTENTION_READING } };
}

/**
 * The last slot an attempt of `tx` may be made: its expiry slot moved past the vote-only slots of a migration window
 * it lived through, as the sidecar moves it (core `giveUpSlot`, DESIGN §12).
 */
export function deadlineOf(
  tx: Pick<TrackedTx, 'expires_at_slot' | 'enqueue_slot'>,
  world: Pick<DecisionWorld, 'vote_only_windows' | 'slot'>,
): number {
  const windows = world.vote_only_windows ?? [];
  if (windows.length === 0) return tx.expires_at_slot;
  return giveUpSlot(
    { expires_at_slot: tx.expires_at_slot, enqueued_slot: tx.enqueue_slot },
    windows,
    world.slot,
  );
}

/** core's reflex decision for a tracked transaction: per requested CU when the sidecar told the bundle's CU. */
export function reflexFor(tx: TrackedTx, world: DecisionWorld): ReflexDecision {
  return decideReflex({
    tx: {
      priority: tx.priority,
      max_tip: tx.max_tip,
      tip: tx.tip,
      enqueue_slot: tx.enqueue_slot,
      expires_at_slot: deadlineOf(tx, world),
      retries: tx.retries,
    },
    floor: world.floor,
    leaders: world.leaders,
    policy: world.policy,
    previous: tx.previous,
    slot: world.slot,
    bundle: bundleFor(tx),
  });
}

/** Which tier decides a submission, and whether the model is asked. */
export interface TierChoice {
  /** The tier whose rules apply (what the agent records in the trace as `decision_mode`). */
  tier: DecisionMode;
  /** Ask the model (cortex on every submission; reflex only on hard cases). */
  ask_model: boolean;
  /** Reflex handed a hard case to the model (`escalated` on the submit). */
  escalated: boolean;
  /** Set when the model would have been asked but none is configured. */
  unavailable: 'cortex_unavailable' | 'escalation_unavailable' | null;
}

/**
 * Cortex asks the model for every submission; reflex asks only on hard cases (stale tip data, a `fee_too_low`
 * retry, a tip at the cap). Without a model both fall back to the reflex decision and say why.
 */
export function chooseTier(
  mode: DecisionMode,
  reflex: Extract<ReflexDecision, { action: 'submit' }>,
  modelAvailable: boolean,
): TierChoice {
  if (mode === 'cortex') {
    return modelAvailable
      ? { tier: 'cortex', ask_model: true, escalated: false, unavailable: null }
      : { tier: 'reflex', ask_model: false, escalated: false, unavailable: 'cortex_unavailable' };
  }
  if (!reflex.hard) return { tier: 'reflex', ask_model: false, escalated: false, unavailable: null };
  return modelAvailable
    ? { tier: 'reflex', ask_model: true, escalated: true, unavailable: null }
    : { tier: 'reflex', ask_model: false, escalated: false, unavailable: 'escalation_unavailable' };
}

/** The tip range the sidecar accepts for this transaction's next attempt (policy, caller cap, escalation step). */
export function allowedTipRange(tx: TrackedTx, policy: Policy): { min: number; max: number } {
  if (tx.tip === 'included') return { min: 0, max: 0 };
  const bounds = tipBounds(policy, tx.max_tip);
  const ceiling = tx.previous ? escalationCeiling(tx.previous.tip_lamports, policy) : Infinity;
  return { min: bounds.min, max: Math.min(bounds.max, ceiling) };
}

/** The model's snapshot for a transaction. */
export function buildSnapshot(tx: TrackedTx, world: DecisionWorld, reflex: ReflexDecision): DecisionSnapshot {
  return {
    tx_id: tx.tx_id,
    priority: tx.priority,
    tip_mode: tx.tip,
    tip_floor: { ...world.floor },
    policy: { ...world.policy },
    ...(tx.previous ? { previous_attempt: { ...tx.previous } } : {}),
    leader: {
      ...(world.leader.identity ? { identity: world.leader.identity } : {}),
      bundle_engine: world.leader.bundle_engine,
      next_bundle_engine_leader_slot: world.leader.next_bundle_engine_slot,
    },
    slot: world.slot,
    expires_at_slot: deadlineOf(tx, world),
    retries: tx.retries,
    ...(tx.max_tip !== null ? { max_tip: tx.max_tip } : {}),
    ...bundleSnapshot(tx),
    allowed_tip: allowedTipRange(tx, world.policy),
    reflex: {
      action: reflex.action,
      ...(reflex.action === 'submit' ? { tip_lamports: reflex.tip_lamports } : {}),
      ...(reflex.action === 'submit' && reflex.pricing
        ? {
            pricing: {
              tip_per_cu: reflex.pricing.tip_per_cu,
              bid_per_cu: reflex.pricing.bid_per_cu,
              signal: reflex.pricing.signal,
            },
          }
        : {}),
      reason: reflex.reason,
      hard_reasons: [...reflex.hard_reasons],
    },
  };
}

/** The bundle's requested CU and its write set's contention, as reflex priced them (nothing without a CU count). */
function bundleSnapshot(tx: TrackedTx): Pick<DecisionSnapshot, 'compute_units' | 'contention'> {
  const bundle = bundleFor(tx);
  if (!bundle) return {};
  return {
    compute_units: bundle.compute_units,
    contention: {
      class: bundle.contention.class,
      write_price_micro_lamports: bundle.contention.write_price_micro_lamports,
    },
  };
}

/** A model answer that passed every check. */
export interface CheckedAnswer {
  action: 'submit' | 'hold';
  tip_lamports: number;
  rationale: string;
}

/** Why a model answer was refused (recorded as `fallback_reason: "invalid_answer: <why>"`). */
export type AnswerProblem =
  | 'not_an_object'
  | 'invalid_action'
  | 'tip_not_an_integer'
  | 'tip_negative'
  | 'tip_below_min'
  | 'tip_above_max'
  | 'rationale_not_a_string';

/**
 * Checks the `decide_submission` tool input: `action` is `submit` or `hold`, `tip_lamports` a non-negative safe
 * integer inside the allowed range, `rationale` a string. Nothing is clamped: a tip outside the range means the
 * model misread the situation, so the whole answer is refused and the reflex decision is used instead (a clamped
 * absurd tip would still be a decision nobody made). For an included-tip transaction the tip is always 0.
 */
export function checkModelAnswer(
  input: unknown,
  range: { min: number; max: number },
): { ok: true; answer: CheckedAnswer } | { ok: false; problem: AnswerProblem } {
  if (!input || typeof input !== 'object' || Array.isArray(input))
    return { ok: false, problem: 'not_an_object' };
  const { action, tip_lamports: tip, rationale } = input as Record<string, unknown>;
  if (action !== 'submit' && action !== 'hold') return { ok: false, problem: 'invalid_action' };
  if (typeof tip !== 'number' || !Number.isSafeInteger(tip))
    return { ok: false, problem: 'tip_not_an_integer' };
  if (tip < 0) return { ok: false, problem: 'tip_negative' };
  if (rationale !== undefined && typeof rationale !== 'string')
    return { ok: false, problem: 'rationale_not_a_string' };
  const text = typeof rationale === 'string' ? rationale : '';
  // An included-tip transaction carries its own tip: whatever the model says, the attempt adds none.
  if (range.max === 0 && range.min === 0)
    return { ok: true, answer: { action, tip_lamports: 0, rationale: text } };
  if (action === 'submit') {
    if (tip < range.min) return { ok: false, problem: 'tip_below_min' };
    if (tip > range.max) return { ok: false, problem: 'tip_above_max' };
  }
  return { ok: true, answer: { action, tip_lamports: tip, rationale: text } };
}

/**
 * The sidecar's own submit check (core `checkSubmitAgainstPolicy`) run before asking, with what the agent knows, so
 * a decision that would be refused is never sent. The spend window is the sidecar's to know, so it is not checked.
 */
export function violationOf(tip: number, tx: TrackedTx, world: DecisionWorld): PolicyViolation | null {
  return checkSubmitAgainstPolicy(
    {
      tip_lamports: tip,
      tip_mode: tx.tip,
      caller_max_tip: tx.max_tip,
      previous_tip_lamports: tx.previous?.tip_lamports ?? null,
      retries: tx.retries,
      slot: world.slot,
      expires_at_slot: deadlineOf(tx, world),
    },
    world.policy,
  );
}
