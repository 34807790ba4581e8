import { LeaderBuffer, emptyTimeline, type Policy } from '@solrelay/core';
import { createPorts, type RelayPorts } from '../src/context';
import { Expiry } from '../src/settle/expiry';
import { Settler } from '../src/settle/settle';
import { Evaluator } from '../src/track/evaluate';
import { FaultApplier } from '../src/track/fault';
import type { StoredAttempt, StoredTx } from '../src/store/records';
import { InMemoryTxStore } from '../src/store/store';
import { unitPortOptions } from './helpers/unit-ports';

/**
 * Settlement on its own: the only writer of a transaction's state, over the in-memory store (the store's real
 * tables and rules, no disk), a recording hub and lifecycle log, and upstream stubs that throw if settlement ever
 * touches them.
 */

const SLOT = 500;
const NOW = 1_700_000_000_000;

/** A stub that fails the test on any use: settlement must not reach upstreams or deciders. */
function forbidden(name: string): never {
  return new Proxy(
    {},
    {
      get: (_target, key) => {
        if (key === 'then') return undefined;
        throw new Error(`settlement used ${name}.${String(key)}`);
      },
    },
  ) as never;
}

function rig(policy: Partial<Policy> = {}, leaders?: LeaderBuffer) {
  const store = new InMemoryTxStore(1000);
  const events: Array<{ name: string; data: Record<string, unknown> }> = [];
  const hub = {
    publish: (name: string, data: Record<string, unknown>) => events.push({ name, data }),
  };
  const lifecycle: Array<{ bundle_id: string; stage: string; failure: string | null }> = [];
  const options = unitPortOptions({
    store,
    hub,
    lifecycle: {
      append: (entry: { bundle_id: string; stage: string; failure: string | null }) => {
        lifecycle.push({ bundle_id: entry.bundle_id, stage: entry.stage, failure: entry.failure });
        return Promise.resolve();
      },
    },
    rpc: forbidden('rpc'),
    engine: forbidden('engine'),
    oracle: { ingestLandedTip: jest.fn() },
    leaders: leaders ?? forbidden('leaders'),
    tippers: forbidden('tippers'),
    policy,
    now: () => NOW,
  });
  const ctx: RelayPorts = createPorts(options).ports;
  ctx.chain.advance(SLOT);
  const settle = new Settler(ctx);
  const backToPending: string[] = [];
  settle.signals.on('back-to-pending', ({ txId }) => backToPending.push(txId));
  return { ctx, settle, store, events, lifecycle, backToPending };
}

function attempt(n: number, stage: StoredAttempt['stage']): StoredAttempt {
  return {
    attempt: n,
    bundle_id: `${n}`.repeat(64).slice(0, 64),
    tip_lamports: 10_000,
    tip_tx: 'AA==',
    tip_signature: `tip${n}`,
    tip_account: 'tipAccount',
    tip_last_valid_block_height: 1000,
    bundle_signatures: ['user1', `tip${n}`],
    created_at: NOW - 5000,
    created_slot: SLOT - 20,
    slot_submitted: stage === 'journaled' ? null : SLOT - 19,
    target_slot: SLOT - 16,
    window_end_slot: SLOT - 13,
    leader: 'leader',
    stage,
    outcome: null,
    slot_landed: null,
    floor_at_submit: { p25: 1, p50: 2, p75: 3, p95: 4, p99: 5, ema: 2, stale: false },
    decision: {
      mode: 'reflex',
      bypass: true,
      escalated: false,
      reason: 'test',
      trace: null,
      source: 'bypass',
    },
    reserved_lamports: 15_000,
    released: false,
    leaked: false,
    timeline: {
      ...emptyTimeline(),
      ...(stage === 'journaled' ? {} : { submitted: { slot: SLOT - 19, ts: NOW - 4000 } }),
    },
    send_errors: 0,
  };
}

