/**
 * Memory and scale: RSS of the sidecar process alone (the simnet is its own process) with 10,000 pending, and while
 * transactions stream through to landed and finalized (bypass mode, so no agent process is needed to move them),
 * sampled as they go so growth can be seen to be flat; then start-up time on the journal each phase left behind.
 */
import { join } from 'node:path';
import type { Benchmark, BenchContext } from '../benchmark';
import { keepAliveAgent, postJson } from '../lib/http';
import { REPO_ROOT, rssBytes, sleep, startSidecarChild } from '../lib/processes';
import { SseReader } from '../lib/sse';
import { benchPolicy, startRelayStack, type BenchStack } from '../lib/stack';
import { round } from '../lib/stats';
import { TxFactory } from '../lib/txgen';

const RSS_TARGET_MB = 200;
/** Issue #32: RSS after 100,000 transactions through, with the default settings. */
const THROUGH_RSS_TARGET_MB = 300;
/** Issue #32's flatness: the last third of the samples within 10 % of the middle third. */
const FLAT_WITHIN = 0.1;
const mb = (bytes: number) => Math.round(bytes / 2 ** 20);

/**
 * The spend ledger's heap for an hour of attempts at `perSecond` (what `spend-limit` counts over the rolling hour),
 * measured in a child process with `--expose-gc` on the sidecar's own `SpendLedger`: every entry by its attempt's key,
 * as the ledger held them until session 23, then folded into per-second sums, as it holds a terminal transaction's
 * now. The through phase is too short to show it: the hour is what an operator's process holds.
 */
async function ledgerPhase(perSecond: number): Promise<{
  entries: number;
  keyed_mb: number;
  bytes_per_entry: number;
  folded_mb: number;
  seconds: number;
}> {
  const entries = Math.max(1, Math.round(perSecond * 3_600));
  const script = `
    const { SpendLedger } = require('@solrelay/sidecar');
    const used = () => { gc(); gc(); return process.memoryUsage().heapUsed; };
    const n = ${entries};
    const t0 = Date.now();
    const ids = Array.from({ length: n }, (_, i) => 'tx_01M8H4EF' + i.toString(36).toUpperCase().padStart(16, '0'));
    const ledger = new SpendLedger();
    const before = used();
    for (let i = 0; i < n; i++) ledger.set(ids[i] + '#1', [t0 + Math.floor((i * 3_600_000) / n), 15_000]);
    ledger.spentSince(t0);
    const keyed = used() - before;
    for (let i = 0; i < n; i++) ledger.fold(ids[i] + '#1');
    if (ledger.spentSince(t0) !== n * 15_000) throw new Error('folded sum differs');
    const folded = used() - before;
    console.log(JSON.stringify({ keyed, folded, seconds: [...ledger.folded()].length, held: ids.length }));
  `;
  const { execFileSync } = await import('node:child_process');
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', script], {
    cwd: join(REPO_ROOT, 'bench'),
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  const r = JSON.parse(out.trim().split('\n').pop() as string) as {
    keyed: number;
    folded: number;
    seconds: number;
  };
  return {
    entries,
    keyed_mb: round(r.keyed / 1e6, 1),
    bytes_per_entry: Math.round(r.keyed / entries),
    folded_mb: round(Math.max(0, r.folded) / 1e6, 2),
    seconds: r.seconds,
  };
}

/** Stop the sidecar and start it again on the same files; ms from spawn to listening. */
async function restartTime(stack: BenchStack, label: string): Promise<{ start_ms: number; rss_mb: number }> {
  await stack.sidecar.stop();
  const again = await startSidecarChild(stack.env, join(stack.dir, `sidecar-restart-${label}.log`));
  const result = { start_ms: Math.round(again.startMs), rss_mb: mb(rssBytes(again.pid)) };
  await again.stop();
  return result;
}

