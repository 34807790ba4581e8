/**
 * The landing-economics simulator on a fast simulated clock: the simnet's own `Auction` (seeded regimes, clearing
 * tips, synthetic competitors) and `TipFloor`, stepped slot by slot in a loop with no wall clock, and every strategy
 * replayed against the same seed (same regime path, clearing tips, leader schedule, model latencies).
 *
 * Engine model (the simnet block engine's decided behaviour, README "Competing window"): a bundle sent in slot t
 * competes only in the first bundle-engine leader window starting within 4 slots after t, through that leader's last
 * slot; it lands in the first of those slots whose clearing tip it meets (tips are paid only when it lands). If none,
 * the sidecar learns it one slot after the window (JSON-RPC inference) as `fee_too_low` when the tip was below the
 * floor's p50, else `dropped`, and the transaction is pending again.
 */
import {
  DEFAULT_POLICY,
  decideReflex,
  type Policy,
  type ReflexTransaction,
  type TipFloor,
} from '@solrelay/core';
import { Auction, Rng, TipFloor as MarketTipFloor, decideSubmission, type Regime } from '@solrelay/simnet';

export const STRATEGIES = [
  'fixed-10k',
  'always-p50',
  'always-p95',
  'escalate-p50',
  'reflex',
  'cortex',
] as const;
export type Strategy = (typeof STRATEGIES)[number];

const LEADER_WINDOW = 4;
const ENGINE_LOOKAHEAD = 4;
/**
 * Slots after a window's last slot before a lost attempt is known and the next can go out. Relay over JSON-RPC has
 * no push for a lost auction: it judges a bundle lost on the first status pass after the window plus its grace of 4
 * slots (`WINDOW_GRACE_SLOTS` in the sidecar), so the next attempt goes out about 5 slots after the window. (The
 * first version assumed 1; the end-to-end fixed-bid run, with 1.5 submits per transaction against the simulator's
 * ~3, showed it was too optimistic.)
 */
const SETTLE_DELAY_SLOTS = 5;
/** Share of leaders running the bundle engine (the simnet's default, and mainnet's 89–95% of stake). */
const BUNDLE_ENGINE_SHARE = 0.9;
/** Slots of synthetic market history fed to the tip floor before the first arrival (the engine warms it too). */
const WARMUP_SLOTS = 150;
/** Baseline escalation: ×(1 + step) per failure (agent-sdk.md §4's toy run uses 0.5). */
const ESCALATE_FACTOR = 1.5;
const FIXED_TIP = 10_000;

/** Policy of the run: defaults, with retries bounded by expiry rather than by count (set for every strategy alike). */
export const SIM_POLICY: Policy = { ...DEFAULT_POLICY, 'max-retries': 20 };

export interface Market {
  regime: Regime;
  bundleEngine: boolean[];
  clearing: number[];
  /** Floor the sidecar sees at slot s (published one slot late, as a polled oracle would be). */
  floors: TipFloor[];
  /** Simulated model latency in slots for the n-th model call (seeded, shared by every run of the seed). */
  modelLatency: number[];
  horizon: number;
}

/** One seed's market: regime pinned, leaders, clearing tips, the floor history, model latencies. */
export function buildMarket(seed: number, regime: Regime, horizon: number): Market {
  const rng = new Rng(seed);
  const auction = new Auction(rng, { retainSlots: 16 });
  auction.setRegime(regime);
  const leaderRng = rng.fork('bench-leaders');
  const modelRng = rng.fork('bench-model-latency');
  const floorBook = new MarketTipFloor({ now: () => 0 });
  const bundleEngine: boolean[] = [];
  const clearing: number[] = [];
  const floors: TipFloor[] = [];
  let windowFlag = true;
  for (let s = 0; s < horizon; s++) {
    if (s % LEADER_WINDOW === 0) windowFlag = leaderRng.chance(BUNDLE_ENGINE_SHARE);
    bundleEngine.push(windowFlag);
    const slot = auction.slot(s);
    clearing.push(auction.clearingTip(s));
    const f = floorBook.snapshot().lamports;
    floors.push({ ...f, stale: false });
    if (slot && windowFlag) floorBook.record(s, slot.competitorLandedTips);
  }
  // Model latency: log-normal around 0.8 s (2 slots), p95 ≈ 2 s (5 slots), at 400 ms per slot.
  const modelLatency: number[] = [];
  for (let i = 0; i < 200_000; i++) {
    const z = Math.sqrt(-2 * Math.log(1 - modelRng.next())) * Math.cos(2 * Math.PI * modelRng.next());
    modelLatency.push(Math.max(1, Math.ceil((800 * Math.exp(0.55 * z)) / 400)));
  }
  return { regime, bundleEngine, clearing, floors, modelLatency, horizon };
}

