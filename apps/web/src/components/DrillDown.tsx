import { useEffect, useState } from 'react';
import type { LifecycleEntry, TxRecord } from '@solrelay/core';
import { formatClock, formatDuration, formatInteger, formatLamportsCompact } from '../format';
import type { DashboardStore } from '../store';
import { Id, StageTag } from './common';
import { decisionLabel } from './LifecyclePanel';

const STAGES = ['submitted', 'landed', 'processed', 'confirmed', 'finalized', 'failed'] as const;
const FLOOR_KEYS = ['p25', 'p50', 'p75', 'p95', 'p99', 'ema'] as const;

/**
 * One bundle in full: commitment timeline, the tip against the floor at submit, the decision trace and every
 * signature. Read fresh from `GET /bundle/{id}` whenever the table's copy of the entry changes.
 */
export function DrillDown({
  store,
  bundleId,
  listEntry,
  onClose,
}: {
  store: DashboardStore;
  bundleId: string;
  listEntry: LifecycleEntry | undefined;
  onClose: () => void;
}) {
  const [entry, setEntry] = useState<LifecycleEntry | null>(listEntry ?? null);
  const [record, setRecord] = useState<TxRecord | null>(null);
  const [error, setError] = useState<string | null>(null);
  // A failed read is tried again a second later (a busy sidecar may not answer the first one in time).
  const [retry, setRetry] = useState(0);
  // Changes whenever the polled copy moves to a new stage: the cue to read the entry again.
  const version = listEntry
    ? `${listEntry.stage}:${STAGES.map((s) => listEntry.timeline[s]?.slot ?? '').join(',')}`
    : '';

  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    store.bundle(bundleId).then(
      (fresh) => {
        if (!live) return;
        setEntry(fresh);
        setError(null);
        store.tx(fresh.tx_id).then(
          (r) => live && setRecord(r),
          () => undefined, // the record may have aged out of memory; signatures are still listed
        );
      },
      (e: unknown) => {
        if (!live) return;
        setError(e instanceof Error ? e.message : String(e));
        if (retry < 5) timer = setTimeout(() => live && setRetry((n) => n + 1), 1_000);
      },
    );
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [store, bundleId, version, retry]);

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'Escape') onClose();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [onClose]);

  return (
    <div className="drawer-backdrop" onClick={onClose}>
      <aside
        className="drawer"
        role="dialog"
        aria-label="bundle details"
        data-testid="drilldown"
        onClick={(event) => event.stopPropagation()}
      >
        <header className="drawer-head">
          <h2>Bundle</h2>
          <button type="button" className="close" onClick={onClose} aria-label="close details">
            ×
          </button>
        </header>
        {error ? <p className="text-bad">could not read the bundle: {error}</p> : null}
        {entry ? <EntryDetails entry={entry} record={record} /> : <p className="muted">loading…</p>}
      </aside>
    </div>
  );
}

