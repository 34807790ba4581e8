/**
 * Sending a reconciled plan: `POST /internal/submit`, after the sidecar's own policy check is run once more on the
 * world as it is now (it moves during a decision). A refusal is read by its error code (`sidecar-errors.ts`), so
 * only the sidecar saying the transaction is unknown or over makes the agent stop tracking it.
 */
import { isRelayError, type DecisionMode, type RelayError } from '@solrelay/core';
import { violationOf, type DecisionWorld, type TrackedTx } from './decision';
import { messageOf, oneLine, shortBundleId } from './log-text';
import type { AgentLog, AgentRelayClient, Clock } from './ports';
import type { SubmitPlan } from './reconcile';
import { submitRefusalOf } from './sidecar-errors';

/** One accepted submission, as reported to `onSubmit`. */
export interface SubmitRecord {
  tx_id: string;
  bundle_id: string;
  tip_lamports: number;
  /** The tier the sidecar's mode chose for this decision (what the trace records as `decision_mode`). */
  tier: DecisionMode;
  /**
   * The tier that produced the submitted tip, sent as the submit's `decision_mode` (the lifecycle records it):
   * `cortex` when the model's answer was used, `reflex` for reflex's own decision, including every fallback.
   */
  decision_mode: DecisionMode;
  escalated: boolean;
  fallback_reason: string | null;
  /** From the start of the decision cycle (enqueue, a failed attempt's settle, or the watchdog) to the 202. */
  latency_ms: number;
  model_latency_ms: number | null;
}

/** What sending a plan needs from the agent. */
export interface SubmitContext {
  readonly client: Pick<AgentRelayClient, 'submit'>;
  readonly log: AgentLog;
  readonly clock: Clock;
  /** After the sidecar refuses a submit, wait this many slots before deciding again. */
  readonly refusedCooldownSlots: number;
  readonly onSubmit: ((record: SubmitRecord) => void) | undefined;
  world(): DecisionWorld | null;
  /** Reflex ended the transaction's attempts (it stays queued at the sidecar until expiry). */
  stopTx(txId: string, why: string): void;
  /** Stop tracking a transaction. */
  forget(txId: string): void;
  /** The sidecar refused the token. */
  refuse(error: RelayError): void;
  /** Re-read the sidecar state (policy, slot, floor, mode). */
  reread(why: string): void;
}

/** Submit `plan` for `tx`, unless the policy refuses it by now; a refusal is handled by its code. */
export async function submitPlan(ctx: SubmitContext, tx: TrackedTx, plan: SubmitPlan): Promise<void> {
  const world = ctx.world();
  if (!world) return;
  const violation = violationOf(plan.tip, tx, world);
  if (violation) {
    // Reflex's own decision is built inside the bounds; this only trips when the world moved during a decision.
    if (violation.key === 'expiry-slots' || violation.key === 'max-retries') {
      ctx.stopTx(tx.tx_id, `${violation.key} (${violation.actual} > ${violation.limit})`);
    } else {
      ctx.log.error(
        `not submitting ${tx.tx_id}: tip ${plan.tip} breaks ${violation.key} (limit ${violation.limit})`,
      );
      tx.cooldown_until_slot = world.slot + ctx.refusedCooldownSlots;
    }
    return;
  }
  tx.status = 'submitted';
  const reason = plan.reason.slice(0, 2_000) || 'agent decision';
  try {
    const response = await ctx.client.submit({
      tx_id: tx.tx_id,
      tip_lamports: plan.tip,
      reason,
      escalated: plan.escalated,
      decision_mode: plan.decidedBy,
      trace: plan.trace,
      ...(plan.pricing ? { pricing: plan.pricing } : {}),
    });
    const latency = Math.max(0, ctx.clock.now() - tx.cycle_started_ms);
    ctx.log.line(
      `submit ${tx.tx_id} tip=${plan.tip} tier=${plan.tier} escalated=${plan.escalated} latency_ms=${latency}` +
        `${plan.pricing ? ` contention=${plan.pricing.contention} bid_per_cu=${plan.pricing.bid_per_cu}` : ''}` +
        `${plan.model_latency_ms === null ? '' : ` model_ms=${plan.model_latency_ms}`}` +
        `${plan.fallback ? ` fallback=${plan.fallback.split(':')[0]}` : ''}` +
        ` bundle=${shortBundleId(response.bundle_id)} reason=${oneLine(reason)}`,
    );
    ctx.onSubmit?.({
      tx_id: tx.tx_id,
      bundle_id: response.bundle_id,
      tip_lamports: plan.tip,
      tier: plan.tier,
      decision_mode: plan.decidedBy,
      escalated: plan.escalated,
      fallback_reason: plan.fallback,
      latency_ms: latency,
      model_latency_ms: plan.model_latency_ms,
    });
  } catch (error) {
    refused(ctx, tx, world, error);
  }
}

function refused(ctx: SubmitContext, tx: TrackedTx, world: DecisionWorld, error: unknown): void {
  const relayError = isRelayError(error) ? error : null;
  const refusal = submitRefusalOf(error);
  switch (refusal) {
    case 'not_pending':
      // An attempt is in flight, or attempts stopped: wait for events or the watchdog (it stays "submitted").
      ctx.log.line(`skip ${tx.tx_id} reason=${oneLine(messageOf(error))}`);
      return;
    case 'tx_ended':
      // Over at the sidecar (its terminal event may still be on its way): nothing is left to decide.
      ctx.log.line(`skip ${tx.tx_id} reason=${oneLine(messageOf(error))}`);
      ctx.forget(tx.tx_id);
      return;
    case 'unknown_tx':
      ctx.forget(tx.tx_id);
      return;
    case 'token_refused':
      if (relayError) ctx.refuse(relayError);
      return;
    case 'stale_copy':
    case 'retry_later':
      break;
  }
  tx.status = 'pending';
  tx.cooldown_until_slot = world.slot + ctx.refusedCooldownSlots;
  const key = typeof relayError?.details.key === 'string' ? ` key=${relayError.details.key}` : '';
  ctx.log.error(`submit ${tx.tx_id} refused${key}: ${oneLine(messageOf(error))}`);
  // The sidecar judged the tip by a policy (or state) this agent does not have: re-read it before retrying, or
  // the same refused tip comes back after the cooldown. A spend-limit refusal is `retry_later`: the rolling budget
  // is spent (the sidecar's reservations, not a policy this agent lacks), so a re-read cannot change the answer; the
  // cooldown waits for reservations to be released or to age out of the hour.
  if (refusal === 'stale_copy') ctx.reread('submit refused (422)');
}
