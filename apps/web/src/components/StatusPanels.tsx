import { useState } from 'react';
import type {
  BlockEngineRegionStatus,
  ContentionLanding,
  DecisionMode,
  LandingStat,
  UpstreamHealth,
  WebhookEndpointStatus,
} from '@solrelay/core';
import { formatAgo, formatInteger, formatLamportsCompact, formatSol } from '../format';
import type { DashboardState, DashboardStore } from '../store';
import { Dot, Id, Panel, type Tone } from './common';

export function SlotPanel({ state }: { state: DashboardState }) {
  const slot = state.slot;
  const beTone: Tone =
    slot?.bundle_engine_leader === true ? 'good' : slot?.bundle_engine_leader === false ? 'idle' : 'warn';
  const beText =
    slot?.bundle_engine_leader === true
      ? 'bundle engine'
      : slot?.bundle_engine_leader === false
        ? 'no bundle engine'
        : 'bundle engine unknown';
  const nextBe = slot?.next_bundle_engine_slot ?? null;
  return (
    <Panel title="Slot" className="area-slot" testId="panel-slot">
      <div className="slot-number" data-testid="slot" data-slot={slot?.slot ?? ''}>
        {formatInteger(slot?.slot)}
      </div>
      <dl className="kv">
        <dt>leader</dt>
        <dd data-testid="leader">{slot?.leader ? <Id value={slot.leader} /> : '—'}</dd>
        <dt>engine</dt>
        <dd data-testid="bundle-engine">
          <Dot tone={beTone} label={beText} /> {beText}
        </dd>
        <dt>next BE slot</dt>
        <dd>
          {nextBe === null
            ? '—'
            : slot && nextBe <= slot.slot
              ? 'now'
              : `${formatInteger(nextBe)} (in ${nextBe - (slot?.slot ?? nextBe)})`}
        </dd>
      </dl>
    </Panel>
  );
}

const UPSTREAM_LABELS: Array<[keyof NonNullable<DashboardState['status']>['upstream'], string]> = [
  ['stream', 'geyser stream'],
  ['rpc', 'solana rpc'],
  ['block_engine', 'block engine'],
  ['tip_floor', 'tip floor'],
];

function HealthRow({ name, health, now }: { name: string; health: UpstreamHealth; now: number }) {
  return (
    <li className="health-row" data-testid={`health-${name.replace(/\s/g, '-')}`}>
      <Dot tone={health.ok ? 'good' : 'bad'} label={health.ok ? 'ok' : 'down'} />
      <span className="health-name">{name}</span>
      <span className={`health-detail ${health.ok ? '' : 'text-bad'}`}>
        {health.ok ? 'ok' : 'down'}
        {health.detail ? ` · ${health.detail}` : ''}
        {!health.ok ? ` · last ok ${formatAgo(health.last_ok_at, now)}` : ''}
      </span>
    </li>
  );
}

export function HealthPanel({ state, now }: { state: DashboardState; now: number }) {
  const status = state.status;
  const connection = state.connection?.state ?? 'idle';
  const connectionTone: Tone =
    connection === 'open' ? 'good' : connection === 'reconnecting' ? 'bad' : 'warn';
  return (
    <Panel title="Health" className="area-health" testId="panel-health">
      <ul className="health-list">
        <li className="health-row" data-testid="health-events">
          <Dot tone={connectionTone} label={connection} />
          <span className="health-name">event stream</span>
          <span className="health-detail">
            {connection}
            {connection === 'reconnecting' && state.connection?.delay_ms != null
              ? ` · retry in ${state.connection.delay_ms} ms`
              : ''}
          </span>
        </li>
        {status
          ? UPSTREAM_LABELS.map(([key, label]) => (
              <HealthRow key={key} name={label} health={status.upstream[key]} now={now} />
            ))
          : null}
        {(status ? (status.tippers ?? [{ ...status.tipper, held_reason: null }]) : []).map((tipper) => (
          <TipperRow
            key={tipper.pubkey}
            tipper={tipper}
            waiting={status?.paused_reason ?? null}
            pool={(status?.tippers?.length ?? 1) > 1}
          />
        ))}
        {status?.spend ? <SpendRow spend={status.spend} /> : null}
        {status?.capacity ? <CapacityRow capacity={status.capacity} /> : null}
        {(status?.block_engine_regions ?? []).map((region) => (
          <RegionRow
            key={region.url}
            region={region}
            landing={status?.landing?.by_region.find((r) => r.region === region.region) ?? null}
          />
        ))}
        {(status?.landing?.by_contention ?? []).map((row) => (
          <ContentionRow key={row.contention} row={row} />
        ))}
        {(status?.webhooks ?? []).map((webhook, index) => (
          <WebhookRow key={webhook.url} index={index} webhook={webhook} now={now} />
        ))}
      </ul>
      {state.pollError ? <p className="text-bad small">last poll failed: {state.pollError}</p> : null}
    </Panel>
  );
}

