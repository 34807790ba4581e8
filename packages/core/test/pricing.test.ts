import {
  COMPUTE_BUDGET_PROGRAM_ID,
  DEFAULT_POLICY,
  FLOOR_REFERENCE_CU,
  bidPerCu,
  classifyContention,
  computeUnitLimitOf,
  decideReflex,
  requestedComputeUnits,
  tipForCu,
  tipPerCu,
  type ContentionSignal,
  type ReflexInput,
  type TipFloor,
} from '../src';

const SYSTEM = '11111111111111111111111111111111';
const SWAP_PROGRAM = 'JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4';
const FLOOR: TipFloor = {
  p25: 5_000,
  p50: 10_000,
  p75: 40_000,
  p95: 1_400_000,
  p99: 10_000_000,
  ema: 9_000,
  stale: false,
};

function setLimit(units: number) {
  const data = new Uint8Array(5);
  data[0] = 2;
  new DataView(data.buffer).setUint32(1, units, true);
  return { program: COMPUTE_BUDGET_PROGRAM_ID, data };
}
const transfer = { program: SYSTEM, data: new Uint8Array([2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]) };
const swap = { program: SWAP_PROGRAM, data: new Uint8Array([9, 9]) };

describe('requestedComputeUnits', () => {
  it('reads SetComputeUnitLimit when present', () => {
    expect(computeUnitLimitOf(setLimit(1_337))).toBe(1_337);
    expect(requestedComputeUnits([setLimit(300_000), swap, swap])).toBe(300_000);
  });
  it('caps a limit at 1.4M', () => {
    expect(requestedComputeUnits([setLimit(4_000_000), swap])).toBe(1_400_000);
  });
  it('defaults to 200,000 per non-builtin and 3,000 per builtin instruction', () => {
    expect(requestedComputeUnits([transfer])).toBe(3_000);
    expect(requestedComputeUnits([swap])).toBe(200_000);
    expect(requestedComputeUnits([transfer, swap, swap])).toBe(403_000);
  });
  it('caps the default at 1.4M', () => {
    expect(requestedComputeUnits(Array.from({ length: 8 }, () => swap))).toBe(1_400_000);
  });
  it('ignores ComputeBudget instructions that are not SetComputeUnitLimit', () => {
    const price = { program: COMPUTE_BUDGET_PROGRAM_ID, data: new Uint8Array([3, 1, 0, 0, 0, 0, 0, 0, 0]) };
    expect(computeUnitLimitOf(price)).toBeNull();
    expect(requestedComputeUnits([price, swap])).toBe(203_000);
  });
});

describe('classifyContention', () => {
  it('is unknown without readings', () => {
    expect(classifyContention(null, 'p75').class).toBe('unknown');
    expect(classifyContention([], 'p75').class).toBe('unknown');
  });
  it('is uncontended when most slots read 0', () => {
    const signal = classifyContention([0, 0, 0, 5_000, 0], 'p75');
    expect(signal.class).toBe('uncontended');
    expect(signal.slots).toBe(5);
  });
  it('is contended when most slots priced the write set, at the targeted percentile', () => {
    const signal = classifyContention([10, 20, 30, 40, 0, 50, 60, 70], 'p75');
    expect(signal.class).toBe('contended');
    expect(signal.write_price_micro_lamports).toBe(50);
  });
});

describe('bidPerCu', () => {
  const quiet: ContentionSignal = { class: 'uncontended', write_price_micro_lamports: 0, slots: 150 };
  const hot = (price: number): ContentionSignal => ({
    class: 'contended',
    write_price_micro_lamports: price,
    slots: 150,
  });
  it('bids the bottom of the ladder per reference CU when uncontended', () => {
    expect(bidPerCu(FLOOR, 'p75', quiet).per_cu).toBe(FLOOR.p25 / FLOOR_REFERENCE_CU);
  });
  it('bids the targeted percentile per reference CU when contended and the write price is lower', () => {
    const bid = bidPerCu(FLOOR, 'p75', hot(1_000));
    expect(bid.per_cu).toBe(FLOOR.p75 / FLOOR_REFERENCE_CU);
    expect(bid.signal).toMatch(/contended/);
  });
  it('bids the write-set price when it is above the floor per CU', () => {
    // 400,000 µlamports/CU = 0.4 lamports/CU, above 40,000 / 200,000 = 0.2.
    expect(bidPerCu(FLOOR, 'p75', hot(400_000)).per_cu).toBeCloseTo(0.4);
  });
  it('prices unknown contention as contended', () => {
    const unknown: ContentionSignal = { class: 'unknown', write_price_micro_lamports: null, slots: 0 };
    expect(bidPerCu(FLOOR, 'p75', unknown).per_cu).toBe(FLOOR.p75 / FLOOR_REFERENCE_CU);
  });
  it('a contended bid per CU is higher than an uncontended one', () => {
    expect(bidPerCu(FLOOR, 'p75', hot(0)).per_cu).toBeGreaterThan(bidPerCu(FLOOR, 'p75', quiet).per_cu);
  });
  it('rounds lamports up, never below the rank', () => {
    expect(tipForCu(0.2, 10_001)).toBe(2_001);
    expect(tipPerCu(tipForCu(0.37, 12_345), 12_345)).toBeGreaterThanOrEqual(0.37);
  });
});

