import { CONTENTION_CLASSES } from './pricing';
import type { LandingView } from './landing';
import type { WebhookEndpointStatus } from './webhooks';
import { z } from 'zod';
import { MAX_USER_TRANSACTIONS } from './bundle-id';
import { RelayError, previewValue, type ErrorBody } from './errors';
import { AiDecisionTraceSchema, type LifecycleEntry } from './lifecycle';
import type { TipFloorView } from './oracle';
import type { AttemptOutcome } from './outcomes';
import type { Policy, PolicyEntry, PolicyKey, PolicyProblem } from './policy';
import type { BundleStage, QueuedTxState, TxState } from './states';
import {
  DECISION_MODES,
  PRIORITIES,
  TIP_MODES,
  TX_ENCODINGS,
  type DecisionMode,
  type Priority,
  type TipMode,
} from './vocabulary';

/** Largest request body the API accepts (413 above). */
export const MAX_REQUEST_BODY_BYTES = 256 * 1024;

/** Default count of `GET /lifecycle`. */
export const DEFAULT_LIFECYCLE_LAST = 10;

const lamports = z.int().min(0);
const encodedTransaction = z.string().min(1, 'must not be empty');

/**
 * `POST /tx/enqueue` body. `transaction` (one) or `transactions` (1 to 4), not both. Defaults:
 * `encoding` base64, `priority` normal, `tip` auto. `max_tip` below `min-tip` is a 422 the sidecar
 * checks against the live policy.
 */
export const EnqueueRequestSchema = z
  .strictObject({
    transactions: z.array(encodedTransaction).min(1).max(MAX_USER_TRANSACTIONS).optional(),
    transaction: encodedTransaction.optional(),
    encoding: z.enum(TX_ENCODINGS).default('base64'),
    priority: z.enum(PRIORITIES).default('normal'),
    tip: z.enum(TIP_MODES).default('auto'),
    expiry_slots: z.int().min(1).max(10_000).optional(),
    max_tip: lamports.optional(),
  })
  .refine((body) => (body.transactions === undefined) !== (body.transaction === undefined), {
    message: 'give either `transaction` or `transactions`',
    path: ['transactions'],
  })
  .transform(({ transaction, transactions, ...rest }) => ({
    ...rest,
    transactions: transactions ?? (transaction === undefined ? [] : [transaction]),
  }));

/** A validated enqueue request, normalised to a `transactions` list. */
export type EnqueueRequest = z.output<typeof EnqueueRequestSchema>;
/** An enqueue body as a caller writes it. */
export type EnqueueRequestBody = z.input<typeof EnqueueRequestSchema>;

/** `POST /tx/enqueue` answer: 202 for a new transaction, 200 for a repeat. */
export interface EnqueueResponse {
  tx_id: string;
  state: TxState;
  slot: number;
  signatures: string[];
}

/**
 * Most levels of nesting a submit's `trace` may have. The trace is free-form JSON (the agent's inputs and tool
 * call), journaled and written to the lifecycle log; a deeper one could not be serialised at all.
 */
export const MAX_TRACE_DEPTH = 32;

/** True when `value` nests objects and arrays at most `max` levels deep. Iterative: safe on any depth. */
function nestingAtMost(value: unknown, max: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    if (item.value === null || typeof item.value !== 'object') continue;
    if (item.depth > max) return false;
    for (const child of Object.values(item.value)) pending.push({ value: child, depth: item.depth + 1 });
  }
  return true;
}

/** `POST /internal/submit` body. */
export const SubmitRequestSchema = z.strictObject({
  tx_id: z.string().min(1),
  tip_lamports: lamports,
  reason: z.string().min(1).max(2_000),
  escalated: z.boolean().optional(),
  trace: AiDecisionTraceSchema.nullable()
    .optional()
    .refine((trace) => nestingAtMost(trace, MAX_TRACE_DEPTH), {
      message: `must be nested at most ${MAX_TRACE_DEPTH} levels deep`,
    }),
  /**
   * The tier that actually produced this decision (a cortex agent that fell back to reflex says `reflex`). The
   * lifecycle records it; without it the sidecar records its own current mode.
   */
  decision_mode: z.enum(DECISION_MODES).optional(),
  /**
   * How the tip was priced per requested CU (DESIGN §11), when it was: the bid per CU the decider asked for, the
   * contention it read and the signal, in words. The sidecar counts the bundle's CU itself and records all of it in
   * the lifecycle entry; a packed bundle never takes a rider that would rank it below `bid_per_cu`.
   */
  pricing: z
    .strictObject({
      bid_per_cu: z.number().min(0),
      contention: z.enum(CONTENTION_CLASSES),
      signal: z.string().min(1).max(2_000),
    })
    .optional(),
});

