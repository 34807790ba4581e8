/**
 * Landing economics: every strategy on the simnet's own auction model stepped on a fast simulated clock (see
 * landing-sim.ts), >= 20 seeds x calm / busy / spike x expiry 12 / 150, with 95% intervals over seeds; then one
 * end-to-end run of relay reflex through the real sidecar and agent processes on a real simnet, whose landing rate
 * is compared with the simulator's for the same regime and expiry.
 */
import type { Regime } from '@solrelay/simnet';
import type { Benchmark, BenchContext } from '../benchmark';
import { keepAliveAgent, postJson } from '../lib/http';
import { sleep } from '../lib/processes';
import { SseReader } from '../lib/sse';
import { benchPolicy, startRelayStack } from '../lib/stack';
import { meanInterval, percentile, round, type Interval } from '../lib/stats';
import { TxFactory } from '../lib/txgen';
import { STRATEGIES, SIM_POLICY, buildMarket, horizonFor, runStrategy, type Strategy } from './landing-sim';

const REGIMES: Regime[] = ['calm', 'busy', 'spike'];
const EXPIRIES = [12, 150];

interface Cell {
  regime: Regime;
  expiry: number;
  strategy: Strategy;
  seeds: number;
  landing_rate: Interval;
  slots_p50: Interval;
  slots_p95: Interval;
  lamports_per_landed: Interval;
  missed_windows_per_tx: Interval;
  model_calls_per_tx: Interval;
}

function fmt(i: Interval, digits = 0, scale = 1): string {
  const r = (v: number) => round(v * scale, digits).toLocaleString('en-US');
  return `${r(i.mean)} [${r(i.lo)}, ${r(i.hi)}]`;
}

function simulate(ctx: BenchContext, seeds: number, arrivals: number): Cell[] {
  const cells: Cell[] = [];
  for (const regime of REGIMES) {
    const perSeed = new Map<string, Array<ReturnType<typeof runStrategy>>>();
    for (let seed = 1; seed <= seeds; seed++) {
      const market = buildMarket(seed, regime, horizonFor(arrivals, Math.max(...EXPIRIES)));
      for (const expiry of EXPIRIES) {
        for (const strategy of STRATEGIES) {
          const key = `${expiry}/${strategy}`;
          const list = perSeed.get(key) ?? [];
          list.push(runStrategy(strategy, market, arrivals, expiry));
          perSeed.set(key, list);
        }
      }
    }
    for (const expiry of EXPIRIES) {
      for (const strategy of STRATEGIES) {
        const runs = perSeed.get(`${expiry}/${strategy}`) ?? [];
        const sorted = runs.map((r) => [...r.slots].sort((a, b) => a - b));
        cells.push({
          regime,
          expiry,
          strategy,
          seeds: runs.length,
          landing_rate: meanInterval(runs.map((r) => r.landed / r.total)),
          slots_p50: meanInterval(sorted.map((s) => percentile(s, 50))),
          slots_p95: meanInterval(sorted.map((s) => percentile(s, 95))),
          lamports_per_landed: meanInterval(runs.map((r) => r.lamportsPerLanded)),
          missed_windows_per_tx: meanInterval(runs.map((r) => r.missedWindowsPerTx)),
          model_calls_per_tx: meanInterval(runs.map((r) => r.modelCallsPerTx)),
        });
      }
    }
    ctx.progress(
      `simulated ${regime}: ${seeds} seeds x ${arrivals} arrivals x ${STRATEGIES.length} strategies x ${EXPIRIES.length} expiries`,
    );
  }
  return cells;
}

interface EndToEnd {
  strategy: 'reflex' | 'fixed-10k';
  regime: Regime;
  expiry: number;
  slot_ms: number;
  enqueued: number;
  landed: number;
  landing_rate: number;
  lamports_per_landed: number;
  submits: number;
}

/**
 * One strategy end to end: real simnet (regime pinned), real sidecar process, and the real agent process (reflex)
 * or the sidecar's bypass (a fixed 10,000-lamport tip, no agent).
 */
