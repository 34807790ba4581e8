import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { get, waitUntil, type Stack } from '@solrelay/testkit';
import { percentile, writeResults } from '../../src/security-results';
import { AGENT_MAIN, processMemory, startProcessStack, type ProcessSidecar } from '../../src/security-stack';
import { EnqueueClient, metricSum, metricValue, openLoop, type EnqueueResult } from '../../src/soak-load';
import { SseTally, openStalledClient } from '../../src/soak-sse';
import { TransferFactory } from '../../src/soak-wire';

/**
 * Issue #10, "Load": SOAK_MINUTES (default 10) of open-loop enqueues at SOAK_RATE per second (default 200) into
 * the built sidecar process, decided by the built agent process in reflex mode, on the simnet. Asserts that no
 * accepted transaction is lost (every one reaches a terminal state the chain agrees with), that the sidecar's RSS
 * is flat (mean of the last third of the run within 25 % of the middle third), and that relay kept up: the offered
 * rate went out, enqueue p99 within SOAK_ENQUEUE_P99_BOUND_MS (default 2 s), at least 95 % finalized. A few SSE
 * readers that never read stay attached throughout: had they not been dropped, they alone would make the RSS climb.
 * Writes reliability/results/soak.json. `pnpm test:soak`; not in CI.
 */

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const RATE = Number(process.env.SOAK_RATE ?? 200);
const SLOT_MS = Number(process.env.SOAK_SLOT_MS ?? 400);
/**
 * Bundles the simulated leader includes per slot. The simnet's default (64) with 400 ms slots and 90 % of slots
 * led by bundle-engine validators caps the chain near 144 bundles/s, below the offered 200/s: the soak measures
 * relay, not that model limit, so it raises it.
 */
const BUNDLES_PER_SLOT = Number(process.env.SOAK_BUNDLES_PER_SLOT ?? 256);
const DRAIN_MS = Number(process.env.SOAK_DRAIN_S ?? 300) * 1000;
const SAMPLE_MS = 10_000;
const STALLED = Number(process.env.SOAK_STALLED_READERS ?? 5);
const MAX_IN_FLIGHT = 5000;
/**
 * Flags for the sidecar's node: by default the heap cap README recommends for production. Without one, V8 on a
 * machine with memory to spare lets garbage pile up between major collections (a 10-minute run reached 1.6 GB of
 * RSS with ~200 MB live after each collection), which the flatness check cannot tell from a leak.
 * SOAK_SIDECAR_NODE_FLAGS replaces them (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile under load, or ""
 * to run uncapped).
 */
const SIDECAR_NODE_FLAGS = (process.env.SOAK_SIDECAR_NODE_FLAGS ?? '--max-old-space-size=640')
  .split(' ')
  .filter(Boolean);
/** Enqueue p99 the soak accepts (the answer includes the journal's fsync; idle-machine runs measure ~0.4–0.6 s). */
const SOAK_ENQUEUE_P99_BOUND_MS = Number(process.env.SOAK_ENQUEUE_P99_BOUND_MS ?? 2000);

const TERMINAL = new Set(['finalized', 'failed', 'expired']);

interface Sample {
  atMs: number;
  sidecarRss: number;
  agentRss: number | null;
  accepted: number;
  terminal: number;
  queueDepth: number | null;
  heapUsed: number | null;
  external: number | null;
  /** Attempts (bundles) built so far, and transactions that reached `landed`. */
  attempts: number | null;
  landed: number | null;
  /** CPU seconds used so far (user + system): the sidecar, the agent, this process (simnet + load + reader). */
  cpu: { sidecar: number | null; agent: number | null; harness: number };
}