/** A validated submit request. */
export type SubmitRequest = z.output<typeof SubmitRequestSchema>;

/** `POST /internal/submit` answer (202). */
export interface SubmitResponse {
  tx_id: string;
  bundle_id: string;
  tip_lamports: number;
}

/** `POST /internal/mode` body. */
export const ModeRequestSchema = z.strictObject({ decision_mode: z.enum(DECISION_MODES) });

/** A validated mode request. */
export type ModeRequest = z.output<typeof ModeRequestSchema>;

/** `GET|POST /internal/mode` answer. */
export interface ModeResponse {
  decision_mode: DecisionMode;
}

/** `GET /internal/agent/info` answer. */
export interface AgentInfo {
  model: string;
  provider: string;
  /** Unix epoch milliseconds. */
  connected_since: number;
}

/** One state a transaction entered. */
export interface TxHistoryEntry {
  state: TxState;
  slot: number;
  /** Unix epoch milliseconds. */
  ts: number;
}

/** One attempt (bundle) of a transaction. */
export interface TxAttempt {
  attempt: number;
  bundle_id: string;
  tip_lamports: number;
  slot_submitted: number;
  stage: BundleStage;
  outcome: AttemptOutcome | null;
  /** The tipper keypair that signed this attempt's tip transaction (base58); null for `"tip":"included"`. */
  tipper?: string | null;
  /** Requested CU of the whole bundle as sent (a pack's once packed); null when not known (DESIGN §11). */
  compute_units?: number | null;
  /** tip_lamports / compute_units. */
  tip_per_cu?: number | null;
  /** The rank this attempt's own transaction needs, lamports per CU (a pack never ranks it lower). */
  bid_per_cu?: number | null;
  /** The signal that priced the tip. */
  priced_by?: string | null;
  /** The regional block engine that took the bundle (its name); null until one did, or when not known. */
  region?: string | null;
}

/** `GET /tx/{tx_id}` answer: the full record. */
export interface TxRecord {
  tx_id: string;
  state: TxState;
  priority: Priority;
  tip: TipMode;
  max_tip: number | null;
  enqueued_slot: number;
  expires_at_slot: number;
  /** The user transactions' first signatures. */
  tx_signatures: string[];
  bundle_id: string | null;
  history: TxHistoryEntry[];
  attempts: TxAttempt[];
  retries: number;
  last_error: ErrorBody['error'] | null;
  failure: AttemptOutcome | null;
}

/** Health of one upstream. */
export interface UpstreamHealth {
  ok: boolean;
  detail: string | null;
  /** Unix epoch milliseconds of the last good exchange, or null. */
  last_ok_at: number | null;
}

/** One tipper of the pool in `GET /status`. */
export interface TipperStatus {
  pubkey: string;
  /** At its last read (`confirmed`), or null before the first. */
  balance_lamports: number | null;
  /** Tips and fees of its attempts that may still take from it after that read. */
  reserved_lamports: number;
  /** Its attempts in flight (built, not yet landed or settled). */
  in_flight: number;
  /** What a new tip and its fee may take: balance - reserved - the rent-exempt minimum (null before a read). */
  available_lamports: number | null;
  /** Why it is passed over, when it is (its own tip transaction failed and its balance does not cover it yet). */
  held_reason: string | null;
}