export function ModePanel({
  state,
  store,
  now,
}: {
  state: DashboardState;
  store: DashboardStore;
  now: number;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const mode = state.mode;
  const status = state.status;
  const next: DecisionMode = mode === 'cortex' ? 'reflex' : 'cortex';
  const agentConnected = status?.agent.connected ?? false;
  return (
    <Panel title="Decision" className="area-mode" testId="panel-mode">
      <div className="mode-row">
        <span className={`mode-name ${mode ?? ''}`} data-testid="mode">
          {mode ?? '—'}
        </span>
        <button
          type="button"
          role="switch"
          aria-checked={mode === 'cortex'}
          aria-label="decision mode: reflex or cortex"
          className={`switch ${mode === 'cortex' ? 'switch-on' : ''}`}
          data-testid="mode-switch"
          disabled={busy || mode === null}
          title={`switch to ${next}`}
          onClick={() => {
            setBusy(true);
            setError(null);
            store
              .setMode(next)
              .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)))
              .finally(() => setBusy(false));
          }}
        >
          <span className={mode === 'reflex' ? 'switch-side active' : 'switch-side'}>reflex</span>
          <span className={mode === 'cortex' ? 'switch-side active' : 'switch-side'}>cortex</span>
        </button>
      </div>
      {status?.bypass ? (
        <p className="badge-line">
          <span className="tag tag-warn">bypass</span> every enqueue is submitted at once at a fixed tip
        </p>
      ) : null}
      <dl className="kv" data-testid="agent">
        <dt>agent</dt>
        <dd>
          <Dot tone={agentConnected ? 'good' : 'idle'} label={agentConnected ? 'connected' : 'absent'} />{' '}
          {agentConnected ? 'connected' : 'absent'}
          {agentConnected && state.agent
            ? ` · ${formatAgo(state.agent.connected_since, now).replace(' ago', '')}`
            : ''}
        </dd>
        <dt>model</dt>
        <dd className="mono">{status?.agent.model ?? '—'}</dd>
        <dt>provider</dt>
        <dd className="mono">{status?.agent.provider ?? '—'}</dd>
      </dl>
      {error ? <p className="text-bad small">mode change failed: {error}</p> : null}
    </Panel>
  );
}

const PERCENTILES = ['p25', 'p50', 'p75', 'p95', 'p99', 'ema'] as const;

export function TipNowPanel({ state, now }: { state: DashboardState; now: number }) {
  const tip = state.tip;
  return (
    <Panel
      title="Tip floor (lamports)"
      className="area-tipnow"
      testId="panel-tipnow"
      actions={
        tip ? (
          <span className={tip.stale ? 'tag tag-bad' : 'tag'}>
            {tip.stale ? 'stale' : 'fresh'} · {tip.source}
          </span>
        ) : null
      }
    >
      <div className="tip-grid">
        {PERCENTILES.map((p) => (
          <div key={p} className="tip-cell">
            <span className="tip-label">{p}</span>
            <span className="tip-value" title={tip ? `${formatInteger(tip[p])} lamports` : ''}>
              {formatLamportsCompact(tip?.[p])}
            </span>
          </div>
        ))}
      </div>
      <p className="small muted">
        updated {formatAgo(tip?.updated_at ?? null, now)}
        {state.status ? ` · queue ${state.status.queue}` : ''}
      </p>
    </Panel>
  );
}

/** The rolling hour's tips and fees against `spend-limit`: full means submits are refused until it frees up. */
/** One webhook endpoint: what it has taken, what it is owed, and why it is failing if it is. */
function WebhookRow({ webhook, index, now }: { webhook: WebhookEndpointStatus; index: number; now: number }) {
  const failing = webhook.consecutive_failures > 0;
  const tone: Tone = failing ? 'bad' : webhook.pending > 100 ? 'warn' : 'good';
  const owed =
    webhook.pending > 0 && webhook.oldest_pending_ms !== null
      ? ` · ${formatInteger(webhook.pending)} owed (oldest ${formatAgo(now - webhook.oldest_pending_ms, now)})`
      : ' · none owed';
  return (
    <li className="health-row" data-testid={`health-webhook-${index}`} title={webhook.url}>
      <Dot tone={tone} label={failing ? 'failing' : 'ok'} />
      <span className="health-name">webhook</span>
      <span className={`health-detail ${failing ? 'text-bad' : ''}`}>
        {formatInteger(webhook.delivered)} delivered{owed}
        {failing ? ` · failing ×${webhook.consecutive_failures}: ${webhook.last_error ?? ''}` : ''}
      </span>
    </li>
  );
}

