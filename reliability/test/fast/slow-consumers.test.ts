import { rename, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { SseReader, get, waitUntil, type Stack } from '@solrelay/testkit';
import { percentile, writeResults } from '../../src/security-results';
import { deliveryLags, stampReceipts } from '../../src/security-sse';
import { processMemory, startProcessStack, type ProcessSidecar } from '../../src/security-stack';
import { EnqueueClient, closedLoop, metricValue, type EnqueueResult } from '../../src/soak-load';
import { openStalledClient } from '../../src/soak-sse';
import { TransferFactory } from '../../src/soak-wire';

/**
 * Issue #10, "Slow consumers": SSE clients that never read must not stall the others nor grow the sidecar's memory
 * without bound; past a buffer limit they are dropped and counted (relay_sse_slow_clients_dropped).
 *
 * The built sidecar process runs with RELAY_SSE_BUFFER_BYTES=256 KiB so the limit is reached in seconds. Even so,
 * each stalled connection first soaks up ~4 MB in kernel socket buffers (on loopback the server's send buffer
 * alone grows to ~2.5 MB; node cannot shrink a TCP client's receive buffer), so several MB of events must flow
 * before the sidecar's own buffer fills. Enqueue load alone (4-transaction bundles, bypass mode) takes ~40 s on
 * this machine to publish that much, so an operator's edits add volume: a refused policy file is published as
 * `policy_changed` with one problem per bad key (~40 KB an event, under the limit; one at a time). The enqueue load runs
 * throughout, and the reading client must see every one of its transactions and every event id.
 *
 * "Not stalled" is judged on time too: the reading client's delivery lag (its receipt time minus the `ts` the
 * sidecar stamped when it published) and the enqueue latency while the stalled clients are attached are compared
 * with a warm-up with the reader alone. "Bounded" is judged on the hub's own accounting: the unsent bytes it held
 * for any one client never pass the limit (relay_sse_client_buffered_bytes_peak), and for all of them together never
 * pass the limit times the clients (relay_sse_buffered_bytes_peak); what the kernel's socket buffers hold on top is
 * bounded by the kernel, not by relay. RSS is reported, not asserted: it moves with
 * the load (a control run with the limit at 1 GiB, so no drop, grew about as much, because a frame published alone
 * is one string shared by every socket's queue).
 */

const STALLED = 60;
const BUFFER_LIMIT = 256 * 1024;
const AFTER_DROP_ENQUEUES = 200;
const POST_DROP_BYTES = 8 * 1024 * 1024;
/** What a client's backlog may hold beyond the limit: the chunked-encoding framing of the last write. */
const FRAMING_SLACK = 64;
/** Stalled-phase p99 (reader lag, enqueue latency) may be this many times the warm-up's, or LAG_FLOOR_MS. */
const LAG_FACTOR = 10;
const LAG_FLOOR_MS = 1000;

const POLICY = { 'rate-limit': 1_000_000, 'max-queue': 1_000_000 };

let stack: Stack<ProcessSidecar>;
const stalled: Socket[] = [];

beforeAll(async () => {
  stack = await startProcessStack({
    env: {
      BYPASS_AGENT: '1',
      BUNDLE_ENGINE_RPS: '2000',
      RELAY_SSE_BUFFER_BYTES: String(BUFFER_LIMIT),
    },
    policy: POLICY,
  });
}, 60_000);

afterAll(async () => {
  for (const socket of stalled) socket.destroy();
  await stack?.close();
});

const round = (ms: number | null) => (ms === null ? null : Math.round(ms));

async function metrics(): Promise<string> {
  return (await get(stack.sidecar.url, '/metrics')).body as string;
}

test('stalled SSE readers are dropped and counted; a reading client gets every event on time; buffers stay bounded', async () => {
  const url = stack.sidecar.url;
  const pid = stack.sidecar.child.pid as number;
  await waitUntil(async () => (await get(url, '/tip')).body.source !== 'none', 15_000, 'tip data');
  const factory = new TransferFactory(
    stack.payer,
    () => stack.simnet.cluster.latestBlockhash('confirmed').blockhash,
  );
  const client = new EnqueueClient(url);
  const started = performance.now();
  try {
    // The reading client is attached from the start, so the warm-up gives its lag without stalled readers.
    const reader = await SseReader.open(`${url}/internal/events`);
    expect(reader.status).toBe(200);
    const stamps = stampReceipts(reader);
    const warmFrom = Date.now();
    let warm = 0;
    const warmResults = await closedLoop({
      client,
      factory,
      transactionsPerEnqueue: 4,
      concurrency: 8,
      stop: () => warm++ >= 100,
    });
    expect(warmResults.filter((r) => r.status !== 202)).toEqual([]);
    const warmIds = warmResults.map((r) => r.txId as string);
    await reader.waitFor((r) => {
      const seen = new Set(r.events('tx_enqueued').map((m) => JSON.parse(m.data).tx_id as string));
      return warmIds.every((id) => seen.has(id));
    }, 30_000);
    const warmTo = Date.now();
    const baseline = await processMemory(pid);

    for (let i = 0; i < STALLED; i++) stalled.push(await openStalledClient(url));
    await waitUntil(
      async () => metricValue(await metrics(), 'relay_sse_clients') === STALLED + 1,
      10_000,
      'every SSE client attached',
    );
    const attachedAt = Date.now();
    const attachedPerf = performance.now();
    expect(metricValue(await metrics(), 'relay_sse_slow_clients_dropped')).toBe(0);

    // Load until every stalled reader is dropped, then as much again to show the reader still gets everything.
    let dropped = 0;
    // When the last stalled client was dropped (performance.now and wall clock), as the /metrics poll saw it.
    const drop: { at: number | null; wall: number | null } = { at: null, wall: null };
    let afterDrop = 0;
    const poll = setInterval(() => {
      void metrics().then(
        (text) => {
          dropped = metricValue(text, 'relay_sse_slow_clients_dropped') ?? 0;
          if (dropped >= STALLED && drop.at === null) {
            drop.at = performance.now();
            drop.wall = Date.now();
          }
        },
        () => undefined,
      );
    }, 250);
    const deadline = performance.now() + 60_000;
    let policyEdits = 0;
    let bytesAfterDrop = 0;
    const churnPolicy = async () => {
      // Until every stalled reader is dropped, then POST_DROP_BYTES more: had a dropped client kept anything,
      // that volume times STALLED would show in the sidecar's memory.
      while (performance.now() < deadline && (drop.at === null || bytesAfterDrop < POST_DROP_BYTES)) {
        const n = ++policyEdits;
        const bad = Object.fromEntries(
          Array.from({ length: 150 }, (_, k) => [`edit-${n}-unknown-key-${k}-${'x'.repeat(80)}`, k]),
        );
        // As an editor saves: a whole new file renamed over the old one.
        const path = stack.env.RELAY_POLICY_FILE as string;
        await writeFile(`${path}.tmp`, JSON.stringify({ ...POLICY, ...bad }));
        await rename(`${path}.tmp`, path);
        await reader.waitFor((r) => r.events('policy_changed').length >= n, 10_000);
        if (drop.at !== null) bytesAfterDrop += reader.events('policy_changed').at(-1)!.data.length;
      }
    };
    let results: EnqueueResult[];
    try {
      [results] = await Promise.all([
        closedLoop({
          client,
          factory,
          transactionsPerEnqueue: 4,
          concurrency: 8,
          stop: () =>
            performance.now() > deadline || (drop.at !== null && afterDrop++ >= AFTER_DROP_ENQUEUES),
        }),
        churnPolicy(),
      ]);
    } finally {
      clearInterval(poll);
    }
    const policyEvents = reader.events('policy_changed');
    expect(policyEvents.length).toBeGreaterThanOrEqual(policyEdits);
    expect(policyEvents.every((m) => JSON.parse(m.data).ok === false)).toBe(true);
    const accepted = results.filter((r) => r.status === 202).map((r) => r.txId as string);
    expect(results.filter((r) => r.status !== 202)).toEqual([]);
    expect(drop.at).not.toBeNull();
    const droppedAt = drop.at as number;
    const droppedAtWall = drop.wall as number;

    // The reading client saw every accepted transaction, and every event id without a gap.
    await reader.waitFor((r) => {
      const seen = new Set(r.events('tx_enqueued').map((m) => JSON.parse(m.data).tx_id as string));
      return accepted.every((id) => seen.has(id));
    }, 30_000);
    expect(reader.ended).toBe(false);
    const seqs = reader.messages.filter((m) => m.id).map((m) => Number(m.id!.split('-')[1]));
    const gaps = seqs.filter((seq, i) => i > 0 && seq !== seqs[i - 1]! + 1);
    expect(gaps).toEqual([]);
    const bytesRead = reader.messages.reduce((sum, m) => sum + m.data.length + m.event.length + 30, 0);

    // Timeliness: the reader's lag and the enqueue latency with the stalled clients attached (until the last one
    // was dropped) against the warm-up with the reader alone.
    const warmLags = deliveryLags(reader, stamps, warmFrom, warmTo).map((l) => l.lagMs);
    const stalledLags = deliveryLags(reader, stamps, attachedAt, droppedAtWall).map((l) => l.lagMs);
    const warmLagP99 = percentile(warmLags, 99);
    const stalledLagP99 = percentile(stalledLags, 99);
    const lagBoundMs = Math.max(LAG_FACTOR * (warmLagP99 ?? 0), LAG_FLOOR_MS);
    const warmEnqueueP99 = percentile(
      warmResults.map((r) => r.latencyMs),
      99,
    );
    const stalledEnqueues = results.filter((r) => r.sentAt >= attachedPerf && r.sentAt < droppedAt);
    const stalledEnqueueP99 = percentile(
      stalledEnqueues.map((r) => r.latencyMs),
      99,
    );
    const enqueueBoundMs = Math.max(LAG_FACTOR * (warmEnqueueP99 ?? 0), LAG_FLOOR_MS);

    // Boundedness, from the hub's own accounting.
    const text = await metrics();
    const peakClient = metricValue(text, 'relay_sse_client_buffered_bytes_peak');
    const peakTotal = metricValue(text, 'relay_sse_buffered_bytes_peak');
    const bufferedEnd = metricValue(text, 'relay_sse_buffered_bytes');
    const clientBound = BUFFER_LIMIT + FRAMING_SLACK;
    const totalBound = clientBound * (STALLED + 1);
    const droppedCount = metricValue(text, 'relay_sse_slow_clients_dropped');
    const clientsLeft = metricValue(text, 'relay_sse_clients');
    const memory = await processMemory(pid);
    reader.close();

    writeResults('slow-consumers', {
      stalled_clients: STALLED,
      reading_clients: 1,
      sse_buffer_limit_bytes: BUFFER_LIMIT,
      enqueues: results.length + warmResults.length,
      transactions: (results.length + warmResults.length) * 4,
      events_received_by_reader: reader.messages.length,
      event_id_gaps: gaps.length,
      bytes_received_by_reader: bytesRead,
      dropped: droppedCount,
      enqueues_after_all_dropped: Math.max(0, afterDrop - 1),
      policy_edits_published: policyEdits,
      bytes_published_after_all_dropped: bytesAfterDrop,
      stalled_phase_ms: droppedAtWall - attachedAt,
      reader_lag_warmup: {
        events: warmLags.length,
        p50_ms: percentile(warmLags, 50),
        p99_ms: warmLagP99,
      },
      reader_lag_with_stalled_clients: {
        events: stalledLags.length,
        p50_ms: percentile(stalledLags, 50),
        p99_ms: stalledLagP99,
        max_ms: stalledLags.length ? Math.max(...stalledLags) : null,
        bound_ms: lagBoundMs,
      },
      enqueue_latency_warmup: { enqueues: warmResults.length, p99_ms: round(warmEnqueueP99) },
      enqueue_latency_with_stalled_clients: {
        enqueues: stalledEnqueues.length,
        p99_ms: round(stalledEnqueueP99),
        bound_ms: round(enqueueBoundMs),
      },
      hub_client_buffered_bytes_peak: peakClient,
      hub_client_buffered_bytes_bound: clientBound,
      hub_buffered_bytes_peak: peakTotal,
      hub_buffered_bytes_bound: totalBound,
      hub_buffered_bytes_end: bufferedEnd,
      heap_used_end_bytes: metricValue(text, 'relay_process_nodejs_heap_size_used_bytes'),
      rss_baseline_bytes: baseline.rss,
      rss_peak_bytes: memory.peak,
      rss_end_bytes: memory.rss,
      rss_peak_growth_bytes: memory.peak - baseline.rss,
      duration_ms: Math.round(performance.now() - started),
    });

    expect(droppedCount).toBe(STALLED);
    expect(clientsLeft).toBe(1); // only the reading client is left
    // Enough samples on both sides for a p99 to mean something.
    expect(warmLags.length).toBeGreaterThanOrEqual(100);
    expect(stalledLags.length).toBeGreaterThanOrEqual(100);
    expect(stalledEnqueues.length).toBeGreaterThanOrEqual(50);
    expect(stalledLagP99).toBeLessThanOrEqual(lagBoundMs);
    expect(stalledEnqueueP99).toBeLessThanOrEqual(enqueueBoundMs);
    // The stalled clients did fill their buffers (so the bound below was exercised), and no client's backlog, nor
    // all of them together, ever passed the limit.
    expect(peakClient).toBeGreaterThan(BUFFER_LIMIT / 8);
    expect(peakClient).toBeLessThanOrEqual(clientBound);
    expect(peakTotal).toBeGreaterThanOrEqual(peakClient!);
    expect(peakTotal).toBeLessThanOrEqual(totalBound);
    expect(bufferedEnd).toBeLessThanOrEqual(clientBound); // the reader's backlog alone
  } finally {
    client.close();
  }
}, 120_000);
