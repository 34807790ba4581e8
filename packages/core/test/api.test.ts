import {
  isRelayError,
  parseEnqueueRequest,
  parseModeRequest,
  parseSubmitRequest,
  type RelayError,
} from '../src';

function thrownBy(fn: () => unknown): RelayError | undefined {
  try {
    fn();
  } catch (error) {
    return error as RelayError;
  }
  return undefined;
}

describe('enqueue body', () => {
  it('normalises one transaction and fills the defaults', () => {
    expect(parseEnqueueRequest({ transaction: 'AQID' })).toEqual({
      transactions: ['AQID'],
      encoding: 'base64',
      priority: 'normal',
      tip: 'auto',
    });
    expect(
      parseEnqueueRequest({
        transactions: ['a', 'b'],
        encoding: 'base58',
        priority: 'high',
        tip: 'included',
        expiry_slots: 60,
        max_tip: 90_000,
      }),
    ).toEqual({
      transactions: ['a', 'b'],
      encoding: 'base58',
      priority: 'high',
      tip: 'included',
      expiry_slots: 60,
      max_tip: 90_000,
    });
  });

  it.each([
    [{ transactions: [] }, 'transactions'],
    [{}, 'transactions'],
    [{ transaction: 'a', transactions: ['b'] }, 'transactions'],
    [{ transaction: 'a', priority: 'urgent' }, 'priority'],
    [{ transaction: 'a', encoding: 'hex' }, 'encoding'],
    [{ transaction: 'a', tip: 'maybe' }, 'tip'],
    [{ transaction: 'a', max_tip: -1 }, 'max_tip'],
    [{ transaction: 'a', max_tip: 1.5 }, 'max_tip'],
    [{ transaction: 'a', expiry_slots: 0 }, 'expiry_slots'],
    [{ transaction: 'a', 'max-tip': 5 }, 'max-tip'],
    [{ transaction: '' }, 'transaction'],
    [{ transactions: ['a', 3] }, 'transactions.1'],
  ])('refuses %j naming %s', (body, field) => {
    const error = thrownBy(() => parseEnqueueRequest(body));
    expect(isRelayError(error, 'RELAY_E_REQUEST_INVALID_FIELD')).toBe(true);
    expect(error?.details.field).toBe(field);
    expect(error?.status).toBe(400);
  });

  it('refuses more than four transactions with its own code', () => {
    const error = thrownBy(() => parseEnqueueRequest({ transactions: ['a', 'b', 'c', 'd', 'e'] }));
    expect(isRelayError(error, 'RELAY_E_TX_TOO_MANY_TRANSACTIONS')).toBe(true);
    expect(error?.details.count).toBe(5);
  });

  it('refuses a body that is not an object', () => {
    for (const body of [null, [], 'x']) {
      expect(thrownBy(() => parseEnqueueRequest(body))?.details.field).toBe('(body)');
    }
  });
});

describe('submit and mode bodies', () => {
  it('accepts a submit with optional trace', () => {
    const body = {
      tx_id: 'tx_1',
      tip_lamports: 40_000,
      reason: 'p75',
      escalated: true,
      trace: { model: 'm' },
    };
    expect(parseSubmitRequest(body)).toEqual(body);
  });

  it.each([
    [{ tip_lamports: 1, reason: 'r' }, 'tx_id'],
    [{ tx_id: 't', tip_lamports: -1, reason: 'r' }, 'tip_lamports'],
    [{ tx_id: 't', tip_lamports: 1, reason: '' }, 'reason'],
    [{ tx_id: 't', tip_lamports: 1, reason: 'r', bogus: 1 }, 'bogus'],
  ])('refuses submit %j naming %s', (body, field) => {
    expect(thrownBy(() => parseSubmitRequest(body))?.details.field).toBe(field);
  });

  it('accepts a known mode and refuses others with RELAY_E_MODE_INVALID', () => {
    expect(parseModeRequest({ decision_mode: 'reflex' })).toEqual({ decision_mode: 'reflex' });
    expect(
      isRelayError(
        thrownBy(() => parseModeRequest({ decision_mode: 'turbo' })),
        'RELAY_E_MODE_INVALID',
      ),
    ).toBe(true);
    expect(
      isRelayError(
        thrownBy(() => parseModeRequest({})),
        'RELAY_E_REQUEST_INVALID_FIELD',
      ),
    ).toBe(true);
  });

  it('refuses a submit whose trace nests too deeply to journal, naming the field', () => {
    const base = { tx_id: 'tx_1', tip_lamports: 1000, reason: 'r' };
    const deep = JSON.parse(`${'['.repeat(50_000)}${']'.repeat(50_000)}`);
    const error = thrownBy(() => parseSubmitRequest({ ...base, trace: { inputs: deep } }));
    expect(isRelayError(error, 'RELAY_E_REQUEST_INVALID_FIELD')).toBe(true);
    expect(error?.details.field).toBe('trace');
    const ok = { inputs: { floor: { p50: 1, history: [[1, 2]] } }, model: 'm' };
    expect(parseSubmitRequest({ ...base, trace: ok }).trace).toEqual(ok);
    expect(parseSubmitRequest({ ...base, trace: null }).trace).toBeNull();
  });

  it('refuses a hostile mode with a short, serialisable echo (deep nesting used to throw a RangeError: a 500)', () => {
    const deep = JSON.parse(`${'['.repeat(50_000)}${']'.repeat(50_000)}`);
    const error = thrownBy(() => parseModeRequest({ decision_mode: deep }));
    expect(isRelayError(error, 'RELAY_E_MODE_INVALID')).toBe(true);
    expect(() => JSON.stringify(error?.toBody())).not.toThrow();
    const long = thrownBy(() => parseModeRequest({ decision_mode: 'x'.repeat(200_000) }));
    expect(JSON.stringify(long?.toBody()).length).toBeLessThan(1_000);
    expect(thrownBy(() => parseModeRequest({ decision_mode: 'turbo' }))?.message).toContain('(got turbo)');
  });
});

describe('submit decision_mode', () => {
  it('accepts the tier that decided and refuses anything else, naming the field', () => {
    expect(
      parseSubmitRequest({ tx_id: 't', tip_lamports: 1000, reason: 'r', decision_mode: 'reflex' })
        .decision_mode,
    ).toBe('reflex');
    expect(parseSubmitRequest({ tx_id: 't', tip_lamports: 1000, reason: 'r' }).decision_mode).toBeUndefined();
    let caught: unknown;
    try {
      parseSubmitRequest({ tx_id: 't', tip_lamports: 1000, reason: 'r', decision_mode: 'bypass' });
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({
      code: 'RELAY_E_REQUEST_INVALID_FIELD',
      details: { field: 'decision_mode' },
    });
  });
});