describe('decideReflex per requested CU', () => {
  function input(overrides: Partial<ReflexInput> = {}): ReflexInput {
    return {
      floor: FLOOR,
      leaders: { bundle_engine: [true, false, false] },
      policy: DEFAULT_POLICY,
      previous: null,
      slot: 1_000,
      tx: {
        priority: 'normal',
        max_tip: null,
        tip: 'auto',
        enqueue_slot: 1_000,
        expires_at_slot: 1_150,
        retries: 0,
      },
      ...overrides,
    };
  }
  const quiet: ContentionSignal = { class: 'uncontended', write_price_micro_lamports: 0, slots: 150 };
  const hot: ContentionSignal = { class: 'contended', write_price_micro_lamports: 0, slots: 150 };

  it('a light uncontended transfer pays min-tip, far under the flat p75', () => {
    const decision = decideReflex(input({ bundle: { compute_units: 4_400, contention: quiet } }));
    if (decision.action !== 'submit') throw new Error(decision.reason);
    expect(decision.tip_lamports).toBe(DEFAULT_POLICY['min-tip']);
    expect(decision.tip_lamports).toBeLessThanOrEqual(FLOOR.p75 / 4);
    expect(decision.pricing).toMatchObject({ compute_units: 4_400, contention: 'uncontended' });
  });

  it('a heavy contended swap bids p75 per reference CU over its whole CU', () => {
    const decision = decideReflex(input({ bundle: { compute_units: 1_001_400, contention: hot } }));
    if (decision.action !== 'submit') throw new Error(decision.reason);
    expect(decision.tip_lamports).toBe(tipForCu(FLOOR.p75 / FLOOR_REFERENCE_CU, 1_001_400));
    expect(decision.pricing?.tip_per_cu).toBeGreaterThanOrEqual(FLOOR.p75 / FLOOR_REFERENCE_CU);
    expect(decision.pricing?.signal).toMatch(/contended write set/);
  });

  it('the same bundle bids more per CU when its write set is contended', () => {
    const a = decideReflex(input({ bundle: { compute_units: 600_000, contention: quiet } }));
    const b = decideReflex(input({ bundle: { compute_units: 600_000, contention: hot } }));
    if (a.action !== 'submit' || b.action !== 'submit') throw new Error('expected submits');
    expect(b.pricing?.tip_per_cu).toBeGreaterThan(a.pricing?.tip_per_cu ?? Infinity);
  });

  it('stays within max-tip', () => {
    const decision = decideReflex(
      input({
        bundle: { compute_units: 1_400_000, contention: { ...hot, write_price_micro_lamports: 5e6 } },
      }),
    );
    if (decision.action !== 'submit') throw new Error(decision.reason);
    expect(decision.tip_lamports).toBe(DEFAULT_POLICY['max-tip']);
    expect(decision.hard_reasons).toContain('tip_at_cap');
  });

  it('a retry keeps the previous tip per CU over a bundle whose CU grew', () => {
    const decision = decideReflex(
      input({
        bundle: { compute_units: 400_000, contention: quiet },
        previous: { tip_lamports: 20_000, outcome: 'dropped', compute_units: 200_000 },
        tx: { ...input().tx, retries: 1 },
      }),
    );
    if (decision.action !== 'submit') throw new Error(decision.reason);
    // 0.1 lamports/CU before, over 400k CU: 40,000, but at most escalation-step above the previous tip.
    expect(decision.tip_lamports).toBe(Math.min(40_000, 20_000 + DEFAULT_POLICY['escalation-step']));
  });

  it('escalates per CU after fee_too_low, by at most escalation-step', () => {
    const decision = decideReflex(
      input({
        bundle: { compute_units: 1_000_000, contention: hot },
        previous: { tip_lamports: 10_000, outcome: 'fee_too_low', compute_units: 1_000_000 },
        tx: { ...input().tx, retries: 1 },
      }),
    );
    if (decision.action !== 'submit') throw new Error(decision.reason);
    expect(decision.tip_lamports).toBe(10_000 + DEFAULT_POLICY['escalation-step']);
    expect(decision.reason).toMatch(/repriced per CU/);
  });

  it('without a bundle, keeps the flat percentile (no pricing)', () => {
    const decision = decideReflex(input());
    if (decision.action !== 'submit') throw new Error(decision.reason);
    expect(decision.tip_lamports).toBe(FLOOR.p75);
    expect(decision.pricing ?? null).toBeNull();
  });
});
