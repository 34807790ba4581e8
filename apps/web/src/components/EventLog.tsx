import { useState } from 'react';
import { formatClock, formatInteger } from '../format';
import type { DashboardState } from '../store';
import { Id, Panel } from './common';

export function EventLogPanel({ state }: { state: DashboardState }) {
  const [filter, setFilter] = useState('');
  const needle = filter.trim().toLowerCase();
  const rows = needle
    ? state.log.filter(
        (e) =>
          e.event.includes(needle) ||
          e.text.toLowerCase().includes(needle) ||
          (e.tx_id?.toLowerCase().includes(needle) ?? false) ||
          (e.bundle_id?.includes(needle) ?? false),
      )
    : state.log;
  return (
    <Panel
      title="Event log"
      className="area-log"
      testId="panel-log"
      actions={
        <>
          <span className="small muted" title="slot and tip ticks are counted, not logged">
            ticks: slot {formatInteger(state.tickCounts.slot_update)} · tip{' '}
            {formatInteger(state.tickCounts.tip_update)}
          </span>
          <input
            className="filter"
            type="search"
            placeholder="filter"
            aria-label="filter the event log"
            value={filter}
            onChange={(event) => setFilter(event.target.value)}
          />
        </>
      }
    >
      <ol className="log" data-testid="event-log">
        {rows.map((entry) => (
          <li
            key={entry.seq}
            className={`log-row tone-${entry.tone}`}
            data-event={entry.event}
            data-tx-id={entry.tx_id ?? ''}
          >
            <span className="log-time mono">{formatClock(entry.ts)}</span>
            <span className={`log-event ev-${entry.event}`}>{entry.event}</span>
            <span className="log-text">
              {entry.tx_id ? <Id value={entry.tx_id} kind="tx" /> : null} {entry.text}
            </span>
          </li>
        ))}
        {rows.length === 0 ? <li className="muted empty">no events yet</li> : null}
      </ol>
    </Panel>
  );
}