/** `GET /status` answer. */
export interface StatusResponse {
  slot: number;
  leader: string | null;
  bundle_engine_leader: boolean | null;
  next_bundle_engine_leader_slot: number | null;
  tip: { p50: number; p75: number };
  stale: boolean;
  decision_mode: DecisionMode;
  bypass: boolean;
  /** Pending (non-terminal) transactions. */
  queue: number;
  agent: { connected: boolean; model: string | null; provider: string | null };
  upstream: {
    stream: UpstreamHealth;
    rpc: UpstreamHealth;
    block_engine: UpstreamHealth;
    tip_floor: UpstreamHealth;
  };
  /** The first tipper of the pool (`KEYPAIR_PATH`'s first file), kept for callers that read one. */
  tipper: { pubkey: string; balance_lamports: number | null };
  /** Every tipper of the pool, in `KEYPAIR_PATH` order. Absent from sidecars older than the pool. */
  tippers?: TipperStatus[];
  /**
   * Tips and fees reserved or paid in the rolling hour, against `spend-limit` (0 = no limit). When the window is
   * full, submits are refused with RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED until reservations are released or age out.
   */
  spend: { window_lamports: number; limit_lamports: number };
  paused_reason: string | null;
  /**
   * Each regional block engine bundles go to (`BUNDLE_ENGINE_URL`, comma-separated), in configured order: its
   * region name, address, how long a 429 or failure still keeps it from sending, and what it answered.
   */
  block_engine_regions: BlockEngineRegionStatus[];
  /**
   * What relay can send (regions × `BUNDLE_ENGINE_RPS` bundles a second), what waits to be sent, how long that takes
   * to go out, and how many enqueues were refused because they could not have been sent before they expire.
   */
  capacity: {
    send_rate_per_s: number;
    /**
     * The recent share of settled bundles that landed, as admission counts it (waiting transactions go out at
     * send_rate_per_s × what a bundle carries × this; at least 0.25). Absent from older sidecars.
     */
    landed_share?: number;
    /** Milliseconds per slot as relay measures it (deadlines in slots become time with it). */
    slot_ms: number;
    waiting: number;
    expected_wait_s: number;
    refused_total: number;
  };
  /** One entry per configured webhook endpoint (`RELAY_WEBHOOK_URL`); empty when none is. */
  webhooks: WebhookEndpointStatus[];
  /**
   * This sidecar's host session and every session of its database (PostgreSQL store, DESIGN §10); null on the local
   * journal. Absent from sidecars older than host sessions.
   */
  fleet?: FleetStatus | null;
  /**
   * What became of the bundles this sidecar sent since it started, by the regional engine that took each one and by
   * the contention class its tip was priced for: taken, landed (confirmed), lost, tips paid. Absent from older sidecars.
   */
  landing?: LandingView;
}

/** `GET /status`'s `fleet`: this host's session, and the sessions its database knows. */
export interface FleetStatus {
  /** `RELAY_HOST_ID`. */
  host_id: string;
  /** This host's current epoch (a new one at each start, and after a lease that lapsed). */
  epoch: number;
  /** `RELAY_LEASE_MS`. */
  lease_ms: number;
  /** Whether this host's session holds (its writes are fenced by it); false while it registers again. */
  live: boolean;
  /** Sessions not ended, and those ended in the last 10 minutes; null when the database could not be read. */
  hosts: FleetHostStatus[] | null;
}

/** One host session in {@link FleetStatus}. Ages are by the database's clock. */
export interface FleetHostStatus {
  host_id: string;
  epoch: number;
  /** ISO 8601. */
  started_at: string;
  heartbeat_age_ms: number;
  /** Until the lease lapses (negative once it has). */
  lease_remaining_ms: number;
  /** Not ended and its lease not lapsed. */
  live: boolean;
  /** ISO 8601, or null while open. */
  ended_at: string | null;
  /** Live transactions this session owns. */
  owned: number;
}

export interface BlockEngineRegionStatus {
  /** The engine's name for it (GetRegions), else the host's first label. */
  region: string;
  url: string;
  /** Milliseconds it still cools after a 429 or a failed request; 0 when it takes bundles. */
  cooling_ms: number;
  /** Bundles it took (an id back), refused (a verdict), and requests that failed in transport (429, 5xx, timeouts). */
  accepted: number;
  rejected: number;
  transport_errors: number;
}

/** `GET /tip` answer (lamports). */
export type TipResponse = TipFloorView;