async function endToEnd(
  ctx: BenchContext,
  strategy: EndToEnd['strategy'],
  count: number,
  regime: Regime,
  expiry: number,
): Promise<EndToEnd> {
  const slotMs = 200;
  const stack = await startRelayStack({
    simnet: { seed: 5, slotMs, fixedClearingTip: null, regime },
    policy: benchPolicy({ 'max-retries': SIM_POLICY['max-retries'] }),
    env:
      strategy === 'reflex'
        ? { AGENT_DECISION_MODE: 'reflex' }
        : { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '10000' },
    ...(strategy === 'reflex' ? { agent: () => ({}) } : {}),
  });
  try {
    const url = stack.sidecar.url;
    const factory = new TxFactory(20);
    await stack.simnet.request({
      op: 'fund',
      addresses: factory.payers.map((p) => p.publicKey),
      lamports: 10_000_000_000_000,
    });
    let slot = 0;
    const expiresAt = new Map<string, number>();
    const landedTip = new Map<string, number>();
    const bundleTip = new Map<string, number>();
    let submits = 0;
    const observer = new SseReader(`${url}/internal/events`, {
      onEvent: (e) => {
        const d = JSON.parse(e.data) as Record<string, unknown>;
        if (e.event === 'slot_update') slot = Math.max(slot, d.slot as number);
        else if (e.event === 'tx_enqueued') expiresAt.set(d.tx_id as string, d.expires_at_slot as number);
        else if (e.event === 'submit_requested') {
          submits++;
          bundleTip.set(d.bundle_id as string, d.tip_lamports as number);
        } else if (
          e.event === 'tx_status_changed' &&
          d.state === 'landed' &&
          !landedTip.has(d.tx_id as string)
        ) {
          landedTip.set(d.tx_id as string, bundleTip.get(d.bundle_id as string) ?? 0);
        }
      },
    });
    await observer.open();
    const agent = keepAliveAgent(4);
    let blockhash = await stack.simnet.request<string>({ op: 'blockhash' });
    let blockhashAt = Date.now();
    ctx.progress(
      `end to end (${strategy}): ${count} transactions, one per ${slotMs} ms slot, regime ${regime}, expiry ${expiry}`,
    );
    for (let i = 0; i < count; i++) {
      if (Date.now() - blockhashAt > 5_000) {
        blockhash = await stack.simnet.request<string>({ op: 'blockhash' });
        blockhashAt = Date.now();
      }
      const [tx] = factory.make(1, blockhash, { expiry_slots: expiry });
      const answer = await postJson(agent, `${url}/tx/enqueue`, (tx as { body: string }).body);
      if (answer.status !== 202) throw new Error(`enqueue answered ${answer.status}: ${answer.body}`);
      await sleep(slotMs);
    }
    // Done when every transaction has landed or its last attempt slot plus a window and a settle are behind us.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const open = [...expiresAt.entries()].filter(([id, exp]) => !landedTip.has(id) && slot <= exp + 8);
      if (open.length === 0) break;
      await sleep(200);
    }
    observer.close();
    agent.destroy();
    const tips = [...landedTip.values()];
    return {
      strategy,
      regime,
      expiry,
      slot_ms: slotMs,
      enqueued: expiresAt.size,
      landed: landedTip.size,
      landing_rate: round(landedTip.size / Math.max(1, expiresAt.size), 4),
      lamports_per_landed: Math.round(tips.reduce((a, b) => a + b, 0) / Math.max(1, tips.length)),
      submits,
    };
  } finally {
    await stack.close();
  }
}

