import fc from 'fast-check';
import {
  DEFAULT_POLICY,
  TIP_PERCENTILES,
  checkSubmitAgainstPolicy,
  clampTip,
  decideReflex,
  targetPercentile,
  type AttemptOutcome,
  type Policy,
  type ReflexInput,
  type TipFloor,
  type TipPercentile,
} from '../src';

const FLOOR: TipFloor = {
  p25: 5_000,
  p50: 10_000,
  p75: 40_000,
  p95: 1_400_000,
  p99: 10_000_000,
  ema: 9_000,
  stale: false,
};
const BE_NOW = { bundle_engine: [true, false, false] };

function input(
  overrides: Partial<Omit<ReflexInput, 'tx'>> & { tx?: Partial<ReflexInput['tx']> } = {},
): ReflexInput {
  const { tx, ...rest } = overrides;
  return {
    floor: FLOOR,
    leaders: BE_NOW,
    policy: DEFAULT_POLICY,
    previous: null,
    slot: 1_000,
    ...rest,
    tx: {
      priority: 'normal',
      max_tip: null,
      tip: 'auto',
      enqueue_slot: 1_000,
      expires_at_slot: 1_150,
      retries: 0,
      ...tx,
    },
  };
}

describe('targetPercentile', () => {
  it.each([
    ['p25', 'high', 'p50'],
    ['p50', 'high', 'p75'],
    ['p75', 'high', 'p95'],
    ['p95', 'high', 'p99'],
    ['p99', 'high', 'p99'],
    ['ema', 'high', 'p75'],
    ['p25', 'low', 'p25'],
    ['p50', 'low', 'p25'],
    ['p75', 'low', 'p50'],
    ['p99', 'low', 'p95'],
    ['ema', 'low', 'p25'],
    ['ema', 'normal', 'ema'],
    ['p95', 'normal', 'p95'],
  ] as const)('%s with %s priority targets %s', (percentile, priority, expected) => {
    expect(targetPercentile(percentile, priority)).toBe(expected);
  });
});

