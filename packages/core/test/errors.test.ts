import { readFileSync } from 'node:fs';
import {
  RELAY_ERRORS,
  RELAY_ERROR_CODES,
  RELAY_ERROR_CODE_PATTERN,
  RelayError,
  formatRelayErrorMessage,
  httpStatusOf,
  isRelayError,
  isRelayErrorCode,
  previewValue,
  relayErrorFromBody,
  relayErrorJson,
  type RelayErrorArgs,
  type RelayErrorCode,
  type RelayErrorContext,
  type UnfilledPlaceholders,
} from '../src';

// Causes named by DESIGN §3 and the issue, each with the status it must answer.
const REQUIRED: Array<[RelayErrorCode, number]> = [
  ['RELAY_E_REQUEST_MALFORMED_JSON', 400],
  ['RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE', 415],
  ['RELAY_E_REQUEST_BODY_TOO_LARGE', 413],
  ['RELAY_E_REQUEST_INVALID_FIELD', 400],
  ['RELAY_E_TX_BAD_ENCODING', 400],
  ['RELAY_E_TX_UNDECODABLE', 400],
  ['RELAY_E_TX_UNSIGNED', 400],
  ['RELAY_E_TX_BAD_SIGNATURE', 400],
  ['RELAY_E_TX_TOO_MANY_TRANSACTIONS', 400],
  ['RELAY_E_TX_DUPLICATE_TRANSACTION', 400],
  ['RELAY_E_TX_BLOCKHASH_EXPIRED', 422],
  ['RELAY_E_AUTH_MISSING_TOKEN', 401],
  ['RELAY_E_AUTH_INVALID_TOKEN', 401],
  ['RELAY_E_TX_NOT_FOUND', 404],
  ['RELAY_E_BUNDLE_NOT_FOUND', 404],
  ['RELAY_E_TX_WRONG_STATE', 409],
  ['RELAY_E_TX_OWNED_ELSEWHERE', 409],
  ['RELAY_E_POLICY_MAX_TIP_EXCEEDED', 422],
  ['RELAY_E_POLICY_MIN_TIP_NOT_MET', 422],
  ['RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED', 422],
  ['RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED', 422],
  ['RELAY_E_POLICY_INVALID_FILE', 422],
  ['RELAY_E_POLICY_INVALID_VALUE', 400],
  ['RELAY_E_POLICY_UNKNOWN_KEY', 400],
  ['RELAY_E_QUEUE_FULL', 429],
  ['RELAY_E_RATE_LIMITED', 429],
  ['RELAY_E_CAPACITY_EXCEEDED', 429],
  ['RELAY_E_NOT_READY', 503],
  ['RELAY_E_TIPPER_UNDERFUNDED', 503],
  ['RELAY_E_AGENT_NOT_CONNECTED', 404],
  ['RELAY_E_MODE_INVALID', 400],
  ['RELAY_E_UPSTREAM_UNREACHABLE', 502],
  ['RELAY_E_CONFIG_MISSING_ENV', 500],
  ['RELAY_E_CONFIG_UNREADABLE_KEYPAIR', 500],
  ['RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP', 500],
  ['RELAY_E_CONFIG_DATA_DIR_IN_USE', 500],
  ['RELAY_E_INTERNAL_ERROR', 500],
  // A lost attempt's journal code, and the one journals written before it carry (codes are never removed).
  ['RELAY_E_ATTEMPT_LOST', 502],
  ['RELAY_E_UPSTREAM_INVALID_RESPONSE', 502],
];

