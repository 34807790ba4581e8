import type { LifecycleEntry } from '@solrelay/core';
import { formatClock, formatDuration, formatInteger, formatLamportsCompact } from '../format';
import type { DashboardState } from '../store';
import { Id, Panel, StageTag } from './common';

/** The time of the entry's latest reached stage. */
function lastTs(entry: LifecycleEntry): number | null {
  const t = entry.timeline;
  return (t.failed ?? t.finalized ?? t.confirmed ?? t.processed ?? t.landed ?? t.submitted)?.ts ?? null;
}

/** bypass / reflex / cortex, plus whether a decision trace is attached. */
export function decisionLabel(entry: LifecycleEntry): string {
  return entry.bypass ? 'bypass' : entry.decision_mode;
}

export function LifecyclePanel({
  state,
  selected,
  onSelect,
}: {
  state: DashboardState;
  selected: string | null;
  onSelect: (bundleId: string) => void;
}) {
  const entries = state.lifecycle;
  return (
    <Panel
      title="Lifecycle (bundles)"
      className="area-lifecycle"
      testId="panel-lifecycle"
      actions={<span className="small muted">latest {entries.length} · click a row for details</span>}
    >
      <table className="table table-click" data-testid="lifecycle-table">
        <thead>
          <tr>
            <th>time</th>
            <th>tx</th>
            <th>bundle</th>
            <th className="num">#</th>
            <th>stage</th>
            <th className="num">tip</th>
            <th>decision</th>
            <th className="num">slot sub → land</th>
            <th className="num">sub→proc</th>
            <th className="num">proc→conf</th>
            <th className="num">conf→fin</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((entry) => (
            <tr
              key={entry.bundle_id}
              data-bundle-id={entry.bundle_id}
              data-tx-id={entry.tx_id}
              data-stage={entry.stage}
              className={entry.bundle_id === selected ? 'selected' : ''}
              tabIndex={0}
              onClick={() => onSelect(entry.bundle_id)}
              onKeyDown={(event) => {
                if (event.key === 'Enter' || event.key === ' ') {
                  event.preventDefault();
                  onSelect(entry.bundle_id);
                }
              }}
            >
              <td className="mono muted">{formatClock(lastTs(entry))}</td>
              <td>
                <Id value={entry.tx_id} kind="tx" />
              </td>
              <td>
                <Id value={entry.bundle_id} />
              </td>
              <td className="num">{entry.attempt}</td>
              <td>
                <StageTag stage={entry.stage} />
                {entry.failure ? <span className="text-bad small"> {entry.failure}</span> : null}
              </td>
              <td className="num" title={`${formatInteger(entry.tip_lamports)} lamports`}>
                {formatLamportsCompact(entry.tip_lamports)}
              </td>
              <td>
                {decisionLabel(entry)}
                {entry.escalated ? <span className="tag tag-warn small">escalated</span> : null}
                {entry.ai_decision_trace ? (
                  <span className="tag small" title="a decision trace is recorded">
                    trace
                  </span>
                ) : null}
              </td>
              <td className="num mono">
                {formatInteger(entry.slot_submitted)} → {formatInteger(entry.slot_landed)}
              </td>
              <td className="num">{formatDuration(entry.submitted_to_processed_ms)}</td>
              <td className="num">{formatDuration(entry.processed_to_confirmed_ms)}</td>
              <td className="num">{formatDuration(entry.confirmed_to_finalized_ms)}</td>
            </tr>
          ))}
          {entries.length === 0 ? (
            <tr>
              <td colSpan={11} className="muted empty">
                no bundles yet
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </Panel>
  );
}
