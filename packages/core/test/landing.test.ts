import { LANDED_SHARE_FLOOR, LandedShare, LandingTally, UNKNOWN_REGION, UNPRICED } from '../src';

describe('LandingTally', () => {
  it('lists the configured regions first, each at zero, with no share or cost until something settles', () => {
    const tally = new LandingTally();
    expect(tally.view(['frankfurt', 'ny'])).toEqual({
      by_region: [
        {
          region: 'frankfurt',
          submitted: 0,
          landed: 0,
          lost: 0,
          tips_paid_lamports: 0,
          landed_share: null,
          lamports_per_landed: null,
        },
        {
          region: 'ny',
          submitted: 0,
          landed: 0,
          lost: 0,
          tips_paid_lamports: 0,
          landed_share: null,
          lamports_per_landed: null,
        },
      ],
      by_contention: [],
    });
  });

  it('counts each bundle by its region and by its contention class, the share over settled bundles only', () => {
    const tally = new LandingTally();
    const hot = { region: 'ny', contention: 'contended' as const };
    const calm = { region: 'frankfurt', contention: 'uncontended' as const };
    for (let i = 0; i < 4; i++) tally.submitted(hot);
    tally.landed(hot, 30_000);
    tally.landed(hot, 50_000);
    tally.lost(hot);
    // The fourth is still in flight: not in the share.
    tally.submitted(calm);
    tally.landed(calm, 1_001);
    const view = tally.view(['frankfurt', 'ny']);
    expect(view.by_region).toEqual([
      {
        region: 'frankfurt',
        submitted: 1,
        landed: 1,
        lost: 0,
        tips_paid_lamports: 1_001,
        landed_share: 1,
        lamports_per_landed: 1_001,
      },
      {
        region: 'ny',
        submitted: 4,
        landed: 2,
        lost: 1,
        tips_paid_lamports: 80_000,
        landed_share: 2 / 3,
        lamports_per_landed: 40_000,
      },
    ]);
    expect(
      view.by_contention.map((c) => [c.contention, c.submitted, c.landed, c.lost, c.lamports_per_landed]),
    ).toEqual([
      ['contended', 4, 2, 1, 40_000],
      ['uncontended', 1, 1, 0, 1_001],
    ]);
  });

  it('takes back a loss when the bundle is found landed after all', () => {
    const tally = new LandingTally();
    const route = { region: 'ny', contention: 'uncontended' as const };
    tally.submitted(route);
    tally.lost(route);
    tally.notLost(route);
    tally.landed(route, 1_000);
    expect(
      tally.view().by_region.map((r) => [r.region, r.submitted, r.landed, r.lost, r.landed_share]),
    ).toEqual([['ny', 1, 1, 0, 1]]);
  });

  it('names what it does not know: an engine not recorded, a tip not priced per CU', () => {
    const tally = new LandingTally();
    tally.submitted({ region: null, contention: null });
    tally.lost({ region: null, contention: null });
    const view = tally.view(['frankfurt']);
    expect(view.by_region.map((r) => [r.region, r.submitted, r.lost, r.landed_share])).toEqual([
      ['frankfurt', 0, 0, null],
      [UNKNOWN_REGION, 1, 1, 0],
    ]);
    expect(view.by_contention).toEqual([
      {
        contention: UNPRICED,
        submitted: 1,
        landed: 0,
        lost: 1,
        tips_paid_lamports: 0,
        landed_share: 0,
        lamports_per_landed: null,
      },
    ]);
  });
});

describe('LandedShare', () => {
  it('starts at 1, follows the recent share of settled bundles, and never goes below its floor', () => {
    const share = new LandedShare();
    expect(share.value(0)).toBe(1);
    // Half of the bundles land, steadily: the share settles near one half.
    for (let i = 0; i < 200; i++) share.observe(i % 2 === 0, 1_000 + i);
    expect(share.value(1_200)).toBeGreaterThan(0.45);
    expect(share.value(1_200)).toBeLessThan(0.55);
    // Every bundle lost: the raw share falls towards 0, admission still counts on the floor.
    for (let i = 0; i < 200; i++) share.observe(false, 2_000 + i);
    expect(share.value(2_200)).toBe(LANDED_SHARE_FLOOR);
  });

  it('reads a slow steady flow as it is: no fading between settlements a few seconds apart', () => {
    const share = new LandedShare();
    // One region at one bundle a second, half of them landing; then one every 5 s.
    for (let i = 0; i < 200; i++) share.observe(i % 2 === 0, i * 1_000);
    expect(share.value(199_000)).toBeGreaterThan(0.45);
    expect(share.value(199_000)).toBeLessThan(0.55);
    for (let i = 0; i < 100; i++) share.observe(i % 4 === 0, 200_000 + i * 5_000);
    expect(share.value(695_000)).toBeLessThan(0.35);
  });

  it('weighs recent bundles most, and fades back towards 1 once nothing settles for a while', () => {
    const share = new LandedShare();
    for (let i = 0; i < 8; i++) share.observe(false, i);
    const afterLosses = share.value(8);
    expect(afterLosses).toBeLessThan(0.65);
    expect(afterLosses).toBeGreaterThan(LANDED_SHARE_FLOOR);
    // Unchanged for 10 s; 30 s after that, two thirds of the loss came back; minutes later, nearly all of it.
    const lost = 1 - afterLosses;
    expect(1 - share.value(8 + 10_000)).toBeCloseTo(lost, 4);
    expect(1 - share.value(8 + 40_000)).toBeCloseTo(lost * Math.exp(-1), 4);
    expect(share.value(8 + 300_000)).toBeGreaterThan(0.999);
    // A landing pulls it up by a sixteenth of the gap.
    const before = share.value(8);
    share.observe(true, 8);
    expect(share.value(8)).toBeCloseTo(before + (1 - before) / 16, 10);
  });
});
