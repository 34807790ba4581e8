import { coercePolicyValue, POLICY_KEYS } from '@solrelay/core';
import fc from 'fast-check';
import { nastyString } from './fuzz-requests';

/**
 * Malformed `relay` command lines for the bad-input suite, each with the kind of message it must end in: unknown
 * commands and flags, options before the command, missing values, bad numbers (negative, fractional, exponent,
 * hex, unicode digits, out of range, repeated), --sim-only flags without --sim, bad policy keys and values,
 * contradictions, bad bundle ids, stray positionals, unicode everywhere, with and without --json. None of them
 * is a command line that would start anything: the suite checks that too before running one.
 */

export interface ArgvCase {
  category: string;
  argv: string[];
  /** Exit codes allowed (1: the command ran and refused; 2: usage). */
  exits: number[];
  /** What stderr must say. */
  message: RegExp;
}

const COMMANDS = [
  'up',
  'start',
  'agent',
  'web',
  'smoke',
  'sim',
  'status',
  'tip',
  'queue',
  'lifecycle',
  'bundle',
  'policy',
];
/** Commands that take --json. */
const JSON_COMMANDS = [
  ['smoke'],
  ['sim'],
  ['status'],
  ['tip'],
  ['queue'],
  ['lifecycle'],
  ['policy', 'show'],
  ['policy', 'validate'],
  ['policy', 'clear'],
];
const KNOWN_OPTIONS = new Set([
  'json',
  'help',
  'h',
  'version',
  'sim',
  'seed',
  'slot-ms',
  'slotMs',
  'rate-limit',
  'rateLimit',
  'demo',
  'bypass',
  'tip',
  'attempts',
  'timeout',
  'last',
  'l',
  'path',
  '$0',
  '_',
]);

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The CLI's rule for whole-number flags: underscores dropped, digits only, within the range. */
export function isWholeNumber(text: string, min: number, max = Number.MAX_SAFE_INTEGER): boolean {
  const plain = text.replace(/_/g, '');
  return /^\d+$/.test(plain) && Number(plain) >= min && Number(plain) <= max;
}

/** A policy value the CLI must refuse for `key`. */
function refusedPolicyValue(key: string, value: string): boolean {
  try {
    coercePolicyValue(key, value);
    return false;
  } catch {
    return true;
  }
}

const token = fc.oneof(
  { weight: 3, arbitrary: fc.stringMatching(/^[a-z][a-z0-9-]{0,14}$/) },
  { weight: 2, arbitrary: nastyString },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'stauts',
      'statu',
      'polcy',
      'bundles',
      'Status',
      'STATUS',
      'lifecycl',
      'tips',
      'smok',
      'sim2',
    ),
  },
);

const unknownCommand: fc.Arbitrary<ArgvCase> = fc
  .tuple(
    token.filter(
      (t) => !t.startsWith('-') && !COMMANDS.includes(t) && !['help', 'completion', 'version'].includes(t),
    ),
    fc.array(fc.oneof(token, fc.constantFrom('--json', '-l', '5')), { maxLength: 3 }),
  )
  .map(([command, rest]) => ({
    category: 'unknown command',
    argv: [command, ...rest.filter((t) => !['--help', '-h', '--version'].includes(t))],
    exits: [2],
    message: /Unknown argument|Did you mean/,
  }));

const flagName = fc
  .oneof(
    fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/),
    fc.constantFrom('verbose', 'force', 'yes', 'dry-run', 'url', 'port', 'token', 'ιδ', 'ü', 'x'),
  )
  .filter(
    (name) => !KNOWN_OPTIONS.has(name) && !/^no($|-)/.test(name) && !/-$/.test(name) && !name.includes('--'),
  );

const commandPath = fc.constantFrom(
  ['status'],
  ['tip'],
  ['queue'],
  ['lifecycle'],
  ['policy', 'show'],
  ['policy', 'validate'],
  ['policy', 'clear'],
  ['agent'],
  ['web'],
  ['up'],
  ['start'],
  ['sim'],
  ['smoke'],
);

