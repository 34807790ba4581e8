import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import bs58 from 'bs58';
import { z } from 'zod';
import {
  LifecycleEntrySchema,
  deriveBundleId,
  emptyTimeline,
  lifecycleEntryProblems,
  parseLifecycleLine,
  timelineDurations,
  type LifecycleEntry,
} from '../src';

const SCHEMA = JSON.parse(
  readFileSync(join(__dirname, '..', 'schema', 'lifecycle-entry.schema.json'), 'utf8'),
) as { properties: Record<string, unknown>; required: string[] };

// The JSON Schema file, read back as a validator independent of the zod source.
const fileValidator = z.fromJSONSchema(SCHEMA as Parameters<typeof z.fromJSONSchema>[0]);

function signature(seed: number): string {
  return bs58.encode(Uint8Array.from({ length: 64 }, (_, i) => (seed * 31 + i * 7) % 256));
}

const transactions = [signature(1), signature(2)];

const FINALIZED: LifecycleEntry = {
  v: 1,
  bundle_id: deriveBundleId(transactions),
  tx_id: 'tx_01J9Z8X7W6V5T4S3R2Q1P0N9M8',
  attempt: 1,
  stage: 'finalized',
  failure: null,
  slot_submitted: 1_000,
  slot_landed: 1_002,
  tip_lamports: 40_000,
  tip_floor_at_submit: {
    p25: 5_000,
    p50: 10_000,
    p75: 40_000,
    p95: 1_400_000,
    p99: 10_000_000,
    ema: 9_000,
    stale: false,
  },
  region: 'amsterdam',
  leader: 'GdnSyH3YtwcxFvQrVVJMm1JhTS4QVX7MFsX56uJLUfiZ',
  decision_mode: 'reflex',
  bypass: false,
  escalated: false,
  submitted_to_processed_ms: 900,
  processed_to_confirmed_ms: 1_200,
  confirmed_to_finalized_ms: 12_800,
  timeline: {
    submitted: { slot: 1_000, ts: 1_700_000_000_000 },
    landed: { slot: 1_002, ts: 1_700_000_000_800 },
    processed: { slot: 1_002, ts: 1_700_000_000_900 },
    confirmed: { slot: 1_005, ts: 1_700_000_002_100 },
    finalized: { slot: 1_034, ts: 1_700_000_014_900 },
    failed: null,
  },
  transactions,
  ai_decision_trace: null,
};

const FAILED: LifecycleEntry = {
  ...FINALIZED,
  attempt: 2,
  stage: 'failed',
  failure: 'fee_too_low',
  slot_landed: null,
  decision_mode: 'cortex',
  escalated: true,
  submitted_to_processed_ms: null,
  processed_to_confirmed_ms: null,
  confirmed_to_finalized_ms: null,
  timeline: { ...emptyTimeline(), submitted: { slot: 1_000, ts: 1 }, failed: { slot: 1_008, ts: 2 } },
  ai_decision_trace: {
    model: 'claude-haiku-4-5',
    request_id: 'req_1',
    latency_ms: 812,
    usage: { input_tokens: 900, output_tokens: 60, cache_read_input_tokens: 800 },
    rationale: 'floor moved up',
    fallback_reason: null,
    extra_field: 'kept',
  },
};

const INVALID: Array<[string, unknown]> = [
  ['wrong version', { ...FINALIZED, v: 2 }],
  ['missing field', (({ tip_lamports: _omit, ...rest }) => rest)(FINALIZED)],
  ['extra field', { ...FINALIZED, surprise: true }],
  ['upper-case bundle id', { ...FINALIZED, bundle_id: FINALIZED.bundle_id.toUpperCase() }],
  ['unknown stage', { ...FINALIZED, stage: 'pending' }],
  ['unknown failure class', { ...FAILED, failure: 'too_slow' }],
  ['negative tip', { ...FINALIZED, tip_lamports: -1 }],
  ['fractional slot', { ...FINALIZED, slot_submitted: 1.5 }],
  ['unknown decision mode', { ...FINALIZED, decision_mode: 'bypass' }],
  ['timeline missing a stage', { ...FINALIZED, timeline: { ...FINALIZED.timeline, failed: undefined } }],
  ['six transactions', { ...FINALIZED, transactions: [1, 2, 3, 4, 5, 6].map(signature) }],
  ['no transactions', { ...FINALIZED, transactions: [] }],
  [
    'tip floor without stale',
    { ...FINALIZED, tip_floor_at_submit: { ...FINALIZED.tip_floor_at_submit, stale: undefined } },
  ],
  ['trace as a string', { ...FINALIZED, ai_decision_trace: 'thoughts' }],
  ['a region that is not a name', { ...FINALIZED, region: 3 }],
];

