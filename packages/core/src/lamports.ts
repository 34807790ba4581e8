import { RelayError } from './errors';

/** Lamports in one SOL. */
export const LAMPORTS_PER_SOL = 1_000_000_000;

const DECIMAL = /^\+?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;
const SOL_DECIMALS = 9;

/**
 * Converts a SOL amount to integer lamports without floating-point drift.
 *
 * A number is read through its decimal form at 15 significant digits (`1e-05` → `"0.0000100000000000000"`),
 * which drops the float noise past a double's precision (`6.001000000000001e-06` is 6,001 lamports, not
 * 6,002), and that decimal is scaled by 10^9 exactly with integer arithmetic, so `0.000001234` gives
 * `1234` (multiplying by 1e9 in floating point gives `1233.9999999999998`).
 * Strings are read as written, which is exact for any decimal the tip-floor JSON could carry.
 *
 * Sub-lamport remainders are rounded **up** (ceiling): a value derived from a tip floor is then
 * never below that floor, which is what a bid aimed at a floor needs. Negative, non-finite, empty
 * or non-decimal input throws `RELAY_E_TIP_INVALID_AMOUNT`, as does a result beyond
 * `Number.MAX_SAFE_INTEGER`.
 *
 * @example
 * solToLamports(1e-5); // 10000
 * solToLamports('0.000001234'); // 1234
 */
export function solToLamports(sol: number | string): number {
  // Callers pass parsed JSON; a null, boolean, bigint or object is refused like any other non-amount.
  if (typeof sol !== 'number' && typeof sol !== 'string') {
    throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(sol) });
  }
  const text = typeof sol === 'number' ? numberToDecimalString(sol) : sol.trim();
  const match = DECIMAL.exec(text);
  const whole = match?.[1] ?? '';
  const fraction = match?.[2] ?? '';
  if (!match || whole.length + fraction.length === 0) {
    throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(sol) });
  }
  const exponent = Number(match[3] ?? '0');
  if (!Number.isSafeInteger(exponent))
    throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(sol) });
  const digits = (whole + fraction).replace(/^0+/, '');
  // Zero is zero whatever its exponent: never build 10^exponent for it (a string like "0e999999999"
  // from an upstream would otherwise stall the event loop).
  if (digits === '') return 0;
  const mantissa = BigInt(digits);
  const scale = exponent - fraction.length + SOL_DECIMALS;
  let lamports: bigint;
  if (scale < 0 && -scale > digits.length) {
    // The mantissa is below the divisor: less than one lamport, which rounds up to 1 (as below),
    // without computing a divisor with millions of digits.
    lamports = 1n;
  } else if (scale >= 0) {
    if (scale > 30) throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(sol) });
    lamports = mantissa * 10n ** BigInt(scale);
  } else {
    const divisor = 10n ** BigInt(-scale);
    lamports = mantissa / divisor + (mantissa % divisor === 0n ? 0n : 1n);
  }
  if (lamports > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(sol) });
  }
  return Number(lamports);
}

function numberToDecimalString(value: number): string {
  if (!Number.isFinite(value) || value < 0) {
    return `invalid:${String(value)}`;
  }
  // A double carries ~15.95 significant decimal digits; anything past the 15th is binary noise from
  // the upstream's own float arithmetic (Jito serves 6.001000000000001e-06 for 6,001 lamports).
  // Reading 15 significant digits drops that noise before the exact integer scaling.
  return value === 0 ? '0' : value.toPrecision(15);
}

/**
 * Formats integer lamports as an exact SOL decimal string (no trailing zeros), for display.
 *
 * @example
 * lamportsToSol(10_000); // "0.00001"
 */
export function lamportsToSol(lamports: number): string {
  if (!isLamports(lamports)) throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(lamports) });
  const whole = Math.floor(lamports / LAMPORTS_PER_SOL);
  const fraction = String(lamports % LAMPORTS_PER_SOL)
    .padStart(SOL_DECIMALS, '0')
    .replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : String(whole);
}

/** True for a non-negative safe integer, the only shape a lamport amount takes in relay. */
export function isLamports(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
