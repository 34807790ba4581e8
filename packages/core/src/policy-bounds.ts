import { RelayError, type PolicyViolationDetails } from './errors';
import type { Policy } from './policy';
import type { TipMode } from './vocabulary';

/**
 * The tip range a policy and a caller allow: `[min-tip, min(max-tip, caller max_tip)]`. `max` is
 * below `min` when the caller's cap is below `min-tip` (no tip is allowed then).
 */
export interface TipBounds {
  min: number;
  max: number;
}

/** The allowed tip range for a transaction. */
export function tipBounds(
  policy: Pick<Policy, 'min-tip' | 'max-tip'>,
  callerMaxTip: number | null,
): TipBounds {
  return {
    min: policy['min-tip'],
    max: callerMaxTip === null ? policy['max-tip'] : Math.min(policy['max-tip'], callerMaxTip),
  };
}

/**
 * Clamps a tip into the allowed range. If the range is empty (caller cap below `min-tip`) the
 * caller's cap wins, because it is a promise made to the caller; the submit check then refuses the
 * tip on `min-tip`, so nothing is sent.
 *
 * @example
 * clampTip(5_000_000, DEFAULT_POLICY, null); // 2_000_000 (max-tip)
 */
export function clampTip(
  tip: number,
  policy: Pick<Policy, 'min-tip' | 'max-tip'>,
  callerMaxTip: number | null,
): number {
  const bounds = tipBounds(policy, callerMaxTip);
  return Math.min(Math.max(Math.ceil(tip), bounds.min), bounds.max);
}

/**
 * The most a retry may tip: the previous tip plus `escalation-step`, but never less than `min-tip`
 * (when the policy's floor was raised after the previous attempt, `min-tip` wins over the step).
 */
export function escalationCeiling(
  previousTip: number,
  policy: Pick<Policy, 'escalation-step' | 'min-tip'>,
): number {
  return Math.max(previousTip + policy['escalation-step'], policy['min-tip']);
}

/** What the sidecar knows when an agent (or a manual call) asks to submit an attempt. */
export interface SubmitCheckInput {
  tip_lamports: number;
  tip_mode: TipMode;
  /** The caller's `max_tip` from enqueue, or null. */
  caller_max_tip: number | null;
  /** The previous attempt's tip, or null for a first attempt. */
  previous_tip_lamports: number | null;
  /** Retries counted so far (an attempt after a previous one is retry number `retries`). */
  retries: number;
  slot: number;
  /** The last slot an attempt may be made. */
  expires_at_slot: number;
  /** Tip + fee lamports already reserved in the rolling hour. Default 0. */
  spent_in_window_lamports?: number;
  /** Fee lamports this attempt reserves besides the tip. Default 0. */
  fee_lamports?: number;
}

/** The codes of a broken bound; each carries {@link PolicyViolationDetails}. */
export type PolicyViolationCode =
  | 'RELAY_E_TX_TIP_NOT_RAISABLE'
  | 'RELAY_E_POLICY_MAX_TIP_EXCEEDED'
  | 'RELAY_E_POLICY_MIN_TIP_NOT_MET'
  | 'RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED'
  | 'RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP'
  | 'RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED'
  | 'RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED'
  | 'RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED'
  | 'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED';

/** A broken bound: the policy key (or `max_tip`, the caller's cap; `tip`, a tip on an included-tip transaction), its code, limit and the offending value. */
export interface PolicyViolation {
  key: PolicyViolationDetails['key'];
  code: PolicyViolationCode;
  limit: number;
  actual: number;
}

/**
 * Checks a requested submission against the policy and returns the first bound it breaks, or
 * null. The sidecar refuses such a submit with 422 naming the key; it never clamps silently.
 * Checked in order: included tip, `max-retries`, `expiry-slots`, caller `max_tip`, `max-tip`,
 * `min-tip`, `escalation-step`, `spend-limit`. An included-tip transaction (tip 0) skips the four
 * tip bounds but not `max-retries`, `expiry-slots` or `spend-limit` (its fee is still reserved).
 */
