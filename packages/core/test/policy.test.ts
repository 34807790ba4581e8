import {
  DEFAULT_POLICY,
  POLICY_KEYS,
  PolicySchema,
  clearPolicy,
  coercePolicyValue,
  isRelayError,
  parsePolicyText,
  resetPolicy,
  resolvePolicy,
  serializePolicyFile,
  setPolicyValue,
  validatePolicy,
  type PolicyKey,
} from '../src';

function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('policy defaults', () => {
  it('are the values DESIGN §5 decided', () => {
    expect(DEFAULT_POLICY).toEqual({
      'max-tip': 2_000_000,
      'tip-percentile': 'p75',
      'max-retries': 3,
      'expiry-slots': 150,
      'escalation-step': 50_000,
      'max-queue': 1_000,
      'rate-limit': 600,
      priority: null,
      'min-tip': 1_000,
      'spend-limit': 500_000_000,
    });
  });

  it('has exactly the ten keys', () => {
    expect([...POLICY_KEYS].sort()).toEqual(
      [
        'escalation-step',
        'expiry-slots',
        'max-queue',
        'max-retries',
        'max-tip',
        'min-tip',
        'priority',
        'rate-limit',
        'spend-limit',
        'tip-percentile',
      ].sort(),
    );
  });

  it('pass their own validate, with no problem at all', () => {
    expect(validatePolicy({ ...DEFAULT_POLICY })).toEqual({
      ok: true,
      policy: DEFAULT_POLICY,
      file: { ...DEFAULT_POLICY },
      problems: [],
    });
    expect(validatePolicy({})).toMatchObject({ ok: true, policy: DEFAULT_POLICY, problems: [] });
  });
});

// Each key with a value just outside its range (and a wrong type).
const OUT_OF_RANGE: Array<[PolicyKey, unknown]> = [
  ['max-tip', 999],
  ['max-tip', 1.5e3 + 0.5],
  ['max-tip', '2000000'],
  ['tip-percentile', 'p90'],
  ['tip-percentile', 75],
  ['max-retries', -1],
  ['max-retries', 21],
  ['expiry-slots', 0],
  ['expiry-slots', 10_001],
  ['escalation-step', -1],
  ['escalation-step', 0.5],
  ['max-queue', 0],
  ['max-queue', 1_000_001],
  ['rate-limit', 0],
  ['rate-limit', 1_000_001],
  ['priority', 'urgent'],
  ['min-tip', 999],
  ['min-tip', null],
  ['spend-limit', -1],
  ['spend-limit', Number.MAX_SAFE_INTEGER + 2],
];

describe('policy validation', () => {
  it.each(OUT_OF_RANGE)('rejects %s = %p naming the key', (key, value) => {
    const result = validatePolicy({ [key]: value });
    expect(result.ok).toBe(false);
    expect(result.policy).toBeNull();
    expect(result.problems).toEqual([
      expect.objectContaining({ code: 'invalid_value', severity: 'error', key }),
    ]);
    expect(result.problems[0]?.message.startsWith(`${key}:`)).toBe(true);
    // the zod schema alone says the same, with the key as the issue path
    const parsed = PolicySchema.safeParse({ [key]: value });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual([key]);
  });

  it.each([
    ['max-tip', 1_000],
    ['max-retries', 0],
    ['max-retries', 20],
    ['expiry-slots', 1],
    ['escalation-step', 0],
    ['max-queue', 1_000_000],
    ['rate-limit', 1],
    ['priority', 'high'],
    ['priority', null],
    ['min-tip', 1_000],
    ['spend-limit', 0],
    ['tip-percentile', 'ema'],
  ] as Array<[PolicyKey, unknown]>)('accepts %s = %p at the edge of its range', (key, value) => {
    const result = validatePolicy({ [key]: value });
    expect(result.problems.filter((p) => p.severity === 'error')).toEqual([]);
    expect(result.policy?.[key]).toBe(value);
  });

  it('reports every problem at once, with stable codes and severities', () => {
    const result = validatePolicy({
      'min-tip': 5_000,
      'max-tip': 4_000,
      'spend-limit': 3_000,
      'escalation-step': 0,
      'max-retries': 2,
      'expiry-slots': 300,
      max_tip: 1,
      'rate-limit': 'fast',
    });
    expect(result.ok).toBe(false);
    expect(result.problems.map((p) => [p.code, p.severity, p.key])).toEqual([
      ['unknown_key', 'error', 'max_tip'],
      ['invalid_value', 'error', 'rate-limit'],
      ['min_tip_above_max_tip', 'error', 'min-tip'],
      ['spend_limit_below_max_tip', 'error', 'spend-limit'],
      ['escalation_step_zero_with_retries', 'warning', 'escalation-step'],
      ['expiry_beyond_blockhash_lifetime', 'warning', 'expiry-slots'],
    ]);
    expect(result.problems[0]?.message).toContain('did you mean "max-tip"');
  });

  it('accepts a file with warnings only', () => {
    const result = validatePolicy({ 'expiry-slots': 151 });
    expect(result.ok).toBe(true);
    expect(result.policy?.['expiry-slots']).toBe(151);
    expect(result.problems.map((p) => p.code)).toEqual(['expiry_beyond_blockhash_lifetime']);
  });

  it('lets spend-limit 0 mean no limit, and escalation-step 0 pass without retries', () => {
    expect(validatePolicy({ 'spend-limit': 0, 'max-tip': 9_000_000 }).problems).toEqual([]);
    expect(validatePolicy({ 'escalation-step': 0, 'max-retries': 0 }).problems).toEqual([]);
  });

  it('refuses what is not an object, and malformed JSON', () => {
    for (const input of [null, [], 'x', 3]) {
      expect(validatePolicy(input).problems.map((p) => p.code)).toEqual(['not_an_object']);
    }
    expect(parsePolicyText('{"max-tip": ').problems.map((p) => p.code)).toEqual(['invalid_json']);
    expect(parsePolicyText('{"max-tip": 3000000}\n').policy?.['max-tip']).toBe(3_000_000);
  });
});

