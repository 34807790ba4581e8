/**
 * SSE fan-out alone: the sidecar's `EventHub` (the one `/internal/events` serves) behind a plain `node:http` server
 * in this process, publishing at a fixed event rate to 100 or 1,000 subscribers that live in a child process. What
 * it measures is the hub's own cost (its process's CPU per event) and the delivery latency at that rate, apart from
 * the enqueue path: in `api-fanout` the enqueues saturate the sidecar's thread, so fan-out and enqueue cost are
 * measured together, at whatever rate the machine reaches.
 *
 * The rates: 6,000 events/s is what 3,000 enqueues/s publish (`tx_enqueued` and `tx_status_changed` each), issue
 * 32's enqueue goal; 2,000 events/s is about what the whole sidecar reaches with 1,000 subscribers on this machine.
 *
 * Run as a child (`sse-fanout-readers`) this file is the subscribers: a few parse every frame and time it (receipt
 * `Date.now()` minus the event's `ts`; one machine, one clock), the rest count bytes on bare sockets.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { txStatusChangedEvent, type TxEnqueuedEvent } from '@solrelay/core';
import { EventHub } from '@solrelay/sidecar';
import type { Benchmark, BenchContext } from '../benchmark';
import { cpuTimeMs, sleep } from '../lib/processes';
import { openFanoutSubscribers } from '../lib/sse';
import { distribution, round, type Distribution } from '../lib/stats';

const TIMED_SUBSCRIBERS = 10;
const WARM_UP_S = 1;
const READERS_FLAG = 'sse-fanout-readers';

interface ReaderReport {
  delivery: number[];
  bytes: number[];
  dropped: number;
}

export interface FanoutLevel {
  subscribers: number;
  events_per_s_target: number;
  events_published: number;
  duration_s: number;
  /** The hub's process (publisher + hub + HTTP server), per event and as a share of one core. */
  hub_cpu_pct_of_one_core: number;
  hub_cpu_us_per_event: number;
  readers_cpu_pct_of_one_core: number;
  delivery_latency_ms: Distribution;
  /** Lowest bytes a counting subscriber received since connecting relative to the most one received. */
  min_delivery_ratio: number;
  /** Counting subscribers that received fewer bytes than the most one received (0: every frame everywhere). */
  subscribers_short: number;
  subscribers_dropped: number;
  /** The frames published in the window times the subscribers, MB/s: what the hub had to send them together. */
  stream_mb_per_s: number;
  hub_counters: EventHub['counters'];
}

