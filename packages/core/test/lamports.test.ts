import fc from 'fast-check';
import { isRelayError, lamportsToSol, solToLamports } from '../src';

describe('solToLamports', () => {
  it.each([
    [1e-5, 10_000],
    ['1e-05', 10_000],
    [0.000001234, 1_234],
    ['0.000001234', 1_234],
    [0.01, 10_000_000],
    [1, 1_000_000_000],
    [0, 0],
    ['0', 0],
    [1.5, 1_500_000_000],
    ['.5', 500_000_000],
    ['2.', 2_000_000_000],
    [4.2e-7, 420],
    ['1.234E-6', 1_234],
    [0.1 + 0.2, 300_000_000], // 0.30000000000000004: binary noise past 15 significant digits is dropped
    [0.0000009999999999, 1_000], // a genuine sub-lamport remainder at 15 digits still rounds up
  ])('%p SOL = %p lamports', (sol, lamports) => {
    expect(solToLamports(sol)).toBe(lamports);
  });

  it('rounds sub-lamport remainders up', () => {
    expect(solToLamports('0.0000000001')).toBe(1);
    expect(solToLamports('0.0000000015')).toBe(2);
    expect(solToLamports('0.000001234000000000001')).toBe(1_235);
    expect(solToLamports(1e-12)).toBe(1);
  });

  it('does not drift where float multiplication does', () => {
    // the trap this function exists to avoid: a float product that rounds up to the wrong lamport
    expect(Math.ceil(0.000001007 * 1e9)).toBe(1008);
    expect(solToLamports(0.000001007)).toBe(1007);
  });

  it.each([[-1], [Number.NaN], [Number.POSITIVE_INFINITY], [''], ['abc'], ['-0.1'], ['1e400'], ['1,5']])(
    'refuses %p',
    (value) => {
      let thrown: unknown;
      try {
        solToLamports(value);
      } catch (error) {
        thrown = error;
      }
      expect(isRelayError(thrown, 'RELAY_E_TIP_INVALID_AMOUNT')).toBe(true);
    },
  );

  it('is exact for every decimal string with up to 9 fractional digits (property)', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 9_000_000_000_000_000n }), (lamports) => {
        const whole = lamports / 1_000_000_000n;
        const fraction = (lamports % 1_000_000_000n).toString().padStart(9, '0');
        expect(solToLamports(`${whole}.${fraction}`)).toBe(Number(lamports));
      }),
      { numRuns: 300 },
    );
  });

  it('agrees with the decimal for numbers as JSON would carry them (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000_000 }),
        fc.integer({ min: 0, max: 6 }),
        (units, shift) => {
          // units * 10^-(9+shift) SOL written through a JSON round trip of the float
          const text = `${units}e-${9 + shift}`;
          const sol = JSON.parse(JSON.stringify(Number(text))) as number;
          const divisor = 10 ** shift;
          expect(solToLamports(sol)).toBe(Math.floor((units + divisor - 1) / divisor));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('solToLamports, hostile input', () => {
  it('answers huge exponents at once instead of building 10^exponent', () => {
    const started = performance.now();
    expect(solToLamports('0e999999999')).toBe(0);
    expect(solToLamports('0.000e-999999999')).toBe(0);
    expect(solToLamports('1e-999999999')).toBe(1);
    expect(solToLamports('123e-99999999')).toBe(1);
    expect(() => solToLamports('1e999999999')).toThrow('Not a tip amount');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('keeps exact results next to the shortcut', () => {
    expect(solToLamports('1e-9')).toBe(1);
    expect(solToLamports('15e-10')).toBe(2);
    expect(solToLamports('5e-10')).toBe(1);
    expect(solToLamports('0001e-9')).toBe(1);
    expect(solToLamports('000.000')).toBe(0);
  });

  it.each([[null], [undefined], [true], [{}], [[]], [10n]])(
    'refuses %p with RELAY_E_TIP_INVALID_AMOUNT, not a TypeError',
    (value) => {
      let thrown: unknown;
      try {
        solToLamports(value as unknown as string);
      } catch (error) {
        thrown = error;
      }
      expect(isRelayError(thrown, 'RELAY_E_TIP_INVALID_AMOUNT')).toBe(true);
    },
  );
});

describe('lamportsToSol', () => {
  it('prints exact decimals', () => {
    expect(lamportsToSol(10_000)).toBe('0.00001');
    expect(lamportsToSol(1_000_000_000)).toBe('1');
    expect(lamportsToSol(1_500_000_001)).toBe('1.500000001');
    expect(lamportsToSol(0)).toBe('0');
  });

  it('round-trips with solToLamports (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (lamports) => {
        expect(solToLamports(lamportsToSol(lamports))).toBe(lamports);
      }),
      { numRuns: 300 },
    );
  });
});
