import { z } from 'zod';
import { RelayError } from './errors';
import {
  BLOCKHASH_LIFETIME_SLOTS,
  JITO_MIN_TIP_LAMPORTS,
  PRIORITIES,
  TIP_PERCENTILES,
  type Priority,
} from './vocabulary';

/**
 * The policy file's schema (DESIGN §5): the ten keys, kebab-case as written in
 * `relay.policy.json`, each with its default, range and meaning. Every key is optional in the file;
 * parsing fills the defaults. Single-key ranges live here; rules across keys live in
 * {@link validatePolicy}.
 */
export const PolicySchema = z
  .strictObject({
    'max-tip': z
      .int()
      .min(JITO_MIN_TIP_LAMPORTS)
      .default(2_000_000)
      .describe('Ceiling on any tip, in lamports. At least min-tip.'),
    'tip-percentile': z
      .enum(TIP_PERCENTILES)
      .default('p75')
      .describe('Tip-floor statistic a first attempt targets: p25, p50, p75, p95, p99 or ema.'),
    'max-retries': z.int().min(0).max(20).default(3).describe('Attempts allowed after the first. 0 to 20.'),
    'expiry-slots': z
      .int()
      .min(1)
      .max(10_000)
      .default(150)
      .describe(
        'No attempt is made more than this many slots after enqueue. 1 to 10,000; above 150 (blockhash lifetime) is warned.',
      ),
    'escalation-step': z
      .int()
      .min(0)
      .default(50_000)
      .describe("A cap, in lamports: a retry's tip is at most the previous tip plus this step."),
    'max-queue': z
      .int()
      .min(1)
      .max(1_000_000)
      .default(1_000)
      .describe('Enqueue is refused (429) at this many non-terminal transactions. 1 to 1,000,000.'),
    'rate-limit': z
      .int()
      .min(1)
      .max(1_000_000)
      .default(600)
      .describe('Accepted enqueues per sliding 60 s window, across all callers (tx/min). 1 to 1,000,000.'),
    priority: z
      .enum(PRIORITIES)
      .nullable()
      .default(null)
      .describe(
        'When set, every transaction uses this priority (low, normal, high); null or absent = unset.',
      ),
    'min-tip': z
      .int()
      .min(JITO_MIN_TIP_LAMPORTS)
      .default(JITO_MIN_TIP_LAMPORTS)
      .describe("Floor on any tip, in lamports (Jito's minimum is 1,000)."),
    'spend-limit': z
      .int()
      .min(0)
      .default(500_000_000)
      .describe('Tip + fee lamports reservable per rolling hour; at least max-tip, or 0 for no limit.'),
  })
  .describe('relay policy file (relay.policy.json). Every key is optional; absent keys take their default.');

/** A fully resolved policy: every key present. */
export type Policy = z.output<typeof PolicySchema>;

/** One policy key. */
export type PolicyKey = keyof Policy;

/** The contents of a policy file: only the keys it overrides. */
export type PolicyFile = { [K in PolicyKey]?: Policy[K] };

/** The ten policy keys, in file order. */
export const POLICY_KEYS = Object.keys(PolicySchema.shape) as PolicyKey[];

/** The built-in defaults. */
export const DEFAULT_POLICY: Readonly<Policy> = Object.freeze(PolicySchema.parse({}));

/** True for one of the ten keys. */
export function isPolicyKey(value: unknown): value is PolicyKey {
  return typeof value === 'string' && (POLICY_KEYS as string[]).includes(value);
}

/** The meaning of a key, from the schema. */
export function describePolicyKey(key: PolicyKey): string {
  return PolicySchema.shape[key].description ?? '';
}

/** Stable codes of the problems {@link validatePolicy} reports. */
export type PolicyProblemCode =
  | 'invalid_json'
  | 'not_an_object'
  | 'unknown_key'
  | 'invalid_value'
  | 'min_tip_above_max_tip'
  | 'spend_limit_below_max_tip'
  | 'escalation_step_zero_with_retries'
  | 'expiry_beyond_blockhash_lifetime';

/** One policy problem. `error` refuses the file; `warning` is reported and the file is used. */
export interface PolicyProblem {
  code: PolicyProblemCode;
  severity: 'error' | 'warning';
  /** The key at fault (the first, when a rule involves two); null when the whole file is at fault. */
  key: string | null;
  message: string;
}

/** The verdict on a policy file's contents. */
export interface PolicyValidation {
  /** True when no problem is an error. */
  ok: boolean;
  /** The resolved policy when `ok`, else null. */
  policy: Policy | null;
  /** The file's valid known keys when `ok`, else null. */
  file: PolicyFile | null;
  /** Every problem found, errors and warnings, in a stable order. */
  problems: PolicyProblem[];
}

/**
 * Validates the parsed JSON of a policy file and reports every problem at once: unknown keys, bad
 * values (each naming its key), and contradictions between keys — `min-tip` above `max-tip`
 * (error), `spend-limit` below `max-tip` unless 0 (error), `escalation-step` 0 while retries are
 * allowed (warning: a `fee_too_low` retry could not raise the tip), `expiry-slots` beyond the
 * 150-slot blockhash lifetime (warning: attempts would outlive the transaction).
 *
 * @example
 * validatePolicy({ 'max-tip': 500 }).problems[0]; // { code: 'invalid_value', key: 'max-tip', … }
 */
