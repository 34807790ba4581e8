import { POLICY_KEYS, type PolicyKey, type PolicyProblemCode } from '@solrelay/core';
import fc from 'fast-check';

/**
 * Malformed policy files (relay.policy.json) for the bad-input suite: broken JSON, the wrong top-level type,
 * wrong types and out-of-range values per key, huge and fractional numbers, unknown keys (typos, snake_case,
 * unicode, `__proto__`), contradictions between keys, unicode and binary content, empty and oversize files, deep
 * nesting. A few valid files are mixed in, so "the previous valid policy stays in force" is checked against a
 * policy that changes during the run. Each file says what problem it must at least be reported with.
 */

export interface PolicyFileCase {
  category: string;
  /** The file's bytes. */
  bytes: Buffer;
  /** A problem the verdict must include (code, and key when one key is at fault), or null for a valid file. */
  expect: { code: PolicyProblemCode; key?: string } | null;
}

const text = (category: string, body: string, expect: PolicyFileCase['expect']): PolicyFileCase => ({
  category,
  bytes: Buffer.from(body, 'utf8'),
  expect,
});

/** In-range values per key: a valid file picks from these. */
const VALID: Record<PolicyKey, fc.Arbitrary<unknown>> = {
  'max-tip': fc.integer({ min: 2_000_000, max: 5_000_000 }),
  'tip-percentile': fc.constantFrom('p25', 'p50', 'p75', 'p95', 'p99', 'ema'),
  'max-retries': fc.integer({ min: 0, max: 20 }),
  'expiry-slots': fc.integer({ min: 1, max: 150 }),
  'escalation-step': fc.integer({ min: 1, max: 500_000 }),
  'max-queue': fc.integer({ min: 1, max: 1_000_000 }),
  'rate-limit': fc.integer({ min: 1, max: 1_000_000 }),
  priority: fc.constantFrom('low', 'normal', 'high', null),
  'min-tip': fc.integer({ min: 1_000, max: 2_000_000 }),
  'spend-limit': fc.constantFrom(0, 500_000_000, 1_000_000_000),
};

const NUMERIC_KEYS: PolicyKey[] = [
  'max-tip',
  'max-retries',
  'expiry-slots',
  'escalation-step',
  'max-queue',
  'rate-limit',
  'min-tip',
  'spend-limit',
];

/** Values out of each numeric key's range, as JSON text (so 1e400 and 2^53+1 arrive as written). */
const OUT_OF_RANGE: Record<string, string[]> = {
  'max-tip': ['999', '0', '-1', '1000.5'],
  'max-retries': ['-1', '21', '3.5', '1e3'],
  'expiry-slots': ['0', '10001', '-150', '1.1'],
  'escalation-step': ['-1', '-50000', '0.5'],
  'max-queue': ['0', '1000001', '-1', '2.5'],
  'rate-limit': ['0', '1000001', '-600'],
  'min-tip': ['999', '0', '-1000', '1000.1'],
  'spend-limit': ['-1', '-500000000', '0.25'],
};

const HUGE_NUMBERS = [
  '1e308',
  '1e400',
  '-1e400',
  '9007199254740993',
  '123456789012345678901234567890',
  '5e-324',
];

const WRONG_TYPES = [
  '"2000000"',
  '"2_000_000"',
  'true',
  'false',
  '[]',
  '[2000000]',
  '{}',
  '{"value":2000000}',
  '""',
  '"💥"',
  '"p75 "',
  '"P75"',
  '"NORMAL"',
  '"none"',
];

const UNICODE = ['💥', 'é', '\u202E', '\uFEFF', 'Ω', '𝓤', '\u0000', '\u00A0', 'ﬁ'];

const jsonKey = (key: string) => JSON.stringify(key);

const validFile: fc.Arbitrary<PolicyFileCase> = fc.record(VALID, { requiredKeys: [] }).map((file) => {
  // Keep the cross-key rules satisfied: min-tip <= max-tip, spend-limit 0 or >= max-tip.
  const out: Record<string, unknown> = { ...file };
  const maxTip = (out['max-tip'] as number | undefined) ?? 2_000_000;
  if (typeof out['min-tip'] === 'number' && out['min-tip'] > maxTip) out['min-tip'] = maxTip;
  if (typeof out['spend-limit'] === 'number' && out['spend-limit'] !== 0 && out['spend-limit'] < maxTip)
    out['spend-limit'] = 0;
  return text('valid', JSON.stringify(out, null, 2), null);
});

