import { DEFAULT_POLICY, decideReflex, escalationCeiling, type Policy } from '@solrelay/core';
import fc from 'fast-check';
import {
  buildSnapshot,
  checkModelAnswer,
  chooseTier,
  leaderViewFromSlotUpdate,
  reflexFor,
  violationOf,
  type DecisionWorld,
  type TrackedTx,
} from '../src';
import { reflexPlan } from '../src/reconcile';

const FLOOR = {
  p25: 5_000,
  p50: 10_000,
  p75: 40_000,
  p95: 500_000,
  p99: 1_500_000,
  ema: 9_000,
  stale: false,
};

function tx(extra: Partial<TrackedTx> = {}): TrackedTx {
  return {
    tx_id: 'tx_1',
    priority: 'normal',
    max_tip: null,
    tip: 'auto',
    enqueue_slot: 100,
    expires_at_slot: 250,
    retries: 0,
    previous: null,
    compute_units: null,
    contention: null,
    status: 'pending',
    cooldown_until_slot: 0,
    cycle_started_ms: 0,
    ...extra,
  };
}

function world(
  extra: {
    slot?: number;
    next?: number | null;
    known?: boolean;
    floor?: Partial<typeof FLOOR>;
    policy?: Partial<Policy>;
  } = {},
): DecisionWorld {
  const slot = extra.slot ?? 120;
  const next = extra.next === undefined ? slot : extra.next;
  const event = {
    slot,
    leader: 'L',
    bundle_engine_leader: extra.known === false ? null : next === slot,
    next_bundle_engine_slot: extra.known === false ? null : next,
  };
  return {
    slot,
    leaders: leaderViewFromSlotUpdate(event),
    leader: { identity: 'L', bundle_engine: event.bundle_engine_leader, next_bundle_engine_slot: next },
    floor: { ...FLOOR, ...extra.floor },
    policy: { ...DEFAULT_POLICY, ...extra.policy },
  };
}

type Expect = { action: 'submit' | 'hold' | 'stop'; tip?: number; hard?: string[] };
const reflexCases: Array<[string, Partial<TrackedTx>, Parameters<typeof world>[0], Expect]> = [
  ['first attempt, normal: the p75 floor', {}, {}, { action: 'submit', tip: 40_000, hard: [] }],
  [
    'high priority: one percentile up (p95)',
    { priority: 'high' },
    {},
    { action: 'submit', tip: 500_000, hard: [] },
  ],
  [
    'low priority: one percentile down (p50)',
    { priority: 'low' },
    {},
    { action: 'submit', tip: 10_000, hard: [] },
  ],
  [
    'policy pins priority high',
    {},
    { policy: { priority: 'high' } },
    { action: 'submit', tip: 500_000, hard: [] },
  ],
  ['floor below min-tip: min-tip', {}, { floor: { p75: 200 } }, { action: 'submit', tip: 1_000, hard: [] }],
  [
    'floor above max-tip: the cap, a hard case',
    {},
    { floor: { p75: 3_000_000 } },
    { action: 'submit', tip: 2_000_000, hard: ['tip_at_cap'] },
  ],
  [
    'caller max_tip below the floor: the caller cap, a hard case',
    { max_tip: 20_000 },
    {},
    { action: 'submit', tip: 20_000, hard: ['tip_at_cap'] },
  ],
  [
    'stale tip data: a hard case',
    {},
    { floor: { stale: true } },
    { action: 'submit', tip: 40_000, hard: ['stale_tip_data'] },
  ],
  [
    'fee_too_low retry: up to the floor',
    { retries: 1, previous: { tip_lamports: 30_000, outcome: 'fee_too_low' } },
    {},
    { action: 'submit', tip: 40_000, hard: ['fee_too_low_retry'] },
  ],
  [
    'fee_too_low retry: at most escalation-step',
    { retries: 1, previous: { tip_lamports: 30_000, outcome: 'fee_too_low' } },
    { floor: { p75: 900_000 } },
    { action: 'submit', tip: 80_000, hard: ['fee_too_low_retry'] },
  ],
  [
    'fee_too_low retry above the floor: the previous tip',
    { retries: 1, previous: { tip_lamports: 60_000, outcome: 'fee_too_low' } },
    {},
    { action: 'submit', tip: 60_000, hard: ['fee_too_low_retry'] },
  ],
  [
    'dropped retry: the same tip',
    { retries: 1, previous: { tip_lamports: 33_000, outcome: 'dropped' } },
    {},
    { action: 'submit', tip: 33_000, hard: [] },
  ],
  ['included tip: 0', { tip: 'included' }, {}, { action: 'submit', tip: 0, hard: [] }],
  ['bundle-engine leader 2 slots ahead: submit', {}, { next: 122 }, { action: 'submit', tip: 40_000 }],
  ['no bundle-engine leader within 2 slots: hold', {}, { next: 123 }, { action: 'hold' }],
  ['no bundle-engine leader in the lookahead: hold', {}, { next: null }, { action: 'hold' }],
  [
    'bundle-engine set unknown: submit without holding',
    {},
    { known: false },
    { action: 'submit', tip: 40_000 },
  ],
  ['past the expiry slot: stop', { expires_at_slot: 119 }, {}, { action: 'stop' }],
  [
    'retries exhausted: stop',
    { retries: 4, previous: { tip_lamports: 30_000, outcome: 'dropped' } },
    {},
    { action: 'stop' },
  ],
  [
    'a non-retryable outcome: stop',
    { retries: 1, previous: { tip_lamports: 30_000, outcome: 'simulation_failed' } },
    {},
    { action: 'stop' },
  ],
];

