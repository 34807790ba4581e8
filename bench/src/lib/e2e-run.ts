/**
 * The pieces every strategy of the submission benchmark shares: one transaction's outcome, the chain's truth about
 * landings (getSignatureStatuses), the slot timeline (when each slot was produced, from the simnet child) and the
 * per-run summary (landed, time to land in slots and ms, lamports per landed from balance deltas).
 */
import type { SimnetChild } from './processes';
import type { EngineTally } from './simnet-process';
import { percentile, round } from './stats';

export interface TxOutcome {
  signature: string;
  payer: string;
  /** Lamports the transaction moves to its recipients (excluded from its cost). */
  moved: number;
  /** Date.now() when the user's code was handed the transaction (relay: the POST /tx/enqueue started). */
  arrivalMs: number;
  /**
   * Relay: answered 202. Baselines: at least one send got a bundle id back from the engine (a 200); a transaction
   * every send of which was answered 429 was never accepted.
   */
  accepted: boolean;
  /** Relay: answered 429 at admission. */
  refused: boolean;
  retryAfterS: number | null;
  refusalCode: string | null;
  /** Relay's terminal/last state for the transaction; baselines: null. */
  relayState: string | null;
  /** From getSignatureStatuses after the run: the slot it landed in, or null. */
  landedSlot: number | null;
  /** Relay: ms from the POST to its answer (how "at once" a refusal is). */
  answerMs?: number;
  /** Relay on a fleet: the host (0-based) that accepted it. */
  host?: number;
}

/** A transaction handed to a strategy at `arrivalMs`, before anything happened to it. */
export function newOutcome(
  tx: { signature: string; payer: string; moved: number },
  arrivalMs: number,
): TxOutcome {
  return {
    signature: tx.signature,
    payer: tx.payer,
    moved: tx.moved,
    arrivalMs,
    accepted: false,
    refused: false,
    retryAfterS: null,
    refusalCode: null,
    relayState: null,
    landedSlot: null,
  };
}

export interface StrategyCounters {
  /** Requests made to the block engine (every JSON-RPC POST; relay: relay_engine_requests_total). */
  engineRequests: number;
  engine429s: number;
  engineOtherErrors: number;
}

export interface StrategyRun {
  strategy: string;
  outcomes: TxOutcome[];
  counters: StrategyCounters;
  /** Lamports the strategy's wallets lost, less what the landed transactions moved: tips + fees. */
  lamportsSpent: number;
  slotTimes: Map<number, number>;
  notes: string[];
  extra?: Record<string, unknown>;
  /** What the strategy's own simnet counted over the run (see {@link engineSide}). */
  engineSide?: EngineSide;
}

/** Counted by the simnet's block engine, not by the client: one client per simnet child, so they are its own. */
export interface EngineSide {
  /** Requests the engine answered 429 / -32097, from the simnet's start (warm-up, getTipAccounts and all). */
  rateLimited: number;
  /** Lamports the tip accounts gained on chain from the first arrival to the end of the run: the tips paid. */
  tipLamports: number;
  /** The published tip floor's `landed_tips_75th_percentile` (lamports) just before the first arrival. */
  floorP75Lamports: number | null;
  /** Engine requests (and refusals) by client address, from the simnet's start. */
  byAddress: EngineTally['byAddress'];
}

/** The engine's tally and the tip floor before the first arrival; hand it to {@link engineSide} at the end. */
export async function engineSideStart(
  simnet: SimnetChild,
): Promise<{ tally: EngineTally; floorP75Lamports: number | null }> {
  const tally = await simnet.request<EngineTally>({ op: 'engineTally' });
  let floorP75Lamports: number | null = null;
  try {
    const floor = (await (await fetch(simnet.started.tipFloorUrl)).json()) as Array<{
      landed_tips_75th_percentile?: number;
    }>;
    const p75 = floor[0]?.landed_tips_75th_percentile;
    if (typeof p75 === 'number') floorP75Lamports = Math.round(p75 * 1e9);
  } catch {
    // No floor answer: the row that needs it says so.
  }
  return { tally, floorP75Lamports };
}

