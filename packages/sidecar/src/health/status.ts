import type {
  FleetStatus,
  LeaderBuffer,
  ReadyResponse,
  StatusResponse,
  TipOracle,
  TipperStatus,
  WebhookEndpointStatus,
} from '@solrelay/core';
import type { PolicyStore } from '../policy/policy-store';
import type { Relay } from '../relay';
import type { TxStore } from '../store/store';
import type { Clock } from '../runtime/clock';
import type { UpstreamHealth } from './upstream-health';

export interface StatusSources {
  relay: Relay;
  leaders: LeaderBuffer;
  oracle: TipOracle;
  health: UpstreamHealth;
  policy: PolicyStore;
  store: Pick<TxStore, 'healthy' | 'problem'>;
  /** What readiness calls the store when its writes fail (default `journal`). */
  storeName?: string;
  clock: Clock;
  /** Each webhook endpoint's delivery state (empty without webhooks). */
  webhooks: () => WebhookEndpointStatus[];
  /** This host's session and its database's sessions (PostgreSQL); absent on the local journal. */
  fleet?: () => Promise<FleetStatus>;
}

/** `GET /status`: the chain position, tip floor, decider, queue, upstreams, tippers and the hour's spend. */
export async function statusOf(s: StatusSources): Promise<StatusResponse> {
  const r = s.relay;
  const [counts, spent, capacity, fleet] = await Promise.all([
    r.counts(),
    r.spentThisHour(),
    r.capacity(),
    s.fleet?.() ?? null,
  ]);
  const view = s.leaders.leaderView(r.slot);
  const floor = s.oracle.view(s.clock.now());
  const agent = r.agent;
  const tippers = r.tipperStatus();
  const first = tippers[0] as TipperStatus;
  return {
    slot: r.slot,
    leader: view.leader,
    bundle_engine_leader: view.bundle_engine[0] ?? null,
    next_bundle_engine_leader_slot: s.leaders.nextBundleEngineSlot(r.slot, 64),
    tip: { p50: floor.p50, p75: floor.p75 },
    stale: floor.stale,
    decision_mode: r.decisionMode,
    bypass: r.bypass,
    queue: counts.active,
    agent: { connected: agent !== null, model: agent?.model ?? null, provider: agent?.provider ?? null },
    upstream: {
      stream: s.health.stream(),
      rpc: s.health.get('rpc'),
      block_engine: {
        ...s.health.get('block_engine'),
        ...(r.lastErrors.engine ? { ok: false, detail: r.lastErrors.engine } : {}),
      },
      tip_floor: s.health.get('tip_floor'),
    },
    tipper: { pubkey: first.pubkey, balance_lamports: first.balance_lamports },
    tippers,
    spend: { window_lamports: spent, limit_lamports: s.policy.current['spend-limit'] },
    paused_reason: r.paused,
    block_engine_regions: r.engineRegions(),
    capacity,
    webhooks: s.webhooks(),
    fleet,
    landing: r.landing(),
  };
}

/** `GET /readyz`: ready only when every input a decision needs is live; otherwise each reason, in words. */
export function readinessOf(s: StatusSources): ReadyResponse {
  const r = s.relay;
  const reasons: string[] = [];
  const stream = s.health.stream();
  if (!stream.ok) reasons.push(`stream: ${stream.detail ?? 'down'}`);
  const stalled = s.health.slotsStalledMs();
  if (stalled) reasons.push(`slots: no new slot for ${Math.round(stalled / 1000)} s (stream and RPC)`);
  const rpc = s.health.get('rpc');
  if (!rpc.ok) reasons.push(`rpc: ${rpc.detail ?? 'down'}`);
  const tip = s.oracle.view(s.clock.now());
  if (tip.source === 'none') reasons.push('tip data: none yet');
  else if (tip.stale)
    reasons.push(
      `tip data: stale (${Math.round((tip.age_ms ?? 0) / 1000)} s old; tip floor: ${s.health.get('tip_floor').detail ?? 'ok'})`,
    );
  if (r.lastErrors.engine) reasons.push(`block engine: ${r.lastErrors.engine}`);
  if (r.paused) reasons.push(r.paused);
  if (!s.store.healthy) reasons.push(`${s.storeName ?? 'journal'}: ${s.store.problem ?? 'writes failing'}`);
  if (r.tipsHeld) reasons.push(r.tipsHeld);
  const consensus = r.consensus();
  if (consensus.holdSends)
    reasons.push(
      `consensus: migration at slot ${consensus.migrationSlot} (blocks past it carry no user transactions): bundles held until Alpenglow finalizes`,
    );
  if (!r.bypass && !r.agent && !r.fallbackActive)
    reasons.push('no decider: no agent connected (and the fallback grace period has not passed)');
  return { ready: reasons.length === 0, reasons };
}
