// A bundle sent to a region its target leader is not connected to is forwarded, later: it competes in no slot
// produced before it arrives, and when its leader's slots pass meanwhile it goes on to the next bundle-engine leader.
// The engine's clock is the test's, so nothing here depends on how fast the machine is.
import { startHarness, tipTx, type Harness } from './engine-harness';

let h: Harness;
let nowMs = 1_000_000;

beforeAll(async () => {
  // Half the stake runs the bundle engine, so windows with and without a bundle-engine leader right after are both common.
  h = await startHarness({
    seed: 5,
    bundleEngineShare: 0.5,
    engine: { crossRegionDelayMs: 250, now: () => nowMs },
  });
});
afterAll(async () => h.close());

/**
 * Advance to just before a bundle-engine leader window (one `accept` takes) and return that leader's region and
 * window's first slot.
 */
function beforeWindow(accept: (first: number) => boolean = () => true): { region: string; first: number } {
  for (let i = 0; i < 4000; i++) {
    const next = h.cluster.leaderAt(h.cluster.slot + 1);
    const current = h.cluster.leaderAt(h.cluster.slot);
    const region = next?.bundleEngine ? h.engine.regionOf(next.identity) : null;
    if (next?.bundleEngine && next.identity !== current?.identity && region && accept(h.cluster.slot + 1))
      return { region, first: h.cluster.slot + 1 };
    h.cluster.advance(1);
  }
  throw new Error('no bundle-engine leader window found');
}

/** Whether a bundle-engine leader holds one of the lookahead slots after the window that starts at `first`. */
function leaderSoonAfterWindow(first: number): boolean {
  const identity = h.cluster.leaderAt(first)?.identity;
  let last = first;
  while (h.cluster.leaderAt(last + 1)?.identity === identity && last - first < 3) last++;
  // Re-windowing happens at the slot after the window: its lookahead is the next leaderLookaheadSlots slots.
  for (let slot = last + 2; slot <= last + 1 + h.engine.leaderLookaheadSlots; slot++)
    if (h.cluster.leaderAt(slot)?.bundleEngine) return true;
  return false;
}

function send(region: string): string {
  const outcome = h.engine.submitBundle([tipTx(h, 5_000_000)], 'base58', region);
  if (!outcome.ok) throw new Error(outcome.error.message);
  return outcome.bundleId;
}

test("sent to the leader's own region, a bundle lands in that leader's first slot", () => {
  const { region, first } = beforeWindow();
  const id = send(region);
  expect(h.engine.getBundle(id)?.arrivesAtMs).toBe(nowMs);
  h.cluster.advance(1);
  expect(h.engine.getBundle(id)).toMatchObject({ state: 'landed', landedSlot: first });
});

test('sent to another region, it misses the slots produced before it arrives and lands after', () => {
  const { region, first } = beforeWindow();
  const other = h.engine.regions.find((r) => r !== region) as string;
  const id = send(other);
  expect(h.engine.getBundle(id)?.arrivesAtMs).toBe(nowMs + 250);
  h.cluster.advance(1);
  expect(h.engine.getBundle(id)?.state).toBe('pending');
  nowMs += 250;
  // Arrived: the leader's next slot takes it (the leader holds consecutive slots).
  const before = h.engine.getBundle(id);
  for (let i = 0; i < 8 && h.engine.getBundle(id)?.state === 'pending'; i++) h.cluster.advance(1);
  expect(before?.window?.firstSlot).toBe(first);
  expect(h.engine.getBundle(id)?.state).toBe('landed');
  expect(h.engine.getBundle(id)?.landedSlot).toBeGreaterThan(first);
});

test("when its leader's slots pass before it arrives, it is forwarded to the next bundle-engine leader", () => {
  const { region, first } = beforeWindow(leaderSoonAfterWindow);
  const other = h.engine.regions.find((r) => r !== region) as string;
  const id = send(other);
  const window = h.engine.getBundle(id)?.window;
  expect(window?.firstSlot).toBe(first);
  // The whole window is produced while the bundle is still on its way.
  while (h.cluster.slot <= (window?.lastSlot ?? 0)) h.cluster.advance(1);
  h.cluster.advance(1);
  // Not judged as an auction it never took part in: handed on to the next leader, whose window is later.
  const moved = h.engine.getBundle(id);
  expect(moved?.state).toBe('pending');
  expect(moved?.failure).toBeNull();
  expect(moved?.window?.firstSlot).toBeGreaterThan(window?.lastSlot ?? 0);
  nowMs += 250;
  for (let i = 0; i < 4000 && h.engine.getBundle(id)?.state === 'pending'; i++) h.cluster.advance(1);
  expect(h.engine.getBundle(id)?.state).toBe('landed');
});

test('with no bundle-engine leader near when it arrives late, it is dropped as no leader up soon', () => {
  const { region } = beforeWindow((first) => !leaderSoonAfterWindow(first));
  const other = h.engine.regions.find((r) => r !== region) as string;
  const id = send(other);
  const window = h.engine.getBundle(id)?.window;
  while (h.cluster.slot <= (window?.lastSlot ?? 0) + 1) h.cluster.advance(1);
  expect(h.engine.getBundle(id)).toMatchObject({ state: 'failed', failure: 'no_leader' });
});