describe('decideReflex, table', () => {
  it.each([
    // [name, input, expected action, expected tip]
    ['first attempt at p75', input(), 'submit', 40_000],
    ['high priority moves to p95', input({ tx: { priority: 'high' } }), 'submit', 1_400_000],
    ['low priority moves to p50', input({ tx: { priority: 'low' } }), 'submit', 10_000],
    [
      'policy priority pin wins',
      input({ tx: { priority: 'low' }, policy: { ...DEFAULT_POLICY, priority: 'high' } }),
      'submit',
      1_400_000,
    ],
    ['ema target', input({ policy: { ...DEFAULT_POLICY, 'tip-percentile': 'ema' } }), 'submit', 9_000],
    ['floor below min-tip is raised', input({ floor: { ...FLOOR, p75: 10 } }), 'submit', 1_000],
    [
      'p99 above max-tip is capped',
      input({ tx: { priority: 'high' }, policy: { ...DEFAULT_POLICY, 'tip-percentile': 'p99' } }),
      'submit',
      2_000_000,
    ],
    ['caller cap applies', input({ tx: { max_tip: 25_000 } }), 'submit', 25_000],
    [
      'fee_too_low retry rises to the floor within the step',
      input({ previous: { tip_lamports: 20_000, outcome: 'fee_too_low' }, tx: { retries: 1 } }),
      'submit',
      40_000,
    ],
    [
      'fee_too_low retry limited by escalation-step',
      input({
        previous: { tip_lamports: 20_000, outcome: 'fee_too_low' },
        tx: { retries: 1, priority: 'high' },
      }),
      'submit',
      70_000,
    ],
    [
      'fee_too_low retry never drops below the previous tip',
      input({ previous: { tip_lamports: 60_000, outcome: 'fee_too_low' }, tx: { retries: 1 } }),
      'submit',
      60_000,
    ],
    [
      'dropped retry keeps the tip',
      input({ previous: { tip_lamports: 33_333, outcome: 'dropped' }, tx: { retries: 2 } }),
      'submit',
      33_333,
    ],
    ['included tip submits 0', input({ tx: { tip: 'included' } }), 'submit', 0],
    ['unknown BE data submits', input({ leaders: { bundle_engine: [null, null, null] } }), 'submit', 40_000],
    [
      'BE leader two slots ahead submits',
      input({ leaders: { bundle_engine: [false, false, true] } }),
      'submit',
      40_000,
    ],
    [
      'no BE leader soon holds',
      input({ leaders: { bundle_engine: [false, false, false] } }),
      'hold',
      undefined,
    ],
    [
      'retries exhausted stops',
      input({ previous: { tip_lamports: 20_000, outcome: 'dropped' }, tx: { retries: 4 } }),
      'stop',
      undefined,
    ],
    ['past expiry stops', input({ slot: 1_151 }), 'stop', undefined],
    ['at the expiry slot still submits', input({ slot: 1_150 }), 'submit', 40_000],
    [
      'non-retryable outcome stops',
      input({ previous: { tip_lamports: 20_000, outcome: 'simulation_failed' }, tx: { retries: 1 } }),
      'stop',
      undefined,
    ],
    ['caller cap below min-tip stops', input({ tx: { max_tip: 500 } }), 'stop', undefined],
  ] as Array<[string, ReflexInput, string, number | undefined]>)('%s', (_name, reflexInput, action, tip) => {
    const decision = decideReflex(reflexInput);
    expect(decision.action).toBe(action);
    expect(decision.reason.length).toBeGreaterThan(0);
    if (decision.action === 'submit') expect(decision.tip_lamports).toBe(tip);
  });

  it('marks the hard cases', () => {
    expect(decideReflex(input()).hard_reasons).toEqual([]);
    expect(decideReflex(input({ floor: { ...FLOOR, stale: true } })).hard_reasons).toEqual([
      'stale_tip_data',
    ]);
    expect(
      decideReflex(input({ previous: { tip_lamports: 20_000, outcome: 'fee_too_low' }, tx: { retries: 1 } }))
        .hard_reasons,
    ).toEqual(['fee_too_low_retry']);
    const capped = decideReflex(input({ tx: { max_tip: 25_000 } }));
    expect([capped.hard, capped.hard_reasons]).toEqual([true, ['tip_at_cap']]);
    expect(decideReflex(input({ tx: { max_tip: 40_000 } })).hard_reasons).toEqual(['tip_at_cap']);
    expect(decideReflex(input({ leaders: { bundle_engine: [false, false, false] } })).hard).toBe(false);
  });
});

const outcomeArb = fc.constantFrom<AttemptOutcome>('fee_too_low', 'dropped');
const percentileArb = fc.constantFrom<TipPercentile>(...TIP_PERCENTILES);
const lamportsArb = fc.integer({ min: 0, max: 50_000_000 });

const policyArb = fc
  .record({
    minTip: fc.integer({ min: 1_000, max: 100_000 }),
    extra: fc.integer({ min: 0, max: 5_000_000 }),
    step: fc.integer({ min: 0, max: 1_000_000 }),
    percentile: percentileArb,
    priority: fc.constantFrom(null, 'low', 'normal', 'high' as const),
  })
  .map(({ minTip, extra, step, percentile, priority }): Policy => ({
    ...DEFAULT_POLICY,
    'min-tip': minTip,
    'max-tip': minTip + extra,
    'escalation-step': step,
    'tip-percentile': percentile,
    priority,
  }));

const floorArb = fc.record({
  p25: lamportsArb,
  p50: lamportsArb,
  p75: lamportsArb,
  p95: lamportsArb,
  p99: lamportsArb,
  ema: lamportsArb,
  stale: fc.boolean(),
});