async function put(
  r: ReturnType<typeof rig>,
  state: StoredTx['state'],
  retries = 0,
  stage: StoredAttempt['stage'] = 'submitted',
  override: Partial<StoredAttempt> = {},
): Promise<StoredTx> {
  const tx: StoredTx = {
    tx_id: 'tx_1',
    state,
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_at: NOW - 10_000,
    enqueued_slot: SLOT - 30,
    expires_at_slot: SLOT + 100,
    wires: ['AA=='],
    signatures: ['user1'],
    blockhashes: ['hash'],
    nonce_accounts: [null],
    fee_payers: ['payer'],
    history: [{ state: 'pending', slot: SLOT - 30, ts: NOW - 10_000 }],
    attempts: [],
    retries,
    last_error: null,
    failure: null,
    landed_slot: null,
    stopped: false,
  };
  await r.store.accept(tx);
  await r.store.addAttempt(tx.tx_id, { ...attempt(retries + 1, stage), ...override });
  return (await r.store.get(tx.tx_id)) as StoredTx;
}

const statusEvents = (r: ReturnType<typeof rig>) =>
  r.events.filter((e) => e.name === 'tx_status_changed').map((e) => e.data.state);

/** The fault applier over `settle` alone (no packing, no tipper pool in these tests). */
function faultsOf(settle: Settler): FaultApplier {
  return new FaultApplier({
    settleFailed: (tx, attempt, outcome, options) => settle.settleFailed(tx, attempt, outcome, options),
    packing: { exclude: () => undefined, excludeAll: () => undefined },
    onTipFailed: () => undefined,
    forgetBlockhash: () => undefined,
  });
}

test('a retryable loss re-pends a submitted transaction, counts a retry, releases the spend and says so', async () => {
  const r = rig();
  const tx = await put(r, 'submitted');
  expect(await r.store.spentSince(0)).toBeGreaterThan(0);
  await r.settle.settleFailed(tx, tx.attempts[0] as StoredAttempt, 'fee_too_low', {
    countRetry: true,
    detail: 'window passed',
  });
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('pending');
  expect(after.retries).toBe(1);
  expect(after.stopped).toBe(false);
  expect(after.failure).toBeNull();
  expect(after.last_error?.code).toBe('RELAY_E_ATTEMPT_LOST');
  expect(after.history.map((h) => h.state)).toEqual(['pending', 'pending']);
  expect(after.history[1]).toEqual({ state: 'pending', slot: SLOT, ts: NOW });
  const a = after.attempts[0] as StoredAttempt;
  expect(a).toMatchObject({ stage: 'failed', outcome: 'fee_too_low', released: true });
  expect(a.timeline.failed).toEqual({ slot: SLOT, ts: NOW });
  expect(await r.store.spentSince(0)).toBe(0);
  expect(statusEvents(r)).toEqual(['pending']);
  const settled = r.events.find((e) => e.name === 'bundle_settled');
  expect(settled?.data).toMatchObject({
    stage: 'failed',
    failure_type: 'fee_too_low',
    retries: 1,
    tx_id: 'tx_1',
  });
  expect(r.lifecycle).toEqual([{ bundle_id: a.bundle_id, stage: 'failed', failure: 'fee_too_low' }]);
  // Settlement calls no decider: it signals, after the journal commit and the events.
  expect(r.backToPending).toEqual(['tx_1']);
  expect((await r.store.counts()).active).toBe(1);
});

