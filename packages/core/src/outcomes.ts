/**
 * Attempt outcome classes (DESIGN §2): why one bundle did not land, and what relay does next.
 * These names are carried as `failure` / `failure_type` everywhere.
 */

/** Every attempt outcome class. */
export const ATTEMPT_OUTCOMES = [
  'fee_too_low',
  'dropped',
  'simulation_failed',
  'invalid_bundle',
  'insufficient_funds',
] as const;

/** An attempt outcome (failure) class. */
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** What follows an outcome: retry with a tip that may rise, retry at the same tip, or fail the transaction. */
export type OutcomeNext = 'retry_escalate' | 'retry_same_tip' | 'fail';

/** The consequence of each outcome class. */
export const OUTCOME_NEXT: Readonly<Record<AttemptOutcome, OutcomeNext>> = Object.freeze({
  fee_too_low: 'retry_escalate',
  dropped: 'retry_same_tip',
  simulation_failed: 'fail',
  invalid_bundle: 'fail',
  insufficient_funds: 'fail',
});

/** True for a known outcome class name. */
export function isAttemptOutcome(value: unknown): value is AttemptOutcome {
  return typeof value === 'string' && (ATTEMPT_OUTCOMES as readonly string[]).includes(value);
}

/** True when another attempt follows this outcome (`fee_too_low`, `dropped`). */
export function isRetryableOutcome(outcome: AttemptOutcome): boolean {
  return OUTCOME_NEXT[outcome] !== 'fail';
}

/**
 * What one upstream report says about an attempt:
 * - `outcome`: the attempt ended without landing, with its class;
 * - `landed`: the bundle was seen in a slot (the commitment tracker still promotes from signature
 *   statuses, never from this);
 * - `none`: nothing decisive yet (forwarded, pending, or informational).
 */
export type AttemptReport =
  | { kind: 'outcome'; outcome: AttemptOutcome; detail: string }
  | { kind: 'landed'; slot: number | null; detail: string }
  | { kind: 'none'; detail: string };

/**
 * A Jito gRPC `BundleResult` in jito-ts's camelCase shape. Only the members relay reads are typed;
 * the oneofs arrive as optional properties, at most one set.
 */
export interface GrpcBundleResult {
  bundleId?: string;
  accepted?: { slot?: number; validatorIdentity?: string } | undefined;
  rejected?:
    | {
        stateAuctionBidRejected?: { msg?: string | undefined } | undefined;
        winningBatchBidRejected?: { msg?: string | undefined } | undefined;
        simulationFailure?: { txSignature?: string; msg?: string | undefined } | undefined;
        internalError?: { msg?: string } | undefined;
        droppedBundle?: { msg?: string } | undefined;
      }
    | undefined;
  finalized?: object | undefined;
  processed?: { validatorIdentity?: string; slot?: number; bundleIndex?: number } | undefined;
  dropped?: { reason?: number | string } | undefined;
}

const INSUFFICIENT_FUNDS =
  /insufficientfundsforfee|insufficient funds for fee|insufficient lamports|accountnotfound|account not found/i;

/**
 * Classifies a gRPC bundle result (DESIGN §2 table). Auction rejections are `fee_too_low`;
 * `simulationFailure` is `simulation_failed` unless its message says the fee payer cannot pay
 * (`insufficient_funds`); `droppedBundle`, `dropped` and `internalError` are `dropped` (the engine's
 * own fault is worth a retry, not a failure). `accepted` only means forwarded and decides nothing;
 * `processed` means landed.
 */
export function classifyGrpcBundleResult(result: GrpcBundleResult): AttemptReport {
  const rejected = result.rejected;
  if (rejected) {
    if (rejected.stateAuctionBidRejected) {
      return { kind: 'outcome', outcome: 'fee_too_low', detail: 'state auction bid rejected' };
    }
    if (rejected.winningBatchBidRejected) {
      return { kind: 'outcome', outcome: 'fee_too_low', detail: 'winning batch bid rejected' };
    }
    if (rejected.simulationFailure) {
      const msg = rejected.simulationFailure.msg ?? '';
      const outcome = INSUFFICIENT_FUNDS.test(msg) ? 'insufficient_funds' : 'simulation_failed';
      return { kind: 'outcome', outcome, detail: msg || 'simulation failure' };
    }
    if (rejected.droppedBundle) {
      return { kind: 'outcome', outcome: 'dropped', detail: rejected.droppedBundle.msg ?? 'bundle dropped' };
    }
    if (rejected.internalError) {
      return {
        kind: 'outcome',
        outcome: 'dropped',
        detail: rejected.internalError.msg ?? 'engine internal error',
      };
    }
    return { kind: 'outcome', outcome: 'dropped', detail: 'rejected without a known reason' };
  }
  if (result.dropped) {
    return {
      kind: 'outcome',
      outcome: 'dropped',
      detail: `dropped (reason ${String(result.dropped.reason)})`,
    };
  }
  if (result.processed) {
    return { kind: 'landed', slot: result.processed.slot ?? null, detail: 'processed by a leader' };
  }
  if (result.finalized) return { kind: 'none', detail: 'finalized (status comes from signatures)' };
  if (result.accepted) return { kind: 'none', detail: 'accepted (forwarded only)' };
  return { kind: 'none', detail: 'empty result' };
}