const badJson: fc.Arbitrary<PolicyFileCase> = fc.oneof(
  fc.tuple(validFile, fc.nat()).map(([file, cut]) => {
    const full = file.bytes.toString('utf8');
    // Cut before the closing brace: never whole, so never valid.
    return text('truncated JSON', full.slice(0, cut % Math.max(1, full.length - 1)), {
      code: 'invalid_json',
    });
  }),
  fc
    .constantFrom(
      '{"max-tip": 2000000,}',
      "{'max-tip': 2000000}",
      '{max-tip: 2000000}',
      '{"max-tip": 2000000 // a comment\n}',
      '{"max-tip": /* c */ 2000000}',
      '{"max-tip": NaN}',
      '{"max-tip": Infinity}',
      '{"max-tip": -Infinity}',
      '{"max-tip": 0x1E8480}',
      '{"max-tip": 02000000}',
      '{"max-tip": +2000000}',
      '{"max-tip": .5}',
      '{"max-tip": 2_000_000}',
      '{"max-tip" 2000000}',
      '{"max-tip": 2000000}}',
      '{"max-tip": 2000000} {"min-tip": 1000}',
      '{"max-tip": undefined}',
      '{"priority": "high"',
      '[',
      '{',
      '"',
      '\uFEFF{"max-tip": 2000000}',
      '{"max-tip": "\\x41"}',
      '{"max-tip": "\\u00"}',
      'max-tip = 2000000',
      'max-tip: 2000000\nmin-tip: 1000',
      '<policy max-tip="2000000"/>',
      'null null',
    )
    .map((body) => text('broken JSON', body, { code: 'invalid_json' })),
  fc.constantFrom('', ' ', '\n', '\t\r\n').map((body) => text('empty file', body, { code: 'invalid_json' })),
  fc
    .uint8Array({ minLength: 1, maxLength: 2048 })
    .filter((bytes) => {
      try {
        JSON.parse(Buffer.from(bytes).toString('utf8'));
        return false;
      } catch {
        return true;
      }
    })
    .map((bytes): PolicyFileCase => ({
      category: 'binary',
      bytes: Buffer.from(bytes),
      expect: { code: 'invalid_json' },
    })),
  fc.constantFrom('utf16le' as const, 'ucs2' as const).map((enc): PolicyFileCase => ({
    category: 'UTF-16 file',
    bytes: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"max-tip": 3000000}', enc)]),
    expect: { code: 'invalid_json' },
  })),
  fc
    .integer({ min: 100_000, max: 1_000_000 })
    .map((n) => text('oversize garbage', `{"max-tip": ${'9'.repeat(n)}`, { code: 'invalid_json' })),
);