export interface TxOutcome {
  landed: boolean;
  slotsToLand: number | null;
  tipPaid: number;
  attempts: number;
  missedWindows: number;
  modelCalls: number;
}

interface Attempt {
  tip: number;
  outcome: 'fee_too_low' | 'dropped';
}

/** The window a bundle sent at slot t competes in: [first, last] or null (dropped at once). */
function competingWindow(m: Market, t: number): [number, number] | null {
  for (let s = t + 1; s <= t + ENGINE_LOOKAHEAD && s < m.horizon; s++) {
    if (m.bundleEngine[s]) {
      const last = Math.min(m.horizon - 1, (Math.floor(s / LEADER_WINDOW) + 1) * LEADER_WINDOW - 1);
      return [s, last];
    }
  }
  return null;
}

function windowStartsBetween(m: Market, from: number, to: number): number[] {
  const starts: number[] = [];
  for (let s = from; s <= to && s < m.horizon; s++) {
    if (m.bundleEngine[s] && (s % LEADER_WINDOW === 0 || s === from)) starts.push(s);
  }
  return starts;
}

interface Ticket {
  modelCursor: number;
}

/** Decide at slot t: the tip to send now, or null to hold one slot. Cortex may also return a delay (model latency). */
function decide(
  strategy: Strategy,
  m: Market,
  t: number,
  enqueue: number,
  expiry: number,
  previous: Attempt | null,
  retries: number,
  ticket: Ticket,
): { tip: number; delay: number; modelCall: boolean } | null | 'stop' {
  const floor = m.floors[t] as TipFloor;
  const maxTip = SIM_POLICY['max-tip'];
  switch (strategy) {
    case 'fixed-10k':
      return { tip: FIXED_TIP, delay: 0, modelCall: false };
    case 'always-p50':
      return { tip: Math.min(maxTip, Math.max(1_000, floor.p50)), delay: 0, modelCall: false };
    case 'always-p95':
      return { tip: Math.min(maxTip, Math.max(1_000, floor.p95)), delay: 0, modelCall: false };
    case 'escalate-p50': {
      const tip = previous ? previous.tip * ESCALATE_FACTOR : floor.p50;
      return { tip: Math.round(Math.min(maxTip, Math.max(1_000, tip))), delay: 0, modelCall: false };
    }
    case 'reflex':
    case 'cortex': {
      const tx: ReflexTransaction = {
        priority: 'normal',
        max_tip: null,
        tip: 'auto',
        enqueue_slot: enqueue,
        expires_at_slot: enqueue + expiry,
        retries,
      };
      const reflex = decideReflex({
        tx,
        floor,
        leaders: {
          bundle_engine: [
            m.bundleEngine[t] ?? null,
            m.bundleEngine[t + 1] ?? null,
            m.bundleEngine[t + 2] ?? null,
          ],
        },
        policy: SIM_POLICY,
        previous: previous ? { tip_lamports: previous.tip, outcome: previous.outcome } : null,
        slot: t,
      });
      if (reflex.action === 'stop') return 'stop';
      if (reflex.action === 'hold') return null;
      if (strategy === 'reflex') return { tip: reflex.tip_lamports, delay: 0, modelCall: false };
      // Cortex: the model is asked once reflex's timing says a leader is near; it answers L slots later with the
      // simnet Messages endpoint's own heuristic over the snapshot taken now.
      const answer = decideSubmission({
        tip_floor: floor,
        policy: SIM_POLICY as unknown as Record<string, unknown>,
        previous_attempt: previous ? { tip_lamports: previous.tip, outcome: previous.outcome } : null,
        leader: { bundle_engine: true },
        slot: t,
      });
      const delay = m.modelLatency[ticket.modelCursor++ % m.modelLatency.length] as number;
      return { tip: answer.tip_lamports, delay, modelCall: true };
    }
  }
}