async function pendingPhase(ctx: BenchContext, pending: number) {
  const stack = await startRelayStack({
    simnet: { seed: 21, slotMs: 400, fixedClearingTip: 5_000 },
    policy: benchPolicy(),
    env: { RELAY_AGENT_GRACE_S: '0' },
  });
  try {
    const idle = mb(rssBytes(stack.sidecar.pid));
    const factory = new TxFactory(100);
    const txs = factory.make(pending, await stack.simnet.request<string>({ op: 'blockhash' }));
    const agent = keepAliveAgent(32);
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < txs.length) {
          const tx = txs[next++] as { body: string };
          const a = await postJson(agent, `${stack.sidecar.url}/tx/enqueue`, tx.body);
          if (a.status !== 202) throw new Error(`enqueue answered ${a.status}: ${a.body}`);
        }
      }),
    );
    agent.destroy();
    await sleep(2_000);
    const withPending = mb(rssBytes(stack.sidecar.pid));
    ctx.progress(
      `${pending} pending: sidecar RSS ${withPending} MB (idle ${idle} MB); restarting on that journal`,
    );
    const restart = await restartTime(stack, 'pending');
    return { pending, idle_rss_mb: idle, rss_mb: withPending, restart };
  } finally {
    await stack.close();
  }
}

interface Sample {
  t_s: number;
  enqueued: number;
  landed: number;
  finalized: number;
  rss_mb: number;
  /** V8 heap in use, from the sidecar's own /metrics: live data plus garbage not yet collected. */
  heap_used_mb: number;
}

/** The sidecar's V8 heap in use (prom-client's default metric), in MB. */
async function heapUsedMb(url: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const bytes = Number(/^relay_process_nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1]);
    return Number.isFinite(bytes) ? mb(bytes) : -1;
  } catch {
    return -1;
  }
}

async function throughPhase(
  ctx: BenchContext,
  total: number,
  budgetS: number,
  memoryMode: 'default' | 'small' = 'default',
) {
  const stack = await startRelayStack({
    simnet: { seed: 22, slotMs: 200, bundleEngineShare: 1, fixedClearingTip: 5_000 },
    policy: benchPolicy(),
    env: {
      BYPASS_AGENT: '1',
      BYPASS_TIP_LAMPORTS: '10000',
      BUNDLE_ENGINE_RPS: '10000',
      RELAY_MEMORY_MODE: memoryMode,
    },
  });
  try {
    const url = stack.sidecar.url;
    const factory = new TxFactory(200);
    await stack.simnet.request({
      op: 'fund',
      addresses: factory.payers.map((p) => p.publicKey),
      lamports: 100_000_000_000_000,
    });
    let landed = 0;
    let finalized = 0;
    const observer = new SseReader(`${url}/internal/events`, {
      onEvent: (e) => {
        if (e.event !== 'tx_status_changed') return;
        // A cheap test before JSON.parse: this reader sees every event of the run.
        if (e.data.includes('"state":"landed"')) landed++;
        else if (e.data.includes('"state":"finalized"')) finalized++;
      },
    });
    await observer.open();
    const agent = keepAliveAgent(16);
    const samples: Sample[] = [];
    const t0 = performance.now();
    let enqueued = 0;
    let blockhash = await stack.simnet.request<string>({ op: 'blockhash' });
    let blockhashAt = Date.now();
    let lastSample = 0;
    const maxInFlight = 2_000;
    const sample = async () => {
      const s = {
        t_s: round((performance.now() - t0) / 1000, 1),
        enqueued,
        landed,
        finalized,
        rss_mb: mb(rssBytes(stack.sidecar.pid)),
        heap_used_mb: await heapUsedMb(url),
      };
      samples.push(s);
      ctx.progress(
        `through (${memoryMode}): ${s.enqueued} enqueued, ${s.landed} landed, ${s.finalized} finalized, RSS ${s.rss_mb} MB, heap ${s.heap_used_mb} MB`,
      );
    };
    while (enqueued < total && performance.now() - t0 < budgetS * 1000) {
      if (Date.now() - blockhashAt > 5_000) {
        blockhash = await stack.simnet.request<string>({ op: 'blockhash' });
        blockhashAt = Date.now();
      }
      // Bounded in flight: the point is a steady stream through the sidecar, not a 100,000-deep queue.
      if (enqueued - landed >= maxInFlight) {
        await sleep(20);
      } else {
        const batch = factory.make(Math.min(64, total - enqueued), blockhash);
        await Promise.all(
          batch.map(async (tx) => {
            const a = await postJson(agent, `${url}/tx/enqueue`, tx.body);
            if (a.status === 202) enqueued++;
          }),
        );
      }
      if (performance.now() - lastSample > (total > 10_000 ? 15_000 : 3_000)) {
        lastSample = performance.now();
        await sample();
      }
    }
    // Let the tail land and finalize (32 slots) before the last reading.
    const drainUntil = Date.now() + (total > 10_000 ? 20_000 : 10_000);
    while (Date.now() < drainUntil && finalized < enqueued) await sleep(250);
    await sample();
    const elapsedS = (performance.now() - t0) / 1000;
    observer.close();
    agent.destroy();
    ctx.progress('restarting on the journal left after the run');
    const restart = await restartTime(stack, 'through');
    return {
      target_transactions: total,
      enqueued,
      landed,
      finalized,
      elapsed_s: round(elapsedS, 1),
      through_per_s: Math.round(landed / elapsedS),
      samples,
      peak_rss_mb: Math.max(...samples.map((s) => s.rss_mb)),
      restart,
    };
  } finally {
    await stack.close();
  }
}