test.each(reflexCases)('reflex: %s', (_name, txExtra, worldExtra, expected) => {
  const decision = reflexFor(tx(txExtra), world(worldExtra));
  expect(decision.action).toBe(expected.action);
  if (decision.action === 'submit') {
    if (expected.tip !== undefined) expect(decision.tip_lamports).toBe(expected.tip);
    if (expected.hard) expect(decision.hard_reasons).toEqual(expected.hard);
  }
});

const tierCases: Array<[string, 'reflex' | 'cortex', boolean, boolean, ReturnType<typeof chooseTier>]> = [
  [
    'reflex, easy case',
    'reflex',
    false,
    true,
    { tier: 'reflex', ask_model: false, escalated: false, unavailable: null },
  ],
  [
    'reflex, hard case: escalate',
    'reflex',
    true,
    true,
    { tier: 'reflex', ask_model: true, escalated: true, unavailable: null },
  ],
  [
    'reflex, hard case, no model',
    'reflex',
    true,
    false,
    { tier: 'reflex', ask_model: false, escalated: false, unavailable: 'escalation_unavailable' },
  ],
  [
    'cortex: always the model',
    'cortex',
    false,
    true,
    { tier: 'cortex', ask_model: true, escalated: false, unavailable: null },
  ],
  [
    'cortex, hard case: the model, not an escalation',
    'cortex',
    true,
    true,
    { tier: 'cortex', ask_model: true, escalated: false, unavailable: null },
  ],
  [
    'cortex without a model: reflex, said why',
    'cortex',
    false,
    false,
    { tier: 'reflex', ask_model: false, escalated: false, unavailable: 'cortex_unavailable' },
  ],
];

test.each(tierCases)('tier: %s', (_name, mode, hard, modelAvailable, expected) => {
  const reflex = {
    action: 'submit' as const,
    tip_lamports: 1,
    percentile: 'p75' as const,
    reason: '',
    hard,
    hard_reasons: hard ? (['stale_tip_data'] as const).slice() : [],
  };
  expect(chooseTier(mode, reflex, modelAvailable)).toEqual(expected);
});

const RANGE = { min: 1_000, max: 80_000 };
const answerCases: Array<[string, unknown, string | { tip: number; action: string }]> = [
  [
    'a good submit',
    { action: 'submit', tip_lamports: 50_000, rationale: 'ok' },
    { tip: 50_000, action: 'submit' },
  ],
  [
    'a hold (its tip is not used)',
    { action: 'hold', tip_lamports: 9_999_999, rationale: 'wait' },
    { tip: 9_999_999, action: 'hold' },
  ],
  ['tip above the range', { action: 'submit', tip_lamports: 80_001, rationale: '' }, 'tip_above_max'],
  ['tip below min-tip', { action: 'submit', tip_lamports: 999, rationale: '' }, 'tip_below_min'],
  ['negative tip', { action: 'submit', tip_lamports: -5, rationale: '' }, 'tip_negative'],
  ['non-integer tip', { action: 'submit', tip_lamports: 1_500.5, rationale: '' }, 'tip_not_an_integer'],
  ['tip as a string', { action: 'submit', tip_lamports: '5000', rationale: '' }, 'tip_not_an_integer'],
  [
    'NaN-like tip',
    { action: 'submit', tip_lamports: Number.POSITIVE_INFINITY, rationale: '' },
    'tip_not_an_integer',
  ],
  ['wrong action', { action: 'send_now', tip_lamports: 5_000, rationale: '' }, 'invalid_action'],
  ['"drop" is not an action here', { action: 'drop', tip_lamports: 5_000, rationale: '' }, 'invalid_action'],
  ['not an object', 'submit 5000', 'not_an_object'],
  ['an array', [1, 2], 'not_an_object'],
  [
    'rationale not a string',
    { action: 'submit', tip_lamports: 5_000, rationale: 7 },
    'rationale_not_a_string',
  ],
];

