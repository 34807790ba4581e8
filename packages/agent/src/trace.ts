/**
 * The reasoning trace of a decision, sent with every submit and stored as the lifecycle entry's
 * `ai_decision_trace` (DESIGN §6: model, request id, latency, token usage, cache use, inputs, tool input,
 * rationale, fallback reason). Pure: built from what the decision already has.
 */
import type { AiDecisionTrace, DecisionMode, ReflexDecision } from '@solrelay/core';
import type { TierChoice } from './decision';
import type { DecisionModel, ModelResult } from './ports';
import type { DecisionSnapshot } from './snapshot';

/** The trace sent with every submit (lands in the lifecycle entry's `ai_decision_trace`). */
export type AgentDecisionTrace = AiDecisionTrace & {
  /**
   * The tier the agent's mode chose (what was attempted; with `fallback_reason` set, reflex's decision was sent). The
   * tier that produced the tip goes in the submit's own `decision_mode`.
   */
  decision_mode: DecisionMode;
  escalated: boolean;
  inputs: DecisionSnapshot;
  cache_hit?: boolean;
  reflex?: { tip_lamports: number; reason: string; tip_per_cu?: number; bid_per_cu?: number };
};

/** Reflex's decision when it would submit: the reference every trace carries. */
export type SubmittingReflex = Extract<ReflexDecision, { action: 'submit' }>;

/** What a decision that asked the model knows when its trace is built. */
export interface ModelConsultation {
  choice: TierChoice;
  model: Pick<DecisionModel, 'model' | 'provider'>;
  result: ModelResult;
  snapshot: DecisionSnapshot;
  reflex: SubmittingReflex;
}

/**
 * The trace of a decision the model was not asked about. `fallback_reason` says why when the tier wanted the
 * model but none is configured (`cortex_unavailable`, `escalation_unavailable`); otherwise it is null.
 */
export function reflexTrace(
  choice: TierChoice,
  snapshot: DecisionSnapshot,
  reflex: SubmittingReflex,
): AgentDecisionTrace {
  return {
    decision_mode: choice.tier,
    escalated: false,
    inputs: snapshot,
    rationale: reflex.reason,
    fallback_reason: choice.unavailable,
  };
}

/**
 * The trace of a decision that asked the model: the call's facts (request id, latency, usage and cache use), the
 * inputs, reflex's answer for reference, then what was decided. `toolInput` is the model's raw answer, omitted
 * when there was none (a failed call); `fallbackReason` is null when the model's answer was used.
 */
export function modelTrace(
  consultation: ModelConsultation,
  outcome: { toolInput: unknown; rationale: string; fallbackReason: string | null },
): AgentDecisionTrace {
  const { choice, model, result, snapshot, reflex } = consultation;
  return {
    decision_mode: choice.tier,
    escalated: choice.escalated,
    model: model.model,
    provider: model.provider,
    request_id: result.request_id,
    latency_ms: result.latency_ms,
    ...(result.usage
      ? { usage: { ...result.usage }, cache_hit: result.usage.cache_read_input_tokens > 0 }
      : {}),
    inputs: snapshot,
    reflex: {
      tip_lamports: reflex.tip_lamports,
      reason: reflex.reason,
      ...(reflex.pricing
        ? { tip_per_cu: reflex.pricing.tip_per_cu, bid_per_cu: reflex.pricing.bid_per_cu }
        : {}),
    },
    ...(outcome.toolInput === undefined ? {} : { tool_input: outcome.toolInput }),
    rationale: outcome.rationale,
    fallback_reason: outcome.fallbackReason,
  };
}
