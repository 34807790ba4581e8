import type { TipFloorView } from './oracle';
import type { SlotSpan } from './consensus';
import type { AttemptOutcome } from './outcomes';
import type { Policy, PolicyKey, PolicyProblem } from './policy';
import type { ContentionSignal } from './pricing';
import type { TxState } from './states';
import type { DecisionMode, Priority, TipMode } from './vocabulary';

/** Fields on every event: `ts`, Unix epoch milliseconds when the sidecar emitted it. */
export interface EventBase {
  ts: number;
}

/** A transaction moved to a new state (one event per state, skipped states included). */
export interface TxStatusChangedEvent extends EventBase {
  tx_id: string;
  state: TxState;
  /** The bundle that produced this state, or null. */
  bundle_id: string | null;
  /** The user transactions' first signatures. */
  tx_signatures: string[];
  /** The failure class when `state` is `failed`, else null. */
  failure: AttemptOutcome | null;
}

/** What a `tx_status_changed` payload is built from: a transaction's current state, whatever holds it. */
export interface TxStatusSource {
  tx_id: string;
  state: TxState;
  /** The bundle that produced this state (usually the last attempt's), or null. */
  bundle_id: string | null;
  /** The user transactions' first signatures, whatever the state. */
  tx_signatures: readonly string[];
  /** The transaction's failure class, whatever the state. */
  failure: AttemptOutcome | null;
  ts: number;
}

/**
 * The `tx_status_changed` payload for a transaction's state: the one place its rules live. The signatures are
 * shown once the transaction has landed (not while `pending` or `submitted`); `failure` only when it `failed`.
 * Pure: the caller gives the time. The sidecar's publisher, its per-transaction stream's first frame and the
 * client's view of a record all build the event here, so the three cannot disagree.
 *
 * @example
 * hub.publish('tx_status_changed', txStatusChangedEvent({ tx_id, state: 'landed', bundle_id, tx_signatures, failure: null, ts: now }));
 */
export function txStatusChangedEvent(source: TxStatusSource): TxStatusChangedEvent {
  const beforeLanding = source.state === 'pending' || source.state === 'submitted';
  return {
    tx_id: source.tx_id,
    state: source.state,
    bundle_id: source.bundle_id,
    tx_signatures: beforeLanding ? [] : [...source.tx_signatures],
    failure: source.state === 'failed' ? source.failure : null,
    ts: source.ts,
  };
}

/** A bundle reached a terminal stage. */
export interface BundleSettledEvent extends EventBase {
  bundle_id: string;
  stage: 'finalized' | 'failed';
  failure_type: AttemptOutcome | null;
  tx_id: string;
  tip_lamports: number;
  /** The transaction's retries counted so far. */
  retries: number;
  /**
   * The settled attempt's requested CU as sent (a pack's lead's own, without its riders), when it was counted: what a
   * retry reprices from (reflex's `previous.compute_units`). Only when the transaction goes back to be decided again.
   */
  attempt_compute_units?: number;
  /**
   * When the settled attempt was a pack's lead: its own tip before packing (a pack may raise its tip to rank its
   * riders). A retry reprices from it and `attempt_compute_units` (then the lead's own CU), not from `tip_lamports`.
   */
  attempt_own_tip_lamports?: number;
  /** The next attempt's requested CU, as on `tx_enqueued`. Only when the transaction goes back to be decided again. */
  compute_units?: number;
  /** The write set's contention, as on `tx_enqueued`. Only when the transaction goes back to be decided again. */
  contention?: ContentionSignal;
}

/** A new highest processed slot. */
export interface SlotUpdateEvent extends EventBase {
  slot: number;
  /** The slot's scheduled leader, or null when not in the leader buffer. */
  leader: string | null;
  /** Whether that leader runs the bundle engine; null when unknown. */
  bundle_engine_leader: boolean | null;
  /** The first slot from this one (within the sidecar's lookahead) led by a bundle-engine validator, or null. */
  next_bundle_engine_slot: number | null;
  /**
   * The vote-only slots of a consensus migration window the sidecar has seen (DESIGN §12; `last` null while it is
   * open), present only once one began. A decider moves each transaction's give-up slot past them (core
   * `giveUpSlot`), as the sidecar does: blocks there carry no user transactions, so they use up no one's time.
   */
  vote_only_windows?: SlotSpan[];
}

/** A transaction was accepted. */
export interface TxEnqueuedEvent extends EventBase {
  tx_id: string;
  slot: number;
  priority: Priority;
  /** The last slot an attempt may be made. */
  expires_at_slot: number;
  /** The caller's tip cap, or null. */
  max_tip: number | null;
  tip: TipMode;
  /**
   * The requested CU of the bundle reflex prices (DESIGN §11): the user transactions' plus the most relay's tip
   * transaction requests. Absent for a caller-included tip (reflex bids no tip) or bytes the sidecar could not count.
   * Older agents ignore it; with it the agent's reflex prices per CU as the sidecar's fallback does.
   */
  compute_units?: number;
  /**
   * The contention of the bundle's write set (signers left out), when the sidecar held a reading of the last ~5 slots
   * as it built the event; it never makes an RPC call for it on the enqueue path. Absent: no reading yet (the agent
   * prices it as `unknown`, i.e. as contended, the fallback's reading when RPC cannot answer).
   */
  contention?: ContentionSignal;
}