test('an attempt adopted from another host is not re-pended while its tip may land (DESIGN §10, rule 3); once dead it is', async () => {
  const r = rig();
  const adopted = { ...(await put(r, 'submitted')), tx_id: 'tx_2', signatures: ['user2'] };
  await r.store.accept({ ...adopted, attempts: [], inherited_attempts: 1 });
  await r.store.addAttempt('tx_2', attempt(1, 'submitted'));
  const tx = (await r.store.get('tx_2')) as StoredTx;
  expect(tx.inherited_attempts).toBe(1);
  const lose = () =>
    r.settle.settleFailed(tx, tx.attempts[0] as StoredAttempt, 'dropped', {
      countRetry: true,
      detail: 'window passed',
    });
  // Block height 990: the tip (last valid at 1000) may still land; the earlier owner may still be sending it.
  r.ctx.chain.advance(SLOT + 1, 990);
  expect(await lose()).toBe(false);
  expect((await r.store.get('tx_2'))?.state).toBe('submitted');
  expect(r.backToPending).toEqual([]);
  // Past its last valid block height and the confirmation margin: provably dead, settled and decided again.
  r.ctx.chain.advance(SLOT + 2, 1000 + 33);
  expect(await lose()).toBe(true);
  expect((await r.store.get('tx_2'))?.state).toBe('pending');
  expect(r.backToPending).toEqual(['tx_2']);
  // An attempt this host built itself after adopting it is settled as usual, its tip live or not.
  await r.store.addAttempt(
    'tx_2',
    { ...attempt(2, 'submitted'), tip_last_valid_block_height: 5000 },
    { expect: { state: 'pending' } },
  );
  const again = (await r.store.get('tx_2')) as StoredTx;
  r.ctx.chain.advance(SLOT + 3, 1000 + 34);
  expect(
    await r.settle.settleFailed(again, again.attempts[1] as StoredAttempt, 'dropped', {
      countRetry: true,
      detail: 'window passed',
    }),
  ).toBe(true);
});

/** `put`'s pending tx_1 with a journaled attempt, and beside it tx_2 (its own signature, no attempt yet) with `extra`. */
async function putSecond(r: ReturnType<typeof rig>, extra: Partial<StoredTx>): Promise<void> {
  const base = await put(r, 'pending', 0, 'journaled');
  await r.store.accept({ ...base, tx_id: 'tx_2', signatures: ['user2'], attempts: [], ...extra });
}

test('an inherited attempt left journaled (its resend refused, or its tip died before it went out) is settled by the expiry pass once its tip cannot land', async () => {
  const r = rig();
  await putSecond(r, { inherited_attempts: 1 });
  await r.store.addAttempt('tx_2', attempt(1, 'journaled'));
  const expiry = new Expiry(r.ctx, r.settle);
  r.ctx.chain.advance(SLOT + 1, 990); // the tip (last valid at 1000) may still land: kept
  await expiry.checkExpiry();
  expect((await r.store.get('tx_2'))?.attempts[0]?.stage).toBe('journaled');
  expect(r.backToPending).toEqual([]);
  r.ctx.chain.advance(SLOT + 2, 1000 + 33); // provably dead: settled, decided again
  await expiry.checkExpiry();
  const after = (await r.store.get('tx_2')) as StoredTx;
  expect(after.attempts[0]).toMatchObject({ stage: 'failed', outcome: 'dropped' });
  expect(after.state).toBe('pending');
  expect(r.backToPending).toEqual(['tx_2']);
  // Not this host's own journaled attempt of tx_1 (no inheritance): left to the sender.
  expect((await r.store.get('tx_1'))?.attempts[0]?.stage).toBe('journaled');
});

test('a transaction past its expiry whose lock a decider keeps busy is still expired: after 8 busy passes the pass waits for the lock', async () => {
  const r = rig();
  await putSecond(r, { expires_at_slot: SLOT + 1 });
  r.ctx.chain.advance(SLOT + 2, 2_000);
  // Its blockhash provably dead, its signature nowhere in the chain's history.
  const expiry = new Expiry(
    {
      ...r.ctx,
      blockhashes: { provablyDead: () => Promise.resolve(true) } as unknown as RelayPorts['blockhashes'],
      rpc: {
        getBlockHeight: () => Promise.resolve(2_000),
        getSignatureStatusesWithContext: () => Promise.resolve({ contextSlot: SLOT + 2, statuses: [null] }),
      } as unknown as RelayPorts['rpc'],
    },
    r.settle,
  );
  // A decider holding the lock through every pass (an agent submitting past the expiry slot, refused each time).
  let release = () => undefined as void;
  void r.ctx.locks.run('tx_2', () => new Promise<void>((resolve) => (release = resolve)));
  for (let pass = 1; pass <= 8; pass++) {
    await expiry.checkExpiry();
    expect((await r.store.get('tx_2'))?.state).toBe('pending');
  }
  const waiting = expiry.checkExpiry();
  release();
  await waiting;
  expect((await r.store.get('tx_2'))?.state).toBe('expired');
});