describe('decideReflex, properties', () => {
  it('a submitted tip is always within [min-tip, min(max-tip, cap)] when the cap is >= min-tip', () => {
    fc.assert(
      fc.property(
        policyArb,
        floorArb,
        fc.option(fc.integer({ min: 0, max: 10_000_000 }), { nil: null }),
        fc.option(fc.record({ tip_lamports: lamportsArb, outcome: outcomeArb }), { nil: null }),
        fc.constantFrom('low', 'normal', 'high' as const),
        (policy, floor, capOffset, previous, priority) => {
          const cap = capOffset === null ? null : policy['min-tip'] + capOffset;
          const decision = decideReflex(
            input({ policy, floor, previous, tx: { max_tip: cap, priority, retries: previous ? 1 : 0 } }),
          );
          expect(decision.action).toBe('submit');
          if (decision.action !== 'submit') return;
          const upper = Math.min(policy['max-tip'], cap ?? Infinity);
          expect(decision.tip_lamports).toBeGreaterThanOrEqual(policy['min-tip']);
          expect(decision.tip_lamports).toBeLessThanOrEqual(upper);
          expect(Number.isSafeInteger(decision.tip_lamports)).toBe(true);
          // and the sidecar's own check accepts what reflex decided
          expect(
            checkSubmitAgainstPolicy(
              {
                tip_lamports: decision.tip_lamports,
                tip_mode: 'auto',
                caller_max_tip: cap,
                previous_tip_lamports: previous?.tip_lamports ?? null,
                retries: previous ? 1 : 0,
                slot: 1_000,
                expires_at_slot: 1_150,
              },
              policy,
            ),
          ).toBeNull();
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a retry never rises by more than escalation-step above an in-bounds previous tip', () => {
    fc.assert(
      fc.property(
        policyArb,
        floorArb,
        outcomeArb,
        fc.double({ min: 0, max: 1, noNaN: true }),
        (policy, floor, outcome, at) => {
          const previousTip = Math.round(policy['min-tip'] + at * (policy['max-tip'] - policy['min-tip']));
          const decision = decideReflex(
            input({ policy, floor, previous: { tip_lamports: previousTip, outcome }, tx: { retries: 1 } }),
          );
          if (decision.action !== 'submit') throw new Error(`expected submit, got ${decision.action}`);
          expect(decision.tip_lamports - previousTip).toBeLessThanOrEqual(policy['escalation-step']);
          if (outcome === 'dropped') expect(decision.tip_lamports).toBe(previousTip);
          if (outcome === 'fee_too_low') expect(decision.tip_lamports).toBeGreaterThanOrEqual(previousTip);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('holds exactly when all three slots are known non-bundle-engine', () => {
    const flag = fc.constantFrom(true, false, null);
    fc.assert(
      fc.property(fc.tuple(flag, flag, flag), (flags) => {
        const decision = decideReflex(input({ leaders: { bundle_engine: flags } }));
        const allFalse = flags.every((f) => f === false);
        expect(decision.action).toBe(allFalse ? 'hold' : 'submit');
      }),
      { numRuns: 50 },
    );
  });
});

describe('decideReflex, timing window', () => {
  it('reads only the current slot and the next two, whatever span the view covers', () => {
    const far = decideReflex(input({ leaders: { bundle_engine: [false, false, false, true, true] } }));
    expect(far.action).toBe('hold');
    expect(far.reason).toContain('1000..1002');
    const near = decideReflex(input({ leaders: { bundle_engine: [false, false, true, false, false] } }));
    expect(near.action).toBe('submit');
  });
});

describe('clampTip', () => {
  it('clamps into [min-tip, min(max-tip, cap)]', () => {
    expect(clampTip(10, DEFAULT_POLICY, null)).toBe(1_000);
    expect(clampTip(5_000_000, DEFAULT_POLICY, null)).toBe(2_000_000);
    expect(clampTip(5_000_000, DEFAULT_POLICY, 30_000)).toBe(30_000);
    expect(clampTip(1_234.2, DEFAULT_POLICY, null)).toBe(1_235);
  });
});
