import type { QueueResponse } from '@solrelay/client';
import type { CliContext, CommandResult } from '../../output';
import { withSidecar } from '../../sidecar-api';

/** `relay queue`: a summary line, then one line per pending transaction; `--json` prints `GET /queue` as is. */
export async function queue(ctx: CliContext): Promise<CommandResult> {
  const data = await withSidecar(ctx, (client) => client.queue());
  return { data, text: renderQueue(data) };
}

export function renderQueue(q: QueueResponse): string {
  const lines = [`pending ${q.pending}  evicted_total ${q.evicted_total}`];
  const width = Math.max(0, ...q.entries.map((e) => e.tx_id.length));
  for (const entry of q.entries) {
    const age = `${entry.age_slots} ${entry.age_slots === 1 ? 'slot' : 'slots'}`;
    lines.push(`${entry.tx_id.padEnd(width)}  ${age.padStart(10)}  ${entry.priority}`);
  }
  return lines.join('\n');
}