test('a non-retryable outcome fails the transaction for good and counts an eviction', async () => {
  const r = rig();
  const tx = await put(r, 'submitted');
  await r.settle.settleFailed(tx, tx.attempts[0] as StoredAttempt, 'invalid_bundle', {
    countRetry: false,
    detail: 'engine: bad bundle',
  });
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('failed');
  expect(after.failure).toBe('invalid_bundle');
  expect(after.stopped).toBe(true);
  expect(after.retries).toBe(0);
  expect((await r.store.counts()).evicted).toEqual({ failed: 1 });
  expect((await r.store.counts()).active).toBe(0);
  expect(statusEvents(r)).toEqual(['failed']);
  expect(r.events.find((e) => e.name === 'tx_status_changed')?.data.failure).toBe('invalid_bundle');
  expect(r.backToPending).toEqual([]);
});

test('a retry past max-retries stops attempts: pending, stopped, waiting for proof of expiry', async () => {
  const r = rig({ 'max-retries': 2 });
  const tx = await put(r, 'submitted', 2);
  await r.settle.settleFailed(tx, tx.attempts[0] as StoredAttempt, 'dropped', {
    countRetry: true,
    detail: 'dropped',
  });
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('pending');
  expect(after.retries).toBe(3);
  expect(after.stopped).toBe(true);
  expect(after.failure).toBeNull();
  expect(statusEvents(r)).toEqual(['pending']);
});

test('an attempt settled with final: false leaves the transaction where it is', async () => {
  const r = rig();
  const tx = await put(r, 'submitted');
  await r.settle.settleFailed(tx, tx.attempts[0] as StoredAttempt, 'simulation_failed', {
    countRetry: false,
    detail: 'a user transaction failed on chain',
    final: false,
  });
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('submitted');
  expect(after.attempts[0]?.stage).toBe('failed');
  expect(statusEvents(r)).toEqual([]);
  expect(r.backToPending).toEqual([]);
});

test('moving forward emits every skipped state in order and moves the landed bundle with it', async () => {
  const r = rig();
  const tx = await put(r, 'submitted');
  const a = tx.attempts[0] as StoredAttempt;
  await r.settle.moveTo(tx, 'confirmed', SLOT - 2, NOW, {
    bundleId: a.bundle_id,
    landedSlot: SLOT - 2,
    attempt: a,
  });
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('confirmed');
  expect(after.landed_slot).toBe(SLOT - 2);
  expect(after.history.slice(1).map((h) => h.state)).toEqual(['landed', 'processed', 'confirmed']);
  expect(statusEvents(r)).toEqual(['landed', 'processed', 'confirmed']);
  expect(after.attempts[0]).toMatchObject({ stage: 'confirmed', slot_landed: SLOT - 2 });
  expect(r.lifecycle.map((l) => l.stage)).toEqual(['confirmed']);
});

test('the engine taking an attempt marks it submitted with its target window', async () => {
  const r = rig();
  const tx = await put(r, 'pending', 0, 'journaled');
  await r.settle.markSubmitted(
    tx,
    tx.attempts[0] as StoredAttempt,
    (slot) => ({ slot: slot + 2, end: slot + 5 }),
    'amsterdam',
  );
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('submitted');
  expect(after.attempts[0]).toMatchObject({
    stage: 'submitted',
    slot_submitted: SLOT,
    target_slot: SLOT + 2,
    window_end_slot: SLOT + 5,
    region: 'amsterdam',
  });
  expect(statusEvents(r)).toEqual(['submitted']);
  expect(r.ctx.metrics.landing.view().by_region).toEqual([
    expect.objectContaining({ region: 'amsterdam', submitted: 1, landed: 0, lost: 0 }),
  ]);
});

