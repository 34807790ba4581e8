import { z } from 'zod';
import { RelayError } from './errors';
import { isLamports, solToLamports } from './lamports';
import type { TipPercentile } from './vocabulary';

/** Tip-floor statistics in lamports, and whether they are stale (the spec's "Tip floor"). */
export interface TipFloor {
  p25: number;
  p50: number;
  p75: number;
  p95: number;
  p99: number;
  ema: number;
  stale: boolean;
}

/** The statistics alone, without the staleness verdict. */
export type TipFloorLamports = Omit<TipFloor, 'stale'>;

/** Which data a tip-floor view was computed from. */
export type TipFloorSource = 'tip_floor' | 'observed' | 'none';

/** The oracle's answer: `GET /tip`, `tip_update` events. Times are Unix epoch milliseconds. */
export interface TipFloorView extends TipFloor {
  /** When the data behind this view was received (tip floor) or last observed (landed tips). */
  updated_at: number | null;
  source: TipFloorSource;
  /** `now - updated_at`, or null when there is no data. */
  age_ms: number | null;
}

const solAmount = z.union([z.number().nonnegative(), z.string().regex(/^\+?\d*\.?\d*(?:[eE][+-]?\d+)?$/)]);

/** One object of Jito's tip-floor REST answer / tip stream frame; values are SOL floats. */
export const JitoTipFloorSampleSchema = z.looseObject({
  time: z.string().optional(),
  landed_tips_25th_percentile: solAmount,
  landed_tips_50th_percentile: solAmount,
  landed_tips_75th_percentile: solAmount,
  landed_tips_95th_percentile: solAmount,
  landed_tips_99th_percentile: solAmount,
  ema_landed_tips_50th_percentile: solAmount,
});

/** A Jito tip-floor sample as received. */
export type JitoTipFloorSample = z.input<typeof JitoTipFloorSampleSchema>;

/** Converts one Jito sample (SOL floats) to lamports, exactly (see {@link solToLamports}). */
export function tipFloorFromJitoSample(sample: JitoTipFloorSample): TipFloorLamports {
  return {
    p25: solToLamports(sample.landed_tips_25th_percentile),
    p50: solToLamports(sample.landed_tips_50th_percentile),
    p75: solToLamports(sample.landed_tips_75th_percentile),
    p95: solToLamports(sample.landed_tips_95th_percentile),
    p99: solToLamports(sample.landed_tips_99th_percentile),
    ema: solToLamports(sample.ema_landed_tips_50th_percentile),
  };
}

/**
 * Reads Jito's tip-floor answer (a JSON array of samples, or one sample) and returns the newest
 * sample in lamports.
 *
 * @throws RelayError `RELAY_E_UPSTREAM_INVALID_RESPONSE` when the shape or a value is wrong.
 */
export function parseJitoTipFloorResponse(json: unknown): TipFloorLamports {
  const list = Array.isArray(json) ? json : [json];
  const last = list[list.length - 1];
  const parsed = JitoTipFloorSampleSchema.safeParse(last);
  if (!parsed.success) {
    throw new RelayError('RELAY_E_UPSTREAM_INVALID_RESPONSE', {
      upstream: 'tip_floor',
      reason: parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; '),
    });
  }
  try {
    return tipFloorFromJitoSample(parsed.data);
  } catch (cause) {
    throw new RelayError(
      'RELAY_E_UPSTREAM_INVALID_RESPONSE',
      { upstream: 'tip_floor', reason: 'a tip amount is not a SOL decimal' },
      { cause },
    );
  }
}

/** Reads one statistic of a floor; `ema` is a statistic like the percentiles. */
export function floorValue(floor: TipFloorLamports, percentile: TipPercentile): number {
  return floor[percentile];
}

/** Tuning of a {@link TipOracle}. */
export interface TipOracleOptions {
  /** Data older than this is stale. Default 30,000 ms. */
  staleAfterMs?: number;
  /** Landed-tip observations older than this are not used. Default 120,000 ms. */
  observationWindowMs?: number;
  /** At most this many observations are kept (memory bound). Default 512. */
  maxObservations?: number;
  /** Observations alone make a fresh view only from this many in the window. Default 8. */
  minObservations?: number;
  /** Smoothing factor of the observations' EMA, in (0, 1]. Default 0.2. */
  emaAlpha?: number;
}

interface Observation {
  lamports: number;
  atMs: number;
}

const PERCENTILES = { p25: 25, p50: 50, p75: 75, p95: 95, p99: 99 } as const;

/**
 * The tip oracle: turns Jito tip-floor samples and relay's own landed-tip observations into one
 * tip-floor view, with staleness judged against an injected clock.
 *
 * How the two sources combine: Jito's tip floor (percentiles over every landed bundle) is the
 * primary source. Landed-tip observations are the fallback: when the tip floor is missing or
 * stale and at least `minObservations` observations fall in the observation window, the view is
 * computed from them (nearest-rank percentiles; `ema` smooths them in time order) and is fresh.
 * Otherwise the last tip-floor sample is served marked stale; with no sample at all, whatever
 * observations exist are served marked stale; with nothing, all zeros and stale (`source: 'none'`).
 * The sources are never averaged: one view always describes one population.
 *
 * @example
 * const oracle = new TipOracle({ staleAfterMs: 30_000 });
 * oracle.ingestTipFloor(jitoSample, nowMs);
 * oracle.view(nowMs).p75; // lamports
 */
export class TipOracle {
  private readonly staleAfterMs: number;
  private readonly observationWindowMs: number;
  private readonly maxObservations: number;
  private readonly minObservations: number;
  private readonly emaAlpha: number;
  private sample: { floor: TipFloorLamports; atMs: number } | null = null;
  private observations: Observation[] = [];