async function runLevel(
  ctx: BenchContext,
  subscribers: number,
  eventsPerS: number,
  seconds: number,
): Promise<FanoutLevel> {
  const hub = new EventHub({ bootId: 'bench', keepAliveMs: 0 });
  const server = createServer((_req, res) => hub.subscribe(res, {}));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const readers: ChildProcess = fork(
    fileURLToPath(import.meta.url),
    [READERS_FLAG, url, String(subscribers)],
    {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  try {
    await once(readers, 'ready');
    ctx.progress(
      `${subscribers} subscribers connected; publishing ${eventsPerS} events/s for ${WARM_UP_S} s of warm-up, then ${seconds} s`,
    );
    // A warm-up second at the same rate before the window (JIT, the sockets' first writes): its first few hundred ms
    // delivered in ~200 ms, a start-up cost, not the steady state measured here.
    let published = 0;
    let n = 0;
    let windowAt = -1;
    let frameBytes = 0;
    let readersCpu0 = 0;
    let cpu0 = process.cpuUsage();
    const start = performance.now();
    let t0 = start;
    // Paced against the clock in 1 ms steps: the publisher catches up after a late timer instead of drifting.
    while (performance.now() - start < (WARM_UP_S + seconds) * 1000) {
      if (windowAt < 0 && performance.now() - start >= WARM_UP_S * 1000) {
        windowAt = published;
        readers.send({ window: Date.now() });
        readersCpu0 = cpuTimeMs(readers.pid as number);
        cpu0 = process.cpuUsage();
        t0 = performance.now();
      }
      const due = Math.floor(((performance.now() - start) / 1000) * eventsPerS);
      while (published < due) {
        const bytes = publishPair(hub, n++, published % 2 === 0);
        if (windowAt >= 0) frameBytes += bytes;
        published++;
      }
      await sleep(1);
    }
    published -= windowAt;
    const elapsedMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const readersCpu = cpuTimeMs(readers.pid as number) - readersCpu0;
    await sleep(1000); // what is in flight arrives
    readers.send({ report: true });
    const report = (await once(readers, 'report')) as ReaderReport;
    const hubCpuMs = (cpu.user + cpu.system) / 1000;
    const most = Math.max(1, ...report.bytes);
    const least = report.bytes.length ? Math.min(...report.bytes) : most;
    return {
      subscribers,
      events_per_s_target: eventsPerS,
      events_published: published,
      duration_s: round(elapsedMs / 1000, 2),
      hub_cpu_pct_of_one_core: round((hubCpuMs / elapsedMs) * 100, 1),
      hub_cpu_us_per_event: round((hubCpuMs * 1000) / published, 1),
      readers_cpu_pct_of_one_core: round((readersCpu / elapsedMs) * 100, 1),
      delivery_latency_ms: distribution(report.delivery),
      min_delivery_ratio: least / most,
      subscribers_short: report.bytes.filter((b) => b < most).length,
      subscribers_dropped: report.dropped,
      stream_mb_per_s: round((frameBytes * subscribers) / (elapsedMs / 1000) / 1e6, 1),
      hub_counters: { ...hub.counters },
    };
  } finally {
    readers.kill();
    hub.dispose();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** One enqueue's worth of events, alternately: `tx_enqueued`, then `tx_status_changed` (as the intake publishes). */
function publishPair(hub: EventHub, n: number, enqueued: boolean): number {
  const txId = `tx_01JBENCH${String(n).padStart(17, '0')}`;
  const ts = Date.now();
  if (enqueued) {
    const event: TxEnqueuedEvent = {
      tx_id: txId,
      slot: 312_000_000 + (n >> 10),
      priority: 'normal',
      expires_at_slot: 312_000_150 + (n >> 10),
      max_tip: null,
      tip: 'auto',
      compute_units: 4_400,
      contention: { class: 'uncontended', write_price_micro_lamports: 0, slots: 5 },
      ts,
    };
    return hub.publish('tx_enqueued', event).frame.length;
  }
  return hub.publish(
    'tx_status_changed',
    txStatusChangedEvent({
      tx_id: txId,
      state: 'pending',
      bundle_id: null,
      tx_signatures: [],
      failure: null,
      ts,
    }),
  ).frame.length;
}

function once(child: ChildProcess, kind: 'ready' | 'report'): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { kind?: string; value?: unknown }) => {
      if (message.kind !== kind) return;
      child.off('message', onMessage);
      resolve(message.value);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`sse-fanout readers exited (${code}) before "${kind}"`)));
  });
}

/** The child: `subscribers` SSE readers on `url`; reports delivery times and bytes when asked. */
async function readersMain(url: string, subscribers: number): Promise<void> {
  let windowStart = Infinity;
  const delivery: number[] = [];
  const { counters, all } = await openFanoutSubscribers(url, subscribers, TIMED_SUBSCRIBERS, (e) => {
    const ts = (JSON.parse(e.data) as { ts?: number }).ts;
    if (typeof ts === 'number' && ts >= windowStart) delivery.push(e.receivedAt - ts);
  });
  process.on('message', (message: { window?: number; report?: boolean }) => {
    if (message.window !== undefined) windowStart = message.window;
    if (message.report) {
      const value: ReaderReport = {
        delivery,
        // Since connecting: every subscriber connected before the first event, so each must hold the same bytes.
        bytes: counters.map((r) => r.bytes),
        dropped: all.filter((r) => r.closed).length,
      };
      process.send?.({ kind: 'report', value });
    }
  });
  process.send?.({ kind: 'ready' });
}

if (process.argv[2] === READERS_FLAG) {
  void readersMain(process.argv[3] as string, Number(process.argv[4]));
}

