/** Tip-floor statistics in lamports. */
export interface TipFloorLamports {
  p25: number;
  p50: number;
  p75: number;
  p95: number;
  p99: number;
  /** Exponential moving average of p50. */
  ema: number;
}

/** One entry of Jito's `GET /api/v1/bundles/tip_floor` answer (an array of one of these): SOL as floats. */
export interface JitoTipFloorEntry {
  time: string;
  landed_tips_25th_percentile: number;
  landed_tips_50th_percentile: number;
  landed_tips_75th_percentile: number;
  landed_tips_95th_percentile: number;
  landed_tips_99th_percentile: number;
  ema_landed_tips_50th_percentile: number;
}

export interface TipFloorSnapshot {
  lamports: TipFloorLamports;
  /** Wall-clock ms of the last update. */
  timeMs: number;
  /** Slot of the last update. */
  slot: number;
}

const LAMPORTS_PER_SOL = 1_000_000_000;

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function toJitoTipFloor(snapshot: TipFloorSnapshot, timeMs = snapshot.timeMs): JitoTipFloorEntry[] {
  const sol = (lamports: number) => lamports / LAMPORTS_PER_SOL;
  const { p25, p50, p75, p95, p99, ema } = snapshot.lamports;
  return [
    {
      time: new Date(timeMs).toISOString(),
      landed_tips_25th_percentile: sol(p25),
      landed_tips_50th_percentile: sol(p50),
      landed_tips_75th_percentile: sol(p75),
      landed_tips_95th_percentile: sol(p95),
      landed_tips_99th_percentile: sol(p99),
      ema_landed_tips_50th_percentile: sol(ema),
    },
  ];
}

export interface TipFloorOptions {
  /** Trailing window, in slots with landed bundles. */
  windowSlots?: number;
  /** EMA weight of each new p50. */
  emaAlpha?: number;
  now?: () => number;
}

/**
 * What Jito's tip-floor oracle publishes: percentiles of the tips that landed over a trailing window of slots, and an
 * EMA of the median. Fed with every bundle-engine slot's landed tips (synthetic competitors and real bundles alike).
 */
export class TipFloor {
  private readonly windowSlots: number;
  private readonly emaAlpha: number;
  private readonly now: () => number;
  private readonly window: number[][] = [];
  private current: TipFloorSnapshot;
  private hasData = false;

  constructor(options: TipFloorOptions = {}) {
    this.windowSlots = options.windowSlots ?? 150;
    this.emaAlpha = options.emaAlpha ?? 0.05;
    this.now = options.now ?? Date.now;
    const min = 1_000;
    this.current = {
      lamports: { p25: min, p50: min, p75: min, p95: min, p99: min, ema: min },
      timeMs: this.now(),
      slot: 0,
    };
  }

  /** Add one slot's landed tips and recompute. */
  record(slot: number, landedTips: readonly number[]): void {
    this.window.push([...landedTips]);
    if (this.window.length > this.windowSlots) this.window.shift();
    const sorted = this.window.flat().sort((a, b) => a - b);
    if (sorted.length === 0) return;
    const p50 = percentile(sorted, 50);
    const previous = this.current;
    const ema = !this.hasData ? p50 : this.emaAlpha * p50 + (1 - this.emaAlpha) * previous.lamports.ema;
    this.current = {
      lamports: {
        p25: percentile(sorted, 25),
        p50,
        p75: percentile(sorted, 75),
        p95: percentile(sorted, 95),
        p99: percentile(sorted, 99),
        ema: Math.round(ema),
      },
      timeMs: this.now(),
      slot,
    };
    this.hasData = true;
  }

  snapshot(): TipFloorSnapshot {
    return this.current;
  }
}