test.each(answerCases)('model answer: %s', (_name, input, expected) => {
  const result = checkModelAnswer(input, RANGE);
  if (typeof expected === 'string') expect(result).toEqual({ ok: false, problem: expected });
  else
    expect(result).toMatchObject({
      ok: true,
      answer: { tip_lamports: expected.tip, action: expected.action },
    });
});

test('model answer for an included-tip transaction: the tip is always 0', () => {
  expect(
    checkModelAnswer({ action: 'submit', tip_lamports: 70_000, rationale: '' }, { min: 0, max: 0 }),
  ).toMatchObject({
    ok: true,
    answer: { tip_lamports: 0 },
  });
});

test('property: a reflex submit never breaks the policy the sidecar checks', () => {
  const lamports = fc.integer({ min: 0, max: 5_000_000 });
  fc.assert(
    fc.property(
      fc.record({
        p25: lamports,
        p50: lamports,
        p75: lamports,
        p95: lamports,
        p99: lamports,
        ema: lamports,
        stale: fc.boolean(),
      }),
      fc.constantFrom('low', 'normal', 'high') as fc.Arbitrary<'low' | 'normal' | 'high'>,
      fc.option(fc.integer({ min: 1_000, max: 3_000_000 }), { nil: null }),
      fc.option(
        fc.record({
          tip_lamports: fc.integer({ min: 1_000, max: 2_000_000 }),
          outcome: fc.constantFrom('fee_too_low', 'dropped') as fc.Arbitrary<'fee_too_low' | 'dropped'>,
        }),
        { nil: null },
      ),
      fc.integer({ min: 0, max: 200_000 }),
      (floor, priority, maxTip, previous, step) => {
        const t = tx({ priority, max_tip: maxTip, previous, retries: previous ? 1 : 0 });
        const w = { ...world({ policy: { 'escalation-step': step } }), floor };
        const decision = reflexFor(t, w);
        if (decision.action !== 'submit') return true;
        return violationOf(decision.tip_lamports, t, w) === null;
      },
    ),
    { numRuns: 500 },
  );
});

