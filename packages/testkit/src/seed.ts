/**
 * The seed of a randomised test. CI must not fail by chance, so a run is reproducible by default: the same fixed
 * seed every time. `RELAY_TEST_SEED=<n>` replays a given seed; `RELAY_TEST_SEED=random` draws a fresh one (the
 * separate, non-gating `pnpm test:random` run). Every randomised test prints the seed it used.
 */
export const FIXED_TEST_SEED = 20_261_125;

export function testSeed(env: Record<string, string | undefined> = process.env): number {
  const raw = env.RELAY_TEST_SEED?.trim();
  if (raw === undefined || raw === '') return FIXED_TEST_SEED;
  if (raw === 'random') return Math.floor(Math.random() * 2 ** 31);
  if (/^\d+$/.test(raw)) return Number(raw);
  throw new Error(`RELAY_TEST_SEED must be a whole number or "random", got ${JSON.stringify(raw)}`);
}