function EntryDetails({ entry, record }: { entry: LifecycleEntry; record: TxRecord | null }) {
  const submittedTs = entry.timeline.submitted?.ts ?? null;
  const userSignatures = new Set(record?.tx_signatures ?? []);
  return (
    <div className="drawer-body">
      <dl className="kv kv-wide">
        <dt>bundle</dt>
        <dd className="mono break" data-testid="drill-bundle-id">
          {entry.bundle_id}
        </dd>
        <dt>tx</dt>
        <dd>
          <Id value={entry.tx_id} kind="tx" /> {record ? <StageTag stage={record.state} /> : null}
        </dd>
        <dt>attempt</dt>
        <dd>
          {entry.attempt} · stage <StageTag stage={entry.stage} />
          {entry.failure ? <span className="text-bad"> {entry.failure}</span> : null}
        </dd>
        <dt>decision</dt>
        <dd>
          {decisionLabel(entry)}
          {entry.escalated ? ' · escalated to the LLM' : ''}
        </dd>
        <dt>leader</dt>
        <dd>{entry.leader ? <Id value={entry.leader} /> : '—'}</dd>
      </dl>

      <h3 className="subhead">Commitment timeline</h3>
      <table className="table" data-testid="drill-timeline">
        <thead>
          <tr>
            <th>stage</th>
            <th className="num">slot</th>
            <th>time</th>
            <th className="num">since submit</th>
          </tr>
        </thead>
        <tbody>
          {STAGES.map((stage) => {
            const point = entry.timeline[stage];
            if (stage === 'failed' && !point) return null;
            return (
              <tr
                key={stage}
                className={point ? '' : 'unreached'}
                data-stage={stage}
                data-reached={point ? 'yes' : 'no'}
              >
                <td>
                  <span className={`step ${point ? (stage === 'failed' ? 'step-bad' : 'step-done') : ''}`} />{' '}
                  {stage}
                </td>
                <td className="num mono">{point ? formatInteger(point.slot) : '—'}</td>
                <td className="mono">{point ? formatClock(point.ts) : '—'}</td>
                <td className="num">
                  {point && submittedTs !== null ? `+${formatDuration(point.ts - submittedTs)}` : '—'}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>

      <h3 className="subhead">Tip vs. floor at submit</h3>
      <TipAgainstFloor entry={entry} />

      <h3 className="subhead">Decision trace</h3>
      <DecisionTrace entry={entry} />

      <h3 className="subhead">Signatures ({entry.transactions.length})</h3>
      <ol className="signatures" data-testid="drill-signatures">
        {entry.transactions.map((signature) => (
          <li key={signature}>
            <span className="mono break">{signature}</span>
            {record ? (
              <span className="tag small">{userSignatures.has(signature) ? 'user' : 'tip'}</span>
            ) : null}
          </li>
        ))}
      </ol>
    </div>
  );
}

/**
 * Horizontal bars of the floor percentiles on one log scale with the tip paid, so "between p50 and p75" is
 * visible even when p99 is a thousand times p25.
 */
function TipAgainstFloor({ entry }: { entry: LifecycleEntry }) {
  const floor = entry.tip_floor_at_submit;
  const values = [entry.tip_lamports, ...FLOOR_KEYS.map((k) => floor[k])].filter((v) => v > 0);
  const hi = Math.log10(Math.max(...values, 10));
  // The scale starts a decade below the smallest value, so the smallest bar is still visible.
  const lo = Math.log10(Math.max(1, Math.min(...values, 10) / 10));
  const pct = (v: number) =>
    v <= 0 ? '0%' : `${Math.max(1, ((Math.log10(v) - lo) / Math.max(hi - lo, 1e-9)) * 100)}%`;
  return (
    <div className="floor" data-testid="drill-floor">
      <div className="floor-row floor-paid">
        <span className="floor-label">tip paid</span>
        <span className="floor-bar">
          <span className="floor-fill paid" style={{ width: pct(entry.tip_lamports) }} />
        </span>
        <span className="floor-value">{formatInteger(entry.tip_lamports)}</span>
      </div>
      {FLOOR_KEYS.map((key) => (
        <div key={key} className="floor-row">
          <span className="floor-label">{key}</span>
          <span className="floor-bar">
            <span className="floor-fill" style={{ width: pct(floor[key]) }} />
          </span>
          <span className="floor-value">{formatInteger(floor[key])}</span>
        </div>
      ))}
      <p className="small muted">
        lamports, log scale · floor data was {floor.stale ? <b className="text-bad">stale</b> : 'fresh'} at
        submit
      </p>
    </div>
  );
}

function DecisionTrace({ entry }: { entry: LifecycleEntry }) {
  const trace = entry.ai_decision_trace;
  if (!trace) {
    return (
      <p className="muted" data-testid="drill-trace">
        {entry.bypass
          ? 'No decision trace: bypass submissions use the fixed tip without a decision.'
          : 'No decision trace was recorded for this attempt.'}
      </p>
    );
  }
  const usage = trace.usage;
  const rows: Array<[string, string | null | undefined]> = [
    ['model', trace.model],
    ['provider', trace.provider],
    ['request id', trace.request_id],
    ['latency', trace.latency_ms === undefined ? undefined : formatDuration(trace.latency_ms)],
    [
      'tokens',
      usage
        ? `in ${usage.input_tokens ?? '—'} · out ${usage.output_tokens ?? '—'} · cache read ${usage.cache_read_input_tokens ?? 0}`
        : undefined,
    ],
    ['fallback', trace.fallback_reason],
  ];
  const { inputs, tool_input: toolInput } = trace;
  return (
    <div className="trace" data-testid="drill-trace">
      <dl className="kv kv-wide">
        {rows
          .filter(([, value]) => value !== undefined && value !== null)
          .map(([label, value]) => (
            <div key={label} className="kv-pair">
              <dt>{label}</dt>
              <dd className={label === 'fallback' ? 'text-warn mono' : 'mono'}>{value}</dd>
            </div>
          ))}
      </dl>
      {trace.rationale ? (
        <blockquote className="rationale" data-testid="drill-rationale">
          {trace.rationale}
        </blockquote>
      ) : null}
      {toolInput !== undefined ? <JsonBlock title="tool input" value={toolInput} /> : null}
      {inputs !== undefined ? <JsonBlock title="inputs" value={inputs} /> : null}
      <p className="small muted">tip paid: {formatLamportsCompact(entry.tip_lamports)} lamports</p>
    </div>
  );
}

function JsonBlock({ title, value }: { title: string; value: unknown }) {
  return (
    <details className="json" open>
      <summary>{title}</summary>
      <pre>{JSON.stringify(value, null, 2)}</pre>
    </details>
  );
}