describe('resolve, set, reset, clear', () => {
  it('resolves values with their override status', () => {
    const resolved = resolvePolicy({ 'max-tip': 3_000_000, priority: 'high' });
    expect(resolved.values['max-tip']).toBe(3_000_000);
    expect(resolved.values['min-tip']).toBe(1_000);
    expect(resolved.overridden).toEqual(['max-tip', 'priority']);
    expect(resolved.entries.find((e) => e.key === 'max-tip')).toMatchObject({
      value: 3_000_000,
      default: 2_000_000,
      source: 'file',
    });
    expect(resolved.entries.find((e) => e.key === 'rate-limit')).toMatchObject({
      value: 600,
      source: 'default',
    });
    expect(resolved.entries.every((e) => e.description.length > 0)).toBe(true);
  });

  it('refuses to resolve an invalid file', () => {
    const error = thrownBy(() => resolvePolicy({ 'min-tip': 10, bogus: 1 }));
    expect(isRelayError(error, 'RELAY_E_POLICY_INVALID_FILE')).toBe(true);
  });

  it.each([
    ['max-tip', '2000000', 2_000_000],
    ['max-tip', '2_500_000', 2_500_000],
    ['max-tip', '3,000,000', 3_000_000],
    ['max-tip', 1_500, 1_500],
    ['tip-percentile', 'p95', 'p95'],
    ['tip-percentile', ' P99 ', 'p99'],
    ['priority', 'high', 'high'],
    ['priority', 'none', null],
    ['max-retries', '0', 0],
  ] as Array<[PolicyKey, unknown, unknown]>)('coerces %s from %p', (key, raw, expected) => {
    expect(coercePolicyValue(key, raw)).toBe(expected);
  });

  it.each([
    ['max-tip', '2e6'],
    ['max-tip', '-5'],
    ['max-tip', 'lots'],
    ['max-retries', '21'],
    ['priority', 'urgent'],
    ['tip-percentile', 'p90'],
  ])('refuses to set %s to %p, naming the key', (key, raw) => {
    const error = thrownBy(() => setPolicyValue({}, key, raw));
    expect(isRelayError(error, 'RELAY_E_POLICY_INVALID_VALUE')).toBe(true);
    expect((error as { details: { key: string } }).details.key).toBe(key);
  });

  it('refuses unknown keys', () => {
    expect(
      isRelayError(
        thrownBy(() => setPolicyValue({}, 'max_tip', '1')),
        'RELAY_E_POLICY_UNKNOWN_KEY',
      ),
    ).toBe(true);
    expect(
      isRelayError(
        thrownBy(() => resetPolicy({}, 'nope')),
        'RELAY_E_POLICY_UNKNOWN_KEY',
      ),
    ).toBe(true);
  });

  it('sets without mutating, in key order; unsetting priority removes it', () => {
    const file = { 'min-tip': 2_000 };
    const next = setPolicyValue(file, 'max-tip', '3000000');
    expect(file).toEqual({ 'min-tip': 2_000 });
    expect(Object.keys(next)).toEqual(['max-tip', 'min-tip']);
    const pinned = setPolicyValue(next, 'priority', 'high');
    expect(pinned.priority).toBe('high');
    expect('priority' in setPolicyValue(pinned, 'priority', 'unset')).toBe(false);
  });

  it('resets one key or all, and clears', () => {
    const file = { 'max-tip': 3_000_000, 'min-tip': 2_000 };
    expect(resetPolicy(file, 'max-tip')).toEqual({ 'min-tip': 2_000 });
    expect(resetPolicy(file)).toEqual({});
    expect(clearPolicy()).toEqual({});
    expect(file).toEqual({ 'max-tip': 3_000_000, 'min-tip': 2_000 });
  });

  it('serialises files in key order with a trailing newline', () => {
    expect(serializePolicyFile({ 'min-tip': 2_000, 'max-tip': 3_000_000 })).toBe(
      '{\n  "max-tip": 3000000,\n  "min-tip": 2000\n}\n',
    );
  });
});