export async function engineSide(
  simnet: SimnetChild,
  start: { tally: EngineTally; floorP75Lamports: number | null },
): Promise<EngineSide> {
  const end = await simnet.request<EngineTally>({ op: 'engineTally' });
  return {
    rateLimited: end.rateLimited,
    tipLamports: end.tipAccountLamports - start.tally.tipAccountLamports,
    floorP75Lamports: start.floorP75Lamports,
    byAddress: end.byAddress,
  };
}

export interface StrategySummary {
  strategy: string;
  submitted: number;
  accepted: number;
  refused: number;
  refused_with_retry_after: number;
  /** Slowest admission answer among the refusals (ms). */
  refusal_answer_max_ms: number | null;
  landed: number;
  landed_pct_of_submitted: number;
  landed_pct_of_accepted: number;
  accepted_then_expired: number;
  time_to_land_ms: { p50: number; p90: number; p99: number };
  time_to_land_slots: { p50: number; p90: number; p99: number };
  /** Landed per second from the first arrival to the last landing. */
  throughput_per_s: number;
  lamports_per_landed: number;
  engine_requests: number;
  engine_requests_per_landed: number;
  engine_429s: number;
  /** 429s the strategy's simnet engine answered (its own count); null when not recorded. */
  engine_429s_at_engine: number | null;
  /** Tips paid (the tip accounts' on-chain gain) over landed; null when not recorded. */
  tip_lamports_per_landed: number | null;
  /** The tip floor's p75 (lamports) just before the first arrival; null when not recorded. */
  tip_floor_p75_lamports: number | null;
  observed_slot_ms: number;
}

/** Chain truth for every signature: the slot it landed in (any commitment), or null. */
export async function landedSlots(rpcUrl: string, signatures: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (let i = 0; i < signatures.length; i += 256) {
    const chunk = signatures.slice(i, i + 256);
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'getSignatureStatuses',
        params: [chunk, { searchTransactionHistory: true }],
      }),
    });
    const body = (await res.json()) as {
      result?: { value: Array<{ slot: number; err: unknown } | null> };
    };
    body.result?.value.forEach((status, j) => {
      if (status && status.err === null) out.set(chunk[j] as string, status.slot);
    });
  }
  return out;
}

export async function slotTimeline(simnet: SimnetChild): Promise<Map<number, number>> {
  return new Map(await simnet.request<Array<[number, number]>>({ op: 'slotTimes' }));
}

/** The last slot produced at or before `ms`. */
function slotAt(times: Map<number, number>, ms: number): number {
  let best = 0;
  for (const [slot, at] of times) if (at <= ms && slot > best) best = slot;
  return best;
}

export function summarize(run: StrategyRun): StrategySummary {
  const { outcomes } = run;
  const landed = outcomes.filter((o) => o.landedSlot !== null);
  const ms: number[] = [];
  const slots: number[] = [];
  let lastLanding = 0;
  for (const o of landed) {
    const at = run.slotTimes.get(o.landedSlot as number);
    if (at === undefined) continue;
    ms.push(Math.max(0, at - o.arrivalMs));
    slots.push(Math.max(0, (o.landedSlot as number) - slotAt(run.slotTimes, o.arrivalMs)));
    lastLanding = Math.max(lastLanding, at);
  }
  ms.sort((a, b) => a - b);
  slots.sort((a, b) => a - b);
  const accepted = outcomes.filter((o) => o.accepted);
  const firstArrival = Math.min(...outcomes.map((o) => o.arrivalMs));
  const span = (lastLanding - firstArrival) / 1000;
  const sortedSlots = [...run.slotTimes.entries()].sort((a, b) => a[0] - b[0]);
  const first = sortedSlots[0];
  const last = sortedSlots[sortedSlots.length - 1];
  const slotMs = first && last && last[0] > first[0] ? (last[1] - first[1]) / (last[0] - first[0]) : 0;
  return {
    strategy: run.strategy,
    submitted: outcomes.length,
    accepted: accepted.length,
    refused: outcomes.filter((o) => o.refused).length,
    refused_with_retry_after: outcomes.filter((o) => o.refused && o.retryAfterS !== null).length,
    refusal_answer_max_ms: outcomes.some((o) => o.refused)
      ? Math.max(...outcomes.filter((o) => o.refused).map((o) => o.answerMs ?? 0))
      : null,
    landed: landed.length,
    landed_pct_of_submitted: round((landed.length / Math.max(1, outcomes.length)) * 100, 1),
    landed_pct_of_accepted: round(
      (accepted.filter((o) => o.landedSlot !== null).length / Math.max(1, accepted.length)) * 100,
      1,
    ),
    accepted_then_expired: accepted.filter((o) => o.landedSlot === null).length,
    time_to_land_ms: { p50: percentile(ms, 50), p90: percentile(ms, 90), p99: percentile(ms, 99) },
    time_to_land_slots: {
      p50: percentile(slots, 50),
      p90: percentile(slots, 90),
      p99: percentile(slots, 99),
    },
    throughput_per_s: landed.length && span > 0 ? round(landed.length / span, 2) : 0,
    lamports_per_landed: landed.length ? Math.round(run.lamportsSpent / landed.length) : 0,
    engine_requests: run.counters.engineRequests,
    engine_requests_per_landed: landed.length ? round(run.counters.engineRequests / landed.length, 2) : 0,
    engine_429s: run.counters.engine429s,
    engine_429s_at_engine: run.engineSide?.rateLimited ?? null,
    tip_lamports_per_landed:
      run.engineSide && landed.length ? Math.round(run.engineSide.tipLamports / landed.length) : null,
    tip_floor_p75_lamports: run.engineSide?.floorP75Lamports ?? null,
    observed_slot_ms: round(slotMs, 1),
  };
}

