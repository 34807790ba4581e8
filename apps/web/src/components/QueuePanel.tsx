import { formatAgo, formatInteger } from '../format';
import { queueRowState, queueStateCounts } from '../queue-view';
import type { DashboardState } from '../store';
import { Id, Panel, StageTag } from './common';

/** Recent transactions shown under the queue; the full list (up to TX_STATE_CAP) stays in the store. */
const RECENT_SHOWN = 30;

export function QueuePanel({ state, now }: { state: DashboardState; now: number }) {
  const queue = state.queue;
  const latest = new Map(state.txStates.map((t) => [t.tx_id, t]));
  return (
    <Panel
      title="Queue"
      className="area-queue"
      testId="panel-queue"
      actions={
        // The queue's size, then how many are in each state: `pending` ones wait to be sent, the others are sent.
        <span className="small muted" data-testid="queue-counts">
          queue <b className="text-strong">{formatInteger(queue?.pending)}</b>
          {queue
            ? queueStateCounts(queue).map(({ state, count }) => (
                <span key={state} data-state={state}>
                  {' '}
                  · {formatInteger(count)} {state}
                </span>
              ))
            : null}{' '}
          · evicted {formatInteger(queue?.evicted_total)}
        </span>
      }
    >
      <table className="table queue-table" data-testid="queue-table">
        <thead>
          <tr>
            <th className="col-tx">tx</th>
            <th className="num">age (slots)</th>
            <th>priority</th>
            <th className="num col-retries">retries</th>
            <th>state</th>
          </tr>
        </thead>
        <tbody>
          {queue && queue.entries.length > 0 ? (
            queue.entries.map((entry) => (
              <tr key={entry.tx_id} data-tx-id={entry.tx_id}>
                <td className="col-tx">
                  <Id value={entry.tx_id} kind="tx" />
                </td>
                <td className="num">{formatInteger(entry.age_slots)}</td>
                <td>{entry.priority}</td>
                <td className="num col-retries">{entry.retries}</td>
                <td>
                  <StageTag stage={queueRowState(entry, latest.get(entry.tx_id), state.queueReadAt)} />
                </td>
              </tr>
            ))
          ) : (
            <tr>
              <td colSpan={5} className="muted empty">
                queue empty
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <h3 className="subhead">Recently seen transactions</h3>
      <table className="table" data-testid="recent-table">
        <tbody>
          {state.txStates.slice(0, RECENT_SHOWN).map((t) => (
            <tr key={t.tx_id} data-tx-id={t.tx_id}>
              <td>
                <Id value={t.tx_id} kind="tx" />
              </td>
              <td>
                <StageTag stage={t.state} />
                {t.failure ? <span className="text-bad small"> {t.failure}</span> : null}
              </td>
              <td className="num muted">{formatAgo(t.updated_at, now)}</td>
            </tr>
          ))}
          {state.txStates.length === 0 ? (
            <tr>
              <td colSpan={3} className="muted empty">
                none since this page opened
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </Panel>
  );
}
