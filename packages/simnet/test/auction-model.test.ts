// The auction's pure logic: requested compute, grouping by lock overlap, ranking by tip per requested CU, and the
// block's CU limits, without the engine, the chain or any randomness.
import {
  MAX_BLOCK_UNITS,
  MAX_WRITABLE_ACCOUNT_UNITS,
  SlotBudget,
  arrivalTick,
  groupBids,
  pinnedTipFor,
  rankBids,
  requestedComputeUnits,
  resolveSlot,
  runTick,
  ticksPerSlot,
  tipPerCu,
  type Bid,
} from '../src/engine/auction-model';

const SYSTEM = '11111111111111111111111111111111';
const COMPUTE_BUDGET = 'ComputeBudget111111111111111111111111111111';
const SOME_PROGRAM = 'JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4';
const TIP = 'tip-account';

function bid(
  id: string,
  tipLamports: number,
  computeUnits: number,
  writeLocks: string[],
  readLocks: string[] = [],
): Bid {
  return { id, kind: 'real', tipLamports, computeUnits, writeLocks, readLocks };
}

const ids = (bids: readonly Bid[]) => bids.map((b) => b.id);
/** The loss of a bid outbid on `account` (an account or an opportunity) by `winner`. */
const outbid = (account: string, winner: string) => ({ reason: 'outbid', account, winner: { id: winner } });

describe('requested compute units (Agave compute budget, SIMD-0170)', () => {
  test('SetComputeUnitLimit wins; capped at 1.4M', () => {
    expect(requestedComputeUnits([COMPUTE_BUDGET, SYSTEM], 1_400)).toBe(1_400);
    expect(requestedComputeUnits([COMPUTE_BUDGET, SOME_PROGRAM], 2_000_000)).toBe(1_400_000);
  });

  test('without a limit: 3,000 per builtin instruction, 200,000 per other, capped at 1.4M', () => {
    expect(requestedComputeUnits([SYSTEM], null)).toBe(3_000);
    expect(requestedComputeUnits([SYSTEM, SYSTEM], null)).toBe(6_000);
    expect(requestedComputeUnits([SOME_PROGRAM, SYSTEM], null)).toBe(203_000);
    expect(requestedComputeUnits(Array(8).fill(SOME_PROGRAM) as string[], null)).toBe(1_400_000);
  });

  test('ticks: one per 50 ms of the slot, at least one', () => {
    expect(ticksPerSlot(400)).toBe(8);
    expect(ticksPerSlot(150)).toBe(3);
    expect(ticksPerSlot(60)).toBe(1);
    expect(ticksPerSlot(20)).toBe(1);
  });
});

describe('grouping by lock overlap (jito-docs: (w,w), (r,w), (w,r) share an auction; (r,r) does not)', () => {
  test('write-write and read-write overlaps join, transitively; read-read and tip accounts do not', () => {
    const bids = [
      bid('a', 1, 1, ['pool-1', TIP]),
      bid('b', 1, 1, ['pool-1', 'x']), // (w,w) with a on pool-1
      bid('c', 1, 1, ['y'], ['x']), // (r,w) with b on x: joins a's group through b
      bid('d', 1, 1, ['z'], ['oracle']),
      bid('e', 1, 1, ['w'], ['oracle']), // (r,r) with d: separate
      bid('f', 1, 1, ['v', TIP]), // shares only the tip account with a
    ];
    const groups = groupBids(bids, new Set([TIP])).map((g) => ids(g).sort());
    expect(groups).toEqual([['a', 'b', 'c'], ['d'], ['e'], ['f']]);
    // Counting the tip account would merge f into a's auction.
    expect(groupBids(bids).map((g) => ids(g).sort())[0]).toEqual(['a', 'b', 'c', 'f']);
  });

  test('a group is ranked by tip per requested CU, not by lamports; ties keep arrival order', () => {
    const small = bid('small', 100_000, 40_000, ['pool']); // 2.5 per CU
    const big = bid('big', 500_000, 400_000, ['pool']); // 1.25 per CU: 5x the lamports, half the rank
    const bigTenfold = bid('big10', 1_000_000, 400_000, ['pool']); // 10x CU, 10x tip: the same rank as small
    expect(ids(rankBids([big, small, bigTenfold]))).toEqual(['small', 'big10', 'big']);
    expect(tipPerCu(bigTenfold)).toBe(tipPerCu(small));
  });
});

