/**
 * Admission against what relay can send. The block engine takes one bundle a second per region from an IP, so relay
 * can send `sendRatePerSecond` bundles (regions × per-region budget); a transaction accepted behind more than that
 * rate can clear before its attempts must stop would be accepted only to expire. It is refused at once instead, with
 * when to try again.
 */
export interface AdmissionInput {
  /** Transactions waiting for a send ahead of this one (accepted, not yet out). */
  ahead: number;
  /** Bundles relay can send per second across its regions. */
  sendRatePerSecond: number;
  /** Observed milliseconds per slot. */
  slotMs: number;
  /** Slots this transaction has before attempts stop (its `expiry-slots`). */
  slotsLeft: number;
  /**
   * Slots kept for what follows the send: a leader window, a lost auction's resend. At most half the deadline is
   * kept, so a short `expiry-slots` still admits what can go out at once.
   */
  reserveSlots: number;
}

export type AdmissionDecision =
  | { ok: true; expectedWaitMs: number }
  | { ok: false; expectedWaitMs: number; availableMs: number; retryAfterMs: number };

/** Slots of {@link AdmissionInput.reserveSlots} relay keeps by default: about 8 s at 400 ms slots, for a leader window and a resend. */
export const ADMISSION_RESERVE_SLOTS = 20;

/**
 * Accept when this transaction's turn to be sent (everything ahead, then it, at the send rate) comes before its
 * deadline less the reserve; otherwise refuse, with the time the backlog needs to drain far enough.
 */
export function admissionDecision(input: AdmissionInput): AdmissionDecision {
  const rate = Math.max(input.sendRatePerSecond, 1e-9);
  const expectedWaitMs = Math.ceil(((Math.max(0, input.ahead) + 1) / rate) * 1000);
  const reserve = Math.min(input.reserveSlots, Math.floor(input.slotsLeft / 2));
  const availableMs = Math.max(0, (input.slotsLeft - reserve) * input.slotMs);
  if (expectedWaitMs <= availableMs) return { ok: true, expectedWaitMs };
  return {
    ok: false,
    expectedWaitMs,
    availableMs,
    retryAfterMs: Math.max(1000, expectedWaitMs - availableMs),
  };
}