const notAnObject: fc.Arbitrary<PolicyFileCase> = fc
  .oneof(
    fc.constantFrom('[]', '[{"max-tip": 2000000}]', 'null', 'true', '0', '2000000', '"max-tip"', '1e400'),
    fc
      .jsonValue({ maxDepth: 2 })
      .filter((v) => typeof v !== 'object' || v === null || Array.isArray(v))
      .map((v) => JSON.stringify(v)),
    fc.integer({ min: 1_000, max: 50_000 }).map((depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`),
  )
  .map((body) => text('not an object', body, { code: 'not_an_object' }));

const badValue: fc.Arbitrary<PolicyFileCase> = fc.oneof(
  fc
    .constantFrom(...NUMERIC_KEYS)
    .chain((key) => fc.tuple(fc.constant(key), fc.constantFrom(...(OUT_OF_RANGE[key] as string[]))))
    .map(([key, value]) =>
      text('out of range', `{${jsonKey(key)}: ${value}}`, { code: 'invalid_value', key }),
    ),
  fc
    .tuple(fc.constantFrom(...NUMERIC_KEYS), fc.constantFrom(...HUGE_NUMBERS))
    // 1e308 and 2^53+1 are "integers" to JavaScript but no key's range reaches them... except the open-ended ones.
    .filter(
      ([key, value]) =>
        !(['max-tip', 'escalation-step', 'min-tip', 'spend-limit'].includes(key) && value === '1e308'),
    )
    .map(([key, value]) =>
      text('huge number', `{${jsonKey(key)}: ${value}}`, { code: 'invalid_value', key }),
    ),
  fc
    .tuple(fc.constantFrom(...POLICY_KEYS), fc.constantFrom(...WRONG_TYPES))
    .filter(([key, value]) => {
      // Strings that are valid for the string keys are not wrong.
      if (key === 'tip-percentile' || key === 'priority') return !['"p75"', '"normal"'].includes(value);
      return true;
    })
    .map(([key, value]) => text('wrong type', `{${jsonKey(key)}: ${value}}`, { code: 'invalid_value', key })),
  fc
    .tuple(
      fc.constantFrom<PolicyKey>('tip-percentile', 'priority'),
      fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom(...UNICODE)),
    )
    .filter(([key, value]) =>
      key === 'tip-percentile'
        ? !['p25', 'p50', 'p75', 'p95', 'p99', 'ema'].includes(value)
        : !['low', 'normal', 'high'].includes(value),
    )
    .map(([key, value]) =>
      text('bad enum', `{${jsonKey(key)}: ${JSON.stringify(value)}}`, { code: 'invalid_value', key }),
    ),
  fc.tuple(fc.constantFrom(...NUMERIC_KEYS), fc.integer({ min: 1, max: 5000 })).map(([key, depth]) =>
    text('nested value', `{${jsonKey(key)}: ${'['.repeat(depth)}${']'.repeat(depth)}}`, {
      code: 'invalid_value',
      key,
    }),
  ),
);

const unknownKey: fc.Arbitrary<PolicyFileCase> = fc
  .oneof(
    fc.constantFrom(
      'max_tip',
      'maxTip',
      'MAX-TIP',
      'max-tip ',
      ' max-tip',
      'max-tips',
      'tip_percentile',
      'retries',
      'expiry',
      'priority ',
      '__proto__',
      'constructor',
      'toString',
      'hasOwnProperty',
      '',
      'max\u2011tip',
      'max-tip\u0000',
    ),
    fc.string({ maxLength: 20 }),
    fc.string({ unit: 'grapheme', maxLength: 8 }),
    fc.constantFrom(...UNICODE),
  )
  .filter((key) => !(POLICY_KEYS as string[]).includes(key))
  .chain((key) =>
    fc
      .tuple(fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null)), validFile)
      .map(([value, base]) => {
        const file = JSON.parse(base.bytes.toString('utf8')) as Record<string, unknown>;
        // The unknown key goes first so the valid keys cannot shadow it (`__proto__` survives JSON text as a key).
        const body = `{${jsonKey(key)}: ${JSON.stringify(value)}${Object.keys(file).length ? ', ' : ''}${JSON.stringify(file).slice(1)}`;
        return text('unknown key', body, { code: 'unknown_key', key });
      }),
  );

const contradiction: fc.Arbitrary<PolicyFileCase> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 1_000, max: 4_000_000 }), fc.integer({ min: 1, max: 1_000_000 }))
    .map(([maxTip, above]) =>
      text('contradiction', JSON.stringify({ 'max-tip': maxTip, 'min-tip': maxTip + above }), {
        code: 'min_tip_above_max_tip',
        key: 'min-tip',
      }),
    ),
  fc
    .tuple(fc.integer({ min: 2_000, max: 4_000_000 }), fc.integer({ min: 1, max: 1_000 }))
    .map(([maxTip, below]) =>
      text(
        'contradiction',
        JSON.stringify({ 'max-tip': maxTip, 'spend-limit': Math.max(1, maxTip - below) }),
        {
          code: 'spend_limit_below_max_tip',
          key: 'spend-limit',
        },
      ),
    ),
  fc.integer({ min: 1, max: 999 }).map((spend) =>
    text('contradiction', JSON.stringify({ 'spend-limit': spend }), {
      code: 'spend_limit_below_max_tip',
      key: 'spend-limit',
    }),
  ),
);

const duplicateKeys: fc.Arbitrary<PolicyFileCase> = fc
  .tuple(fc.constantFrom(...NUMERIC_KEYS), fc.constantFrom('"x"', '-1', 'null', '[]'))
  .map(([key, bad]) =>
    // JSON.parse keeps the last of duplicate keys: the bad one.
    text('duplicate key', `{${jsonKey(key)}: 2000000, ${jsonKey(key)}: ${bad}}`, {
      code: 'invalid_value',
      key,
    }),
  );

const malformed: fc.Arbitrary<PolicyFileCase> = fc.oneof(
  { weight: 5, arbitrary: badJson },
  { weight: 2, arbitrary: notAnObject },
  { weight: 8, arbitrary: badValue },
  { weight: 4, arbitrary: unknownKey },
  { weight: 2, arbitrary: contradiction },
  { weight: 1, arbitrary: duplicateKeys },
);

/** `count` files, about one in twenty valid, reproducible from `seed`. */
export function generatePolicyFiles(seed: number, count: number): PolicyFileCase[] {
  return fc.sample(fc.oneof({ weight: 19, arbitrary: malformed }, { weight: 1, arbitrary: validFile }), {
    seed,
    numRuns: count,
  });
}