function SpendRow({ spend }: { spend: { window_lamports: number; limit_lamports: number } }) {
  const { window_lamports: spent, limit_lamports: limit } = spend;
  const tone = limit === 0 ? 'good' : spent >= limit ? 'bad' : spent >= limit * 0.8 ? 'warn' : 'good';
  return (
    <li className="health-row" data-testid="health-spend">
      <Dot tone={tone} label="spend" />
      <span className="health-name">spend, rolling hour</span>
      <span className="health-detail" title={`${formatInteger(spent)} lamports`}>
        {formatSol(spent, 4)}
        {limit > 0 ? ` of ${formatSol(limit, 4)}` : ' (no limit)'}
      </span>
    </li>
  );
}

/** What relay can send a second, what waits to go out and how long that takes, and enqueues refused for it. */
function CapacityRow({ capacity }: { capacity: NonNullable<DashboardState['status']>['capacity'] }) {
  const tone: Tone = capacity.refused_total > 0 ? 'warn' : 'good';
  return (
    <li className="health-row" data-testid="health-capacity">
      <Dot tone={tone} label="capacity" />
      <span className="health-name">send capacity</span>
      <span className="health-detail">
        {formatInteger(capacity.send_rate_per_s)} bundles/s ·{' '}
        {capacity.landed_share === undefined ? '' : `${Math.round(capacity.landed_share * 100)} % landing · `}
        {formatInteger(capacity.waiting)} waiting (~
        {capacity.expected_wait_s} s) · {formatInteger(capacity.refused_total)} refused
      </span>
    </li>
  );
}

/** What the bundles of one region or contention class came to: landed of settled, and tip per landed. */
function landingText(landing: LandingStat): string {
  if (landing.landed_share === null) return `${formatInteger(landing.submitted)} in flight`;
  const share = `${Math.round(landing.landed_share * 100)} %`;
  const cost =
    landing.lamports_per_landed === null
      ? ''
      : ` · ${formatInteger(landing.lamports_per_landed)} lamports/landed`;
  return `${formatInteger(landing.landed)} landed of ${formatInteger(landing.landed + landing.lost)} (${share})${cost}`;
}

/** One regional block engine: what its bundles came to; amber while a 429 or a failure cools it. */
function RegionRow({ region, landing }: { region: BlockEngineRegionStatus; landing: LandingStat | null }) {
  const cooling = region.cooling_ms > 0;
  return (
    <li className="health-row" data-testid={`health-region-${region.region}`}>
      <Dot tone={cooling ? 'warn' : 'good'} label={cooling ? 'cooling' : 'ok'} />
      <span className="health-name">engine {region.region}</span>
      <span className="health-detail" title={region.url}>
        {landing && landing.submitted > 0 ? `${landingText(landing)} · ` : ''}
        {formatInteger(region.accepted)} taken · {formatInteger(region.rejected)} refused ·{' '}
        {formatInteger(region.transport_errors)} transport errors
        {cooling ? ` · cooling ${(region.cooling_ms / 1000).toFixed(1)} s` : ''}
      </span>
    </li>
  );
}

/** Landing and cost of the bundles priced for one contention class (`unpriced`: a tip not priced per CU). */
function ContentionRow({ row }: { row: ContentionLanding }) {
  const share = row.landed_share;
  return (
    <li className="health-row" data-testid={`health-contention-${row.contention}`}>
      <Dot tone={share === null || share >= 0.5 ? 'good' : 'warn'} label={row.contention} />
      <span className="health-name">{row.contention} bundles</span>
      <span className="health-detail">{landingText(row)}</span>
    </li>
  );
}

/** One tipper of the pool: its balance; red while submission waits on it (or it is held), amber before a read. */
function TipperRow({
  tipper,
  waiting,
  pool,
}: {
  tipper: { pubkey: string; balance_lamports: number | null; held_reason: string | null };
  waiting: string | null;
  pool: boolean;
}) {
  const bad = tipper.held_reason !== null || (waiting !== null && waiting.includes(tipper.pubkey));
  return (
    <li className="health-row" data-testid="health-tipper">
      <Dot tone={tipper.balance_lamports === null ? 'warn' : bad ? 'bad' : 'good'} label="tipper" />
      <span className="health-name">{pool ? 'tipper (pool)' : 'tipper'}</span>
      <span className="health-detail" title={tipper.held_reason ?? waiting ?? undefined}>
        <Id value={tipper.pubkey} />{' '}
        <span title={`${formatInteger(tipper.balance_lamports)} lamports`}>
          {formatSol(tipper.balance_lamports, 4)}
        </span>
      </span>
    </li>
  );
}