/**
 * Several sidecars on one database (DESIGN §10): a host's takeover sweep adopted a transaction whose owner's session
 * ended or lapsed (a host stopped, died, or paused past its lease). From this event on, `host_id` runs it: an attempt
 * in flight is resent only as the bytes already committed, and a new tip is built only once the old one provably
 * cannot land. Written by the adopting host in the same commit as the move, so every host's stream carries it.
 */
export interface TxAdoptedEvent extends EventBase {
  tx_id: string;
  /** The host that owns the transaction now (`RELAY_HOST_ID`). */
  host_id: string;
  /** The host that owned it before, and the epoch of its session that ended or lapsed. */
  from_host_id: string;
  from_epoch: number;
  /** The transaction's state when adopted (never terminal). */
  state: TxState;
  priority: Priority;
  /** The slot it was enqueued at (`tx_enqueued`'s `slot`). */
  enqueued_slot: number;
  expires_at_slot: number;
  max_tip: number | null;
  tip: TipMode;
  /** The transaction's retries counted so far. */
  retries: number;
  /**
   * Its last attempt that ended without landing (tip and outcome), what a decider reprices from; null when none did.
   * Absent from older sidecars.
   */
  previous_attempt?: { tip_lamports: number; outcome: AttemptOutcome } | null;
}

/** A submission was requested through `POST /internal/submit`. */
export interface SubmitRequestedEvent extends EventBase {
  tx_id: string;
  bundle_id: string;
  tip_lamports: number;
  reason: string;
  /** The leader of the slot at submission; null when the leader buffer does not know it. */
  leader: string | null;
}

/** The decision mode changed. */
export interface ModeChangedEvent extends EventBase {
  decision_mode: DecisionMode;
  previous: DecisionMode;
}

/** An agent connected to or left `/internal/agent/presence`. */
export interface AgentPresenceEvent extends EventBase {
  connected: boolean;
  model: string | null;
  provider: string | null;
}

/** The policy file was reloaded (`ok`) or refused (`ok: false`, the last good policy stays). */
export interface PolicyChangedEvent extends EventBase {
  ok: boolean;
  values: Policy;
  overridden: PolicyKey[];
  problems: PolicyProblem[];
}

/** The tip oracle's view changed. */
export type TipUpdateEvent = EventBase & TipFloorView;

/** The client's `Last-Event-ID` cannot be resumed; it should re-read state. */
export interface ResyncEvent extends EventBase {
  reason: 'unknown_boot' | 'too_old';
}

/** Every event on `GET /internal/events`, keyed by SSE event name. */
export interface RelayEventMap {
  tx_status_changed: TxStatusChangedEvent;
  bundle_settled: BundleSettledEvent;
  slot_update: SlotUpdateEvent;
  tx_enqueued: TxEnqueuedEvent;
  submit_requested: SubmitRequestedEvent;
  mode_changed: ModeChangedEvent;
  agent_presence: AgentPresenceEvent;
  policy_changed: PolicyChangedEvent;
  tip_update: TipUpdateEvent;
  tx_adopted: TxAdoptedEvent;
  resync: ResyncEvent;
}

/** An event name. */
export type RelayEventName = keyof RelayEventMap;

/** An event with its name, as a discriminated union. */
export type RelayEvent = { [K in RelayEventName]: { event: K; data: RelayEventMap[K] } }[RelayEventName];

/** The five events of the spec. */
export const SPEC_EVENT_NAMES = [
  'tx_status_changed',
  'bundle_settled',
  'slot_update',
  'tx_enqueued',
  'submit_requested',
] as const satisfies readonly RelayEventName[];

/** Every event name, spec events first. */
export const RELAY_EVENT_NAMES = [
  ...SPEC_EVENT_NAMES,
  'mode_changed',
  'agent_presence',
  'policy_changed',
  'tip_update',
  'tx_adopted',
  'resync',
] as const satisfies readonly RelayEventName[];

/** True for a known event name. */
export function isRelayEventName(value: unknown): value is RelayEventName {
  return typeof value === 'string' && (RELAY_EVENT_NAMES as readonly string[]).includes(value);
}

/** Events on the agent's `/internal/agent/presence` stream. */
export interface AgentPresenceStreamEventMap {
  registered: EventBase & { decision_mode: DecisionMode; model: string; provider: string };
}

/**
 * The SSE id of an event: `<bootId>-<seq>`. Boot ids are caller-chosen and must not contain `-`,
 * CR or LF, so the id parses back unambiguously.
 */
export function formatSseEventId(bootId: string, seq: number): string {
  return `${bootId}-${seq}`;
}

/** Reads an SSE id made by {@link formatSseEventId}; null when it is not one. */
export function parseSseEventId(id: string): { bootId: string; seq: number } | null {
  const match = /^([^-\r\n]+)-(\d+)$/.exec(id);
  if (!match?.[1] || !match[2]) return null;
  const seq = Number(match[2]);
  return Number.isSafeInteger(seq) ? { bootId: match[1], seq } : null;
}
