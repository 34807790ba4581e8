import {
  ATTEMPT_OUTCOMES,
  OUTCOME_NEXT,
  classifyGrpcBundleResult,
  classifyInflightStatus,
  classifySendBundleError,
  classifyTransactionError,
  isRetryableOutcome,
} from '../src';

describe('outcome classes', () => {
  it('say what follows each class', () => {
    expect(ATTEMPT_OUTCOMES).toEqual([
      'fee_too_low',
      'dropped',
      'simulation_failed',
      'invalid_bundle',
      'insufficient_funds',
    ]);
    expect(OUTCOME_NEXT).toEqual({
      fee_too_low: 'retry_escalate',
      dropped: 'retry_same_tip',
      simulation_failed: 'fail',
      invalid_bundle: 'fail',
      insufficient_funds: 'fail',
    });
    expect(ATTEMPT_OUTCOMES.filter(isRetryableOutcome)).toEqual(['fee_too_low', 'dropped']);
  });
});

describe('classifyGrpcBundleResult', () => {
  it.each([
    [{ rejected: { stateAuctionBidRejected: { msg: 'x' } } }, 'outcome', 'fee_too_low'],
    [{ rejected: { winningBatchBidRejected: {} } }, 'outcome', 'fee_too_low'],
    [
      { rejected: { simulationFailure: { txSignature: 's', msg: 'custom program error 0x1' } } },
      'outcome',
      'simulation_failed',
    ],
    [
      { rejected: { simulationFailure: { msg: 'InsufficientFundsForFee' } } },
      'outcome',
      'insufficient_funds',
    ],
    [
      // A fee payer that was never funded: the runtime reports AccountNotFound.
      { rejected: { simulationFailure: { txSignature: 's', msg: 'transaction 0 failed: AccountNotFound' } } },
      'outcome',
      'insufficient_funds',
    ],
    [
      { rejected: { droppedBundle: { msg: 'Bundle Dropped, no connected leader up soon.' } } },
      'outcome',
      'dropped',
    ],
    [{ rejected: { internalError: { msg: 'oops' } } }, 'outcome', 'dropped'],
    [{ dropped: { reason: 0 } }, 'outcome', 'dropped'],
    [{ processed: { slot: 42, validatorIdentity: 'V', bundleIndex: 0 } }, 'landed', undefined],
    [{ accepted: { slot: 41, validatorIdentity: 'V' } }, 'none', undefined],
    [{ finalized: {} }, 'none', undefined],
  ] as const)('%j is %s %s', (result, kind, outcome) => {
    const report = classifyGrpcBundleResult(result);
    expect(report.kind).toBe(kind);
    if (report.kind === 'outcome') expect(report.outcome).toBe(outcome);
    if (report.kind === 'landed') expect(report.slot).toBe(42);
  });
});

describe('classifyInflightStatus', () => {
  const base = { tip_lamports: 5_000, floor_p50_lamports: 10_000, window_passed: true };
  it('infers fee_too_low only when the window passed with a tip below p50', () => {
    expect(classifyInflightStatus({ ...base, status: 'Pending' })).toMatchObject({
      kind: 'outcome',
      outcome: 'fee_too_low',
    });
    expect(classifyInflightStatus({ ...base, status: 'Invalid' })).toMatchObject({
      kind: 'outcome',
      outcome: 'fee_too_low',
    });
    expect(classifyInflightStatus({ ...base, status: 'Failed', tip_lamports: 10_000 })).toMatchObject({
      kind: 'outcome',
      outcome: 'dropped',
    });
    expect(classifyInflightStatus({ ...base, status: 'Pending', window_passed: false }).kind).toBe('none');
    expect(classifyInflightStatus({ ...base, status: 'Invalid', window_passed: false }).kind).toBe('none');
    expect(classifyInflightStatus({ ...base, status: 'Failed', window_passed: false })).toMatchObject({
      kind: 'outcome',
      outcome: 'fee_too_low',
    });
    expect(classifyInflightStatus({ ...base, status: 'Landed', landed_slot: 77 })).toEqual({
      kind: 'landed',
      slot: 77,
      detail: 'engine reports Landed',
    });
  });
});

describe('classifySendBundleError', () => {
  it.each([
    [
      { httpStatus: 429, rpcCode: -32097, message: 'Network congested. Endpoint is globally rate limited.' },
      'transport',
    ],
    [
      { httpStatus: 400, rpcCode: -32602, message: 'bundle contains an already processed transaction' },
      'already_processed',
    ],
    [
      { httpStatus: 400, rpcCode: -32602, message: 'bundle contains an expired blockhash' },
      'blockhash_expired',
    ],
    [
      {
        httpStatus: 400,
        message: 'Bundles must write lock at least one tip account to be eligible for the auction.',
      },
      'invalid_bundle',
    ],
    [{ httpStatus: 400, message: 'transaction #0 could not be decoded' }, 'invalid_bundle'],
    [{ httpStatus: 400, message: 'exceeded maximum number of transactions' }, 'invalid_bundle'],
    [{ httpStatus: 503, message: 'upstream connect error' }, 'transport'],
  ])('%j -> %s', (error, expected) => {
    const result = classifySendBundleError(error);
    expect(result.kind === 'outcome' ? result.outcome : result.kind).toBe(expected);
  });
});

describe('classifyTransactionError', () => {
  it('tells a fee payer that cannot pay from an execution failure', () => {
    expect(classifyTransactionError('InsufficientFundsForFee')).toBe('insufficient_funds');
    expect(classifyTransactionError({ InstructionError: [0, { Custom: 1 }] })).toBe('simulation_failed');
  });
});
