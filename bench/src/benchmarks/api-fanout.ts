/**
 * API and fan-out: sustained `POST /tx/enqueue` rate and latency with no decider attached (every transaction stays
 * pending, `max-queue` raised), so the figure is relay's own cost (decode, signature checks, journal group commit,
 * events), with 0, 100 and 1,000 SSE subscribers on `/internal/events`, and the delivery latency to them.
 *
 * Processes: this one is the load generator (keep-alive HTTP, pre-signed transactions, the SSE readers); the
 * sidecar and the simnet are children, each measured from /proc, so the load generator's share of the two cores is
 * reported rather than hidden.
 */
import { join } from 'node:path';
import type { Benchmark, BenchContext } from '../benchmark';
import { keepAliveAgent, postJson } from '../lib/http';
import { cpuTimeMs, rssBytes, sleep } from '../lib/processes';
import { summarizeCpuProfile, type ProfileSummary } from '../lib/profile';
import { openFanoutSubscribers } from '../lib/sse';
import { benchPolicy, startRelayStack } from '../lib/stack';
import { distribution, round, type Distribution } from '../lib/stats';
import type { BenchStore, StoreUse } from '../lib/store';
import { TxFactory } from '../lib/txgen';

/** Enough in-flight requests to keep the journal's group commit full without queueing inside the load generator. */
const CONCURRENCY = 64;
/** Subscribers that parse every frame and time its delivery; the rest only count bytes (see SseReader). */
const TIMED_SUBSCRIBERS = 10;

export interface LevelResult {
  subscribers: number;
  duration_s: number;
  accepted: number;
  refused: Record<string, number>;
  enqueues_per_s: number;
  enqueue_latency_ms: Distribution;
  events_per_s_per_subscriber: number;
  event_mix: Record<string, number>;
  delivery_latency_ms: Distribution;
  subscribers_dropped: number;
  /** Lowest bytes a byte-counting subscriber received relative to the most one received (1 = every frame delivered). */
  min_delivery_ratio: number;
  cpu_pct_of_one_core: { sidecar: number; load_generator: number; simnet: number };
  load_generator_share_of_machine_pct: number;
  sidecar_rss_mb: number;
  profile?: ProfileSummary | null;
  /** The sidecar's and (on PostgreSQL) the server's commits and CPU over the timed window. */
  store_use?: StoreUse;
}

