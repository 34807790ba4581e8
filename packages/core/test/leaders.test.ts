import { LeaderBuffer, bundleEngineLeaderSoon, leaderViewFromNextSlot } from '../src';

const EPOCH_SLOTS = 32; // a short simnet-style epoch

/** A getLeaderSchedule answer: leaders rotate every 4 slots through `leaders`. */
function schedule(leaders: string[], slots = EPOCH_SLOTS): Record<string, number[]> {
  const map: Record<string, number[]> = {};
  for (let index = 0; index < slots; index += 1) {
    const leader = leaders[Math.floor(index / 4) % leaders.length] as string;
    (map[leader] ??= []).push(index);
  }
  return map;
}

describe('LeaderBuffer', () => {
  it('maps relative schedule indexes to slots in 4-slot windows', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestLeaderSchedule(schedule(['A', 'B', 'C']), 1_000);
    expect(
      [999, 1_000, 1_003, 1_004, 1_007, 1_008, 1_012, 1_031, 1_032].map((s) => buffer.leaderAt(s)),
    ).toEqual([
      null,
      'A',
      'A',
      'B',
      'B',
      'C',
      'A',
      'B', // index 31 is window 7 = B
      null,
    ]);
  });

  it('joins two epochs at the boundary', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestLeaderSchedule(schedule(['A', 'B']), 0);
    buffer.ingestLeaderSchedule(schedule(['X', 'Y']), EPOCH_SLOTS);
    expect([30, 31, 32, 33, 36].map((s) => buffer.leaderAt(s))).toEqual(['B', 'B', 'X', 'X', 'Y']);
  });

  it('takes getSlotLeaders arrays and window lists, later ingests winning', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestSlotLeaders(100, ['A', 'A', 'A', 'A', 'B']);
    expect(buffer.leaderAt(104)).toBe('B');
    buffer.ingestLeaderWindows(104, ['C', 'D']);
    expect([104, 107, 108, 111, 112].map((s) => buffer.leaderAt(s))).toEqual(['C', 'C', 'D', 'D', null]);
  });

  it('answers bundle-engine questions in three states', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestLeaderWindows(0, ['A', 'B', 'C']);
    expect(buffer.isBundleEngineLeader(0)).toBeNull(); // set unknown
    buffer.setBundleEngineValidators(['B']);
    expect([0, 4, 8, 12].map((s) => buffer.isBundleEngineLeader(s))).toEqual([false, true, false, null]);
    buffer.setBundleEngineValidators(null);
    expect(buffer.isBundleEngineLeader(4)).toBeNull();
  });

  it('reads getConnectedLeaders maps (slots and BE set)', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestLeaderWindows(0, ['A', 'B', 'C', 'D']);
    buffer.ingestConnectedLeaders({ C: { slots: [8, 9, 10, 11] }, E: ['20', '21'] });
    expect(buffer.bundleEngineKnown).toBe(true);
    expect(buffer.isBundleEngineLeader(8)).toBe(true);
    expect(buffer.isBundleEngineLeader(4)).toBe(false);
    expect(buffer.leaderAt(20)).toBe('E');
    expect(buffer.isBundleEngineLeader(21)).toBe(true);
  });

  it('finds the next bundle-engine slot within the lookahead', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestLeaderWindows(0, ['A', 'B', 'C', 'B']);
    expect(buffer.nextBundleEngineSlot(0, 100)).toBeNull(); // set unknown
    buffer.setBundleEngineValidators(['C']);
    expect(buffer.nextBundleEngineSlot(0, 100)).toBe(8);
    expect(buffer.nextBundleEngineSlot(9, 100)).toBe(9);
    expect(buffer.nextBundleEngineSlot(0, 8)).toBeNull(); // slots 0..7 only
    expect(buffer.nextBundleEngineSlot(0, 9)).toBe(8);
    expect(buffer.nextBundleEngineSlot(12, 100)).toBeNull();
  });

  it('gives reflex its view of the current slot and the next two', () => {
    const buffer = new LeaderBuffer();
    buffer.ingestLeaderWindows(0, ['A', 'B']);
    buffer.setBundleEngineValidators(['B']);
    expect(buffer.leaderView(1)).toEqual({ slot: 1, leader: 'A', bundle_engine: [false, false, false] });
    expect(buffer.leaderView(2)).toEqual({ slot: 2, leader: 'A', bundle_engine: [false, false, true] });
    expect(bundleEngineLeaderSoon(buffer.leaderView(1))).toBe(false);
    expect(bundleEngineLeaderSoon(buffer.leaderView(2))).toBe(true);
    buffer.setBundleEngineValidators(['C']);
    expect(buffer.leaderView(6).bundle_engine).toEqual([false, false, null]); // slot 8 has no known leader
    expect(bundleEngineLeaderSoon(buffer.leaderView(6))).toBeNull();
  });

  it('evicts slots behind the current slot', () => {
    const buffer = new LeaderBuffer({ behindSlots: 10 });
    buffer.ingestSlotLeaders(
      0,
      Array.from({ length: 10_000 }, (_, i) => `V${i % 7}`),
    );
    buffer.advance(9_000);
    expect(buffer.leaderAt(8_990)).toBe('V2'); // 8990 % 7 = 2, still kept
    expect(buffer.leaderAt(8_989)).toBeNull(); // behind the low-water mark
    expect(buffer.leaderAt(100)).toBeNull();
    expect(buffer.capacityInUse).toBeLessThanOrEqual(2 * 4096);
    buffer.ingestSlotLeaders(10, ['late']); // writes behind the low-water mark are ignored
    expect(buffer.leaderAt(10)).toBeNull();
  });

  it('never holds more than maxSlots, keeping the slots nearest the current one', () => {
    const maxSlots = 8 * 4096;
    const buffer = new LeaderBuffer({ maxSlots });
    buffer.advance(50 * EPOCH_SLOTS * 1_000);
    for (let epoch = 40; epoch < 60; epoch += 1) {
      buffer.ingestLeaderSchedule(schedule([`E${epoch}a`, `E${epoch}b`], 32_000), epoch * 32_000);
      expect(buffer.capacityInUse).toBeLessThanOrEqual(maxSlots);
    }
    expect(buffer.leaderAt(50 * 32_000)).toBe('E50a');
    expect(buffer.leaderAt(40 * 32_000)).toBeNull();
    expect(buffer.leaderAt(59 * 32_000)).toBeNull();
  });

  it('keeps the identity table bounded as validators churn', () => {
    const buffer = new LeaderBuffer({ maxIdentities: 64, behindSlots: 0 });
    for (let i = 0; i < 5_000; i += 1) {
      buffer.advance(i * 4);
      buffer.ingestLeaderWindows(i * 4, [`validator-${i}`]);
    }
    expect(buffer.identityCount).toBeLessThanOrEqual(2 * 4096); // live slots bound the live identities
    expect(buffer.identityCount).toBeLessThan(5_000);
    expect(buffer.leaderAt(4_999 * 4)).toBe('validator-4999');
  });
});