describe('error codes', () => {
  it('every code has a non-empty message and an HTTP error status', () => {
    for (const code of RELAY_ERROR_CODES) {
      const entry = RELAY_ERRORS[code];
      expect([code, typeof entry.message, entry.message.trim().length > 0]).toEqual([code, 'string', true]);
      expect([code, entry.status >= 400 && entry.status <= 599]).toEqual([code, true]);
    }
  });

  it('every code matches RELAY_E_<AREA>_<REASON>', () => {
    for (const code of RELAY_ERROR_CODES) expect(code).toMatch(RELAY_ERROR_CODE_PATTERN);
    expect('RELAY_E_X').not.toMatch(RELAY_ERROR_CODE_PATTERN);
    expect('relay_e_tx_not_found').not.toMatch(RELAY_ERROR_CODE_PATTERN);
  });

  it('codes are unique, and so are their messages', () => {
    expect(new Set(RELAY_ERROR_CODES).size).toBe(RELAY_ERROR_CODES.length);
    const messages = RELAY_ERROR_CODES.map((code) => RELAY_ERRORS[code].message);
    expect(new Set(messages).size).toBe(messages.length);
  });

  it.each(REQUIRED)('%s exists with status %d', (code, status) => {
    expect(RELAY_ERROR_CODES).toContain(code);
    expect(httpStatusOf(code)).toBe(status);
  });
});

describe('RelayError', () => {
  it('fills the message from details and freezes them', () => {
    const error = new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
      field: 'max_tip',
      reason: 'expected integer',
    });
    expect(error.message).toBe('Invalid field `max_tip`: expected integer');
    expect(error.status).toBe(400);
    expect(error.name).toBe('RelayError');
    expect(Object.isFrozen(error.details)).toBe(true);
    expect(error.toBody()).toEqual({
      error: {
        code: 'RELAY_E_REQUEST_INVALID_FIELD',
        message: 'Invalid field `max_tip`: expected integer',
        details: { field: 'max_tip', reason: 'expected integer' },
      },
    });
  });

  it('serialises non-strings, and leaves a placeholder visible when details read back lack it', () => {
    expect(formatRelayErrorMessage('RELAY_E_QUEUE_FULL', { limit: 5, retry_after_s: 1 })).toBe(
      'The queue holds 5 non-terminal transactions (max-queue)',
    );
    // Details from the wire are not checked against the code's type: what is missing shows, never vanishes.
    expect(relayErrorFromBody({ error: { code: 'RELAY_E_QUEUE_FULL', details: {} } }).message).toBe(
      'The queue holds $limit non-terminal transactions (max-queue)',
    );
  });

  it('fills the snake_case keys callers send: an unknown tx or bundle is named in the message', () => {
    expect(new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: 'tx_01ABC' }).message).toBe(
      'Unknown transaction tx_01ABC',
    );
    expect(new RelayError('RELAY_E_BUNDLE_NOT_FOUND', { bundle_id: 'ab'.repeat(32) }).message).toBe(
      `Unknown bundle ${'ab'.repeat(32)}`,
    );
  });

  it('requires the details of its code at compile time', () => {
    // Each line below must fail to typecheck (`pnpm typecheck` fails if one compiles); at run time the old
    // camelCase keys show why: the placeholder stays unfilled.
    // @ts-expect-error camelCase key: the template and the wire use tx_id
    const camel = new RelayError('RELAY_E_TX_NOT_FOUND', { txId: 'tx_1' });
    expect(camel.message).toBe('Unknown transaction $tx_id');
    // @ts-expect-error a code with details cannot be built without them
    const bare = new RelayError('RELAY_E_BUNDLE_NOT_FOUND');
    expect(bare.message).toBe('Unknown bundle $bundle_id');
    // @ts-expect-error the wrong details type
    const wrongType = new RelayError('RELAY_E_REQUEST_BODY_TOO_LARGE', { limit_bytes: 'many' });
    expect(wrongType.details.limit_bytes).toBe('many');
    // @ts-expect-error a code without details takes none
    const extra = new RelayError('RELAY_E_AUTH_MISSING_TOKEN', { token: 'x' });
    expect(extra.details).toEqual({ token: 'x' });
    // @ts-expect-error relayErrorJson is typed the same way
    const partial = relayErrorJson('RELAY_E_ATTEMPT_LOST', { outcome: 'dropped' });
    expect(partial.message).toBe('Bundle $bundle_id did not land (dropped): $reason');
    // A code without details needs no argument; a union of codes takes the details of either.
    expect(new RelayError('RELAY_E_AGENT_NOT_CONNECTED').message).toBe('No decision agent is connected');
    const code =
      camel.code === 'RELAY_E_TX_NOT_FOUND' ? 'RELAY_E_AUTH_MISSING_TOKEN' : 'RELAY_E_AUTH_INVALID_TOKEN';
    expect(new RelayError(code).status).toBe(401);
  });

  it('isRelayError checks name and code, not instanceof', () => {
    const real = new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: 'tx_1' });
    const lookalike = { name: 'RelayError', code: 'RELAY_E_TX_NOT_FOUND', message: 'x', details: {} };
    expect(isRelayError(real)).toBe(true);
    expect(isRelayError(real, 'RELAY_E_TX_NOT_FOUND')).toBe(true);
    expect(isRelayError(real, 'RELAY_E_BUNDLE_NOT_FOUND')).toBe(false);
    expect(isRelayError(lookalike, 'RELAY_E_TX_NOT_FOUND')).toBe(true);
    expect(isRelayError(new Error('RELAY_E_TX_NOT_FOUND'))).toBe(false);
    expect(isRelayError({ name: 'RelayError', code: 'RELAY_E_NOPE' })).toBe(false);
    expect(isRelayError(null)).toBe(false);
  });

  it('round-trips through an HTTP body', () => {
    const original = new RelayError('RELAY_E_NOT_READY', { reason: 'tip data stale' });
    const rebuilt = relayErrorFromBody(JSON.parse(JSON.stringify(original.toBody())), 503);
    expect(rebuilt.code).toBe('RELAY_E_NOT_READY');
    expect(rebuilt.message).toBe('relay is not ready: tip data stale');
    expect(rebuilt.details).toEqual({ reason: 'tip data stale' });
    expect(relayErrorFromBody({ nope: true }, 500).code).toBe('RELAY_E_UPSTREAM_INVALID_RESPONSE');
  });
});