export const sseFanout: Benchmark = {
  name: 'sse-fanout',
  title: '2b. SSE fan-out alone (the event hub at a fixed event rate)',
  async run(ctx) {
    const seconds = ctx.quick ? 2 : 10;
    const plan: [number, number][] = [
      [100, 6_000],
      [1_000, 2_000],
      [1_000, 6_000],
    ];
    const levels: FanoutLevel[] = [];
    for (const [subscribers, rate] of plan) {
      const level = await runLevel(ctx, subscribers, rate, seconds);
      levels.push(level);
      ctx.progress(
        `${subscribers} subscribers at ${rate} events/s: delivery p50 ${level.delivery_latency_ms.p50} p99 ${level.delivery_latency_ms.p99} ms; hub ${level.hub_cpu_pct_of_one_core}% of a core (${level.hub_cpu_us_per_event} us/event), readers ${level.readers_cpu_pct_of_one_core}%; short ${level.subscribers_short}, dropped ${level.subscribers_dropped}`,
      );
    }
    const at = (subs: number, rate: number) =>
      levels.find((l) => l.subscribers === subs && l.events_per_s_target === rate) as FanoutLevel;
    const row = (l: FanoutLevel, target: string, met: boolean | null) => ({
      metric: `delivery p99, ${l.subscribers.toLocaleString('en-US')} subscribers at ${l.events_per_s_target.toLocaleString('en-US')} events/s`,
      target,
      measured: `${l.delivery_latency_ms.p99} ms (p50 ${l.delivery_latency_ms.p50}, max ${l.delivery_latency_ms.max}); hub ${l.hub_cpu_pct_of_one_core} % of a core, ${l.hub_cpu_us_per_event} µs/event; ${l.subscribers_short === 0 && l.subscribers_dropped === 0 ? 'every frame reached every subscriber' : `${l.subscribers_short} subscribers short (the least got ${round(l.min_delivery_ratio * 100, 1)} % of the most), ${l.subscribers_dropped} dropped`}`,
      met,
    });
    const complete = (l: FanoutLevel) => l.subscribers_short === 0 && l.subscribers_dropped === 0;
    return {
      rows: [
        row(at(100, 6_000), '–', null),
        row(
          at(1_000, 2_000),
          '<= 50 ms, every frame to every subscriber',
          (() => {
            const l = at(1_000, 2_000);
            return l.delivery_latency_ms.p99 <= 50 && complete(l);
          })(),
        ),
        row(at(1_000, 6_000), '– (reported: the subscribers share this machine; see the notes)', null),
      ],
      notes: [
        `The sidecar's \`EventHub\` with its defaults (flushes spaced by fan-out: 10 socket writes per ms, at most 25 ms apart) behind \`node:http\` in the benchmark's process, publishing \`tx_enqueued\` and \`tx_status_changed\` alternately at a fixed rate for ${seconds} s per level after ${WARM_UP_S} s of warm-up at that rate; the subscribers live in one child process: ${TIMED_SUBSCRIBERS} \`node:http\` readers, spread through the connection order (the hub writes each flush to its clients in the order they came), parse and time every frame; the rest count the bytes on bare TCP sockets (no HTTP client per read, which made the readers the limit), so the two cores are the hub's and the readers'. Every subscriber connects before the first event, so "every frame reached every subscriber" means every counter holds exactly the same bytes at the end.`,
        "Delivery is receipt time in the reader minus the event's `ts` (both `Date.now()`, one machine): the wait for the next flush, the writes to every socket before it, and the reader's own lag.",
        "This isolates the fan-out: `api-fanout` measures it together with the enqueue path that saturates the sidecar's thread.",
        `The target is judged at 2,000 events/s, above what the whole sidecar publishes with 1,000 subscribers on this machine (about 1,000 enqueues/s, two events each: \`api-fanout\`). At 6,000 events/s, 1,000 subscribers are sent ${at(1_000, 6_000).stream_mb_per_s} MB/s together through loopback, all read by one process on the second core; where a reader falls 4 MiB behind, the hub drops it, as it drops any reader that stops keeping up (dropped: ${at(1_000, 6_000).subscribers_dropped} of 1,000).`,
      ],
      details: { seconds, levels },
    };
  },
};