/** One line of `GET /queue`: a transaction not yet terminal. */
export interface QueueEntry {
  tx_id: string;
  /** Its state now: `pending` waits for an attempt to be sent; the others have one sent or on chain. */
  state: QueuedTxState;
  age_slots: number;
  priority: Priority;
  retries: number;
}

/** `GET /queue` answer. */
export interface QueueResponse {
  /**
   * Every transaction not yet terminal, whatever its state: the spec's name for the queue's size, kept for the
   * callers that read it. `by_state.pending` counts the ones still waiting to be sent.
   */
  pending: number;
  /** The queue's transactions counted by state (every state present, 0 included); they add up to `pending`. */
  by_state: Record<QueuedTxState, number>;
  evicted_total: number;
  /** Sorted by `tx_id`, so by enqueue time. */
  entries: QueueEntry[];
}

/** `GET /lifecycle?last=N` answer, most recent last. */
export interface LifecycleListResponse {
  entries: LifecycleEntry[];
}

/** `GET /bundle/{bundle_id}` answer. */
export type BundleResponse = LifecycleEntry;

/** `GET /policy` answer. */
export interface PolicyView {
  values: Policy;
  overridden: PolicyKey[];
  entries: PolicyEntry[];
  /** The policy file's path, or null when none is configured. */
  path: string | null;
  /** Problems of the file on disk (when it was refused, `values` are the last good policy). */
  problems: PolicyProblem[];
}

/** `GET /readyz` answer (200 when ready, 503 otherwise). */
export interface ReadyResponse {
  ready: boolean;
  reasons: string[];
}

/** The `last` query of `GET /lifecycle`: a positive integer, default 10. */
export const LifecycleQuerySchema = z.strictObject({
  last: z.coerce.number().int().min(1).max(10_000).default(DEFAULT_LIFECYCLE_LAST),
});

/**
 * Validates a request body against a schema. A failure is `RELAY_E_REQUEST_INVALID_FIELD` naming
 * the first field at fault (`details.field`, dotted path; `details.issues` lists them all).
 */
export function parseRequestBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
      field: '(body)',
      reason: 'expected a JSON object',
    });
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    field: fieldName(issue),
    message: issue.message,
  }));
  const first = issues[0] ?? { field: '(body)', message: 'invalid' };
  throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
    field: first.field,
    reason: first.message,
    issues,
  });
}

function fieldName(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys' && issue.keys.length > 0) {
    return [...issue.path.map(String), issue.keys[0]].join('.');
  }
  return issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)';
}

/** Validates `POST /tx/enqueue` (see {@link parseRequestBody}); more than 4 transactions is `RELAY_E_TX_TOO_MANY_TRANSACTIONS`. */
export function parseEnqueueRequest(body: unknown): EnqueueRequest {
  const transactions = (body as { transactions?: unknown } | null)?.transactions;
  if (Array.isArray(transactions) && transactions.length > MAX_USER_TRANSACTIONS) {
    throw new RelayError('RELAY_E_TX_TOO_MANY_TRANSACTIONS', {
      count: transactions.length,
      field: 'transactions',
    });
  }
  return parseRequestBody(EnqueueRequestSchema, body);
}

/** Validates `POST /internal/submit` (see {@link parseRequestBody}). */
export function parseSubmitRequest(body: unknown): SubmitRequest {
  return parseRequestBody(SubmitRequestSchema, body);
}

/**
 * Validates `POST /internal/mode`. An unknown mode is `RELAY_E_MODE_INVALID`, other faults
 * `RELAY_E_REQUEST_INVALID_FIELD`.
 */
export function parseModeRequest(body: unknown): ModeRequest {
  const mode = (body as { decision_mode?: unknown } | null)?.decision_mode;
  if (
    typeof body === 'object' &&
    body !== null &&
    mode !== undefined &&
    !(DECISION_MODES as readonly unknown[]).includes(mode)
  ) {
    // The value is echoed back: bounded, and as text (a deeply nested one would not even serialise).
    throw new RelayError('RELAY_E_MODE_INVALID', { value: previewValue(mode), field: 'decision_mode' });
  }
  return parseRequestBody(ModeRequestSchema, body);
}