describe('leaderViewFromNextSlot', () => {
  it('rebuilds the flags from a slot_update', () => {
    const base = { slot: 100, leader: 'A', bundle_engine_known: true };
    expect(leaderViewFromNextSlot({ ...base, next_bundle_engine_slot: 102 }).bundle_engine).toEqual([
      false,
      false,
      true,
    ]);
    expect(leaderViewFromNextSlot({ ...base, next_bundle_engine_slot: null }).bundle_engine).toEqual([
      false,
      false,
      false,
    ]);
    expect(
      leaderViewFromNextSlot({ ...base, bundle_engine_known: false, next_bundle_engine_slot: null })
        .bundle_engine,
    ).toEqual([null, null, null]);
  });
});

test("regionAt names the region of a slot's bundle-engine leader, and forgets it with the set", () => {
  const leaders = new LeaderBuffer();
  leaders.advance(100);
  leaders.ingestSlotLeaders(100, ['A', 'A', 'B', 'C']);
  leaders.setBundleEngineValidators(
    ['A', 'B'],
    new Map([
      ['A', 'tokyo'],
      ['B', 'ny'],
    ]),
  );
  expect([100, 101, 102, 103, 104].map((slot) => leaders.regionAt(slot))).toEqual([
    'tokyo',
    'tokyo',
    'ny',
    null,
    null,
  ]);
  leaders.setBundleEngineValidators(null);
  expect(leaders.regionAt(100)).toBeNull();
});