const unknownFlag: fc.Arbitrary<ArgvCase> = fc
  .tuple(commandPath, flagName, fc.boolean(), fc.oneof(fc.constant(null), token))
  .map(([path, name, long, value]) => {
    const flag = long || name.length > 1 ? `--${name}` : `-${name}`;
    return {
      category: 'unknown flag',
      argv: [...path, flag, ...(value === null || value.startsWith('-') ? [] : [value])],
      exits: [2],
      message: new RegExp(`Unknown arguments?: .*${escape(name)}`),
    };
  });

const misplaced: fc.Arbitrary<ArgvCase> = fc
  .tuple(
    fc.oneof(
      flagName.map((n) => `--${n}`),
      fc.constantFrom('--json', '--sim', '-x', '--last=5', '--'),
    ),
    fc.constantFrom([], ['status'], ['policy'], ['policy', 'show']),
    fc.boolean(),
  )
  .map(([flag, rest, inPolicy]) => {
    const argv = inPolicy ? ['policy', flag, ...rest.filter((t) => t !== 'policy')] : [flag, ...rest];
    return {
      category: 'option before the command',
      argv,
      exits: [2],
      message: new RegExp(`${escape(flag)} before the (policy )?command`),
    };
  });

const missingValue: fc.Arbitrary<ArgvCase> = fc
  .constantFrom(
    { argv: ['lifecycle', '--last'], message: /--last needs a whole number/ },
    { argv: ['lifecycle', '-l'], message: /--last needs a whole number/ },
    { argv: ['lifecycle', '--last='], message: /--last needs a whole number/ },
    { argv: ['bundle'], message: /Not enough non-option arguments/ },
    { argv: ['policy', 'set'], message: /Not enough non-option arguments/ },
    { argv: ['policy', 'set', 'max-tip'], message: /Not enough non-option arguments/ },
    { argv: ['policy', 'import'], message: /Not enough non-option arguments/ },
    { argv: ['policy', 'export'], message: /Missing required argument: path/ },
    { argv: ['sim', '--seed'], message: /--seed needs a whole number/ },
    { argv: ['sim', '--slot-ms'], message: /--slot-ms needs a whole number/ },
    { argv: ['smoke', '--attempts'], message: /--attempts needs a whole number/ },
    { argv: ['smoke', '--timeout'], message: /--timeout needs a whole number/ },
    { argv: ['start', '--bypass', '--tip'], message: /--tip needs a whole number/ },
    { argv: ['up', '--sim', '--slot-ms'], message: /--slot-ms needs a whole number/ },
    { argv: ['policy'], message: /Name a policy command/ },
    { argv: [], message: /Name a command/ },
  )
  .map(({ argv, message }): ArgvCase => ({
    category: 'missing value',
    argv: [...argv],
    exits: [2],
    message,
  }));

const NUMERIC_FLAGS: Array<{ prefix: string[]; flag: string; min: number; max?: number }> = [
  { prefix: ['up', '--sim'], flag: '--seed', min: 0 },
  { prefix: ['up', '--sim'], flag: '--slot-ms', min: 50, max: 60_000 },
  { prefix: ['start', '--sim'], flag: '--seed', min: 0 },
  { prefix: ['start', '--bypass'], flag: '--tip', min: 1_000 },
  { prefix: ['smoke', '--sim'], flag: '--tip', min: 1_000 },
  { prefix: ['smoke'], flag: '--attempts', min: 1, max: 20 },
  { prefix: ['smoke'], flag: '--timeout', min: 1 },
  { prefix: ['sim'], flag: '--seed', min: 0 },
  { prefix: ['sim'], flag: '--slot-ms', min: 50, max: 60_000 },
  { prefix: ['lifecycle'], flag: '--last', min: 1, max: 10_000 },
  { prefix: ['lifecycle'], flag: '-l', min: 1, max: 10_000 },
];

