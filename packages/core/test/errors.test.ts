import { readFileSync } from 'node:fs';
import {
  RELAY_ERRORS,
  RELAY_ERROR_CODES,
  RELAY_ERROR_CODE_PATTERN,
  RelayError,
  formatRelayErrorMessage,
  httpStatusOf,
  isRelayError,
  previewValue,
  relayErrorFromBody,
  type RelayErrorCode,
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
  ['RELAY_E_POLICY_MAX_TIP_EXCEEDED', 422],
  ['RELAY_E_POLICY_MIN_TIP_NOT_MET', 422],
  ['RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED', 422],
  ['RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED', 422],
  ['RELAY_E_POLICY_INVALID_FILE', 422],
  ['RELAY_E_POLICY_INVALID_VALUE', 400],
  ['RELAY_E_POLICY_UNKNOWN_KEY', 400],
  ['RELAY_E_QUEUE_FULL', 429],
  ['RELAY_E_RATE_LIMITED', 429],
  ['RELAY_E_NOT_READY', 503],
  ['RELAY_E_AGENT_NOT_CONNECTED', 404],
  ['RELAY_E_MODE_INVALID', 400],
  ['RELAY_E_UPSTREAM_UNREACHABLE', 502],
  ['RELAY_E_CONFIG_MISSING_ENV', 500],
  ['RELAY_E_CONFIG_UNREADABLE_KEYPAIR', 500],
  ['RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP', 500],
  ['RELAY_E_INTERNAL_ERROR', 500],
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

  it('leaves unknown placeholders visible and serialises non-strings', () => {
    expect(formatRelayErrorMessage('RELAY_E_QUEUE_FULL', {})).toContain('$limit');
    expect(formatRelayErrorMessage('RELAY_E_QUEUE_FULL', { limit: 5 })).toBe(
      'The queue holds 5 non-terminal transactions (max-queue)',
    );
  });

  it('isRelayError checks name and code, not instanceof', () => {
    const real = new RelayError('RELAY_E_TX_NOT_FOUND', { txId: 'tx_1' });
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
    expect(formatRelayErrorMessage('RELAY_E_MODE_INVALID', { value: cyclic })).toContain('[object]');
  });
});