describe('lifecycle entry schema', () => {
  it.each([
    ['finalized', FINALIZED],
    ['failed with trace', FAILED],
  ])('accepts a %s entry (zod and the JSON Schema file)', (_name, entry) => {
    expect(LifecycleEntrySchema.safeParse(entry).success).toBe(true);
    expect(fileValidator.safeParse(JSON.parse(JSON.stringify(entry))).success).toBe(true);
    expect(lifecycleEntryProblems(entry)).toEqual([]);
  });

  it.each(INVALID)('refuses an entry with %s (zod and the JSON Schema file)', (_name, entry) => {
    expect(LifecycleEntrySchema.safeParse(entry).success).toBe(false);
    expect(fileValidator.safeParse(JSON.parse(JSON.stringify(entry))).success).toBe(false);
  });

  it('type and schema agree on field names', () => {
    // A key added to or removed from LifecycleEntry without this list failing to compile is impossible:
    const fields: Record<keyof LifecycleEntry, true> = {
      v: true,
      bundle_id: true,
      tx_id: true,
      attempt: true,
      stage: true,
      failure: true,
      slot_submitted: true,
      slot_landed: true,
      tip_lamports: true,
      tip_floor_at_submit: true,
      compute_units: true,
      tip_per_cu: true,
      contention: true,
      priced_by: true,
      region: true,
      leader: true,
      decision_mode: true,
      bypass: true,
      escalated: true,
      submitted_to_processed_ms: true,
      processed_to_confirmed_ms: true,
      confirmed_to_finalized_ms: true,
      timeline: true,
      transactions: true,
      ai_decision_trace: true,
    };
    expect(Object.keys(SCHEMA.properties).sort()).toEqual(Object.keys(fields).sort());
    // The pricing fields (DESIGN §11) and the region are optional: lines written before them still parse.
    const optional = ['compute_units', 'tip_per_cu', 'contention', 'priced_by', 'region'];
    expect([...SCHEMA.required].sort()).toEqual(
      Object.keys(fields)
        .filter((key) => !optional.includes(key))
        .sort(),
    );
    const timeline = (SCHEMA.properties.timeline as { properties: Record<string, unknown> }).properties;
    expect(Object.keys(timeline)).toEqual([
      'submitted',
      'landed',
      'processed',
      'confirmed',
      'finalized',
      'failed',
    ]);
  });
});

describe('lifecycle helpers', () => {
  it('finds broken cross-field rules', () => {
    expect(lifecycleEntryProblems({ ...FINALIZED, bundle_id: 'f'.repeat(64) })).toEqual([
      'bundle_id is not the SHA-256 of the joined transaction signatures',
    ]);
    expect(lifecycleEntryProblems({ ...FINALIZED, failure: 'dropped' })).toEqual([
      'failure must be set exactly when stage is failed',
    ]);
    expect(lifecycleEntryProblems({ ...FAILED, timeline: emptyTimeline() })).toEqual([
      'timeline.failed must be set at stage failed',
    ]);
  });

  it('computes stage durations from a timeline', () => {
    expect(timelineDurations(FINALIZED.timeline)).toEqual({
      submitted_to_processed_ms: 900,
      processed_to_confirmed_ms: 1_200,
      confirmed_to_finalized_ms: 12_800,
    });
    expect(timelineDurations(emptyTimeline())).toEqual({
      submitted_to_processed_ms: null,
      processed_to_confirmed_ms: null,
      confirmed_to_finalized_ms: null,
    });
  });

  it('parses log lines, skipping torn ones', () => {
    const line = JSON.stringify(FINALIZED);
    expect(parseLifecycleLine(line)).toEqual(FINALIZED);
    expect(parseLifecycleLine(line.slice(0, line.length - 10))).toBeNull();
    expect(parseLifecycleLine('{"v":1}')).toBeNull();
  });
});
