import type { TxStore } from './store';

export const ROLLING_HOUR_MS = 3_600_000;

/** Lamports reserved or paid in the rolling hour before `now` (what `spend-limit` is checked against). */
export function spentInWindow(store: Pick<TxStore, 'spentSince'>, now: number): Promise<number> {
  return store.spentSince(now - ROLLING_HOUR_MS);
}

/** Spend older than the rolling hour no longer counts against `spend-limit`: drop it from the store. */
export async function pruneSpend(
  store: Pick<TxStore, 'hasSpendOlderThan' | 'pruneSpend'>,
  now: number,
): Promise<void> {
  const before = now - ROLLING_HOUR_MS;
  if (await store.hasSpendOlderThan(before)) await store.pruneSpend(before).catch(() => undefined);
}