export const landingEconomics: Benchmark = {
  name: 'landing-economics',
  title: '3. Landing economics on the simnet auction',
  async run(ctx) {
    const seeds = ctx.quick ? 5 : 20;
    const arrivals = ctx.quick ? 300 : 2_000;
    const cells = simulate(ctx, seeds, arrivals);
    const cell = (regime: Regime, expiry: number, strategy: Strategy) =>
      cells.find((c) => c.regime === regime && c.expiry === expiry && c.strategy === strategy) as Cell;
    // Reflex sits at the ceiling in every regime, so agreement there is weak evidence; the fixed bid in the spike
    // regime lands well below 100% in the simulator and tests agreement where the strategies differ.
    const e2eRuns = [];
    for (const [strategy, regime] of [
      ['reflex', 'busy'],
      ['reflex', 'spike'],
      ['fixed-10k', 'spike'],
    ] as const) {
      const run = await endToEnd(ctx, strategy, ctx.quick ? 40 : 300, regime, 12);
      const simulated = cell(regime, 12, strategy).landing_rate.mean;
      const gap = round(Math.abs(simulated - run.landing_rate) * 100, 1);
      ctx.progress(
        `end to end (${strategy}, ${regime}): ${run.landed}/${run.enqueued} landed (${(run.landing_rate * 100).toFixed(1)}%), simulator ${(simulated * 100).toFixed(1)}%`,
      );
      e2eRuns.push({ ...run, simulator_landing_rate: simulated, gap_points: gap });
    }
    const rows = [];
    for (const regime of REGIMES) {
      const r = cell(regime, 12, 'reflex');
      const p95 = cell(regime, 12, 'always-p95');
      const need = regime === 'spike' ? 0.95 : 0.99;
      const spendRatio = r.lamports_per_landed.mean / Math.max(1, p95.lamports_per_landed.mean);
      rows.push({
        metric: `reflex, ${regime}, expiry 12: landing rate; lamports/landed vs always-p95`,
        target: `>= ${need * 100}%; <= 50%`,
        measured: `${fmt(r.landing_rate, 1, 100)} %; ${round(spendRatio * 100, 1)}% (${Math.round(r.lamports_per_landed.mean).toLocaleString('en-US')} vs ${Math.round(p95.lamports_per_landed.mean).toLocaleString('en-US')})`,
        met: r.landing_rate.mean >= need && spendRatio <= 0.5,
      });
    }
    for (const run of e2eRuns) {
      rows.push({
        metric: `end to end (real sidecar${run.strategy === 'reflex' ? ' + agent, reflex' : ', bypass fixed 10,000'}, ${run.regime}, expiry ${run.expiry}, n=${run.enqueued}) vs simulator`,
        target: 'within 3 points',
        measured: `${round(run.landing_rate * 100, 1)}% vs ${round(run.simulator_landing_rate * 100, 1)}% (${run.gap_points} points)`,
        met: run.gap_points <= 3,
      });
    }
    const notes = [
      `${seeds} seeds x ${arrivals} arrivals (one per slot after a 150-slot warm-up) per regime, the regime pinned; every strategy replays the same seed (regime path, clearing tips, leader schedule with 90% bundle-engine leaders, model latencies). Intervals are 95% t intervals over the per-seed values.`,
      `Policy for every strategy: defaults (tip-percentile p75, max-tip 2,000,000, escalation-step 50,000) with max-retries ${SIM_POLICY['max-retries']}, so expiry, not a retry count, ends attempts. Baselines send at once on enqueue and again one slot after a lost window; escalate multiplies by 1.5 per failure from p50; cortex is the simnet Messages endpoint's heuristic with a log-normal model latency (p50 2 slots, p95 5 slots at 400 ms), asked when reflex's timing says a bundle-engine leader is near.`,
      "The auction is the simnet's: a bundle competes in every slot of its leader window and each slot draws its own clearing tip, so even a fixed 10,000-lamport bid lands far more often per window than its per-slot clear rate suggests, and more than agent-sdk.md §4's toy run. The market (competitor tips feeding the floor) is exogenous: our bids do not move it.",
      '"Missed windows" counts bundle-engine leader windows that opened while a transaction waited without a bundle in them (holding, model thinking, or waiting for a settle).',
    ];
    const markdown = [
      '| regime | expiry | strategy | landing rate % | slots to land p50 | p95 | lamports per landed | missed windows / tx |',
      '|---|---|---|---|---|---|---|---|',
      ...cells.map(
        (c) =>
          `| ${c.regime} | ${c.expiry} | ${c.strategy} | ${fmt(c.landing_rate, 1, 100)} | ${fmt(c.slots_p50, 1)} | ${fmt(c.slots_p95, 1)} | ${fmt(c.lamports_per_landed)} | ${fmt(c.missed_windows_per_tx, 2)} |`,
      ),
    ];
    return {
      rows,
      notes,
      markdown,
      details: {
        seeds,
        arrivals,
        policy: SIM_POLICY,
        cells,
        end_to_end: e2eRuns,
      },
    };
  },
};
