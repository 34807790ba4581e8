import type { Journal } from '../journal/journal';
import type { StoreOp, StoreState } from '../store/records';

export const ROLLING_HOUR_MS = 3_600_000;

/** Lamports reserved or paid in the rolling hour before `now` (what `spend-limit` is checked against). */
export function spentInWindow(state: StoreState, now: number): number {
  return state.spend.spentSince(now - ROLLING_HOUR_MS);
}

/** Spend older than the rolling hour no longer counts against `spend-limit`: drop it from the journal state. */
export async function pruneSpend(journal: Journal<StoreState, StoreOp>, now: number): Promise<void> {
  const before = now - ROLLING_HOUR_MS;
  if (journal.state.spend.hasOlderThan(before))
    await journal.commit({ k: 'prune-spend', before }).catch(() => undefined);
}
