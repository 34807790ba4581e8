/**
 * Answer reconciliation: turns what the model (or reflex alone) said into one plan to submit, inside the policy.
 * A model's answer is used only when it passes every check (shape, allowed tip range, and the sidecar's own policy
 * check against the world as it is after the model thought); otherwise reflex's decision is submitted and the
 * trace says why. Pure: the agent does the I/O (`submit.ts` sends the plan).
 */
import type { DecisionMode, SubmitRequest } from '@solrelay/core';
import {
  allowedTipRange,
  checkModelAnswer,
  violationOf,
  type CheckedAnswer,
  type DecisionWorld,
  type TierChoice,
  type TrackedTx,
} from './decision';
import {
  modelTrace,
  reflexTrace,
  type AgentDecisionTrace,
  type ModelConsultation,
  type SubmittingReflex,
} from './trace';
import type { DecisionSnapshot } from './snapshot';

/** A decision ready to submit: the tip, why, which tier chose it and which produced it, and its trace. */
export interface SubmitPlan {
  tip: number;
  reason: string;
  /** The tier the sidecar's mode chose (what the trace records as `decision_mode`). */
  tier: DecisionMode;
  /** The tier whose answer is submitted: `cortex` only when the model's answer is used. */
  decidedBy: DecisionMode;
  escalated: boolean;
  fallback: string | null;
  trace: AgentDecisionTrace;
  model_latency_ms: number | null;
  /** How the tip was priced per requested CU (DESIGN §11), sent as the submit's `pricing`; absent when it was not. */
  pricing?: NonNullable<SubmitRequest['pricing']>;
}

/** Reflex's per-CU pricing as the submit's `pricing` (the sidecar counts the CU itself). */
function reflexPricing(reflex: SubmittingReflex): Pick<SubmitPlan, 'pricing'> {
  const p = reflex.pricing;
  return p ? { pricing: { bid_per_cu: p.bid_per_cu, contention: p.contention, signal: p.signal } } : {};
}

/**
 * The model's tip as the submit's `pricing`, when reflex priced per CU: its bid is the model's tip over the bundle's
 * requested CU (so a pack never takes a rider under what the model chose), with the contention reflex read.
 */
function modelPricing(tip: number, reflex: SubmittingReflex): Pick<SubmitPlan, 'pricing'> {
  const p = reflex.pricing;
  if (!p) return {};
  const signal = `cortex: the model's tip over ${p.compute_units} CU; reflex bid ${p.bid_per_cu} lamports/CU (${p.signal})`;
  return {
    pricing: {
      bid_per_cu: tip / Math.max(1, p.compute_units),
      contention: p.contention,
      signal: signal.slice(0, 2_000),
    },
  };
}

/** What the model's answer comes to: hold (it said so, validly), or a plan to submit. */
export type ReconciledAnswer = { action: 'hold'; rationale: string } | { action: 'submit'; plan: SubmitPlan };

/** Reflex's own decision as a plan, for a decision the model was not asked about. */
export function reflexPlan(
  choice: TierChoice,
  snapshot: DecisionSnapshot,
  reflex: SubmittingReflex,
): SubmitPlan {
  return {
    tip: reflex.tip_lamports,
    reason: reflex.reason,
    tier: choice.tier,
    decidedBy: 'reflex',
    escalated: false,
    fallback: choice.unavailable,
    model_latency_ms: null,
    trace: reflexTrace(choice, snapshot, reflex),
    ...reflexPricing(reflex),
  };
}

/**
 * Reconciles a model call's result with reflex's decision. A failed call, an answer that fails
 * `checkModelAnswer`, or a tip the policy refuses by now (the policy may have changed, or slots passed, while the
 * model thought) falls back to reflex's tip, with the reason in `fallback` and the trace. A valid `hold` is
 * returned as such: holding is the model's call to make.
 */
export function reconcileModelAnswer(
  consultation: ModelConsultation,
  tx: TrackedTx,
  world: DecisionWorld,
): ReconciledAnswer {
  const { choice, result, reflex } = consultation;
  let fallback: string | null = null;
  let toolInput: unknown = undefined;
  let answer: CheckedAnswer | null = null;
  if (!result.ok) {
    fallback = `${result.reason}: ${result.detail}`;
  } else {
    toolInput = result.tool_input;
    const checked = checkModelAnswer(result.tool_input, allowedTipRange(tx, world.policy));
    if (checked.ok) answer = checked.answer;
    else fallback = `invalid_answer: ${checked.problem}`;
  }

  if (answer?.action === 'hold') return { action: 'hold', rationale: answer.rationale };
  // Checked as the sidecar will check it, with the world as it is now rather than when the model was asked.
  const violation = answer ? violationOf(answer.tip_lamports, tx, world) : null;
  if (violation) {
    fallback = `invalid_answer: breaks ${violation.key}`;
    answer = null;
  }
  if (answer) {
    return {
      action: 'submit',
      plan: {
        tip: answer.tip_lamports,
        reason: `${choice.escalated ? 'escalated' : 'cortex'}: ${answer.rationale || 'model decision'}`,
        tier: choice.tier,
        decidedBy: 'cortex',
        escalated: choice.escalated,
        fallback: null,
        model_latency_ms: result.latency_ms,
        trace: modelTrace(consultation, { toolInput, rationale: answer.rationale, fallbackReason: null }),
        ...modelPricing(answer.tip_lamports, reflex),
      },
    };
  }
  return {
    action: 'submit',
    plan: {
      tip: reflex.tip_lamports,
      reason: `${reflex.reason} (model fallback: ${fallback})`,
      tier: choice.tier,
      decidedBy: 'reflex',
      escalated: choice.escalated,
      fallback,
      model_latency_ms: result.latency_ms,
      trace: modelTrace(consultation, { toolInput, rationale: reflex.reason, fallbackReason: fallback }),
      ...reflexPricing(reflex),
    },
  };
}