test('landing figures: a bundle counts once landed (at confirmed, with its tip) or once lost, by region and class', async () => {
  const pricing = {
    compute_units: 10_000,
    tip_per_cu: 1,
    bid_per_cu: 1,
    contention: 'contended' as const,
    signal: 'test',
  };
  const r = rig();
  const won = await put(r, 'submitted', 0, 'submitted', {
    region: 'ny',
    decision: { ...attempt(1, 'submitted').decision, pricing },
  });
  const a = won.attempts[0] as StoredAttempt;
  const landed = { bundleId: a.bundle_id, landedSlot: SLOT - 2, attempt: a };
  await r.settle.moveTo(won, 'processed', SLOT - 2, NOW, landed);
  // Landed and processed, not yet confirmed: not counted (a processed block can still be orphaned).
  expect(r.ctx.metrics.landing.view().by_region).toEqual([]);
  await r.settle.moveTo((await r.store.get(won.tx_id)) as StoredTx, 'confirmed', SLOT - 1, NOW, landed);
  await r.settle.moveTo((await r.store.get(won.tx_id)) as StoredTx, 'finalized', SLOT, NOW, landed);
  // A bundle an engine took that lost, in another region, its tip not priced per CU; and one no engine took.
  const other = rig();
  const lost = await put(other, 'submitted', 0, 'submitted', { region: 'tokyo' });
  await other.settle.settleFailed(lost, lost.attempts[0] as StoredAttempt, 'fee_too_low', {
    countRetry: true,
    detail: 'lost',
  });
  const third = rig();
  const unsent = await put(third, 'pending', 0, 'journaled', { region: null });
  expect(
    await third.settle.settleFailed(unsent, unsent.attempts[0] as StoredAttempt, 'dropped', {
      countRetry: false,
      detail: 'never sent',
    }),
  ).toBe(true);
  expect(third.ctx.metrics.landing.view().by_region).toEqual([]);
  const view = r.ctx.metrics.landing.view(['ny', 'tokyo']);
  expect(view.by_region.map((x) => [x.region, x.submitted, x.landed, x.lost, x.tips_paid_lamports])).toEqual([
    ['ny', 0, 1, 0, 10_000],
    ['tokyo', 0, 0, 0, 0],
  ]);
  expect(view.by_contention.map((x) => [x.contention, x.landed, x.lost])).toEqual([['contended', 1, 0]]);
  const lostView = other.ctx.metrics.landing.view();
  expect(lostView.by_region.map((x) => [x.region, x.landed, x.lost])).toEqual([['tokyo', 0, 1]]);
  expect(lostView.by_contention.map((x) => [x.contention, x.lost])).toEqual([['unpriced', 1]]);
  const text = await r.ctx.metrics.registry.metrics();
  expect(text).toContain('relay_bundles_landed_total{region="ny",contention="contended"} 1');
  expect(text).toContain('relay_tips_paid_lamports_total{region="ny",contention="contended"} 10000');
  expect(await other.ctx.metrics.registry.metrics()).toContain(
    'relay_bundles_lost_total{region="tokyo",contention="unpriced"} 1',
  );
});