/** utime + stime of a process in seconds, from /proc/<pid>/stat (clock ticks of 1/100 s on Linux). */
async function cpuSeconds(pid: number | undefined): Promise<number | null> {
  if (!pid) return null;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

let stack: Stack<ProcessSidecar> | undefined;
let agent: ChildProcess | undefined;
const stalled: Socket[] = [];

afterAll(async () => {
  for (const socket of stalled) socket.destroy();
  if (agent && agent.exitCode === null && agent.signalCode === null) {
    const exited = new Promise((resolve) => agent!.once('exit', resolve));
    agent.kill('SIGTERM');
    await exited;
  }
  await stack?.close();
});

function cpuDuring(first: Sample, end: Sample, loadMs: number): Record<string, number | null> {
  const diff = (a: number | null, b: number | null) =>
    a === null || b === null ? null : Number((b - a).toFixed(1));
  return {
    sidecar: diff(first.cpu.sidecar, end.cpu.sidecar),
    agent: diff(first.cpu.agent, end.cpu.agent),
    harness: diff(first.cpu.harness, end.cpu.harness),
    wall: Number((loadMs / 1000).toFixed(1)),
  };
}

function mean(values: number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

test(
  `soak: ${MINUTES} min at ${RATE} enqueues/s, agent in reflex mode: no loss, flat memory`,
  async () => {
    stack = await startProcessStack({
      simnet: { slotMs: SLOT_MS, engine: { maxBundlesPerSlot: BUNDLES_PER_SLOT } },
      clearingTip: null, // the seeded auction: calm, busy and spike regimes, so some attempts fail and retry
      env: {
        AGENT_DECISION_MODE: 'reflex',
        RELAY_AGENT_GRACE_S: '86400', // the agent decides, never the sidecar's own fallback
        BUNDLE_ENGINE_RPS: '2000',
      },
      // DESIGN: soak tests set rate-limit, max-queue and spend-limit explicitly. The default spend-limit (0.5 SOL a
      // rolling hour) is spent in under a minute at 200 tips a second (~56k lamports each); the soak measures
      // relay's throughput, so it lifts the budget (0 = none) rather than watch every later transaction expire.
      policy: { 'rate-limit': 1_000_000, 'max-queue': 1_000_000, 'spend-limit': 0 },
      nodeArgs: SIDECAR_NODE_FLAGS,
    });
    const url = stack.sidecar.url;
    const sidecarPid = stack.sidecar.child.pid as number;
    await waitUntil(async () => (await get(url, '/tip')).body.source !== 'none', 30_000, 'tip data');

    // The agent process, as `relay agent` runs it.
    const agentLines: string[] = [];
    agent = spawn(process.execPath, [AGENT_MAIN], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        ...stack.simnet.env(),
        RELAY_URL: url,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let agentLineCount = 0;
    const keepLine = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) {
        if (!line) continue;
        agentLineCount++;
        agentLines.push(line);
        if (agentLines.length > 50) agentLines.shift();
      }
    };
    agent.stdout!.on('data', keepLine);
    agent.stderr!.on('data', keepLine);
    // SOAK_AGENT_LOG=<path> keeps the agent's whole output (one line per decision) for a post-mortem.
    if (process.env.SOAK_AGENT_LOG) {
      const file = createWriteStream(process.env.SOAK_AGENT_LOG);
      agent.stdout!.pipe(file);
      agent.stderr!.pipe(file);
    }
    await waitUntil(
      async () => (await get(url, '/internal/agent/info')).status === 200,
      30_000,
      'the agent to register',
    );

    for (let i = 0; i < STALLED; i++) stalled.push(await openStalledClient(url));

    // What happened to each accepted transaction, from the reading SSE client.
    const terminal = new Map<string, { state: string; failure: string | null; atMs: number }>();
    const reader = await SseTally.open(`${url}/internal/events`, (event) => {
      if (event.event !== 'tx_status_changed') return;
      const data = JSON.parse(event.data) as { tx_id: string; state: string; failure: string | null };
      if (TERMINAL.has(data.state) && !terminal.has(data.tx_id)) {
        terminal.set(data.tx_id, { state: data.state, failure: data.failure, atMs: performance.now() });
      }
    });
    expect(reader.status).toBe(200);

    const payer = stack.simnet.fundedKeypair(5_000_000_000_000);
    const factory = new TransferFactory(
      payer,
      () => stack!.simnet.cluster.latestBlockhash('confirmed').blockhash,
    );
    const client = new EnqueueClient(url, {}, 256);
    const results: EnqueueResult[] = [];
    const accepted = new Map<string, { sentAt: number; latencyMs: number; signature: string }>();
    const start = performance.now();
    const samples: Sample[] = [];
    const sample = async () => {
      const metrics = await get(url, '/metrics').catch(() => null);
      samples.push({
        atMs: performance.now() - start,
        sidecarRss: (await processMemory(sidecarPid)).rss,
        agentRss: agent?.pid
          ? await processMemory(agent.pid).then(
              (m) => m.rss,
              () => null,
            )
          : null,
        accepted: accepted.size,
        terminal: terminal.size,
        queueDepth: metrics ? metricValue(metrics.body as string, 'relay_queue_depth') : null,
        heapUsed: metrics
          ? metricValue(metrics.body as string, 'relay_process_nodejs_heap_size_used_bytes')
          : null,
        external: metrics
          ? metricValue(metrics.body as string, 'relay_process_nodejs_external_memory_bytes')
          : null,
        attempts: metrics ? metricSum(metrics.body as string, 'relay_attempts_total') : null,
        landed: metrics
          ? metricValue(metrics.body as string, 'relay_tx_transitions_total\\{state="landed"\\}')
          : null,
        cpu: {
          sidecar: await cpuSeconds(sidecarPid),
          agent: await cpuSeconds(agent?.pid),
          harness: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
        },
      });
    };
    await sample();
    const sampler = setInterval(() => void sample().catch(() => undefined), SAMPLE_MS);
    let offered: { sent: number; skipped: number };
    try {
      offered = await openLoop({
        client,
        factory,
        ratePerSecond: RATE,
        durationMs: MINUTES * 60_000,
        maxInFlight: MAX_IN_FLIGHT,
        onResult: (result) => {
          results.push(result);
          if (result.status === 202 && result.txId) {
            accepted.set(result.txId, {
              sentAt: result.sentAt,
              latencyMs: result.latencyMs,
              signature: result.signatures[0] ?? '',
            });
          }
        },
      });
    } finally {
      clearInterval(sampler);
    }
    const loadMs = performance.now() - start;
    await sample();

    // Drain: every accepted transaction must reach a terminal state. The stream says so for almost all; anything it
    // did not report is asked for directly.
    const drainStart = performance.now();
    await waitUntil(
      () => [...accepted.keys()].every((id) => terminal.has(id)),
      DRAIN_MS,
      'every accepted transaction to reach a terminal state',
    ).catch(() => undefined);
    const drainMs = performance.now() - drainStart;
    let terminalViaPoll = 0;
    const lost: string[] = [];
    const stuck: Array<[string, string]> = [];
    for (const id of accepted.keys()) {
      if (terminal.has(id)) continue;
      const answer = await get(url, `/tx/${id}`);
      if (answer.status === 404) lost.push(id);
      else if (TERMINAL.has(answer.body.state)) {
        terminalViaPoll++;
        terminal.set(id, { state: answer.body.state, failure: answer.body.failure, atMs: NaN });
      } else stuck.push([id, answer.body.state]);
    }

    // The chain agrees: a finalized transaction's signature is on chain without error.
    const notOnChain: string[] = [];
    const byState: Record<string, number> = {};
    const failures: Record<string, number> = {};
    const toFinalized: number[] = [];
    for (const [id, info] of accepted) {
      const end = terminal.get(id);
      if (!end) continue;
      byState[end.state] = (byState[end.state] ?? 0) + 1;
      if (end.failure) failures[end.failure] = (failures[end.failure] ?? 0) + 1;
      if (end.state === 'finalized') {
        const status = stack.simnet.cluster.signatureStatus(info.signature);
        if (!status || status.err !== null) notOnChain.push(id);
        if (!Number.isNaN(end.atMs)) toFinalized.push(end.atMs - info.sentAt);
      }
    }

    const metricsText = (await get(url, '/metrics')).body as string;
    const droppedReaders = metricValue(metricsText, 'relay_sse_slow_clients_dropped');

    // Per minute: offered and accepted enqueues, enqueue latency, RSS.
    const minutes = Math.ceil(loadMs / 60_000);
    const perMinute = Array.from({ length: minutes }, (_, m) => {
      const inMinute = results.filter(
        (r) => r.sentAt - start >= m * 60_000 && r.sentAt - start < (m + 1) * 60_000,
      );
      const latencies = inMinute.filter((r) => r.status === 202).map((r) => r.latencyMs);
      const rss = samples.filter((s) => s.atMs >= m * 60_000 && s.atMs < (m + 1) * 60_000);
      const finals = [...accepted.entries()]
        .filter(([, a]) => a.sentAt - start >= m * 60_000 && a.sentAt - start < (m + 1) * 60_000)
        .map(([id, a]) => {
          const end = terminal.get(id);
          return end?.state === 'finalized' && !Number.isNaN(end.atMs) ? end.atMs - a.sentAt : null;
        })
        .filter((v): v is number => v !== null);
      return {
        minute: m + 1,
        sent: inMinute.length,
        accepted: latencies.length,
        enqueue_latency_ms: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
        enqueue_to_finalized_ms: { p50: percentile(finals, 50), p99: percentile(finals, 99) },
        sidecar_rss_bytes_mean: Math.round(mean(rss.map((s) => s.sidecarRss))),
        agent_rss_bytes_mean: Math.round(mean(rss.map((s) => s.agentRss ?? 0))),
        queue_depth_max: Math.max(0, ...rss.map((s) => s.queueDepth ?? 0)),
      };
    });

    // RSS flatness over the load: last third against middle third of the samples taken while loading.
    const during = samples.filter((s) => s.atMs <= loadMs);
    const third = Math.floor(during.length / 3);
    const middle = mean(during.slice(third, 2 * third).map((s) => s.sidecarRss));
    const last = mean(during.slice(2 * third).map((s) => s.sidecarRss));
    const latencies = results.filter((r) => r.status === 202).map((r) => r.latencyMs);
    const refusals: Record<string, number> = {};
    for (const r of results)
      if (r.status !== 202) refusals[`${r.status} ${r.code}`] = (refusals[`${r.status} ${r.code}`] ?? 0) + 1;

    writeResults('soak', {
      config: {
        minutes: MINUTES,
        rate_per_s: RATE,
        slot_ms: SLOT_MS,
        simnet_bundles_per_slot: BUNDLES_PER_SLOT,
        decision_mode: 'reflex',
        transactions_per_enqueue: 1,
        stalled_sse_readers: STALLED,
        max_in_flight: MAX_IN_FLIGHT,
        auction: 'seeded (calm / busy / spike)',
        sidecar_node_flags: SIDECAR_NODE_FLAGS,
      },
      load_duration_ms: Math.round(loadMs),
      drain_duration_ms: Math.round(drainMs),
      offered: offered.sent + offered.skipped,
      sent: offered.sent,
      skipped_at_in_flight_cap: offered.skipped,
      achieved_rate_per_s: Number(((results.length / loadMs) * 1000).toFixed(1)),
      accepted: accepted.size,
      refusals,
      terminal_by_state: byState,
      failure_classes: failures,
      terminal_via_poll: terminalViaPoll,
      lost: lost.length,
      stuck: stuck.length,
      finalized_not_on_chain: notOnChain.length,
      enqueue_latency_ms: {
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        max: percentile(latencies, 100),
      },
      enqueue_to_finalized_ms: {
        p50: percentile(toFinalized, 50),
        p99: percentile(toFinalized, 99),
        max: percentile(toFinalized, 100),
      },
      cpu_seconds_during_load: cpuDuring(samples[0]!, during.at(-1)!, loadMs),
      sidecar_rss: {
        first_bytes: samples[0]?.sidecarRss,
        middle_third_mean_bytes: Math.round(middle),
        last_third_mean_bytes: Math.round(last),
        last_over_middle: Number((last / middle).toFixed(3)),
        end_bytes: samples.at(-1)?.sidecarRss,
      },
      stalled_readers_dropped: droppedReaders,
      reading_client: { events: reader.events, bytes: reader.bytes, ended: reader.ended },
      agent_output_lines: agentLineCount,
      per_minute: perMinute,
      samples,
    });
    reader.close();
    client.close();

    if (lost.length + stuck.length > 0) console.error('agent output (last lines):\n' + agentLines.join('\n'));
    expect(Object.keys(refusals).filter((k) => k.startsWith('-1') || k.startsWith('5'))).toEqual([]);
    expect(lost).toEqual([]);
    expect(stuck).toEqual([]);
    expect(notOnChain).toEqual([]);
    expect(reader.ended).toBe(false);
    // A stalled reader is dropped once ~4 MB of kernel buffers and its 4 MiB limit are full: judged when the
    // run published comfortably more than that (a full run publishes hundreds of MB).
    if (reader.bytes > 16 * 1024 * 1024) expect(droppedReaders).toBe(STALLED);
    else expect(droppedReaders).toBeLessThanOrEqual(STALLED);
    // Flatness needs a steady state: the first third (warm-up, heap growth to its working size) is left out,
    // and runs shorter than 3 minutes (validation runs) are all warm-up, so there it is recorded, not judged.
    expect(during.length).toBeGreaterThanOrEqual(3);
    if (MINUTES >= 3) expect(last).toBeLessThanOrEqual(middle * 1.25);
    // Relay kept up: the offered rate went out (none skipped at the generator's in-flight cap), enqueues answered
    // promptly, and what was accepted landed (the seeded auction's spikes may cost a few to expiry, not more).
    // Judged for the idle machine the soak is meant for; a loaded one shows here first.
    expect(offered.skipped).toBe(0);
    expect((results.length / loadMs) * 1000).toBeGreaterThanOrEqual(RATE * 0.95);
    expect(percentile(latencies, 99) ?? Infinity).toBeLessThanOrEqual(SOAK_ENQUEUE_P99_BOUND_MS);
    expect(byState.finalized ?? 0).toBeGreaterThanOrEqual(accepted.size * 0.95);
  },
  (MINUTES * 60 + DRAIN_MS / 1000 + 180) * 1000,
);