describe('CU limits (Agave block_cost_limits: 60M per block, 12M per writable account)', () => {
  test('limits are the verified constants', () => {
    expect(MAX_BLOCK_UNITS).toBe(60_000_000);
    expect(MAX_WRITABLE_ACCOUNT_UNITS).toBe(12_000_000);
  });

  test('a full account: higher ranks take what is left, the lower bid is outbid and told by whom', () => {
    // 11M of the pool's 12M already written by non-bundle traffic; one tick: 1M left.
    const budget = new SlotBudget(
      MAX_BLOCK_UNITS,
      1,
      MAX_WRITABLE_ACCOUNT_UNITS,
      new Map([['pool', 11_000_000]]),
    );
    const outcome = runTick(
      [
        bid('low', 10_000, 400_000, ['pool']),
        bid('high', 100_000, 400_000, ['pool']),
        bid('mid', 50_000, 400_000, ['pool']),
        bid('elsewhere', 1_000, 400_000, ['quiet']),
      ],
      budget,
    );
    expect(ids(outcome.included)).toEqual(['high', 'mid', 'elsewhere']);
    expect(outcome.lost.get('low')).toMatchObject(outbid('pool', 'mid'));
    expect(budget.accountUnitsUsed('pool')).toBe(11_800_000);
  });

  test('the block budget: the lowest tip per CU across all auctions is cut first', () => {
    const budget = new SlotBudget(1_000_000, 1);
    const outcome = runTick(
      [bid('a', 5_000, 600_000, ['a']), bid('b', 4_000, 300_000, ['b']), bid('c', 1_000, 300_000, ['c'])],
      budget,
    );
    expect(ids(outcome.included)).toEqual(['b', 'a']);
    expect(outcome.lost.get('c')).toMatchObject({ reason: 'block_full' });
  });

  test('block and account space are spread over the slot ticks; a bid left out competes again next tick', () => {
    const budget = new SlotBudget(800_000, 8);
    const first = bid('first', 9_000, 100_000, ['p1']);
    const second = bid('second', 8_000, 100_000, ['p2']);
    const resolution = resolveSlot([first, second], 3, budget);
    expect(resolution.included.map((e) => [e.bid.id, e.tick])).toEqual([
      ['first', 0],
      ['second', 1],
    ]);
  });

  test('the per-slot cap on real bundles: the extra ones wait for the next slot without taking space', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 2);
    const real = [
      bid('r1', 9_000, 1_000, ['a']),
      bid('r2', 8_000, 1_000, ['b']),
      bid('r3', 7_000, 1_000, ['c']),
    ];
    const resolution = resolveSlot(real, 2, budget, { maxReal: 2 });
    expect(resolution.included.map((e) => e.bid.id)).toEqual(['r1', 'r2']);
    expect(resolution.lost.get('r3')).toMatchObject({ reason: 'block_full' });
    expect(budget.remaining).toBe(MAX_BLOCK_UNITS - 2_000);
  });

  test('a transaction bigger than a tick share still fits when it is the first on its accounts', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 8);
    const outcome = runTick([bid('huge', 1_000, 1_400_000, ['pool'])], budget);
    expect(ids(outcome.included)).toEqual(['huge']);
  });

  test('a pinned clearing tip: every bid below it loses, contended or not; at or above it competes', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 1);
    const outcome = runTick(
      [
        bid('below', 4_999, 3_000, ['quiet']),
        bid('at', 5_000, 3_000, ['other']),
        bid('bg', 1_000, 9, ['hot']),
      ],
      budget,
      { pinnedTip: 5_000 },
    );
    expect(ids(outcome.included)).toEqual(['at']);
    expect(outcome.lost.get('below')).toMatchObject({ reason: 'pinned' });
    expect(outcome.lost.get('bg')).toMatchObject({ reason: 'pinned' });
  });

  test('a pinned clearing tip per CU: a heavy bundle below its rank loses, a light one at the same lamports wins', () => {
    const perCu = 5_000 / 201_400; // 5,000 lamports over the reference bundle, ≈ 0.0248 lamports per CU
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 1);
    const outcome = runTick(
      [
        // 1,000 lamports over 1.4M CU: the competitor at that rank bids ceil(0.0248 × 1.4M) = 34,757.
        bid('heavy', 1_000, 1_400_000, ['heavy-payer']),
        // The same 1,000 lamports over a light transfer and its tip (≈ 1,450 CU): the competitor bids 36.
        bid('light', 1_000, 1_450, ['light-payer']),
        bid('ref-below', 4_999, 201_400, ['ref-payer-1']),
        bid('ref-at', 5_000, 201_400, ['ref-payer-2']),
        bid('heavy-at', pinnedTipFor(perCu, 1_400_000), 1_400_000, ['heavy-payer-2']),
      ],
      budget,
      { pinnedTipPerCu: perCu },
    );
    expect(pinnedTipFor(perCu, 1_400_000)).toBe(34_757);
    expect(pinnedTipFor(perCu, 201_400)).toBe(5_000);
    expect(ids(outcome.included).sort()).toEqual(['heavy-at', 'light', 'ref-at']);
    expect(outcome.lost.get('heavy')).toMatchObject({ reason: 'pinned', winner: null });
    expect(outcome.lost.get('ref-below')).toMatchObject({ reason: 'pinned' });
    // The flat pin at the same 1,000 lamports treats both alike: neither light nor heavy loses to it.
    const flat = runTick(
      [bid('heavy', 1_000, 1_400_000, ['a']), bid('light', 1_000, 1_450, ['b'])],
      new SlotBudget(MAX_BLOCK_UNITS, 1),
      { pinnedTip: 1_000 },
    );
    expect(ids(flat.included).sort()).toEqual(['heavy', 'light']);
    // Both pins at once: a bid has to meet both.
    const both = runTick(
      [bid('light', 1_000, 1_450, ['a']), bid('ref', 5_000, 201_400, ['b'])],
      new SlotBudget(MAX_BLOCK_UNITS, 1),
      { pinnedTip: 2_000, pinnedTipPerCu: perCu },
    );
    expect(ids(both.included)).toEqual(['ref']);
    expect(both.lost.get('light')).toMatchObject({ reason: 'pinned' });
  });

  test('bids racing for one opportunity exclude each other within a tick', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 1);
    const arb = (id: string, tip: number): Bid => ({
      ...bid(id, tip, 200_000, [`${id}-payer`, 'pool']),
      opportunity: 'pool',
    });
    const outcome = runTick(
      [arb('x', 10_000), arb('y', 20_000), bid('swap', 5_000, 200_000, ['pool'])],
      budget,
    );
    expect(ids(outcome.included)).toEqual(['y', 'swap']);
    expect(outcome.lost.get('x')).toMatchObject({ reason: 'outbid', winner: { id: 'y' } });
  });

  test('the slot summary: lowest winning tip per CU of contended and uncontended auctions', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 1);
    const resolution = resolveSlot(
      [
        bid('p1', 20_000, 200_000, ['pool']),
        bid('p2', 10_000, 200_000, ['pool']),
        bid('q', 1_000, 10_000, ['q']),
      ],
      1,
      budget,
    );
    expect(resolution.lowestWinning).toEqual({ contended: 0.05, uncontended: 0.1 });
  });
});