export function validatePolicy(input: unknown): PolicyValidation {
  const problems: PolicyProblem[] = [];
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    problems.push({
      code: 'not_an_object',
      severity: 'error',
      key: null,
      message: 'A policy file holds one JSON object of policy keys',
    });
    return { ok: false, policy: null, file: null, problems };
  }
  const record = input as Record<string, unknown>;
  const file: Record<string, unknown> = {};
  for (const key of Object.keys(record)) {
    if (!isPolicyKey(key)) {
      problems.push({
        code: 'unknown_key',
        severity: 'error',
        key,
        message: `Unknown policy key "${key}"${suggestKey(key)}`,
      });
      continue;
    }
    const parsed = PolicySchema.shape[key].safeParse(record[key]);
    if (parsed.success) {
      file[key] = parsed.data;
    } else {
      problems.push({
        code: 'invalid_value',
        severity: 'error',
        key,
        message: `${key}: ${parsed.error.issues.map((issue) => issue.message).join('; ')}`,
      });
    }
  }
  const values = { ...DEFAULT_POLICY, ...(file as PolicyFile) };
  const valid = (key: PolicyKey) => !problems.some((problem) => problem.key === key);
  if (valid('min-tip') && valid('max-tip') && values['min-tip'] > values['max-tip']) {
    problems.push({
      code: 'min_tip_above_max_tip',
      severity: 'error',
      key: 'min-tip',
      message: `min-tip ${values['min-tip']} is above max-tip ${values['max-tip']}`,
    });
  }
  if (
    valid('spend-limit') &&
    valid('max-tip') &&
    values['spend-limit'] !== 0 &&
    values['spend-limit'] < values['max-tip']
  ) {
    problems.push({
      code: 'spend_limit_below_max_tip',
      severity: 'error',
      key: 'spend-limit',
      message: `spend-limit ${values['spend-limit']} is below max-tip ${values['max-tip']} (use 0 for no limit)`,
    });
  }
  if (
    valid('escalation-step') &&
    valid('max-retries') &&
    values['escalation-step'] === 0 &&
    values['max-retries'] > 0
  ) {
    problems.push({
      code: 'escalation_step_zero_with_retries',
      severity: 'warning',
      key: 'escalation-step',
      message: `escalation-step is 0 with max-retries ${values['max-retries']}: a fee_too_low retry cannot raise the tip`,
    });
  }
  if (valid('expiry-slots') && values['expiry-slots'] > BLOCKHASH_LIFETIME_SLOTS) {
    problems.push({
      code: 'expiry_beyond_blockhash_lifetime',
      severity: 'warning',
      key: 'expiry-slots',
      message: `expiry-slots ${values['expiry-slots']} is beyond the ${BLOCKHASH_LIFETIME_SLOTS}-slot blockhash lifetime`,
    });
  }
  const ok = !problems.some((problem) => problem.severity === 'error');
  return {
    ok,
    policy: ok ? PolicySchema.parse(file) : null,
    file: ok ? (file as PolicyFile) : null,
    problems,
  };
}

function suggestKey(key: string): string {
  const normalised = key.toLowerCase().replace(/_/g, '-');
  return isPolicyKey(normalised) ? ` (did you mean "${normalised}"?)` : '';
}

/**
 * Parses a policy file's text and validates it. Malformed JSON is an `invalid_json` problem, not a
 * throw, so the caller reports it like any other.
 */