/**
 * Flatness (issue #32): the mean RSS of the last third of the samples against that of the middle third, as a
 * fraction (0.05: 5 % higher). The first third is the warm-up (the retained records fill up to their bound).
 */
function rssDrift(samples: Sample[]): number | null {
  // Too few samples (a quick run) make no thirds: no judgement rather than a vacuous "flat".
  if (samples.length < 6) return null;
  const third = Math.floor(samples.length / 3);
  const mean = (xs: Sample[]) => xs.reduce((a, s) => a + s.rss_mb, 0) / Math.max(1, xs.length);
  const middle = mean(samples.slice(third, 2 * third));
  const last = mean(samples.slice(2 * third));
  return middle > 0 ? round(last / middle - 1, 3) : 0;
}

const pct = (x: number | null) =>
  x === null ? 'n/a (under 6 samples)' : `${x >= 0 ? '+' : ''}${round(x * 100, 1)} %`;

export const memoryScale: Benchmark = {
  name: 'memory-scale',
  title: '4. Memory and scale (sidecar RSS, start-up on a full journal)',
  async run(ctx) {
    const pending = await pendingPhase(ctx, ctx.quick ? 1_000 : 10_000);
    // BENCH_THROUGH=<count>,<seconds> overrides the through phase's size (local exploration).
    const [count, seconds] = (process.env.BENCH_THROUGH ?? '').split(',').map(Number);
    const through = await throughPhase(
      ctx,
      count || (ctx.quick ? 1_000 : 100_000),
      // 100,000 at ~270/s takes ~375 s: the budget lets the count through with room to spare.
      seconds || (ctx.quick ? 8 : 450),
    );
    // The same stream with RELAY_MEMORY_MODE=small (V8 --optimize-for-size), only when asked (BENCH_MEMORY_SMALL=1):
    // the full suite has no room for both at the size.
    const small = process.env.BENCH_MEMORY_SMALL
      ? await throughPhase(
          ctx,
          count || (ctx.quick ? 1_000 : 100_000),
          seconds || (ctx.quick ? 8 : 120),
          'small',
        )
      : null;
    const ledger = await ledgerPhase(Math.max(1, through.through_per_s));
    ctx.progress(
      `spend ledger, an hour at ${through.through_per_s}/s (${ledger.entries.toLocaleString('en-US')} attempts): ` +
        `${ledger.keyed_mb} MB by key, ${ledger.folded_mb} MB folded into ${ledger.seconds} seconds`,
    );
    const drift = rssDrift(through.samples);
    const smallDrift = small ? rssDrift(small.samples) : null;
    const lastRss = (r: typeof through) => r.samples[r.samples.length - 1]?.rss_mb ?? 0;
    const reachedAll = through.landed >= through.target_transactions;
    return {
      rows: [
        {
          metric: `RSS with ${pending.pending.toLocaleString('en-US')} pending`,
          target: `<= ${RSS_TARGET_MB} MB`,
          measured: `${pending.rss_mb} MB (idle ${pending.idle_rss_mb} MB)`,
          met: pending.rss_mb <= RSS_TARGET_MB,
        },
        {
          metric: `RSS after ${through.landed.toLocaleString('en-US')} transactions through, default settings`,
          target: `<= ${THROUGH_RSS_TARGET_MB} MB, flat (last third within ${FLAT_WITHIN * 100} % of the middle third)`,
          measured: `${lastRss(through)} MB (peak ${through.peak_rss_mb} MB; last third vs middle third ${pct(drift)})`,
          met: lastRss(through) <= THROUGH_RSS_TARGET_MB && drift !== null && Math.abs(drift) <= FLAT_WITHIN,
        },
        ...(small
          ? [
              {
                metric: `RELAY_MEMORY_MODE=small: RSS after ${small.landed.toLocaleString('en-US')} through`,
                target: `<= ${THROUGH_RSS_TARGET_MB} MB, flat`,
                measured: `${lastRss(small)} MB (peak ${small.peak_rss_mb} MB; last third vs middle third ${pct(smallDrift)}; ${small.through_per_s}/s through)`,
                met:
                  lastRss(small) <= THROUGH_RSS_TARGET_MB &&
                  smallDrift !== null &&
                  Math.abs(smallDrift) <= FLAT_WITHIN,
              },
            ]
          : []),
        {
          metric: 'transactions through (bypass, landed)',
          target: `${through.target_transactions.toLocaleString('en-US')}`,
          measured: `${through.landed.toLocaleString('en-US')} in ${through.elapsed_s} s (${through.through_per_s}/s), ${through.finalized.toLocaleString('en-US')} finalized`,
          met: reachedAll,
        },
        {
          metric: `spend ledger heap, an hour at the run's ${through.through_per_s}/s (${ledger.entries.toLocaleString('en-US')} attempts)`,
          target: '– (reported; flat memory)',
          measured: `${ledger.folded_mb} MB folded into ${ledger.seconds} per-second sums, as terminal transactions' spend is held; ${ledger.keyed_mb} MB kept by attempt (${ledger.bytes_per_entry} bytes each), as it was held before`,
          met: null,
        },
        {
          metric: `start-up with ${pending.pending.toLocaleString('en-US')} pending in the journal`,
          target: '– (reported)',
          measured: `${pending.restart.start_ms} ms (RSS after ${pending.restart.rss_mb} MB)`,
          met: null,
        },
        {
          metric: 'start-up on the journal after the run through',
          target: '– (reported)',
          measured: `${through.restart.start_ms} ms`,
          met: null,
        },
      ],
      notes: [
        'RSS is `VmRSS` of the sidecar process from /proc; the simnet and the load generator are other processes.',
        'The run through uses bypass (every enqueue submitted at once at 10,000 lamports) on a simnet with 200 ms slots, every leader on the bundle engine and the clearing tip pinned at 5,000, so every transaction lands and finalizes 32 slots later; at most 2,000 are in flight at once. It stops at the target count or the time budget, whichever comes first.',
        'Start-up is spawn to `relay: listening on` of apps/sidecar/dist/main.cjs on the same data directory (journal replay included).',
        `\`heap_used_mb\` in the samples (the JSON) is the V8 heap in use from the sidecar's /metrics, sampled every 15 s wherever the collector happens to be: lowest ${Math.min(...through.samples.slice(Math.floor(through.samples.length / 2)).map((x) => x.heap_used_mb))} MB over the second half of the run, against an RSS that V8 keeps committed between major collections. No flag is passed to node: \`RELAY_MEMORY_MODE=default\` bounds the heap's growth itself (V8's \`--heap-growing-percent\`, which the sidecar sets on itself once started; see packages/sidecar/src/runtime/memory-mode.ts).`,
      ],
      details: { pending, through, small, ledger },
    };
  },
};