/** One level on a fresh stack; `store` chooses where the sidecar keeps its records (default the journal). */
export async function runLevel(
  ctx: BenchContext,
  subscribers: number,
  seconds: number,
  profile: boolean,
  store?: BenchStore,
): Promise<LevelResult> {
  const stack = await startRelayStack({
    store,
    simnet: { seed: 11, slotMs: 400, fixedClearingTip: 5_000 },
    policy: benchPolicy(),
    // No decider: no agent, and the sidecar's own fallback reflex disabled.
    env: { RELAY_AGENT_GRACE_S: '0' },
    cpuProfile: profile,
  });
  let result: LevelResult;
  try {
    const url = stack.sidecar.url;
    const factory = new TxFactory(200);
    const blockhash = await stack.simnet.request<string>({ op: 'blockhash' });
    // Pre-signed before the clock starts: ~6,000/s is more than this machine sustains, so the pool never runs dry.
    const txs = factory.make(Math.ceil(6_000 * seconds), blockhash);
    ctx.progress(`${subscribers} subscribers: ${txs.length} transactions pre-signed; connecting subscribers`);

    const delivery: number[] = [];
    const eventMix: Record<string, number> = {};
    let windowStart = Infinity;
    let windowEnd = Infinity;
    let timedFrames = 0;
    const { counters, all: readers } = await openFanoutSubscribers(
      `${url}/internal/events`,
      subscribers,
      TIMED_SUBSCRIBERS,
      (e) => {
        const ts = (JSON.parse(e.data) as { ts?: number }).ts;
        if (typeof ts !== 'number' || ts < windowStart || ts > windowEnd) return;
        delivery.push(e.receivedAt - ts);
        timedFrames++;
        eventMix[e.event] = (eventMix[e.event] ?? 0) + 1;
      },
    );
    await sleep(500);
    const bytesAtStart = counters.map((r) => r.bytes);

    const agent = keepAliveAgent(CONCURRENCY);
    const latencies: number[] = [];
    const refused: Record<string, number> = {};
    let accepted = 0;
    let next = 0;
    const cpu0 = {
      sidecar: cpuTimeMs(stack.sidecar.pid),
      simnet: cpuTimeMs(stack.simnet.pid),
      self: process.cpuUsage(),
    };
    const store0 = await stack.store.sample();
    const t0 = performance.now();
    windowStart = Date.now();
    const deadline = t0 + seconds * 1000;
    const worker = async () => {
      while (performance.now() < deadline && next < txs.length) {
        const tx = txs[next++];
        if (!tx) break;
        const start = performance.now();
        const answer = await postJson(agent, `${url}/tx/enqueue`, tx.body).catch((e: Error) => ({
          status: 0,
          body: e.message,
        }));
        latencies.push(performance.now() - start);
        if (answer.status === 202) accepted++;
        else refused[String(answer.status)] = (refused[String(answer.status)] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const elapsedS = (performance.now() - t0) / 1000;
    windowEnd = Date.now();
    const storeUse = await stack.store.since(store0);
    const self = process.cpuUsage(cpu0.self);
    const cpu = {
      sidecar: cpuTimeMs(stack.sidecar.pid) - cpu0.sidecar,
      simnet: cpuTimeMs(stack.simnet.pid) - cpu0.simnet,
      load_generator: (self.user + self.system) / 1000,
    };
    const rss = rssBytes(stack.sidecar.pid);
    // Let the last frames reach every reader before counting.
    await sleep(1500);
    agent.destroy();
    // Every counting subscriber of one stream is sent the same chunks: the least bytes against the most.
    const counted = counters.map((r, i) => r.bytes - (bytesAtStart[i] ?? 0));
    const minRatio = counted.length ? Math.min(...counted) / Math.max(1, ...counted) : 1;
    const dropped = readers.filter((r) => r.closed).length;
    for (const r of readers) r.close();
    const pct = (ms: number) => round((ms / (elapsedS * 1000)) * 100, 1);
    result = {
      subscribers,
      duration_s: round(elapsedS, 2),
      accepted,
      refused,
      enqueues_per_s: Math.round(accepted / elapsedS),
      enqueue_latency_ms: distribution(latencies),
      events_per_s_per_subscriber: subscribers
        ? Math.round(timedFrames / Math.min(subscribers, TIMED_SUBSCRIBERS) / elapsedS)
        : 0,
      event_mix: eventMix,
      delivery_latency_ms: distribution(delivery),
      subscribers_dropped: dropped,
      min_delivery_ratio: round(minRatio, 3),
      cpu_pct_of_one_core: {
        sidecar: pct(cpu.sidecar),
        load_generator: pct(cpu.load_generator),
        simnet: pct(cpu.simnet),
      },
      load_generator_share_of_machine_pct: round(pct(cpu.load_generator) / 2, 1),
      sidecar_rss_mb: Math.round(rss / 2 ** 20),
      store_use: storeUse,
    };
  } finally {
    await stack.close();
  }
  // node writes the profile when the sidecar exits, so it is read after stop().
  if (profile) result.profile = summarizeCpuProfile(join(stack.dir, 'profile'));
  return result;
}

export const apiFanout: Benchmark = {
  name: 'api-fanout',
  title: '2. API and fan-out (enqueue rate, latency, SSE delivery)',
  async run(ctx) {
    const seconds = ctx.quick ? 2 : 10;
    const levels: LevelResult[] = [];
    for (const subscribers of [0, 100, 1000]) {
      const level = await runLevel(ctx, subscribers, seconds, false);
      levels.push(level);
      ctx.progress(
        `${subscribers} subscribers: ${level.enqueues_per_s}/s, enqueue p50 ${level.enqueue_latency_ms.p50} p99 ${level.enqueue_latency_ms.p99} ms, delivery p99 ${level.delivery_latency_ms.p99} ms, ${level.events_per_s_per_subscriber} events/s/sub, cpu sidecar ${level.cpu_pct_of_one_core.sidecar}% loadgen ${level.cpu_pct_of_one_core.load_generator}%`,
      );
    }
    let profiled: LevelResult | null = null;
    if (ctx.profile) {
      const profiledSubscribers = Number(process.env.BENCH_PROFILE_SUBSCRIBERS ?? 100);
      ctx.progress(
        `profiling the sidecar at ${profiledSubscribers} subscribers (node --cpu-prof; its numbers are not the table's)`,
      );
      profiled = await runLevel(ctx, profiledSubscribers, seconds, true);
    }
    const at = (n: number) => levels.find((l) => l.subscribers === n) as LevelResult;
    const l0 = at(0);
    const l100 = at(100);
    const l1000 = at(1000);
    return {
      rows: [
        {
          metric: 'enqueues/s, 0 subscribers',
          target: '–',
          measured: `${l0.enqueues_per_s}/s (p50 ${l0.enqueue_latency_ms.p50} ms, p99 ${l0.enqueue_latency_ms.p99} ms)`,
          met: null,
        },
        {
          metric: 'enqueues/s, 100 subscribers',
          target: '>= 3,000/s',
          measured: `${l100.enqueues_per_s}/s`,
          met: l100.enqueues_per_s >= 3000,
        },
        {
          metric: 'enqueue latency p99, 100 subscribers',
          target: '<= 20 ms',
          measured: `${l100.enqueue_latency_ms.p99} ms (p50 ${l100.enqueue_latency_ms.p50} ms)`,
          met: l100.enqueue_latency_ms.p99 <= 20,
        },
        {
          metric: 'enqueues/s, 1,000 subscribers',
          target: '–',
          measured: `${l1000.enqueues_per_s}/s (p50 ${l1000.enqueue_latency_ms.p50} ms, p99 ${l1000.enqueue_latency_ms.p99} ms)`,
          met: null,
        },
        {
          metric: 'delivery latency p99, 100 subscribers',
          target: '–',
          measured: `${l100.delivery_latency_ms.p99} ms (p50 ${l100.delivery_latency_ms.p50} ms, ${l100.events_per_s_per_subscriber} events/s per subscriber)`,
          met: null,
        },
        {
          metric: 'delivery latency p99, 1,000 subscribers',
          target: '<= 50 ms',
          measured: `${l1000.delivery_latency_ms.p99} ms (p50 ${l1000.delivery_latency_ms.p50} ms, ${l1000.events_per_s_per_subscriber} events/s per subscriber)`,
          met: l1000.delivery_latency_ms.p99 <= 50,
        },
        {
          metric: 'load generator share of the 2 cores (0 / 100 / 1,000 subs)',
          target: 'reported',
          measured: levels.map((l) => `${l.load_generator_share_of_machine_pct}%`).join(' / '),
          met: null,
        },
      ],
      notes: [
        `Closed loop: ${CONCURRENCY} keep-alive connections, each posting its next pre-signed transfer as soon as the last answer arrives, for ${seconds} s per level; a fresh sidecar child (real fsync, journal group commit) and simnet child per level; no agent and \`RELAY_AGENT_GRACE_S=0\`, so nothing is submitted and the simulated bank does no work.`,
        `Subscribers are in the load-generator process: ${TIMED_SUBSCRIBERS} raw \`node:http\` readers, spread through the connection order, parse every frame and time it (receipt \`Date.now()\` minus the event's \`ts\`), the others count bytes on bare TCP sockets (since session 16; before, node's HTTP client, whose cost per read loaded the machine the sidecar runs on); \`min_delivery_ratio\` in the JSON checks they all got the same stream. Each enqueue emits \`tx_enqueued\` and \`tx_status_changed\` (plus \`slot_update\` / \`tip_update\` per slot), so the event rate per subscriber is about twice the enqueue rate.`,
        "Delivery latency is measured in the load generator, whose event loop is also busy posting; at saturation part of it is our own queueing, so it is an upper bound on the sidecar's.",
      ],
      details: { concurrency: CONCURRENCY, seconds, levels, profiled },
    };
  },
};
