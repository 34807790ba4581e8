import type { LifecycleEntry } from '@solrelay/client';
import { gridTable, lamports, type CliContext, type CommandResult } from '../../output';
import { withSidecar } from '../../sidecar-api';

export interface LifecycleOptions {
  /** How many recent entries, most recent last. Default 10. */
  last: number;
}

/** The spec's marker for "no failure" in the list view. */
export const NO_FAILURE = '-';

/** `relay lifecycle [--last N]`: recent lifecycle entries as a table; `--json` prints `GET /lifecycle` as is. */
export async function lifecycle(ctx: CliContext, options: LifecycleOptions): Promise<CommandResult> {
  const data = await withSidecar(ctx, (client) => client.lifecycle({ last: options.last }));
  return { data, text: renderLifecycle(data.entries, ctx.color) };
}

export function renderLifecycle(entries: LifecycleEntry[], color: boolean): string {
  if (entries.length === 0) return 'no lifecycle entries yet';
  return gridTable(
    ['bundle_id', 'stage', 'slot', 'failure', 'tip', 'tier', 'escalated'],
    entries.map((e) => [
      e.bundle_id,
      e.stage,
      String(e.slot_submitted),
      e.failure ?? NO_FAILURE,
      lamports(e.tip_lamports),
      e.bypass ? `${e.decision_mode} (bypass)` : e.decision_mode,
      e.escalated ? 'yes' : 'no',
    ]),
    color,
  );
}