/**
 * A typed sample of every code's details. The type makes it complete and exact at compile time (a new code
 * without a sample, or a sample with a key its code does not have, fails `pnpm typecheck`); the first test below
 * makes it complete at run time too.
 */
const BUNDLE = 'c0ffee'.repeat(10) + 'c0de';
const SAMPLES: { [C in RelayErrorCode]: RelayErrorContext[C] } = {
  RELAY_E_REQUEST_MALFORMED_JSON: { reason: 'Unexpected end of JSON input' },
  RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE: { content_type: 'text/plain' },
  RELAY_E_REQUEST_BODY_TOO_LARGE: { limit_bytes: 262_144 },
  RELAY_E_REQUEST_INVALID_FIELD: {
    field: 'max_tip',
    reason: 'expected integer',
    issues: [{ field: 'max_tip', message: 'expected integer' }],
  },
  RELAY_E_REQUEST_UNKNOWN_ROUTE: { method: 'GET', path: '/nope' },
  RELAY_E_REQUEST_MALFORMED_HTTP: { reason: 'HPE_INVALID_METHOD' },
  RELAY_E_REQUEST_HEADERS_TOO_LARGE: {},
  RELAY_E_AUTH_MISSING_TOKEN: {},
  RELAY_E_AUTH_INVALID_TOKEN: {},
  RELAY_E_AUTH_FORBIDDEN_ORIGIN: { origin: 'https://evil.example' },
  RELAY_E_AUTH_FORBIDDEN_HOST: { host: 'rebind.example' },
  RELAY_E_TX_BAD_ENCODING: { index: 2, encoding: 'base58' },
  RELAY_E_TX_UNDECODABLE: { index: 1, reason: 'truncated message' },
  RELAY_E_TX_UNSIGNED: { index: 0, signer: 1 },
  RELAY_E_TX_BAD_SIGNATURE: { index: 3, signer: 0 },
  RELAY_E_TX_TOO_MANY_TRANSACTIONS: { count: 5, field: 'transactions' },
  RELAY_E_TX_DUPLICATE_TRANSACTION: { index: 1, signature: 'sig1111' },
  RELAY_E_TX_SIGNATURE_CONFLICT: { signature: 'sig2222', tx_id: 'tx_01CONFLICT' },
  RELAY_E_TX_BLOCKHASH_EXPIRED: { index: 0, blockhash: 'hash3333' },
  RELAY_E_TX_NOT_FOUND: { tx_id: 'tx_01UNKNOWN' },
  RELAY_E_TX_WRONG_STATE: {
    tx_id: 'tx_01WRONG',
    state: 'landed',
    expected: 'pending with no attempt in flight',
  },
  RELAY_E_TX_OWNED_ELSEWHERE: { tx_id: 'tx_01ELSEWHERE', owner_host: 'relay-b:7777' },
  RELAY_E_TX_TIP_NOT_RAISABLE: { key: 'tip', limit: 0, actual: 5_000, tx_id: 'tx_01INCLUDED' },
  RELAY_E_TX_ILLEGAL_TRANSITION: { from: 'finalized', to: 'pending' },
  RELAY_E_BUNDLE_NOT_FOUND: { bundle_id: BUNDLE },
  RELAY_E_ATTEMPT_LOST: { outcome: 'fee_too_low', bundle_id: BUNDLE, reason: 'the leader window passed' },
  RELAY_E_POLICY_MAX_TIP_EXCEEDED: { key: 'max-tip', limit: 2_000_000, actual: 2_000_001, tx_id: 'tx_01A' },
  RELAY_E_POLICY_MIN_TIP_NOT_MET: { key: 'min-tip', limit: 1_000, actual: 999 },
  RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED: { key: 'max_tip', limit: 50_000, actual: 60_000 },
  RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP: { key: 'max_tip', limit: 1_000, actual: 10 },
  RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED: { key: 'escalation-step', limit: 60_000, actual: 70_000 },
  RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED: { key: 'max-retries', limit: 3, actual: 4 },
  RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED: { key: 'expiry-slots', limit: 250, actual: 251 },
  RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED: { key: 'spend-limit', limit: 500_000_000, actual: 500_000_001 },
  RELAY_E_POLICY_INVALID_FILE: {
    reason: 'min-tip is above max-tip',
    problems: [
      {
        code: 'min_tip_above_max_tip',
        severity: 'error',
        key: 'min-tip',
        message: 'min-tip is above max-tip',
      },
    ],
  },
  RELAY_E_POLICY_INVALID_VALUE: { key: 'max-retries', reason: 'expected 0..20', value: 99 },
  RELAY_E_POLICY_UNKNOWN_KEY: { key: 'max-tips' },
  RELAY_E_QUEUE_FULL: { limit: 1_000, retry_after_s: 1 },
  RELAY_E_RATE_LIMITED: { limit: 600, retry_after_s: 7 },
  RELAY_E_CAPACITY_EXCEEDED: {
    ahead: 480,
    send_rate_per_s: 8,
    expected_wait_s: 60,
    deadline_s: 56,
    retry_after_s: 4,
  },
  RELAY_E_NOT_READY: { reason: 'no tip data; no decider', reasons: ['no tip data', 'no decider'] },
  RELAY_E_TIPPER_UNDERFUNDED: {
    reason: 'tipper 7xKX holds 945880 lamports, of which 0 are reserved; short by 1000',
    tipper: '7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU',
    balance_lamports: 945_880,
    reserved_lamports: 0,
    needed_lamports: 55_000,
    shortfall_lamports: 1_000,
  },
  RELAY_E_AGENT_NOT_CONNECTED: {},
  RELAY_E_MODE_INVALID: { value: '"turbo"', field: 'decision_mode' },
  RELAY_E_UPSTREAM_UNREACHABLE: { upstream: 'block engine', reason: 'rate limited', status: 429 },
  RELAY_E_UPSTREAM_INVALID_RESPONSE: { upstream: 'tip_floor', reason: 'p50: expected number' },
  RELAY_E_TIP_INVALID_AMOUNT: { value: '-1' },
  RELAY_E_CONFIG_MISSING_ENV: { name: 'RPC_URL' },
  RELAY_E_CONFIG_INVALID_ENV: {
    name: 'API_PORT',
    reason: 'expected a whole number from 1 to 65535, got "x"',
  },
  RELAY_E_CONFIG_UNREADABLE_KEYPAIR: { path: '/keys/tipper.json', reason: 'ENOENT' },
  RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP: { tip: 3_000_000, max_tip: 2_000_000 },
  RELAY_E_CONFIG_DATA_DIR_IN_USE: { data_dir: '/var/lib/relay', pid: 4242 },
  RELAY_E_DB_INVALID_URL: { url: 'postgres://relay:***@db:5432', reason: 'name the database in the path' },
  RELAY_E_DB_UNREACHABLE: { url: 'postgres://relay:***@db:5432/relay', reason: 'ECONNREFUSED' },
  RELAY_E_DB_AUTH_FAILED: {
    url: 'postgres://relay:***@db:5432/relay',
    user: 'relay',
    reason: 'password authentication failed (28P01)',
  },
  RELAY_E_DB_NOT_FOUND: { url: 'postgres://relay:***@db:5432/relay', database: 'relay' },
  RELAY_E_DB_SCHEMA_BEHIND: { current: 0, latest: 1, pending: ['001_initial'] },
  RELAY_E_DB_SCHEMA_AHEAD: { current: 3, latest: 1 },
  RELAY_E_DB_MIGRATION_FAILED: { version: 1, name: 'initial', reason: 'syntax error at or near "TABEL"' },
  RELAY_E_DB_COMMIT_UNKNOWN: {
    tx_id: 'tx_01HZX',
    operation: 'transition',
    reason: 'Connection terminated unexpectedly',
  },
  RELAY_E_DB_UNAVAILABLE: {
    url: 'postgres://relay:***@db:5432/relay',
    reason: 'connect ECONNREFUSED 10.0.0.5:5432',
    retry_after_s: 1,
  },
  RELAY_E_DB_IN_USE: {
    url: 'postgres://relay:***@db:5432/relay',
    holder: 'PostgreSQL session pid 4242 from 10.0.0.7, application relay, since 2026-11-26T22:00:00.000Z',
  },
  RELAY_E_HOST_ID_IN_USE: {
    host_id: 'relay-a:8080',
    url: 'postgres://relay:***@db:5432/relay',
    holder:
      'PostgreSQL session pid 4243 from 10.0.0.8, application relay-host, since 2026-11-26T22:00:00.000Z',
  },
  RELAY_E_INTERNAL_ERROR: { reason: 'not a slot: -1' },
};

