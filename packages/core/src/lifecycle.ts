import { z } from 'zod';
import { deriveBundleId } from './bundle-id';
import { ATTEMPT_OUTCOMES } from './outcomes';
import { CONTENTION_CLASSES } from './pricing';
import { BUNDLE_STAGES } from './states';
import { DECISION_MODES } from './vocabulary';

const lamports = z.int().min(0);
const slot = z.int().min(0);
const epochMs = z.int().min(0);
const durationMs = z.int().min(0).nullable();
const base58Signature = z.string().regex(/^[1-9A-HJ-NP-Za-km-z]{32,88}$/);

/** When a stage was reached: slot and Unix epoch milliseconds. */
export const TimelinePointSchema = z.strictObject({ slot, ts: epochMs });

/** The LLM decision trace stored with a lifecycle entry. Known fields are typed; others are kept. */
export const AiDecisionTraceSchema = z.looseObject({
  model: z.string().optional(),
  provider: z.string().optional(),
  request_id: z.string().nullable().optional(),
  latency_ms: z.number().min(0).optional(),
  usage: z
    .looseObject({
      input_tokens: z.int().min(0).optional(),
      output_tokens: z.int().min(0).optional(),
      cache_read_input_tokens: z.int().min(0).optional(),
      cache_creation_input_tokens: z.int().min(0).optional(),
    })
    .optional(),
  inputs: z.unknown().optional(),
  tool_input: z.unknown().optional(),
  rationale: z.string().optional(),
  /** Why the reflex decision was used instead (timeout, error, refusal, invalid, agent_absent). */
  fallback_reason: z.string().nullable().optional(),
});

/** A decision trace. */
export type AiDecisionTrace = z.infer<typeof AiDecisionTraceSchema>;

/**
 * One line of the lifecycle log (DESIGN §4): the whole entry of one bundle at one stage. The latest
 * line of a `bundle_id` is its entry. Slots are integers, times Unix epoch milliseconds.
 */
export const LifecycleEntrySchema = z
  .strictObject({
    v: z.literal(1),
    bundle_id: z.string().regex(/^[0-9a-f]{64}$/),
    tx_id: z.string().min(1),
    attempt: z.int().min(1).describe('1 for the first attempt of the transaction'),
    stage: z.enum(BUNDLE_STAGES),
    failure: z.enum(ATTEMPT_OUTCOMES).nullable(),
    slot_submitted: slot,
    slot_landed: slot.nullable(),
    tip_lamports: lamports,
    tip_floor_at_submit: z.strictObject({
      p25: lamports,
      p50: lamports,
      p75: lamports,
      p95: lamports,
      p99: lamports,
      ema: lamports,
      stale: z.boolean(),
    }),
    compute_units: z
      .int()
      .min(0)
      .nullable()
      .optional()
      .describe(
        "Requested compute units of the whole bundle as sent (user transactions, riders and relay's tip transaction); null when unknown",
      ),
    tip_per_cu: z
      .number()
      .min(0)
      .nullable()
      .optional()
      .describe('tip_lamports / compute_units: the rank the auction reads (DESIGN §11); null when unknown'),
    contention: z
      .enum(CONTENTION_CLASSES)
      .nullable()
      .optional()
      .describe(
        "The contention class of the bundle's write set when it was priced; null when not priced per CU",
      ),
    priced_by: z
      .string()
      .nullable()
      .optional()
      .describe('The signal that priced the tip, in words (or who chose a tip not priced per CU)'),
    region: z
      .string()
      .nullable()
      .optional()
      .describe(
        'The regional block engine that took the bundle (its name); null until one did, or when not known',
      ),
    leader: z.string().nullable(),
    decision_mode: z.enum(DECISION_MODES),
    bypass: z.boolean().describe('true for bypass submissions, which record decision_mode "reflex"'),
    escalated: z.boolean().describe('true when the reflex path handed the decision to the LLM'),
    submitted_to_processed_ms: durationMs,
    processed_to_confirmed_ms: durationMs,
    confirmed_to_finalized_ms: durationMs,
    timeline: z.strictObject({
      submitted: TimelinePointSchema.nullable(),
      landed: TimelinePointSchema.nullable(),
      processed: TimelinePointSchema.nullable(),
      confirmed: TimelinePointSchema.nullable(),
      finalized: TimelinePointSchema.nullable(),
      failed: TimelinePointSchema.nullable(),
    }),
    transactions: z
      .array(base58Signature)
      .min(1)
      .max(5)
      .describe('First signature of every transaction of the bundle, in bundle order'),
    ai_decision_trace: AiDecisionTraceSchema.nullable(),
  })
  .describe('relay lifecycle log entry, version 1');

/** A lifecycle log entry. */
export type LifecycleEntry = z.infer<typeof LifecycleEntrySchema>;

/** A lifecycle timeline. */
export type LifecycleTimeline = LifecycleEntry['timeline'];

/** The current lifecycle entry version. */
export const LIFECYCLE_ENTRY_VERSION = 1;

/** A timeline with every stage unreached, keys in their required order. */
export function emptyTimeline(): LifecycleTimeline {
  return { submitted: null, landed: null, processed: null, confirmed: null, finalized: null, failed: null };
}

/** The three stage durations, from a timeline; null until both ends are reached. */
export function timelineDurations(
  timeline: LifecycleTimeline,
): Pick<
  LifecycleEntry,
  'submitted_to_processed_ms' | 'processed_to_confirmed_ms' | 'confirmed_to_finalized_ms'
> {
  const between = (a: { ts: number } | null, b: { ts: number } | null) =>
    a && b ? Math.max(0, b.ts - a.ts) : null;
  return {
    submitted_to_processed_ms: between(timeline.submitted, timeline.processed),
    processed_to_confirmed_ms: between(timeline.processed, timeline.confirmed),
    confirmed_to_finalized_ms: between(timeline.confirmed, timeline.finalized),
  };
}

/**
 * Rules an entry must keep beyond its shape: the bundle id is the hash of its signatures, a
 * failure is named exactly when the stage is `failed`, and the stage's own timeline point is set.
 * Returns one message per broken rule (empty when the entry is consistent).
 */
export function lifecycleEntryProblems(entry: LifecycleEntry): string[] {
  const problems: string[] = [];
  try {
    if (deriveBundleId(entry.transactions) !== entry.bundle_id) {
      problems.push('bundle_id is not the SHA-256 of the joined transaction signatures');
    }
  } catch {
    problems.push('transactions are not a valid bundle');
  }
  if ((entry.stage === 'failed') !== (entry.failure !== null)) {
    problems.push('failure must be set exactly when stage is failed');
  }
  if (entry.timeline[entry.stage] === null)
    problems.push(`timeline.${entry.stage} must be set at stage ${entry.stage}`);
  return problems;
}

/**
 * Reads one line of the lifecycle log. Returns null for a line that is not a valid entry (a torn
 * last line after a crash is skipped, not fatal).
 */
export function parseLifecycleLine(line: string): LifecycleEntry | null {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return null;
  }
  const parsed = LifecycleEntrySchema.safeParse(json);
  return parsed.success ? parsed.data : null;
}

/** The JSON Schema of a lifecycle entry, generated from {@link LifecycleEntrySchema}. */
export function lifecycleEntryJsonSchema(): Record<string, unknown> {
  const { $schema, ...rest } = z.toJSONSchema(LifecycleEntrySchema, { target: 'draft-2020-12' });
  return {
    $schema,
    $id: 'https://solrelay.dev/schema/lifecycle-entry.schema.json',
    title: 'relay lifecycle entry',
    ...rest,
  };
}
