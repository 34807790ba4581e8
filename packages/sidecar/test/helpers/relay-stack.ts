import type { Keypair } from '@solana/web3.js';
import {
  drainTo,
  get,
  quietLogger,
  startInProcessStack,
  type SseReader,
  TEST_INTERVALS,
  waitUntil,
  type InProcessStackOptions,
  type Stack,
} from '@solrelay/testkit';
import { configFromEnv } from '../../src/config';
import { startSidecar, type Sidecar, type SidecarOptions } from '../../src/service';

export { quietLogger };

/** Fast poll intervals: the simnet's slots are 60 ms in tests (testkit's `TEST_INTERVALS`). */
export const testIntervals: SidecarOptions['intervals'] = TEST_INTERVALS;

/** testkit's stack with this package's own sidecar, from source, in this process. */
export function startRelayStack(
  options: InProcessStackOptions<SidecarOptions> = {},
): Promise<Stack<Sidecar>> {
  return startInProcessStack({ configFromEnv, startSidecar }, options);
}

/** A counter's value from the sidecar's `/metrics` (0 when the series has not been written yet). */
export async function counterValue(sidecarUrl: string, name: string): Promise<number> {
  const text = (await get(sidecarUrl, '/metrics')).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** Wait until every one of `ids` is finalized. */
export async function waitAllFinalized(
  sidecarUrl: string,
  ids: readonly string[],
  ms: number,
): Promise<void> {
  await waitUntil(
    async () => {
      for (const id of ids) if ((await get(sidecarUrl, `/tx/${id}`)).body.state !== 'finalized') return false;
      return true;
    },
    ms,
    `all ${ids.length} finalized`,
  );
}

/** Rent-exempt minimum of a 0-byte system account (what a tipper must keep). */
export const RENT_EXEMPT_MINIMUM = 890_880;

/** Drain a tipper (the stack's first unless given) on chain until it holds exactly `keep`. */
export async function drainTipper(
  stack: Stack<Sidecar>,
  keep: number,
  tipper: Keypair = stack.tipper,
): Promise<void> {
  await drainTo(stack, tipper, keep);
}

/**
 * A stack whose sidecar decides by bypass at a fixed tip, on 150 ms slots (a user transaction's blockhash then
 * outlives a pause stretched by a loaded machine), once it is ready.
 */
export async function startBypassStack(
  tip: number,
  options: Parameters<typeof startRelayStack>[0] = {},
): Promise<Stack<Sidecar>> {
  const stack = await startRelayStack({
    simnet: { slotMs: 150 },
    ...options,
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(tip), ...options.env },
  });
  await waitUntil(async () => (await get(stack.sidecar.url, '/readyz')).status === 200, 15_000, 'ready');
  return stack;
}

/**
 * A ready stack where packs form: one region taking a bundle a second (rate limit on, relay paced at 1/s), packs of up
 * to four, and the sidecar's own reflex deciding (no agent for 1 s), which prices per requested CU: a light
 * transfer's min-tip leaves room under its rank for riders (a fixed bypass tip has no per-CU bid, so nothing rides
 * under it). The pinned competitor sits at min-tip, so relay's tips compete with the seeded background as usual.
 */
export async function startPackingStack(): Promise<Stack<Sidecar>> {
  const stack = await startRelayStack({
    simnet: { slotMs: 150, rateLimit: true, regions: 1 },
    clearingTip: 1_000,
    env: { RELAY_AGENT_GRACE_S: '1', BUNDLE_ENGINE_RPS: '1', BUNDLE_PACK_MAX: '4' },
  });
  await waitUntil(async () => (await get(stack.sidecar.url, '/readyz')).status === 200, 15_000, 'ready');
  return stack;
}

/**
 * Wait on `events` (the global `/internal/events` stream) until `txId` is finalized; its `tx_status_changed` states,
 * in the order the stream gave them.
 */
export async function statesUntilFinalized(
  events: SseReader,
  txId: string,
  timeoutMs = 30_000,
): Promise<string[]> {
  const mine = () =>
    events
      .events('tx_status_changed')
      .map((m) => JSON.parse(m.data) as { tx_id: string; state: string })
      .filter((d) => d.tx_id === txId);
  await events.waitFor(() => mine().some((d) => d.state === 'finalized'), timeoutMs);
  return mine().map((d) => d.state);
}

/** A series' value from the sidecar's `/metrics` (`name{labels}` as written there); 0 before it is first written. */
export async function metricSeries(url: string, series: string): Promise<number> {
  const text = (await get(url, '/metrics')).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}