test('landing figures: a bundle judged lost that lands after all is taken back from the lost; the landed share hears of losses that cost a retry only', async () => {
  const r = rig();
  const settled: boolean[] = [];
  r.settle.signals.on('bundle-settled', ({ landed }) => settled.push(landed));
  const tx = await put(r, 'submitted', 0, 'submitted', { region: 'ny' });
  const a = tx.attempts[0] as StoredAttempt;
  // Judged lost (its window passed): back to pending for another attempt, a loss that costs a send token.
  await r.settle.settleFailed(tx, a, 'dropped', { countRetry: true, detail: 'window passed' });
  expect(r.ctx.metrics.landing.view().by_region).toEqual([
    expect.objectContaining({ region: 'ny', landed: 0, lost: 1 }),
  ]);
  expect(settled).toEqual([false]);
  // Its bundle is on chain after all: resurrected and confirmed.
  const lost = (await r.store.get(tx.tx_id)) as StoredTx;
  const landed = { bundleId: a.bundle_id, landedSlot: SLOT - 1, attempt: lost.attempts[0] as StoredAttempt };
  await r.settle.moveTo(lost, 'confirmed', SLOT - 1, NOW, landed);
  expect(r.ctx.metrics.landing.view().by_region).toEqual([
    expect.objectContaining({ region: 'ny', landed: 1, lost: 0, landed_share: 1 }),
  ]);
  expect(settled).toEqual([false, true]);
  expect(await r.ctx.metrics.registry.metrics()).toContain(
    'relay_bundles_found_landed_total{region="ny",contention="unpriced"} 1',
  );
  // A loss after which nothing goes out again (the caller stopped it) is counted lost, not a token spent.
  const other = rig();
  const stopped: boolean[] = [];
  other.settle.signals.on('bundle-settled', ({ landed }) => stopped.push(landed));
  const last = await put(other, 'submitted', 0, 'submitted', { region: 'ny' });
  await other.settle.settleFailed(last, last.attempts[0] as StoredAttempt, 'dropped', {
    countRetry: false,
    detail: 'stopped',
    stop: true,
  });
  expect(other.ctx.metrics.landing.view().by_region).toEqual([expect.objectContaining({ lost: 1 })]);
  expect(stopped).toEqual([]);
});

test('a landing slot that died puts the transaction back to pending and drops the landed attempt', async () => {
  const r = rig();
  const tx = await put(r, 'submitted');
  const a = tx.attempts[0] as StoredAttempt;
  await r.settle.moveTo(tx, 'processed', SLOT - 2, NOW, { landedSlot: SLOT - 2, attempt: a });
  await r.settle.unland('tx_1', SLOT - 2);
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('pending');
  expect(after.landed_slot).toBeNull();
  expect(after.retries).toBe(0);
  expect(after.attempts[0]).toMatchObject({ stage: 'failed', outcome: 'dropped' });
  expect(statusEvents(r)).toEqual(['landed', 'processed', 'pending']);
});

describe('a lost attempt whose tip lands alone after the transaction ended', () => {
  async function finalizedWithLostAttempt(r: ReturnType<typeof rig>) {
    const tx = await put(r, 'finalized', 0, 'failed');
    await r.store.transition(
      tx.tx_id,
      {},
      { attempts: [{ n: 1, set: { outcome: 'dropped', released: true } }] },
    );
    return (await r.store.get(tx.tx_id)) as StoredTx;
  }

  test('is recorded as leaked, with its lifecycle entry and the metric, once confirmed', async () => {
    const r = rig();
    const tx = await finalizedWithLostAttempt(r);
    const evaluator = new Evaluator(r.ctx, r.settle, faultsOf(r.settle));
    // Processed only: it can still roll back with its block, so it is not counted yet.
    await evaluator.watchLateTips(
      tx.tx_id,
      new Map([['tip1', { slot: SLOT - 2, err: null, confirmationStatus: 'processed' }]]),
    );
    expect((await r.store.get(tx.tx_id))?.attempts[0]?.leaked).toBe(false);
    await evaluator.watchLateTips(
      tx.tx_id,
      new Map([['tip1', { slot: SLOT - 2, err: null, confirmationStatus: 'confirmed' }]]),
    );
    const after = (await r.store.get(tx.tx_id))!;
    expect(after.state).toBe('finalized');
    expect(after.attempts[0]).toMatchObject({ leaked: true, slot_landed: SLOT - 2, released: false });
    expect(r.lifecycle.at(-1)).toMatchObject({ bundle_id: after.attempts[0]!.bundle_id, stage: 'failed' });
    expect(
      (await r.ctx.metrics.registry.getSingleMetricAsString('relay_tips_leaked_lamports_total'))
        .trim()
        .split('\n')
        .at(-1),
    ).toMatch(/ 10000$/);
    // Seen again: counted once.
    await evaluator.watchLateTips(
      tx.tx_id,
      new Map([['tip1', { slot: SLOT - 2, err: null, confirmationStatus: 'finalized' }]]),
    );
    expect(r.lifecycle.filter((e) => e.bundle_id === after.attempts[0]!.bundle_id)).toHaveLength(1);
  });

  test('not when its slot died', async () => {
    const r = rig();
    const tx = await finalizedWithLostAttempt(r);
    r.ctx.chain.deadSlots.add(SLOT - 2);
    await new Evaluator(r.ctx, r.settle, faultsOf(r.settle)).watchLateTips(
      tx.tx_id,
      new Map([['tip1', { slot: SLOT - 2, err: null, confirmationStatus: 'confirmed' }]]),
    );
    expect((await r.store.get(tx.tx_id))?.attempts[0]?.leaked).toBe(false);
  });
});

