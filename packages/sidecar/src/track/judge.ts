import { LOSS_GRACE, type LossGrace, type TxState } from '@solrelay/core';
import type { StoredAttempt } from '../store/records';

export {
  LATE_TIP_CONFIRM_BLOCKS,
  TIP_LANDING_HORIZON_SLOTS,
  inheritedTipMayLand,
  tipStillLive,
} from '../chain/tip-life';

/**
 * The pure part of judging a transaction from its signatures' statuses: no I/O, no clock (the read's slot and time
 * are inputs). `evaluate.ts` applies these verdicts through settlement.
 */

/** One signature's status as read from RPC. */
export interface StatusReading {
  slot: number;
  err: unknown;
  confirmationStatus?: string | undefined;
}
export type StatusMap = Map<string, StatusReading>;

/**
 * An attempt is judged not to have landed only once its target window is `grace.slots` slots behind and at least
 * `grace.ms` have passed since it was sent: statuses take a moment to show, and on a busy machine slots can outrun the
 * status poll. The grace is per consensus (@solrelay/core `lossGrace`, measured by `pnpm bench finality`); these are
 * TowerBFT's, the default where no mode is given.
 */
export const WINDOW_GRACE_SLOTS = LOSS_GRACE.towerbft.slots;
export const WINDOW_GRACE_MS = LOSS_GRACE.towerbft.ms;
/**
 * Whether null statuses for a landing at `landedSlot` prove its block left the chain (DESIGN §2): the cluster has
 * finalized past it, and the answer comes from a node that has seen that root (its `context.slot`). Before the root
 * passes, a node may simply sit on another fork for a while; a node behind the root has not seen the landing yet.
 * The caller still confirms with a history search (the status cache covers ~300 rooted slots).
 */
export function landingGoneBy(
  landedSlot: number,
  finalizedSlot: number,
  contextSlot: number | undefined,
): boolean {
  return finalizedSlot > landedSlot && contextSlot !== undefined && contextSlot >= finalizedSlot;
}

export function commitmentRank(status: string | undefined): number {
  return status === 'finalized' ? 2 : status === 'confirmed' ? 1 : 0;
}

/**
 * Whether the attempt in flight has missed its target window, judged against the moment the statuses were read
 * (`readAt`), never against the slot reached meanwhile.
 */
export function windowPassed(
  flying: StoredAttempt,
  readAt: { slot: number; ts: number },
  grace: LossGrace = LOSS_GRACE.towerbft,
): boolean {
  return (
    flying.stage === 'submitted' &&
    flying.window_end_slot !== null &&
    readAt.slot > flying.window_end_slot + grace.slots &&
    readAt.ts - (flying.timeline.submitted?.ts ?? flying.created_at) >= grace.ms
  );
}

/**
 * Where every user signature's own status puts the transaction: the highest slot among them, and the lowest
 * commitment (commitment is promoted only from the signatures' own status).
 */
export function progress(defined: Array<{ slot: number; confirmationStatus?: string | undefined }>): {
  slot: number;
  target: Extract<TxState, 'processed' | 'confirmed' | 'finalized'>;
} {
  const slot = Math.max(...defined.map((s) => s.slot));
  const rank = Math.min(...defined.map((s) => commitmentRank(s.confirmationStatus)));
  const target = rank >= 2 ? 'finalized' : rank === 1 ? 'confirmed' : 'processed';
  return { slot, target };
}
