/**
 * Admission against what relay can send. The block engine takes one bundle a second per region from an IP, so relay
 * can send `sendRatePerSecond` bundles (regions × per-region budget); a transaction accepted behind more than that
 * rate can clear before its attempts must stop would be accepted only to expire. It is refused at once instead, with
 * when to try again.
 */
export interface AdmissionInput {
  /** Waiting transactions that go out before this one: those of its priority or higher (the send queue's order). */
  ahead: number;
  /** Every waiting transaction, of any priority. */
  waiting: number;
  /** Bundles relay can send per second across its regions. */
  sendRatePerSecond: number;
  /** Observed milliseconds per slot. */
  slotMs: number;
  /** Slots this transaction has before attempts stop (its `expiry-slots`, at most a blockhash's life). */
  slotsLeft: number;
  /**
   * Slots the transactions already waiting have at most (the policy's `expiry-slots`, at most a blockhash's life): a
   * new one that goes out before them delays each, so the whole backlog plus it must still fit in that.
   */
  backlogSlots: number;
  /**
   * Slots kept for what follows the send: a leader window, a lost auction's resend. At most half a deadline is
   * kept, so a short `expiry-slots` still admits what can go out at once.
   */
  reserveSlots: number;
}

export type AdmissionDecision =
  | { ok: true; expectedWaitMs: number }
  | { ok: false; expectedWaitMs: number; availableMs: number; retryAfterMs: number };

/** Slots of {@link AdmissionInput.reserveSlots} relay keeps by default: about 8 s at 400 ms slots. */
export const ADMISSION_RESERVE_SLOTS = 20;

function usableMs(slots: number, reserveSlots: number, slotMs: number): number {
  const reserve = Math.min(reserveSlots, Math.floor(slots / 2));
  return Math.max(0, (slots - reserve) * slotMs);
}

/**
 * Accept when this transaction's turn to be sent (everything ahead of it, then it, at the send rate) comes before its
 * deadline less the reserve, and the whole backlog with it still goes out within the backlog's deadline (so a
 * high-priority arrival does not push transactions already accepted past theirs). Otherwise refuse, with the time
 * the backlog needs to drain far enough.
 */
export function admissionDecision(input: AdmissionInput): AdmissionDecision {
  const rate = Math.max(input.sendRatePerSecond, 1e-9);
  const turnMs = (count: number) => Math.ceil(((Math.max(0, count) + 1) / rate) * 1000);
  const expectedWaitMs = turnMs(input.ahead);
  const availableMs = usableMs(input.slotsLeft, input.reserveSlots, input.slotMs);
  const backlogMs = turnMs(Math.max(input.waiting, input.ahead));
  const backlogAvailableMs = usableMs(input.backlogSlots, input.reserveSlots, input.slotMs);
  const short = Math.max(expectedWaitMs - availableMs, backlogMs - backlogAvailableMs);
  if (short <= 0) return { ok: true, expectedWaitMs };
  return {
    ok: false,
    expectedWaitMs,
    availableMs: Math.min(availableMs, backlogAvailableMs),
    retryAfterMs: Math.max(1000, short),
  };
}