/**
 * Leaders in windows of four from slot 0: `eng` (a bundle-engine validator) leads the windows whose first slot is in
 * `engineWindows`, `plain` every other one.
 */
function leadersWith(engineWindows: number[], upTo = SLOT + 64): LeaderBuffer {
  const leaders = new LeaderBuffer();
  leaders.advance(SLOT - 40);
  const windows: string[] = [];
  for (let first = 0; first <= upTo; first += 4)
    windows.push(engineWindows.includes(first) ? 'eng' : 'plain');
  leaders.ingestLeaderWindows(0, windows);
  leaders.setBundleEngineValidators(['eng']);
  return leaders;
}

test('a window lost inside a consensus migration window counts no retry (DESIGN §12)', async () => {
  const r = rig({}, leadersWith([SLOT - 20]));
  // The cluster announced a migration at a slot before the attempt's window (SLOT - 13): the window lies in it.
  r.ctx.chain.consensus.observeMigrationSlot(SLOT - 20);
  r.ctx.chain.consensus.observeSlot({ slot: SLOT, status: 'processed', parent: SLOT - 1 });
  expect(r.ctx.chain.consensus.snapshot().migrating).toBe(true);
  const tx = await put(r, 'submitted');
  await r.settle.settleFailed(tx, tx.attempts[0] as StoredAttempt, 'dropped', {
    countRetry: true,
    detail: 'window passed',
  });
  const after = (await r.store.get('tx_1')) as StoredTx;
  expect(after.state).toBe('pending');
  expect(after.retries).toBe(0);
});

describe('a window lost to a migration is judged by the slots the engine auctioned the bundle in', () => {
  // Sent at B - 1, the last slot of a bundle-engine leader's window: relay's own target window is that slot alone
  // (B - 1 .. B - 1, before the boundary), but the engine auctions the bundle in the next bundle-engine leader's
  // slots, B .. B + 3, and B + 1 .. B + 3 are vote-only: the auction was cut by the migration.
  const B = SLOT - 8; // the boundary: slots B + 1 .. are the vote-only window (still open at SLOT)
  function lostAtTheBoundary(engineWindows: number[]) {
    const r = rig({}, leadersWith(engineWindows));
    r.ctx.chain.consensus.observeMigrationSlot(B);
    r.ctx.chain.consensus.observeSlot({ slot: SLOT, status: 'processed', parent: SLOT - 1 });
    const sent: StoredAttempt = {
      ...attempt(1, 'submitted'),
      slot_submitted: B - 1,
      target_slot: B - 1,
      window_end_slot: B - 1,
      timeline: { ...emptyTimeline(), submitted: { slot: B - 1, ts: NOW - 4000 } },
    };
    return { r, sent };
  }

  test('sent at the last slot of a leader before the boundary, the next leader past it: no retry', async () => {
    // The old rule (relay's window end, B - 1, in the migration window?) counted one here.
    const { r, sent } = lostAtTheBoundary([B - 4, B]);
    expect(r.ctx.chain.consensus.inMigrationWindow(sent.window_end_slot as number)).toBe(false);
    const tx = await put(r, 'submitted', 0, 'submitted', sent);
    await r.settle.settleFailed(tx, sent, 'dropped', { countRetry: true, detail: 'window passed' });
    const after = (await r.store.get('tx_1')) as StoredTx;
    expect(after.state).toBe('pending');
    expect(after.retries).toBe(0);
  });

  test('the same loss with the next bundle-engine leader after the window closed counts one', async () => {
    // The window closes: Alpenglow finalizes a slot past the boundary while the processed tip is SLOT.
    const { r, sent } = lostAtTheBoundary([B - 4, SLOT + 4]);
    r.ctx.chain.consensus.observeSlot({ slot: SLOT - 1, status: 'finalized' });
    expect(r.ctx.chain.consensus.snapshot().migrating).toBe(false);
    const tx = await put(r, 'submitted', 0, 'submitted', sent);
    await r.settle.settleFailed(tx, sent, 'dropped', { countRetry: true, detail: 'window passed' });
    expect(((await r.store.get('tx_1')) as StoredTx).retries).toBe(1);
  });
});