describe('exclusion within a lock group (assumption: sequential simulation in rank order, per tick)', () => {
  const HOT = new Set(['pool']);
  const rules = { ignored: new Set([TIP]), contended: HOT };

  test('a lower-ranked bundle on a hot account is excluded in a tick and included in the next', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 2);
    const high = bid('high', 40_000, 200_000, ['payer-a', 'pool', TIP]);
    const low = bid('low', 20_000, 200_000, ['payer-b', 'pool', TIP]);
    const tick0 = runTick([low, high], budget, rules);
    expect(ids(tick0.included)).toEqual(['high']);
    expect(tick0.lost.get('low')).toMatchObject(outbid('pool', 'high'));

    const resolution = resolveSlot([low, high], 2, new SlotBudget(MAX_BLOCK_UNITS, 2), rules);
    expect(resolution.included.map((e) => [e.bid.id, e.tick])).toEqual([
      ['high', 0],
      ['low', 1],
    ]);
    expect(resolution.lost.size).toBe(0);
  });

  test('an excluded bundle with no tick left loses the slot, told which account and who took it', () => {
    const resolution = resolveSlot(
      [bid('high', 40_000, 200_000, ['pool']), bid('low', 20_000, 200_000, ['pool'])],
      1,
      new SlotBudget(MAX_BLOCK_UNITS, 1),
      rules,
    );
    expect(resolution.included.map((e) => e.bid.id)).toEqual(['high']);
    expect(resolution.lost.get('low')).toMatchObject({
      reason: 'outbid',
      account: 'pool',
      winner: { id: 'high' },
      tick: 0,
    });
  });

  test('two bundles sharing only a fee payer, or only a plain recipient, are both included in one tick', () => {
    const payer = runTick(
      [
        bid('a', 40_000, 200_000, ['payer', 'pool', TIP]),
        bid('b', 20_000, 200_000, ['payer', 'pool-2', TIP]),
      ],
      new SlotBudget(MAX_BLOCK_UNITS, 1),
      { ...rules, contended: new Set(['pool', 'pool-2']) },
    );
    expect(ids(payer.included)).toEqual(['a', 'b']);
    expect(payer.groups).toHaveLength(1); // one auction (they share a written account), and no exclusion
    const recipient = runTick(
      [
        bid('c', 40_000, 6_000, ['payer-c', 'recipient', TIP]),
        bid('d', 20_000, 6_000, ['payer-d', 'recipient']),
      ],
      new SlotBudget(MAX_BLOCK_UNITS, 1),
      rules,
    );
    expect(ids(recipient.included)).toEqual(['c', 'd']);
  });

  test('a read of a hot account does not exclude; the same opportunity still does, whatever the accounts', () => {
    const outcome = runTick(
      [
        bid('writer', 40_000, 200_000, ['pool']),
        bid('reader', 20_000, 200_000, ['mine'], ['pool']),
        { ...bid('arb-1', 30_000, 200_000, ['x']), opportunity: 'arb' },
        { ...bid('arb-2', 25_000, 200_000, ['y']), opportunity: 'arb' },
      ],
      new SlotBudget(MAX_BLOCK_UNITS, 1),
      rules,
    );
    expect(ids(outcome.included)).toEqual(['writer', 'arb-1', 'reader']);
    expect(outcome.lost.get('arb-2')).toMatchObject(outbid('arb', 'arb-1'));
  });
});