export function parsePolicyText(text: string): PolicyValidation {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      policy: null,
      file: null,
      problems: [
        {
          code: 'invalid_json',
          severity: 'error',
          key: null,
          message: `Not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
        },
      ],
    };
  }
  return validatePolicy(json);
}

/** Where a resolved value comes from. */
export type PolicyValueSource = 'default' | 'file';

/** One resolved key: its value, its default, and whether the file overrides it. */
export interface PolicyEntry<K extends PolicyKey = PolicyKey> {
  key: K;
  value: Policy[K];
  default: Policy[K];
  source: PolicyValueSource;
  description: string;
}

/** A policy resolved against its defaults. */
export interface ResolvedPolicy {
  values: Policy;
  /** Keys the file sets, in key order. */
  overridden: PolicyKey[];
  /** One entry per key, in key order. */
  entries: PolicyEntry[];
}

/**
 * Resolves a file's keys over the defaults, recording for each key whether it is the default or
 * set by the file (what `relay policy show` prints).
 *
 * @throws RelayError `RELAY_E_POLICY_INVALID_FILE` when the file has an error-level problem.
 */
export function resolvePolicy(file: PolicyFile | Record<string, unknown>): ResolvedPolicy {
  const validation = validatePolicy(file);
  if (!validation.ok || !validation.policy || !validation.file) {
    const errors = validation.problems.filter((problem) => problem.severity === 'error');
    throw new RelayError('RELAY_E_POLICY_INVALID_FILE', {
      reason: errors.map((problem) => problem.message).join('; '),
      problems: errors,
    });
  }
  const values = validation.policy;
  const setKeys = validation.file;
  const overridden = POLICY_KEYS.filter((key) => key in setKeys);
  const entries = POLICY_KEYS.map((key): PolicyEntry => ({
    key,
    value: values[key],
    default: DEFAULT_POLICY[key],
    source: key in setKeys ? 'file' : 'default',
    description: describePolicyKey(key),
  }));
  return { values, overridden, entries };
}

const UNSET_WORDS = new Set(['none', 'unset', 'null']);

/**
 * Reads one value as given on a command line (`"2000000"`, `"2_000_000"`, `"p95"`, `"high"`,
 * `"none"` for an unset priority) or as JSON would carry it, and checks it against the key's range.
 * Returns `null` for an unset priority.
 *
 * @throws RelayError `RELAY_E_POLICY_UNKNOWN_KEY` or `RELAY_E_POLICY_INVALID_VALUE` (details.key).
 */
export function coercePolicyValue<K extends PolicyKey>(key: K, raw: unknown): Policy[K];
export function coercePolicyValue(key: string, raw: unknown): Policy[PolicyKey];
export function coercePolicyValue(key: string, raw: unknown): Policy[PolicyKey] {
  if (!isPolicyKey(key)) throw new RelayError('RELAY_E_POLICY_UNKNOWN_KEY', { key });
  let candidate: unknown = raw;
  if (typeof raw === 'string') {
    const text = raw.trim();
    if (key === 'priority' && UNSET_WORDS.has(text.toLowerCase())) candidate = null;
    else if (key === 'tip-percentile' || key === 'priority') candidate = text.toLowerCase();
    else if (/^\d+(?:[_,]\d{3})*$/.test(text)) candidate = Number(text.replace(/[_,]/g, ''));
    else candidate = text;
  }
  const parsed = PolicySchema.shape[key].safeParse(candidate);
  if (!parsed.success) {
    throw new RelayError('RELAY_E_POLICY_INVALID_VALUE', {
      key,
      value: raw,
      reason: parsed.error.issues.map((issue) => issue.message).join('; '),
    });
  }
  return parsed.data as Policy[PolicyKey];
}

/**
 * Returns a new file object with one key set (`relay policy set`). Setting `priority` to unset
 * removes the key. The result may still contradict itself (say `min-tip` above `max-tip`): run
 * {@link validatePolicy} on it before writing.
 *
 * @throws RelayError `RELAY_E_POLICY_UNKNOWN_KEY` or `RELAY_E_POLICY_INVALID_VALUE`.
 */
export function setPolicyValue(file: PolicyFile, key: string, raw: unknown): PolicyFile {
  const value = coercePolicyValue(key, raw);
  const next: Record<string, unknown> = { ...file };
  if (key === 'priority' && value === null) delete next[key];
  else next[key] = value;
  return orderPolicyFile(next as PolicyFile);
}

/**
 * Returns a new file object with one key removed, or with every key removed when none is given
 * (`relay policy reset [key]`).
 *
 * @throws RelayError `RELAY_E_POLICY_UNKNOWN_KEY` for an unknown key.
 */
export function resetPolicy(file: PolicyFile, key?: string): PolicyFile {
  if (key === undefined) return {};
  if (!isPolicyKey(key)) throw new RelayError('RELAY_E_POLICY_UNKNOWN_KEY', { key });
  const next: PolicyFile = { ...file };
  delete next[key];
  return orderPolicyFile(next);
}

/** The file contents after `relay policy clear`: nothing set (the caller deletes the file). */
export function clearPolicy(): PolicyFile {
  return {};
}

/** The keys of a file in schema order, so rewritten files diff cleanly. */
export function orderPolicyFile(file: PolicyFile): PolicyFile {
  const ordered: Record<string, unknown> = {};
  for (const key of POLICY_KEYS) if (key in file) ordered[key] = file[key];
  return ordered as PolicyFile;
}

/** The text to write for a policy file: pretty JSON, keys in schema order, trailing newline. */
export function serializePolicyFile(file: PolicyFile): string {
  return `${JSON.stringify(orderPolicyFile(file), null, 2)}\n`;
}

/** The JSON Schema of the policy file, generated from {@link PolicySchema}. */
export function policyJsonSchema(): Record<string, unknown> {
  const { $schema, ...rest } = z.toJSONSchema(PolicySchema, { io: 'input', target: 'draft-2020-12' });
  return { $schema, $id: 'https://solrelay.dev/schema/policy.schema.json', title: 'relay policy', ...rest };
}

/** The effective priority of a transaction: the policy pin when set, else the transaction's own. */
/** Send order of the priorities: lower goes first. */
export const PRIORITY_RANK: Readonly<Record<Priority, number>> = { high: 0, normal: 1, low: 2 };

export function effectivePriority(policy: Pick<Policy, 'priority'>, own: Priority): Priority {
  return policy.priority ?? own;
}