/** One transaction enqueued at `enqueue`, under `strategy`, until it lands or can no longer be attempted. */
export function simulateTx(
  strategy: Strategy,
  m: Market,
  enqueue: number,
  expiry: number,
  ticket: Ticket,
): TxOutcome {
  let t = enqueue;
  let previous: Attempt | null = null;
  let retries = 0;
  let attempts = 0;
  let modelCalls = 0;
  const competed = new Set<number>();
  const lastAttemptSlot = enqueue + expiry;
  let result: TxOutcome | null = null;
  while (t <= lastAttemptSlot && t < m.horizon) {
    const d = decide(strategy, m, t, enqueue, expiry, previous, retries, ticket);
    if (d === 'stop') break;
    if (d === null) {
      t++;
      continue;
    }
    if (d.modelCall) modelCalls++;
    const sendAt = t + d.delay;
    if (sendAt > lastAttemptSlot) break;
    attempts++;
    const window = competingWindow(m, sendAt);
    if (window) {
      competed.add(window[0] - (window[0] % LEADER_WINDOW));
      for (let s = window[0]; s <= window[1]; s++) {
        if (d.tip >= (m.clearing[s] as number)) {
          result = {
            landed: true,
            slotsToLand: s - enqueue,
            tipPaid: d.tip,
            attempts,
            missedWindows: 0,
            modelCalls,
          };
          break;
        }
      }
      if (result) break;
    }
    const settledAt = (window ? window[1] : sendAt) + SETTLE_DELAY_SLOTS;
    const floorAtSettle = m.floors[Math.min(settledAt, m.horizon - 1)] as TipFloor;
    previous = { tip: d.tip, outcome: window && d.tip < floorAtSettle.p50 ? 'fee_too_low' : 'dropped' };
    retries++;
    t = settledAt + 1;
  }
  const end = result ? enqueue + (result.slotsToLand as number) : lastAttemptSlot;
  // Bundle-engine windows that opened while the transaction waited and that it did not compete in.
  const missed = windowStartsBetween(m, enqueue + 1, end).filter(
    (s) => !competed.has(s - (s % LEADER_WINDOW)),
  ).length;
  return result
    ? { ...result, missedWindows: missed }
    : { landed: false, slotsToLand: null, tipPaid: 0, attempts, missedWindows: missed, modelCalls };
}

export interface RunSummary {
  landed: number;
  total: number;
  slots: number[];
  lamportsPerLanded: number;
  missedWindowsPerTx: number;
  modelCallsPerTx: number;
}

/** `arrivals` transactions, one per slot after the warm-up, each simulated independently (our bids are too few to move the market). */
export function runStrategy(strategy: Strategy, m: Market, arrivals: number, expiry: number): RunSummary {
  const ticket: Ticket = { modelCursor: 0 };
  let landed = 0;
  let spent = 0;
  let missed = 0;
  let calls = 0;
  const slots: number[] = [];
  for (let i = 0; i < arrivals; i++) {
    const o = simulateTx(strategy, m, WARMUP_SLOTS + i, expiry, ticket);
    if (o.landed) {
      landed++;
      spent += o.tipPaid;
      slots.push(o.slotsToLand as number);
    }
    missed += o.missedWindows;
    calls += o.modelCalls;
  }
  return {
    landed,
    total: arrivals,
    slots,
    lamportsPerLanded: landed ? spent / landed : 0,
    missedWindowsPerTx: missed / arrivals,
    modelCallsPerTx: calls / arrivals,
  };
}

export function horizonFor(arrivals: number, expiry: number): number {
  return WARMUP_SLOTS + arrivals + expiry + 16;
}
