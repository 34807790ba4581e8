/**
 * Which regional block engine takes the next bundle. Each region has its own request budget (1 request/s per IP per
 * region on mainnet), and a bundle reaches its leader fastest through the region that leader is connected to; any
 * other region forwards it, later.
 *
 * `waitMs[i]` is how long region i needs before it can take a request (0: now; its token bucket, or the cool-down a
 * 429 put on it). The preferred region (the target leader's) wins when it is ready; otherwise the next ready region
 * after it, in order, so the spill spreads over the regions; when none is ready, the one ready soonest (the
 * preferred on a tie) with how long to wait.
 */
export function chooseRegion(
  waitMs: readonly number[],
  preferred: number | null,
): { region: number; waitMs: number } {
  const count = waitMs.length;
  if (count === 0) throw new Error('chooseRegion needs at least one region');
  const start = preferred !== null && preferred >= 0 && preferred < count ? preferred : 0;
  let best = start;
  for (let step = 0; step < count; step++) {
    const region = (start + step) % count;
    const wait = waitMs[region] as number;
    if (wait <= 0) return { region, waitMs: 0 };
    if (wait < (waitMs[best] as number)) best = region;
  }
  return { region: best, waitMs: waitMs[best] as number };
}