const badNumberText = fc.oneof(
  fc.constantFrom(
    '-1',
    '0',
    '49',
    '60001',
    '10001',
    '21',
    '999',
    '1.5',
    '1e3',
    '1E3',
    '0x10',
    '0b1',
    '0o7',
    '+5',
    ' 5',
    '5 ',
    '5x',
    'x5',
    'NaN',
    'Infinity',
    '-Infinity',
    '٣',
    '５',
    '½',
    '1,000',
    '1 000',
    '__',
    '',
    ' ',
    '99999999999999999999',
    '9007199254740993',
    '-0',
    '.5',
    '5.',
    'null',
    'true',
    '💥',
  ),
  fc.integer({ min: -1_000_000, max: 2_000_000 }).map(String),
  nastyString,
);

const badNumber: fc.Arbitrary<ArgvCase> = fc
  .tuple(fc.constantFrom(...NUMERIC_FLAGS), badNumberText, fc.constantFrom('space', 'equals', 'repeated'))
  .filter(([spec, value]) => !isWholeNumber(value, spec.min, spec.max))
  .map(([spec, value, form]) => {
    const name = spec.flag === '-l' ? '--last' : spec.flag;
    const valueArgs =
      form === 'equals' || value.startsWith('-')
        ? [`${spec.flag}=${value}`]
        : form === 'repeated'
          ? [spec.flag, String(spec.min), `${spec.flag}=${value}`]
          : [spec.flag, value];
    return {
      category: 'bad number',
      argv: [...spec.prefix, ...valueArgs],
      exits: [2],
      message: new RegExp(`${escape(name)} needs a whole number`),
    };
  });

const simOnly: fc.Arbitrary<ArgvCase> = fc
  .constantFrom(
    { argv: ['up', '--seed', '3'], message: /only apply with --sim/ },
    { argv: ['up', '--slot-ms', '100'], message: /only apply with --sim/ },
    { argv: ['up', '--no-rate-limit'], message: /only apply with --sim/ },
    { argv: ['up', '--no-demo'], message: /only apply with --sim/ },
    { argv: ['start', '--seed', '0'], message: /only apply with --sim/ },
    { argv: ['start', '--no-demo'], message: /only apply with --sim/ },
    { argv: ['start', '--tip', '5000'], message: /--tip is only used with --bypass/ },
    { argv: ['smoke', '--seed', '1'], message: /only apply with --sim/ },
    { argv: ['smoke', '--no-rate-limit', '--json'], message: /only apply with --sim/ },
  )
  .map(({ argv, message }): ArgvCase => ({
    category: '--sim-only flag without --sim',
    argv: [...argv],
    exits: [2],
    message,
  }));

const policyKeyToken = fc.oneof(
  fc.constantFrom(...POLICY_KEYS),
  fc.constantFrom('max_tip', 'maxTip', 'MAX-TIP', 'tip', 'retries', '', ' ', '__proto__', 'constructor'),
  nastyString,
);

const policySet: fc.Arbitrary<ArgvCase> = fc
  .tuple(
    policyKeyToken,
    fc.oneof(badNumberText, fc.constantFrom('p76', 'P75 x', 'urgent', 'none', 'low', 'p75', '5000')),
    fc.boolean(),
  )
  .filter(([key, value]) => !(key.startsWith('-') || value.startsWith('-')) && refusedPolicyValue(key, value))
  .map(([key, value, json]) => ({
    category: 'policy set: bad key or value',
    argv: ['policy', 'set', key, value, ...(json ? ['--json'] : [])],
    exits: [2],
    message: (POLICY_KEYS as string[]).includes(key)
      ? new RegExp(`Invalid value for policy key ${escape(key)}`)
      : new RegExp(`Unknown policy key ${escape(key)}`),
  }));