/** Lamports the payers and the tipper lost over the run, less what the landed transactions moved. */
export function spentLamports(before: number[], after: number[], outcomes: readonly TxOutcome[]): number {
  const lost = before.reduce((sum, b, i) => sum + (b - (after[i] ?? b)), 0);
  const moved = outcomes.filter((o) => o.landedSlot !== null).reduce((sum, o) => sum + o.moved, 0);
  return lost - moved;
}

/**
 * Pin the regime (`POST /admin/auction {regime}`) and let `warmupSlots` slots of it pass, so the tip floor (landed
 * tips over a trailing window, empty at a fresh simnet's start) reflects the pinned market before the first arrival.
 * The simnet draws a pinned slot's background market from (seed, regime, slots since the pin) and answers the pin's
 * first slot (`pinnedFromSlot`); waiting until exactly `warmupSlots` slots after it makes every strategy's first
 * arrival meet the same market draws slot for slot, whatever slot its own simnet child had reached when pinned.
 */
export async function pinAndWarmUp(simnet: SimnetChild, regime: string, warmupSlots: number): Promise<void> {
  const res = await fetch(`${simnet.started.adminUrl}/auction`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ regime }),
  });
  if (!res.ok) throw new Error(`POST /admin/auction: ${res.status} ${await res.text()}`);
  const answer = (await res.json()) as { pinnedFromSlot?: number | null };
  const from = answer.pinnedFromSlot ?? (await simnet.request<number>({ op: 'slot' }));
  // Polled finely so each child's first arrival comes early in the same slot after the pin (slots are 400 ms).
  while ((await simnet.request<number>({ op: 'slot' })) < from + warmupSlots) await sleep(20);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** `n` arrivals at once. */
export function burstArrivals(n: number): number[] {
  return Array.from({ length: n }, () => 0);
}

/** `perSecond` arrivals a second, evenly spaced, for `seconds`. */
export function steadyArrivals(perSecond: number, seconds: number): number[] {
  return Array.from({ length: Math.round(perSecond * seconds) }, (_, i) =>
    Math.round((i * 1000) / perSecond),
  );
}

/** The run's seed: `--seed=<n>` (BENCH_SEED), a fresh one for `--seed=random`, else `fallback`; told on `progress`. */
export function seedFromEnv(progress: (line: string) => void, fallback = 7): number {
  const random = process.env.BENCH_SEED === 'random';
  const seed = random ? Math.floor(Math.random() * 1e9) : Number(process.env.BENCH_SEED ?? fallback);
  progress(`seed ${seed}${random ? ' (random; --seed=<n> replays it)' : ''}`);
  return seed;
}