describe('pricing per requested CU (issue 30: the agent prices as the sidecar fallback does)', () => {
  // relay's tip transaction at most (sidecar TIP_TX_MAX_COMPUTE_UNITS), added to every bundle reflex prices.
  const TIP_TX_CU = 1_399;
  const quiet = { class: 'uncontended', write_price_micro_lamports: 0, slots: 150 } as const;
  const busy = { class: 'contended', write_price_micro_lamports: 50_000, slots: 150 } as const;
  const cheap = { policy: { 'min-tip': 100 } };

  test('a light 3k-CU transfer bids far below a 1.4M-CU contended swap at the same percentile', () => {
    const transfer = reflexFor(tx({ compute_units: 3_000 + TIP_TX_CU, contention: quiet }), world(cheap));
    const swap = reflexFor(tx({ compute_units: 1_400_000 + TIP_TX_CU, contention: busy }), world(cheap));
    const flat = reflexFor(tx(), world(cheap));
    if (transfer.action !== 'submit' || swap.action !== 'submit' || flat.action !== 'submit')
      throw new Error('expected submits');
    expect(transfer.percentile).toBe(swap.percentile);
    // Without the bundle both bid the flat p75 floor (40,000): the CU is what tells them apart.
    expect(flat.tip_lamports).toBe(40_000);
    expect(flat.pricing ?? null).toBeNull();
    expect(transfer.tip_lamports * 100).toBeLessThan(swap.tip_lamports);
    expect(transfer.tip_lamports).toBeLessThan(flat.tip_lamports);
    expect(swap.tip_lamports).toBeGreaterThan(flat.tip_lamports);
    expect(transfer.pricing).toMatchObject({ compute_units: 3_000 + TIP_TX_CU, contention: 'uncontended' });
    expect(swap.pricing).toMatchObject({ compute_units: 1_400_000 + TIP_TX_CU, contention: 'contended' });
    expect(transfer.pricing!.bid_per_cu).toBeLessThan(swap.pricing!.bid_per_cu);
  });

  test('the same inputs give the same decision core gives the fallback (decideReflex with the bundle)', () => {
    const t = tx({ compute_units: 200_000 + TIP_TX_CU, contention: busy });
    const w = world(cheap);
    const expected = decideReflex({
      tx: {
        priority: t.priority,
        max_tip: t.max_tip,
        tip: t.tip,
        enqueue_slot: t.enqueue_slot,
        expires_at_slot: t.expires_at_slot,
        retries: t.retries,
      },
      floor: w.floor,
      leaders: w.leaders,
      policy: w.policy,
      previous: null,
      slot: w.slot,
      bundle: { compute_units: 200_000 + TIP_TX_CU, contention: busy },
    });
    expect(reflexFor(t, w)).toEqual(expected);
  });

  test('no contention reading yet: priced as unknown (as contended), still per CU', () => {
    const unread = reflexFor(tx({ compute_units: 3_000 + TIP_TX_CU }), world(cheap));
    const contended = reflexFor(
      tx({
        compute_units: 3_000 + TIP_TX_CU,
        contention: { class: 'contended', write_price_micro_lamports: 0, slots: 150 },
      }),
      world(cheap),
    );
    if (unread.action !== 'submit' || contended.action !== 'submit') throw new Error('expected submits');
    expect(unread.pricing).toMatchObject({ compute_units: 3_000 + TIP_TX_CU, contention: 'unknown' });
    expect(unread.tip_lamports).toBe(contended.tip_lamports);
  });

  test('a retry reprices from the previous attempt tip per CU over its CU', () => {
    const previous = { tip_lamports: 10_000, outcome: 'dropped' as const, compute_units: 10_000 };
    const policy: Policy = { ...DEFAULT_POLICY, 'min-tip': 100, 'max-tip': 10_000_000 };
    const retry = reflexFor(
      tx({ retries: 1, previous, compute_units: 20_000, contention: quiet }),
      world({ policy }),
    );
    if (retry.action !== 'submit') throw new Error('expected a submit');
    // 1 lamport per CU over twice the CU (the previous attempt's rank kept), under the escalation ceiling.
    expect(retry.tip_lamports).toBe(Math.min(20_000, escalationCeiling(10_000, policy)));
    expect(retry.tip_lamports).toBeGreaterThan(10_000);
  });

  test('the snapshot the model reads carries the CU, the contention and reflex per-CU suggestion', () => {
    const t = tx({ compute_units: 1_400_000 + TIP_TX_CU, contention: busy });
    const w = world(cheap);
    const reflex = reflexFor(t, w);
    if (reflex.action !== 'submit' || !reflex.pricing) throw new Error('expected a per-CU submit');
    const snapshot = buildSnapshot(t, w, reflex);
    expect(snapshot).toMatchObject({
      compute_units: 1_400_000 + TIP_TX_CU,
      contention: { class: 'contended', write_price_micro_lamports: 50_000 },
      reflex: {
        tip_lamports: reflex.tip_lamports,
        pricing: {
          tip_per_cu: reflex.pricing.tip_per_cu,
          bid_per_cu: reflex.pricing.bid_per_cu,
          signal: reflex.pricing.signal,
        },
      },
    });
    // Without a CU count the snapshot says nothing of it (and reflex no per-CU pricing).
    const flat = buildSnapshot(tx(), w, reflexFor(tx(), w));
    expect(flat.compute_units).toBeUndefined();
    expect(flat.contention).toBeUndefined();
    expect(flat.reflex.pricing).toBeUndefined();
  });

  test('the submit plan carries the pricing; the trace records the inputs', () => {
    const t = tx({ compute_units: 3_000 + TIP_TX_CU, contention: quiet });
    const w = world(cheap);
    const reflex = reflexFor(t, w);
    if (reflex.action !== 'submit' || !reflex.pricing) throw new Error('expected a per-CU submit');
    const choice = chooseTier('reflex', reflex, false);
    const plan = reflexPlan(choice, buildSnapshot(t, w, reflex), reflex);
    expect(plan.pricing).toEqual({
      bid_per_cu: reflex.pricing.bid_per_cu,
      contention: 'uncontended',
      signal: reflex.pricing.signal,
    });
    expect(plan.trace.inputs).toMatchObject({
      compute_units: 3_000 + TIP_TX_CU,
      contention: { class: 'uncontended' },
    });
  });
});

test('a migration window the sidecar reported moves the deadline: reflex submits past the stored expiry slot', () => {
  // Stored expiry 250, now 260: without the window the transaction is past its give-up slot.
  const late = world({ slot: 260 });
  expect(reflexFor(tx(), late).action).toBe('stop');
  // The sidecar saw vote-only slots 200..219 (20 slots of no user transactions): the deadline is 270.
  const moved: DecisionWorld = { ...late, vote_only_windows: [{ first: 200, last: 219 }] };
  expect(reflexFor(tx(), moved).action).toBe('submit');
  expect(violationOf(10_000, tx(), moved)).toBeNull();
  expect(buildSnapshot(tx(), moved, reflexFor(tx(), moved)).expires_at_slot).toBe(270);
  // Past the moved deadline it stops again; a window still open keeps it from being reached.
  expect(reflexFor(tx(), { ...moved, slot: 271 }).action).toBe('stop');
  expect(reflexFor(tx(), { ...late, vote_only_windows: [{ first: 200, last: null }] }).action).toBe('submit');
});