describe("the give-up slot does not count a migration window's vote-only slots (DESIGN §12, review m5)", () => {
  // Enqueued at SLOT - 30 with its expiry slot at SLOT - 5, lost at SLOT: past the expiry slot as counted in slots.
  // A migration at SLOT - 20 made SLOT - 19 .. SLOT - 10 vote-only (the window closed when Alpenglow finalized SLOT - 9,
  // its first block past the boundary): ten slots in which nothing could land, so relay gives up at SLOT + 5, not
  // SLOT - 5.
  async function lostAfter(migration: boolean) {
    const r = rig({}, leadersWith([SLOT - 40]));
    if (migration) {
      r.ctx.chain.consensus.observeMigrationSlot(SLOT - 20);
      r.ctx.chain.consensus.observeSlot({ slot: SLOT - 9, status: 'processed', parent: SLOT - 10 });
      r.ctx.chain.consensus.observeSlot({ slot: SLOT - 9, status: 'finalized' });
      expect(r.ctx.chain.consensus.voteOnlyWindows()).toEqual([{ first: SLOT - 19, last: SLOT - 10 }]);
    }
    const tx = await put(r, 'submitted');
    await r.store.transition(tx.tx_id, { state: 'submitted' }, { set: { expires_at_slot: SLOT - 5 } });
    const stored = (await r.store.get('tx_1')) as StoredTx;
    expect(r.ctx.chain.deadlineOf(stored)).toBe(migration ? SLOT + 5 : SLOT - 5);
    await r.settle.settleFailed(stored, stored.attempts[0] as StoredAttempt, 'dropped', {
      countRetry: true,
      detail: 'window passed',
    });
    return (await r.store.get('tx_1')) as StoredTx;
  }

  test('without a migration, a loss past the expiry slot stops attempts', async () => {
    expect(await lostAfter(false)).toMatchObject({ state: 'pending', stopped: true, retries: 1 });
  });

  test('after a vote-only window it lived through, the same loss re-pends it for another attempt', async () => {
    expect(await lostAfter(true)).toMatchObject({ state: 'pending', stopped: false });
  });
});

test('a user transaction that failed on chain fails the transaction only once its block is confirmed', async () => {
  const r = rig();
  await put(r, 'submitted');
  const evaluator = new Evaluator(r.ctx, r.settle, faultsOf(r.settle));
  const read = (confirmationStatus: string) =>
    new Map([
      ['user1', { slot: SLOT - 2, err: { InstructionError: [0, 'Custom'] }, confirmationStatus }],
      ['tip1', { slot: SLOT - 2, err: null, confirmationStatus }],
    ]);
  // Processed only: its block may still leave the chain (an abandoned fork), and then the failure never happened.
  await evaluator.evaluate('tx_1', read('processed'), { slot: SLOT, ts: NOW });
  expect((await r.store.get('tx_1'))?.state).toBe('submitted');
  await evaluator.evaluate('tx_1', read('confirmed'), { slot: SLOT, ts: NOW });
  const after = (await r.store.get('tx_1'))!;
  expect(after.state).toBe('failed');
  expect(after.failure).toBe('simulation_failed');
});
