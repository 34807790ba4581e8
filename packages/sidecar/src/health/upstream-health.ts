import type { Clock } from '../runtime/clock';
import type { Metrics } from '../metrics';

export type UpstreamName = 'stream' | 'rpc' | 'block_engine' | 'tip_floor';

export interface Health {
  ok: boolean;
  detail: string | null;
  last_ok_at: number | null;
}

/**
 * What the sidecar knows of each upstream, and when slots last moved. A stream can stay connected and say nothing,
 * and a whole cluster can stall: so the stream counts as healthy only while it brings slots, and readiness also
 * asks whether slots moved from any source.
 */
export class UpstreamHealth {
  private readonly health: Record<UpstreamName, Health> = {
    stream: { ok: false, detail: 'connecting', last_ok_at: null },
    rpc: { ok: false, detail: 'not contacted yet', last_ok_at: null },
    block_engine: { ok: false, detail: 'not contacted yet', last_ok_at: null },
    tip_floor: { ok: false, detail: 'not fetched yet', last_ok_at: null },
  };
  private lastSlotAt: number;
  private lastStreamSlotAt: number;

  constructor(
    private readonly clock: Clock,
    private readonly metrics: Metrics,
    /** No new slot for this long: slots have stalled. */
    private readonly slotStallMs: number,
  ) {
    this.lastSlotAt = clock.now();
    this.lastStreamSlotAt = clock.now();
  }

  mark(name: UpstreamName, ok: boolean, detail: string | null): void {
    this.health[name] = { ok, detail, last_ok_at: ok ? this.clock.now() : this.health[name].last_ok_at };
    this.metrics.upstreamUp.set({ upstream: name }, ok ? 1 : 0);
  }

  get(name: Exclude<UpstreamName, 'stream'>): Health {
    return { ...this.health[name] };
  }

  /** A slot arrived; `advanced` when it is higher than any seen before. */
  slotSeen(fromStream: boolean, advanced: boolean): void {
    const now = this.clock.now();
    if (fromStream) this.lastStreamSlotAt = now;
    if (advanced) this.lastSlotAt = now;
  }

  /** The stream's health: connected is not enough, it must also be bringing slots. */
  stream(): Health {
    const silent = this.silentFor(this.lastStreamSlotAt);
    const stream = this.health.stream;
    return stream.ok && silent
      ? { ...stream, ok: false, detail: `connected, but no new slot for ${Math.round(silent / 1000)} s` }
      : { ...stream };
  }

  /** How long no slot has moved from any source, when that is longer than the stall threshold; else 0. */
  slotsStalledMs(): number {
    return this.silentFor(this.lastSlotAt);
  }

  private silentFor(since: number): number {
    const ms = this.clock.now() - since;
    return ms > this.slotStallMs ? ms : 0;
  }
}
