import type { QueueResponse } from '@solrelay/client';
import { QUEUED_TX_STATES } from '@solrelay/core';
import type { CliContext, CommandResult } from '../../output';
import { withSidecar } from '../../sidecar-api';

/**
 * `relay queue`: a summary line (the queue's size, its count in each state, evicted_total), then one line per
 * transaction not yet terminal with its state; `--json` prints `GET /queue` as is.
 */
export async function queue(ctx: CliContext): Promise<CommandResult> {
  const data = await withSidecar(ctx, (client) => client.queue());
  return { data, text: renderQueue(data) };
}

export function renderQueue(q: QueueResponse): string {
  // Older sidecars send neither `by_state` nor an entry's `state`: their summary is the count alone.
  const summary = q.by_state
    ? [`queue ${q.pending}`, ...QUEUED_TX_STATES.map((s) => `${s} ${q.by_state[s]}`)]
    : [`pending ${q.pending}`];
  const lines = [[...summary, `evicted_total ${q.evicted_total}`].join('  ')];
  if (q.entries.length === 0) return lines.join('\n');
  const table = [
    ['tx_id', 'age', 'priority', 'state'],
    ...q.entries.map((entry) => [
      entry.tx_id,
      `${entry.age_slots} ${entry.age_slots === 1 ? 'slot' : 'slots'}`,
      entry.priority,
      entry.state ?? '-',
    ]),
  ];
  const width = (column: number) => Math.max(...table.map((row) => (row[column] ?? '').length));
  const [txWidth, ageWidth, priorityWidth] = [width(0), width(1), width(2)];
  for (const [tx = '', age = '', priority = '', state = ''] of table) {
    lines.push(
      `${tx.padEnd(txWidth)}  ${age.padStart(ageWidth)}  ${priority.padEnd(priorityWidth)}  ${state}`,
    );
  }
  return lines.join('\n');
}
