import {
  TipOracle,
  isRelayError,
  nearestRank,
  parseJitoTipFloorResponse,
  type JitoTipFloorSample,
} from '../src';

// The shape of Jito's tip_floor answer (jito.md §2): SOL floats.
const JITO_SAMPLE: JitoTipFloorSample = {
  time: '2024-09-01T12:58:00Z',
  landed_tips_25th_percentile: 6.001000000000001e-6,
  landed_tips_50th_percentile: 1e-5,
  landed_tips_75th_percentile: 3.6196500000000005e-5,
  landed_tips_95th_percentile: 0.0014479055000000002,
  landed_tips_99th_percentile: 0.010007999,
  ema_landed_tips_50th_percentile: 9.836078125000002e-6,
};

describe('parseJitoTipFloorResponse', () => {
  it('reads the REST array into lamports', () => {
    expect(parseJitoTipFloorResponse([JITO_SAMPLE])).toEqual({
      p25: 6_001, // Jito's 6.001000000000001e-06: float noise, not a sub-lamport remainder
      p50: 10_000,
      p75: 36_197,
      p95: 1_447_906,
      p99: 10_007_999,
      ema: 9_837,
    });
  });

  it('refuses a wrong shape with an upstream error', () => {
    let thrown: unknown;
    try {
      parseJitoTipFloorResponse([{ landed_tips_25th_percentile: 1 }]);
    } catch (error) {
      thrown = error;
    }
    expect(isRelayError(thrown, 'RELAY_E_UPSTREAM_INVALID_RESPONSE')).toBe(true);
    expect(() => parseJitoTipFloorResponse([{ ...JITO_SAMPLE, landed_tips_50th_percentile: -1 }])).toThrow();
  });
});

describe('nearestRank', () => {
  const values = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
  it.each([
    [25, 30],
    [50, 50],
    [75, 80],
    [95, 100],
    [99, 100],
    [1, 10],
  ])('p%d of 10..100 is %d', (percent, expected) => {
    expect(nearestRank(values, percent)).toBe(expected);
  });

  it('handles one and zero elements', () => {
    expect(nearestRank([7], 99)).toBe(7);
    expect(nearestRank([], 50)).toBe(0);
  });
});

describe('TipOracle', () => {
  const T0 = 1_700_000_000_000;

  it('serves the tip floor fresh, then stale after the threshold', () => {
    const oracle = new TipOracle({ staleAfterMs: 10_000 });
    oracle.ingestTipFloor(JITO_SAMPLE, T0);
    expect(oracle.view(T0 + 10_000)).toMatchObject({
      p50: 10_000,
      stale: false,
      source: 'tip_floor',
      age_ms: 10_000,
    });
    expect(oracle.view(T0 + 10_001)).toMatchObject({
      p50: 10_000,
      stale: true,
      source: 'tip_floor',
      updated_at: T0,
    });
    expect(oracle.floor(T0 + 10_001)).toEqual({
      p25: 6_001,
      p50: 10_000,
      p75: 36_197,
      p95: 1_447_906,
      p99: 10_007_999,
      ema: 9_837,
      stale: true,
    });
  });

  it('is stale with zeros and source none before any data', () => {
    expect(new TipOracle().view(T0)).toEqual({
      p25: 0,
      p50: 0,
      p75: 0,
      p95: 0,
      p99: 0,
      ema: 0,
      stale: true,
      updated_at: null,
      source: 'none',
      age_ms: null,
    });
  });

  it('ignores a sample received before the one it holds', () => {
    const oracle = new TipOracle();
    oracle.ingestTipFloor({ p25: 1, p50: 2, p75: 3, p95: 4, p99: 5, ema: 2 }, T0 + 5);
    oracle.ingestTipFloor({ p25: 9, p50: 9, p75: 9, p95: 9, p99: 9, ema: 9 }, T0);
    expect(oracle.view(T0 + 5).p50).toBe(2);
  });

  it('falls back to landed-tip observations when the tip floor is stale', () => {
    const oracle = new TipOracle({ staleAfterMs: 1_000, minObservations: 4, observationWindowMs: 60_000 });
    oracle.ingestTipFloor({ p25: 1_000, p50: 2_000, p75: 3_000, p95: 4_000, p99: 5_000, ema: 2_000 }, T0);
    for (const [i, tip] of [10_000, 20_000, 30_000, 40_000].entries())
      oracle.ingestLandedTip(tip, T0 + 100 * i);
    // floor still fresh: it wins
    expect(oracle.view(T0 + 500)).toMatchObject({ source: 'tip_floor', p50: 2_000, stale: false });
    // floor stale, enough recent observations: computed from them, fresh
    expect(oracle.view(T0 + 2_000)).toMatchObject({
      source: 'observed',
      stale: false,
      p25: 10_000,
      p50: 20_000,
      p75: 30_000,
      p99: 40_000,
      updated_at: T0 + 300,
    });
    // observations out of the window too: back to the stale floor
    expect(oracle.view(T0 + 100_000)).toMatchObject({ source: 'tip_floor', stale: true, p50: 2_000 });
  });

  it('needs minObservations before observations alone count as fresh', () => {
    const oracle = new TipOracle({ minObservations: 3 });
    oracle.ingestLandedTip(5_000, T0);
    oracle.ingestLandedTip(7_000, T0 + 1);
    expect(oracle.view(T0 + 2)).toMatchObject({ source: 'observed', stale: true, p50: 5_000 });
    oracle.ingestLandedTip(9_000, T0 + 2);
    expect(oracle.view(T0 + 3)).toMatchObject({ source: 'observed', stale: false, p50: 7_000 });
  });

  it('smooths observations with an EMA in time order, whatever the arrival order', () => {
    const oracle = new TipOracle({ minObservations: 1, emaAlpha: 0.5 });
    oracle.ingestLandedTip(3_000, T0 + 2);
    oracle.ingestLandedTip(1_000, T0);
    oracle.ingestLandedTip(2_000, T0 + 1);
    // 1000 -> 1500 -> 2250
    expect(oracle.view(T0 + 3).ema).toBe(2_250);
  });

  it('keeps at most maxObservations', () => {
    const oracle = new TipOracle({ maxObservations: 16 });
    for (let i = 0; i < 1_000; i += 1) oracle.ingestLandedTip(1_000 + i, T0 + i);
    expect(oracle.observationCount).toBe(16);
    expect(oracle.view(T0 + 1_000).p25).toBeGreaterThanOrEqual(1_984);
  });

  it('refuses a non-lamport observation', () => {
    expect(() => new TipOracle().ingestLandedTip(1.5, T0)).toThrow('Not a tip amount');
  });
});