describe('tick symmetry: every bid competes from the tick it arrives until included or the slot ends', () => {
  const HOT = { contended: new Set(['pool']) };
  const at = (b: Bid, arrivalMs: number, kind: Bid['kind'] = b.kind): Bid => ({ ...b, kind, arrivalMs });

  test('a tie in tip per CU goes to the earlier arrival, whatever the kind', () => {
    for (const [first, second] of [
      ['background', 'real'],
      ['real', 'background'],
    ] as const) {
      const early = at(bid('early', 10_000, 200_000, ['payer-1', 'pool']), 10, first);
      const late = at(bid('late', 10_000, 200_000, ['payer-2', 'pool']), 30, second);
      // Input order puts the later one first: only the arrival decides.
      const outcome = runTick([late, early], new SlotBudget(MAX_BLOCK_UNITS, 1), HOT);
      expect(ids(outcome.included)).toEqual(['early']);
      expect(outcome.lost.get('late')).toMatchObject({ reason: 'outbid', winner: { id: 'early' } });
    }
    // Arriving before the slot started (negative) is earlier than any arrival in it.
    const before = at(bid('before', 10_000, 200_000, ['pool']), -120, 'background');
    const during = at(bid('during', 10_000, 200_000, ['pool']), 0, 'real');
    expect(ids(rankBids([during, before]))).toEqual(['before', 'during']);
  });

  test('a real bundle arriving at tick 5 cannot win ticks 0-4, even as the best bid', () => {
    const budget = new SlotBudget(MAX_BLOCK_UNITS, 8);
    const late = at(bid('late-real', 5_000_000, 200_000, ['payer', 'pool']), 5 * 50 + 7);
    const background = [0, 1, 2, 3, 4, 5, 6, 7].map((tick) =>
      at(bid(`bg-${tick}`, 10_000, 200_000, [`bg-payer-${tick}`, 'pool']), tick * 50 + 1, 'background'),
    );
    const resolution = resolveSlot([late, ...background], 8, budget, HOT);
    const tickOf = new Map(resolution.included.map((e) => [e.bid.id, e.tick]));
    expect(arrivalTick(late, 8)).toBe(5);
    expect(tickOf.get('late-real')).toBe(5);
    // Ticks 0-4 went to the background bids there; the late one took tick 5 from bg-5, which then won tick 6.
    expect([0, 1, 2, 3, 4].map((tick) => tickOf.get(`bg-${tick}`))).toEqual([0, 1, 2, 3, 4]);
    expect(tickOf.get('bg-5')).toBe(6);
  });

  test('a background bid that loses its arrival tick stays and can win a later tick of the slot', () => {
    const high = at(bid('high', 40_000, 200_000, ['p1', 'pool']), 0, 'background');
    const low = at(bid('low', 20_000, 200_000, ['p2', 'pool']), 0, 'background');
    const resolution = resolveSlot([low, high], 3, new SlotBudget(MAX_BLOCK_UNITS, 3), HOT);
    expect(resolution.included.map((e) => [e.bid.id, e.tick])).toEqual([
      ['high', 0],
      ['low', 1],
    ]);
  });

  test('arrival tick: the 50 ms it falls in, 0 before the slot, at most the last tick', () => {
    expect(arrivalTick({ arrivalMs: -500 }, 8)).toBe(0);
    expect(arrivalTick({}, 8)).toBe(0);
    expect(arrivalTick({ arrivalMs: 49.9 }, 8)).toBe(0);
    expect(arrivalTick({ arrivalMs: 50 }, 8)).toBe(1);
    expect(arrivalTick({ arrivalMs: 410 }, 8)).toBe(7);
  });
});
