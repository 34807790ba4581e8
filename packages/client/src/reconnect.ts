/** The first wait before reconnecting (SPEC "Reconnection of the client's event stream"). */
export const RECONNECT_BASE_MS = 500;
/** The longest wait between reconnect attempts. */
export const RECONNECT_CAP_MS = 30_000;

/**
 * The wait before reconnect attempt `attempt` (1-based): 500 ms, 1 s, 2 s, 4 s, then doubling, capped at 30 s.
 * The attempt count restarts at 1 after every successful connect.
 *
 * @example
 * reconnectDelay(1); // 500
 * reconnectDelay(4); // 4000
 * reconnectDelay(10); // 30000
 */
export function reconnectDelay(attempt: number): number {
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new RangeError(`reconnect attempts count from 1 (got ${attempt})`);
  }
  // Past 2^7 the doubling is far above the cap; stopping the exponent there keeps the number finite.
  return Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt - 1, 16));
}

/** Opaque timer handle of whatever timer functions are injected. */
export type TimerHandle = unknown;

/**
 * The timer functions the client waits with. Injectable so the reconnect schedule can be driven by fake
 * timers in tests; the default reads `globalThis` at call time, so `jest.useFakeTimers()` applies to it too.
 */
export interface Timers {
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const globalTimers: Timers = {
  setTimeout: (callback, ms) => globalThis.setTimeout(callback, ms),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof globalThis.setTimeout>),
};