/** `getInflightBundleStatuses` status values. */
export type InflightBundleStatus = 'Invalid' | 'Pending' | 'Failed' | 'Landed';

/** The facts needed to read one JSON-RPC inflight status. */
export interface InflightStatusInput {
  status: InflightBundleStatus;
  landed_slot?: number | null;
  /** True once the bundle-engine leader window the attempt targeted has passed. */
  window_passed: boolean;
  tip_lamports: number;
  /** The tip floor's p50 when the window passed (or at submit, if that is all the caller kept). */
  floor_p50_lamports: number;
}

/**
 * Classifies a JSON-RPC inflight status (DESIGN §2 table). JSON-RPC never says "tip too low": a
 * losing bid stays `Pending` and ends `Failed`/`Invalid`. So once the targeted window has passed
 * without landing (or the engine says `Failed`), the outcome is `fee_too_low` when the tip was below
 * the floor's p50 at that time and `dropped` otherwise. Before the window passes, `Pending` and
 * `Invalid` decide nothing (`Invalid` can simply mean the engine has not indexed the id yet).
 */
export function classifyInflightStatus(input: InflightStatusInput): AttemptReport {
  if (input.status === 'Landed') {
    return { kind: 'landed', slot: input.landed_slot ?? null, detail: 'engine reports Landed' };
  }
  if (input.status !== 'Failed' && !input.window_passed) {
    return { kind: 'none', detail: `engine reports ${input.status}; window still open` };
  }
  const belowFloor = input.tip_lamports < input.floor_p50_lamports;
  return belowFloor
    ? {
        kind: 'outcome',
        outcome: 'fee_too_low',
        detail: `not landed (${input.status}); tip ${input.tip_lamports} below floor p50 ${input.floor_p50_lamports}`,
      }
    : { kind: 'outcome', outcome: 'dropped', detail: `not landed (${input.status})` };
}

/** How a `sendBundle` JSON-RPC error is to be handled. */
export type SendBundleErrorClass =
  | { kind: 'outcome'; outcome: AttemptOutcome; detail: string }
  | { kind: 'transport'; detail: string }
  | { kind: 'blockhash_expired'; detail: string }
  | { kind: 'already_processed'; detail: string };

/**
 * Classifies a `sendBundle` rejection by JSON-RPC code, HTTP status and message (the engine is
 * closed source; these are the observed strings of jito.md §1.8). Rate limits, 5xx and unknown
 * errors are transport errors: the same bytes are resent, no attempt is counted.
 */
export function classifySendBundleError(input: {
  httpStatus?: number;
  rpcCode?: number;
  message: string;
}): SendBundleErrorClass {
  const message = input.message;
  const detail = message;
  if (input.httpStatus === 429 || input.rpcCode === -32097) return { kind: 'transport', detail };
  if (/already processed/i.test(message)) return { kind: 'already_processed', detail };
  if (/expired blockhash|blockhash not found|invalid blockhash/i.test(message)) {
    return { kind: 'blockhash_expired', detail };
  }
  if (INSUFFICIENT_FUNDS.test(message)) return { kind: 'outcome', outcome: 'insufficient_funds', detail };
  if (
    /tip account|tip pda|maximum number of transactions|could not be decoded|is invalid|account locks|duplicate|must be signed|max transaction length/i.test(
      message,
    )
  ) {
    return { kind: 'outcome', outcome: 'invalid_bundle', detail };
  }
  if (/simulat/i.test(message)) return { kind: 'outcome', outcome: 'simulation_failed', detail };
  return { kind: 'transport', detail };
}

/**
 * Classifies a Solana `TransactionError` (the `err` of a signature status or a simulation) of a
 * user transaction: the fee payer unable to pay is `insufficient_funds`, anything else that failed
 * on execution is `simulation_failed`.
 */
export function classifyTransactionError(err: unknown): AttemptOutcome {
  const text = typeof err === 'string' ? err : JSON.stringify(err);
  return /InsufficientFundsForFee|AccountNotFound/.test(text ?? '')
    ? 'insufficient_funds'
    : 'simulation_failed';
}
