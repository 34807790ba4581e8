import { RelayError } from './errors';

/** Every state of a relay transaction (DESIGN §2 "States"). */
export const TX_STATES = [
  'pending',
  'submitted',
  'landed',
  'processed',
  'confirmed',
  'finalized',
  'failed',
  'expired',
] as const;

/** A transaction's state. */
export type TxState = (typeof TX_STATES)[number];

/** States a transaction never leaves. */
export const TERMINAL_TX_STATES = ['finalized', 'failed', 'expired'] as const satisfies readonly TxState[];

/** A terminal transaction state. */
export type TerminalTxState = (typeof TERMINAL_TX_STATES)[number];

/**
 * The states of a transaction still in the queue (every state but the terminal ones), in forward order:
 * `pending` waits for an attempt to be sent; the others have one sent or on chain and not yet final.
 */
export const QUEUED_TX_STATES = [
  'pending',
  'submitted',
  'landed',
  'processed',
  'confirmed',
] as const satisfies readonly Exclude<TxState, TerminalTxState>[];

/** The state of a transaction still in the queue. */
export type QueuedTxState = (typeof QUEUED_TX_STATES)[number];

/**
 * The forward path a transaction walks when all goes well. An observation may jump ahead on it
 * (a signature seen `confirmed` while relay still thinks `submitted`); the skipped states are then
 * emitted in this order.
 */
export const TX_PROGRESS_PATH = [
  'pending',
  'submitted',
  'landed',
  'processed',
  'confirmed',
  'finalized',
] as const satisfies readonly TxState[];

/** True for `finalized`, `failed` and `expired`. */
export function isTerminalTxState(state: TxState): state is TerminalTxState {
  return (TERMINAL_TX_STATES as readonly TxState[]).includes(state);
}

/** True for a known state name. */
export function isTxState(value: unknown): value is TxState {
  return typeof value === 'string' && (TX_STATES as readonly string[]).includes(value);
}

/** Backward moves: a retryable outcome re-pends a submission; a dead or off-fork slot re-pends a landing. */
const RE_PEND_FROM: readonly TxState[] = ['submitted', 'landed', 'processed'];

/**
 * Every state reachable from each state in one observed move (forward jumps included; the states
 * they skip are what {@link txTransitionPath} adds). Terminal states have none.
 */
export const TX_TRANSITIONS: Readonly<Record<TxState, readonly TxState[]>> = Object.freeze(
  Object.fromEntries(TX_STATES.map((from) => [from, Object.freeze(computeTargets(from))])) as Record<
    TxState,
    readonly TxState[]
  >,
);

function computeTargets(from: TxState): TxState[] {
  if (isTerminalTxState(from)) return [];
  const progress = TX_PROGRESS_PATH as readonly TxState[];
  const ahead = progress.slice(progress.indexOf(from) + 1);
  const back: TxState[] = RE_PEND_FROM.includes(from) ? ['pending'] : [];
  return [...back, ...ahead, 'failed', 'expired'];
}

/** True when `from -> to` is a legal move (possibly a forward jump). Same-state is not a move. */
export function canTransition(from: TxState, to: TxState): boolean {
  return TX_TRANSITIONS[from].includes(to);
}

/**
 * The ordered states to emit for an observed move `from -> to`, ending with `to`: a forward jump
 * lists every skipped state (`submitted -> confirmed` gives `landed, processed, confirmed`); any
 * other legal move gives `[to]`.
 *
 * @throws RelayError `RELAY_E_TX_ILLEGAL_TRANSITION` for an illegal move, a move out of a terminal
 * state, or `from === to`.
 */
export function txTransitionPath(from: TxState, to: TxState): TxState[] {
  if (!canTransition(from, to)) {
    throw new RelayError('RELAY_E_TX_ILLEGAL_TRANSITION', { from, to });
  }
  const progress = TX_PROGRESS_PATH as readonly TxState[];
  const fromIndex = progress.indexOf(from);
  const toIndex = progress.indexOf(to);
  if (fromIndex >= 0 && toIndex > fromIndex) return progress.slice(fromIndex + 1, toIndex + 1);
  return [to];
}

/** Stages of one bundle (attempt) in the lifecycle log. */
export const BUNDLE_STAGES = [
  'submitted',
  'landed',
  'processed',
  'confirmed',
  'finalized',
  'failed',
] as const;

/** A bundle's lifecycle stage. */
export type BundleStage = (typeof BUNDLE_STAGES)[number];

/** Bundle stages that end a lifecycle. */
export const TERMINAL_BUNDLE_STAGES = ['finalized', 'failed'] as const satisfies readonly BundleStage[];

/** True for `finalized` and `failed`. */
export function isTerminalBundleStage(stage: BundleStage): stage is (typeof TERMINAL_BUNDLE_STAGES)[number] {
  return stage === 'finalized' || stage === 'failed';
}

/**
 * The ordered stages to record for a bundle moving `from -> to`: forward jumps list the skipped
 * stages, `failed` is reachable from any non-terminal stage. Bundles never move backwards: a dead
 * slot fails the attempt and the transaction re-pends with a new one.
 *
 * @throws RelayError `RELAY_E_TX_ILLEGAL_TRANSITION` otherwise.
 */
export function bundleStagePath(from: BundleStage, to: BundleStage): BundleStage[] {
  if (!isTerminalBundleStage(from)) {
    if (to === 'failed') return ['failed'];
    const forward = BUNDLE_STAGES.slice(0, 5) as readonly BundleStage[];
    const fromIndex = forward.indexOf(from);
    const toIndex = forward.indexOf(to);
    if (toIndex > fromIndex) return forward.slice(fromIndex + 1, toIndex + 1);
  }
  throw new RelayError('RELAY_E_TX_ILLEGAL_TRANSITION', { from, to });
}

/** The bundle stage that corresponds to a transaction state, when there is one. */
export function bundleStageForTxState(state: TxState): BundleStage | null {
  return (BUNDLE_STAGES as readonly string[]).includes(state) ? (state as BundleStage) : null;
}
