import { useCallback, useEffect, useState, useSyncExternalStore } from 'react';
import { DrillDown } from './components/DrillDown';
import { EventLogPanel } from './components/EventLog';
import { LifecyclePanel } from './components/LifecyclePanel';
import { QueuePanel } from './components/QueuePanel';
import { HealthPanel, ModePanel, SlotPanel, TipNowPanel } from './components/StatusPanels';
import { TipChartPanel } from './components/TipChart';
import { TokenPrompt } from './components/TokenPrompt';
import { Dot } from './components/common';
import type { DashboardState, DashboardStore } from './store';

/** A clock for "ago" labels; one tick a second is plenty. */
function useNow(intervalMs = 1_000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}

function TopBar({ state }: { state: DashboardState }) {
  const connection = state.connection?.state ?? 'idle';
  const live = connection === 'open';
  return (
    <header className="topbar">
      <h1>
        relay <span className="muted">dashboard</span>
      </h1>
      <span className="conn" data-testid="connection" data-state={connection}>
        <Dot tone={live ? 'good' : connection === 'reconnecting' ? 'bad' : 'warn'} label={connection} />
        {live ? 'live' : connection}
        {connection === 'reconnecting' && state.connection?.delay_ms != null
          ? ` (retry in ${Math.round(state.connection.delay_ms / 100) / 10} s)`
          : ''}
      </span>
      {state.status?.paused_reason ? (
        <span className="banner banner-bad" data-testid="paused">
          submission paused: {state.status.paused_reason}
        </span>
      ) : null}
      {state.status?.stale ? <span className="banner banner-warn">tip data stale</span> : null}
      <span className="spacer" />
      <span className="small muted">{window.location.host}</span>
    </header>
  );
}

export function App({ store }: { store: DashboardStore }) {
  const state = useSyncExternalStore(store.subscribe, store.getSnapshot);
  const now = useNow();
  const [selected, setSelected] = useState<string | null>(null);
  const close = useCallback(() => setSelected(null), []);
  const needsToken = state.auth === 'needs_token' || state.auth === 'token_refused';
  return (
    <div className="app">
      <TopBar state={state} />
      <main className="grid">
        <SlotPanel state={state} />
        <HealthPanel state={state} now={now} />
        <ModePanel state={state} store={store} now={now} />
        <TipNowPanel state={state} now={now} />
        <TipChartPanel state={state} />
        <QueuePanel state={state} now={now} />
        <LifecyclePanel state={state} selected={selected} onSelect={setSelected} />
        <EventLogPanel state={state} />
      </main>
      {selected ? (
        <DrillDown
          store={store}
          bundleId={selected}
          listEntry={state.lifecycle.find((e) => e.bundle_id === selected)}
          onClose={close}
        />
      ) : null}
      {needsToken ? <TokenPrompt store={store} refused={state.auth === 'token_refused'} /> : null}
    </div>
  );
}
