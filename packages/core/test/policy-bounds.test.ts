import {
  DEFAULT_POLICY,
  checkEnqueueAgainstPolicy,
  checkSubmitAgainstPolicy,
  escalationCeiling,
  expiresAtSlot,
  isRelayError,
  policyViolationError,
  tipBounds,
  type SubmitCheckInput,
} from '../src';

const OK: SubmitCheckInput = {
  tip_lamports: 50_000,
  tip_mode: 'auto',
  caller_max_tip: null,
  previous_tip_lamports: null,
  retries: 0,
  slot: 100,
  expires_at_slot: 250,
};

describe('checkSubmitAgainstPolicy', () => {
  it('accepts a submission inside every bound', () => {
    expect(checkSubmitAgainstPolicy(OK, DEFAULT_POLICY)).toBeNull();
  });

  it.each([
    ['max-tip', { tip_lamports: 2_000_001 }, 'RELAY_E_POLICY_MAX_TIP_EXCEEDED'],
    ['min-tip', { tip_lamports: 999 }, 'RELAY_E_POLICY_MIN_TIP_NOT_MET'],
    ['max_tip', { caller_max_tip: 40_000 }, 'RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED'],
    [
      'escalation-step',
      { previous_tip_lamports: 10_000, retries: 1, tip_lamports: 60_001 },
      'RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED',
    ],
    ['max-retries', { previous_tip_lamports: 50_000, retries: 4 }, 'RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED'],
    ['expiry-slots', { slot: 251 }, 'RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED'],
    ['spend-limit', { spent_in_window_lamports: 499_960_000 }, 'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED'],
    ['tip', { tip_mode: 'included' as const }, 'RELAY_E_TX_TIP_NOT_RAISABLE'],
  ])('names %s', (key, change, code) => {
    const violation = checkSubmitAgainstPolicy({ ...OK, ...change }, DEFAULT_POLICY);
    expect(violation).toMatchObject({ key, code });
    const error = policyViolationError(violation!, 'tx_1');
    expect(isRelayError(error, violation!.code)).toBe(true);
    expect(error.status).toBe(422);
    expect(error.details).toMatchObject({ key, tx_id: 'tx_1' });
  });

  it('allows exactly previous + step, and a spend-limit of 0 means none', () => {
    expect(
      checkSubmitAgainstPolicy(
        { ...OK, previous_tip_lamports: 10_000, retries: 1, tip_lamports: 60_000 },
        DEFAULT_POLICY,
      ),
    ).toBeNull();
    expect(
      checkSubmitAgainstPolicy(
        { ...OK, spent_in_window_lamports: 10 ** 12 },
        { ...DEFAULT_POLICY, 'spend-limit': 0 },
      ),
    ).toBeNull();
    expect(
      checkSubmitAgainstPolicy({ ...OK, tip_mode: 'included', tip_lamports: 0 }, DEFAULT_POLICY),
    ).toBeNull();
  });
});

describe('checkSubmitAgainstPolicy, included-tip transactions', () => {
  const INCLUDED: SubmitCheckInput = { ...OK, tip_mode: 'included', tip_lamports: 0 };

  it('still enforces max-retries, expiry-slots and spend-limit', () => {
    expect(
      checkSubmitAgainstPolicy({ ...INCLUDED, previous_tip_lamports: 0, retries: 4 }, DEFAULT_POLICY),
    ).toMatchObject({ key: 'max-retries', code: 'RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED' });
    expect(
      checkSubmitAgainstPolicy({ ...INCLUDED, previous_tip_lamports: null, retries: 4 }, DEFAULT_POLICY),
    ).toMatchObject({ key: 'max-retries' });
    expect(checkSubmitAgainstPolicy({ ...INCLUDED, slot: 251 }, DEFAULT_POLICY)).toMatchObject({
      key: 'expiry-slots',
      code: 'RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED',
    });
    expect(
      checkSubmitAgainstPolicy(
        { ...INCLUDED, spent_in_window_lamports: 499_999_000, fee_lamports: 5_000 },
        DEFAULT_POLICY,
      ),
    ).toMatchObject({ key: 'spend-limit', actual: 500_004_000 });
  });

  it('does not apply the tip bounds to a tip of 0', () => {
    expect(
      checkSubmitAgainstPolicy(
        { ...INCLUDED, caller_max_tip: 0, previous_tip_lamports: 0, retries: 3 },
        DEFAULT_POLICY,
      ),
    ).toBeNull();
  });
});

describe('bounds helpers', () => {
  it('computes tip bounds, the escalation ceiling and the expiry slot', () => {
    expect(tipBounds(DEFAULT_POLICY, null)).toEqual({ min: 1_000, max: 2_000_000 });
    expect(tipBounds(DEFAULT_POLICY, 5_000)).toEqual({ min: 1_000, max: 5_000 });
    expect(escalationCeiling(10_000, DEFAULT_POLICY)).toBe(60_000);
    expect(escalationCeiling(100, { 'escalation-step': 0, 'min-tip': 5_000 })).toBe(5_000);
    expect(expiresAtSlot(1_000, DEFAULT_POLICY)).toBe(1_150);
    expect(expiresAtSlot(1_000, DEFAULT_POLICY, 20)).toBe(1_020);
    expect(expiresAtSlot(1_000, DEFAULT_POLICY, 5_000)).toBe(1_150);
  });
});

describe('checkEnqueueAgainstPolicy', () => {
  it('refuses a caller cap below min-tip, naming max_tip', () => {
    expect(checkEnqueueAgainstPolicy({ max_tip: 999 }, DEFAULT_POLICY)).toEqual({
      key: 'max_tip',
      code: 'RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP',
      limit: 1_000,
      actual: 999,
    });
    expect(checkEnqueueAgainstPolicy({ max_tip: 1_000 }, DEFAULT_POLICY)).toBeNull();
    expect(checkEnqueueAgainstPolicy({}, DEFAULT_POLICY)).toBeNull();
    expect(checkEnqueueAgainstPolicy({ max_tip: 0, tip: 'included' }, DEFAULT_POLICY)).toBeNull();
  });
});