  constructor(options: TipOracleOptions = {}) {
    this.staleAfterMs = options.staleAfterMs ?? 30_000;
    this.observationWindowMs = options.observationWindowMs ?? 120_000;
    this.maxObservations = Math.max(1, Math.floor(options.maxObservations ?? 512));
    this.minObservations = Math.max(1, Math.floor(options.minObservations ?? 8));
    this.emaAlpha = options.emaAlpha ?? 0.2;
    if (!(this.emaAlpha > 0 && this.emaAlpha <= 1)) {
      throw new RelayError('RELAY_E_INTERNAL_ERROR', {
        reason: `emaAlpha must be in (0, 1], got ${this.emaAlpha}`,
      });
    }
  }

  /**
   * Takes one tip-floor sample: a raw Jito sample (SOL) or statistics already in lamports.
   * A sample received earlier than the one held is ignored (out-of-order delivery).
   */
  ingestTipFloor(sample: JitoTipFloorSample | TipFloorLamports, receivedAtMs: number): void {
    const floor = isLamportFloor(sample) ? sample : tipFloorFromJitoSample(sample);
    for (const key of ['p25', 'p50', 'p75', 'p95', 'p99', 'ema'] as const) {
      if (!isLamports(floor[key])) {
        throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: `${key}=${String(floor[key])}` });
      }
    }
    if (this.sample && receivedAtMs < this.sample.atMs) return;
    this.sample = {
      floor: {
        p25: floor.p25,
        p50: floor.p50,
        p75: floor.p75,
        p95: floor.p95,
        p99: floor.p99,
        ema: floor.ema,
      },
      atMs: receivedAtMs,
    };
  }

  /** Takes one tip relay saw land (lamports), observed at `observedAtMs`. */
  ingestLandedTip(lamports: number, observedAtMs: number): void {
    if (!isLamports(lamports))
      throw new RelayError('RELAY_E_TIP_INVALID_AMOUNT', { value: String(lamports) });
    const observation = { lamports, atMs: observedAtMs };
    const last = this.observations[this.observations.length - 1];
    if (!last || last.atMs <= observedAtMs) this.observations.push(observation);
    else {
      const index = this.observations.findIndex((o) => o.atMs > observedAtMs);
      this.observations.splice(index, 0, observation);
    }
    if (this.observations.length > this.maxObservations) {
      this.observations.splice(0, this.observations.length - this.maxObservations);
    }
  }

  /** Number of landed-tip observations held (bounded by `maxObservations`). */
  get observationCount(): number {
    return this.observations.length;
  }

  /** The current view, judged at `nowMs`. */
  view(nowMs: number): TipFloorView {
    const sample = this.sample;
    if (sample && nowMs - sample.atMs <= this.staleAfterMs) {
      return makeView(sample.floor, false, sample.atMs, 'tip_floor', nowMs);
    }
    const recent = this.observations.filter((o) => nowMs - o.atMs <= this.observationWindowMs);
    if (recent.length >= this.minObservations) {
      return makeView(this.statistics(recent), false, lastTime(recent), 'observed', nowMs);
    }
    if (sample) return makeView(sample.floor, true, sample.atMs, 'tip_floor', nowMs);
    if (this.observations.length > 0) {
      return makeView(
        this.statistics(this.observations),
        true,
        lastTime(this.observations),
        'observed',
        nowMs,
      );
    }
    return {
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
    };
  }

  /** The view reduced to the spec's tip-floor fields. */
  floor(nowMs: number): TipFloor {
    const { p25, p50, p75, p95, p99, ema, stale } = this.view(nowMs);
    return { p25, p50, p75, p95, p99, ema, stale };
  }

  private statistics(observations: readonly Observation[]): TipFloorLamports {
    const sorted = observations.map((o) => o.lamports).sort((a, b) => a - b);
    let ema = observations[0]?.lamports ?? 0;
    for (const o of observations.slice(1)) ema += this.emaAlpha * (o.lamports - ema);
    return {
      p25: nearestRank(sorted, PERCENTILES.p25),
      p50: nearestRank(sorted, PERCENTILES.p50),
      p75: nearestRank(sorted, PERCENTILES.p75),
      p95: nearestRank(sorted, PERCENTILES.p95),
      p99: nearestRank(sorted, PERCENTILES.p99),
      // Rounded up like every other sub-lamport value in relay, so a bid at the EMA is not below it.
      ema: Math.ceil(ema - 1e-9),
    };
  }
}

/**
 * Nearest-rank percentile of an ascending list: the smallest value with at least `percent`% of
 * the list at or below it. Always an element of the list (a tip someone really paid).
 */
export function nearestRank(sortedAscending: readonly number[], percent: number): number {
  if (sortedAscending.length === 0) return 0;
  const rank = Math.ceil((percent / 100) * sortedAscending.length);
  return sortedAscending[Math.min(sortedAscending.length, Math.max(1, rank)) - 1] ?? 0;
}

function isLamportFloor(value: JitoTipFloorSample | TipFloorLamports): value is TipFloorLamports {
  return 'p50' in value && isLamports((value as TipFloorLamports).p50);
}

function lastTime(observations: readonly Observation[]): number {
  return observations.reduce((latest, o) => Math.max(latest, o.atMs), -Infinity);
}

function makeView(
  floor: TipFloorLamports,
  stale: boolean,
  updatedAt: number,
  source: TipFloorSource,
  nowMs: number,
): TipFloorView {
  return { ...floor, stale, updated_at: updatedAt, source, age_ms: Math.max(0, nowMs - updatedAt) };
}