const policyContradiction: fc.Arbitrary<ArgvCase> = fc
  .oneof(
    fc.integer({ min: 2_000_001, max: 50_000_000 }).map((v) => ['min-tip', String(v)]),
    fc.integer({ min: 1, max: 1_999_999 }).map((v) => ['spend-limit', String(v)]),
  )
  .map(([key, value]) => ({
    category: 'policy set: contradiction',
    argv: ['policy', 'set', key as string, value as string],
    exits: [1],
    message: /refused: the policy would be invalid/,
  }));

const policyReset: fc.Arbitrary<ArgvCase> = policyKeyToken
  .filter((key) => !(POLICY_KEYS as string[]).includes(key) && !key.startsWith('-'))
  .map((key) => ({
    category: 'policy reset: unknown key',
    argv: ['policy', 'reset', key],
    exits: [2],
    message: /Unknown policy key/,
  }));

const policyImport: fc.Arbitrary<ArgvCase> = fc
  .oneof(nastyString, fc.constantFrom('missing.json', '/nonexistent/dir/x.json', '.', '..', '/'))
  .filter((file) => file !== '' && !file.startsWith('-'))
  .map((file) => ({
    category: 'policy import: unreadable file',
    argv: ['policy', 'import', file],
    exits: [1],
    message: /cannot read|not a valid policy/,
  }));

const badBundleId: fc.Arbitrary<ArgvCase> = fc
  .oneof(
    fc.constantFrom('.', '..', '../status', '%2e%2e', 'zz', ' '),
    fc.stringMatching(/^[0-9a-f]{63}$/),
    fc.stringMatching(/^[0-9a-f]{65}$/),
    fc.stringMatching(/^[0-9a-g]{64}$/).filter((s) => s.includes('g')),
    nastyString,
  )
  .filter((id) => !id.startsWith('-') && id !== '')
  .map((id) => ({
    category: 'bad bundle id',
    argv: ['bundle', id],
    exits: [2],
    message: /a bundle id is 64 hex characters/,
  }));

const strayPositional: fc.Arbitrary<ArgvCase> = fc
  .tuple(
    fc.constantFrom(
      ['status'],
      ['tip'],
      ['queue'],
      ['lifecycle'],
      ['policy', 'show'],
      ['policy', 'validate'],
      ['policy', 'clear'],
      ['agent'],
      ['web'],
    ),
    token,
  )
  .filter(([, extra]) => !extra.startsWith('-') && extra !== '')
  .map(([path, extra]) => ({
    category: 'stray positional',
    argv: [...path, extra],
    exits: [2],
    message: /Unknown argument/,
  }));

const malformedArgv: fc.Arbitrary<ArgvCase> = fc.oneof(
  { weight: 3, arbitrary: unknownCommand },
  { weight: 3, arbitrary: unknownFlag },
  { weight: 2, arbitrary: misplaced },
  { weight: 1, arbitrary: missingValue },
  { weight: 4, arbitrary: badNumber },
  { weight: 1, arbitrary: simOnly },
  { weight: 3, arbitrary: policySet },
  { weight: 1, arbitrary: policyContradiction },
  { weight: 1, arbitrary: policyReset },
  { weight: 1, arbitrary: policyImport },
  { weight: 2, arbitrary: badBundleId },
  { weight: 2, arbitrary: strayPositional },
);

/** Adds `--json` after the command (where the command takes it) to about a third of the cases. */
const withJson: fc.Arbitrary<ArgvCase> = fc.tuple(malformedArgv, fc.nat({ max: 2 })).map(([c, roll]) => {
  const path = JSON_COMMANDS.find((p) => p.every((t, i) => c.argv[i] === t));
  if (roll !== 0 || !path || c.argv.includes('--json') || c.category === 'missing value') return c;
  return { ...c, argv: [...c.argv, '--json'] };
});

/** `count` malformed command lines, reproducible from `seed`. */
export function generateArgv(seed: number, count: number): ArgvCase[] {
  return fc.sample(withJson, { seed, numRuns: count });
}
