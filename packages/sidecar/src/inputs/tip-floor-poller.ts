import { parseJitoTipFloorResponse, type TipOracle } from '@solrelay/core';
import type { EventHub } from '../events/hub';
import type { UpstreamHealth } from '../health/upstream-health';
import type { Clock } from '../runtime/clock';

/** A tip-floor sample whose own `time` is older than this is frozen upstream data (Jito's REST answer is live). */
const TIP_FLOOR_MAX_AGE_MS = 120_000;

/** The `time` of the newest sample of a Jito tip-floor answer, or null when it carries none. */
export function tipFloorSampleTime(json: unknown): number | null {
  const list: unknown[] = Array.isArray(json) ? json : [json];
  const last = list[list.length - 1] as { time?: unknown } | null | undefined;
  if (!last || typeof last.time !== 'string') return null;
  const at = Date.parse(last.time);
  return Number.isFinite(at) ? at : null;
}

/** One read of Jito's tip-floor REST endpoint into the oracle; frozen or failing answers only mark health. */
export async function pollTipFloor(deps: {
  url: string;
  oracle: TipOracle;
  health: UpstreamHealth;
  hub: EventHub;
  clock: Clock;
  /** The fetch to read it with (bound to RELAY_ENGINE_LOCAL_ADDRESS when a block engine serves it); default global. */
  fetch?: typeof fetch;
}): Promise<void> {
  const { oracle, health, hub, clock } = deps;
  try {
    const response = await (deps.fetch ?? fetch)(deps.url, { signal: AbortSignal.timeout(5000) });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const json: unknown = await response.json();
    const floor = parseJitoTipFloorResponse(json);
    const sampledAt = tipFloorSampleTime(json);
    const now = clock.now();
    if (sampledAt !== null && now - sampledAt > TIP_FLOOR_MAX_AGE_MS) {
      // Frozen upstream data is not taken in: the floor relay holds ages out into `stale` (unless the tips relay
      // sees land keep it fresh), and /status names the upstream.
      const age = Math.round((now - sampledAt) / 1000);
      health.mark(
        'tip_floor',
        false,
        `stale: the newest sample is ${age} s old (${new Date(sampledAt).toISOString()})`,
      );
      return;
    }
    oracle.ingestTipFloor(floor, now);
    health.mark('tip_floor', true, null);
    hub.publish('tip_update', { ...oracle.view(now), ts: now });
  } catch (error) {
    health.mark('tip_floor', false, (error as Error).message);
  }
}