export function checkSubmitAgainstPolicy(input: SubmitCheckInput, policy: Policy): PolicyViolation | null {
  const tip = input.tip_lamports;
  const included = input.tip_mode === 'included';
  if (included && tip !== 0) {
    return { key: 'tip', code: 'RELAY_E_TX_TIP_NOT_RAISABLE', limit: 0, actual: tip };
  }
  // Retries, expiry and spend bind every transaction, an included-tip one too; only the tip bounds
  // do not apply to a tip the caller paid inside its own transaction.
  if ((included || input.previous_tip_lamports !== null) && input.retries > policy['max-retries']) {
    return {
      key: 'max-retries',
      code: 'RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED',
      limit: policy['max-retries'],
      actual: input.retries,
    };
  }
  if (input.slot > input.expires_at_slot) {
    return {
      key: 'expiry-slots',
      code: 'RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED',
      limit: input.expires_at_slot,
      actual: input.slot,
    };
  }
  if (!included && input.caller_max_tip !== null && tip > input.caller_max_tip) {
    return {
      key: 'max_tip',
      code: 'RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED',
      limit: input.caller_max_tip,
      actual: tip,
    };
  }
  if (!included && tip > policy['max-tip']) {
    return { key: 'max-tip', code: 'RELAY_E_POLICY_MAX_TIP_EXCEEDED', limit: policy['max-tip'], actual: tip };
  }
  if (!included && tip < policy['min-tip']) {
    return { key: 'min-tip', code: 'RELAY_E_POLICY_MIN_TIP_NOT_MET', limit: policy['min-tip'], actual: tip };
  }
  if (!included && input.previous_tip_lamports !== null) {
    const ceiling = escalationCeiling(input.previous_tip_lamports, policy);
    if (tip > ceiling) {
      return {
        key: 'escalation-step',
        code: 'RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED',
        limit: ceiling,
        actual: tip,
      };
    }
  }
  const reserve = (input.spent_in_window_lamports ?? 0) + tip + (input.fee_lamports ?? 0);
  if (policy['spend-limit'] > 0 && reserve > policy['spend-limit']) {
    return {
      key: 'spend-limit',
      code: 'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED',
      limit: policy['spend-limit'],
      actual: reserve,
    };
  }
  return null;
}

/** The 422 error for a violation, with `details.key`, `limit`, `actual` and, for a submit, `tx_id`. */
export function policyViolationError(
  violation: PolicyViolation,
  txId?: string,
): RelayError<PolicyViolationCode> {
  const details: PolicyViolationDetails = {
    key: violation.key,
    limit: violation.limit,
    actual: violation.actual,
    ...(txId === undefined ? {} : { tx_id: txId }),
  };
  return new RelayError(violation.code, details);
}

/**
 * The last slot an attempt may be made for a transaction enqueued at `enqueueSlot`: the request's
 * `expiry_slots` when given, never more than the policy's `expiry-slots`.
 */
export function expiresAtSlot(
  enqueueSlot: number,
  policy: Pick<Policy, 'expiry-slots'>,
  requestedExpirySlots?: number | null,
): number {
  const slots = Math.min(requestedExpirySlots ?? policy['expiry-slots'], policy['expiry-slots']);
  return enqueueSlot + slots;
}

/**
 * Checks an enqueue request's own limits against the policy: a `max_tip` below `min-tip` can never
 * be honoured, so it is refused at the door (422, key `max_tip`) instead of expiring later.
 */
export function checkEnqueueAgainstPolicy(
  request: { max_tip?: number | null; tip?: TipMode },
  policy: Pick<Policy, 'min-tip'>,
): PolicyViolation | null {
  const cap = request.max_tip;
  if (request.tip !== 'included' && cap !== undefined && cap !== null && cap < policy['min-tip']) {
    return {
      key: 'max_tip',
      code: 'RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP',
      limit: policy['min-tip'],
      actual: cap,
    };
  }
  return null;
}
