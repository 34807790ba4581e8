/**
 * The sidecar's one wall clock. The composition root passes it to everything that stamps or measures time, so a test
 * can hand the whole service a clock it drives, and no module reads `Date.now()` on its own.
 */
export interface Clock {
  /** Unix epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