/** The arguments of a code's constructor, from its sample (the cast only spreads a typed sample by code). */
function sampleArgs<C extends RelayErrorCode>(code: C): RelayErrorArgs<C> {
  return [SAMPLES[code]] as unknown as RelayErrorArgs<C>;
}

/** How a detail value appears in a message (strings as they are, anything else as JSON). */
function rendered(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

describe('every message renders from its typed details', () => {
  // Compile time: every placeholder of every template is a required key of its code's details.
  const noUnfilledPlaceholders: [UnfilledPlaceholders] extends [never] ? true : UnfilledPlaceholders = true;

  it('has a sample for every code, and none for a code that does not exist', () => {
    expect(noUnfilledPlaceholders).toBe(true);
    expect(Object.keys(SAMPLES).sort()).toEqual([...RELAY_ERROR_CODES].sort());
  });

  it.each(RELAY_ERROR_CODES)('%s leaves no $placeholder and shows each value it names', (code) => {
    const error = new RelayError(code, ...sampleArgs(code));
    expect(error.message).not.toMatch(/\$[A-Za-z_]/);
    const template = RELAY_ERRORS[code].message;
    const details = SAMPLES[code] as Record<string, unknown>;
    for (const [, name] of template.matchAll(/\$([A-Za-z_][A-Za-z0-9_]*)/g)) {
      expect([name, name! in details]).toEqual([name, true]);
      expect(error.message).toContain(rendered(details[name!]));
    }
    // The three ways to render agree: the error, its JSON form without an Error, and the formatter.
    expect(relayErrorJson(code, ...sampleArgs(code))).toEqual(error.toJSON());
    expect(formatRelayErrorMessage(code, ...sampleArgs(code))).toBe(error.message);
    expect(error.toBody().error.details).toEqual(details);
  });
});

describe('a lost attempt', () => {
  it('has its own code with the outcome and bundle id', () => {
    const lastError = relayErrorJson('RELAY_E_ATTEMPT_LOST', {
      outcome: 'dropped',
      bundle_id: BUNDLE,
      reason: 'the engine dropped the bundle',
    });
    expect(lastError).toEqual({
      code: 'RELAY_E_ATTEMPT_LOST',
      message: `Bundle ${BUNDLE} did not land (dropped): the engine dropped the bundle`,
      details: { outcome: 'dropped', bundle_id: BUNDLE, reason: 'the engine dropped the bundle' },
    });
  });

  it('as journaled before that code (RELAY_E_UPSTREAM_INVALID_RESPONSE) still reads back whole', () => {
    const old = {
      code: 'RELAY_E_UPSTREAM_INVALID_RESPONSE',
      message: 'the leader window passed without landing',
      details: { outcome: 'fee_too_low', bundle_id: BUNDLE },
    };
    expect(isRelayErrorCode(old.code)).toBe(true);
    const rebuilt = relayErrorFromBody(JSON.parse(JSON.stringify({ error: old })));
    expect(rebuilt.code).toBe('RELAY_E_UPSTREAM_INVALID_RESPONSE');
    expect(rebuilt.message).toBe(old.message);
    expect(rebuilt.details).toEqual(old.details);
  });
});

describe('README errors table', () => {
  const readme = readFileSync(`${__dirname}/../README.md`, 'utf8');
  const documented = [...readme.matchAll(/^\| `(RELAY_E_[A-Z0-9_]+)`\s*\| (\d{3})\s*\|/gm)].map((m) => [
    m[1],
    Number(m[2]),
  ]);

  it('lists every code with its status, and no code that does not exist', () => {
    expect(documented.map(([code]) => code).sort()).toEqual([...RELAY_ERROR_CODES].sort());
    for (const [code, status] of documented) expect(status).toBe(httpStatusOf(code as RelayErrorCode));
  });
});

describe('previewValue', () => {
  it('bounds strings and JSON and never throws', () => {
    expect(previewValue('turbo')).toBe('turbo');
    expect(previewValue({ a: 1 })).toBe('{"a":1}');
    expect(previewValue('x'.repeat(500))).toHaveLength(101);
    const deep = JSON.parse(`${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}`);
    expect(previewValue(deep)).toBe('[object]');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(previewValue(cyclic)).toBe('[object]');
    // A message about a hostile value never throws, even when the value comes back from the wire unbounded.
    const rebuilt = relayErrorFromBody({
      error: { code: 'RELAY_E_MODE_INVALID', details: { value: cyclic } },
    });
    expect(rebuilt.message).toBe('decision_mode must be "cortex" or "reflex" (got [object])');
  });
});
