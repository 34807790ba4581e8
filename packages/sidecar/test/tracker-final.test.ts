import { createPorts } from '../src/context';
import { Settler } from '../src/settle/settle';
import type { StoredTx } from '../src/store/records';
import { InMemoryTxStore } from '../src/store/store';
import { Tracker } from '../src/track/tracker';
import { unitPortOptions } from './helpers/unit-ports';

/**
 * The tracker's `final` pass (issue-31 review m6): under Alpenglow, a finalized-slot report reads the landings it
 * covers at once; under TowerBFT (or while the consensus is unknown) it reads nothing, and the slot's pass does.
 * The tracker runs over the in-memory store; the status read and the evaluator record what they were asked.
 */

const SLOT = 500;
const NOW = 1_700_000_000_000;

function rig() {
  const store = new InMemoryTxStore(1000);
  const reads: string[][] = [];
  const rpc = {
    getSignatureStatusesWithContext: (signatures: string[]) => {
      reads.push([...signatures]);
      return Promise.resolve({ contextSlot: SLOT, statuses: signatures.map(() => null) });
    },
  };
  const options = unitPortOptions({
    store,
    hub: { publish: () => undefined },
    lifecycle: { append: () => Promise.resolve() },
    rpc,
    engine: {},
    oracle: { ingestLandedTip: () => undefined },
    leaders: {},
    tippers: {},
    now: () => NOW,
  });
  const ctx = createPorts(options).ports;
  ctx.chain.advance(SLOT);
  const evaluated: string[] = [];
  const evaluator = {
    evaluate: (txId: string) => {
      evaluated.push(txId);
      return Promise.resolve();
    },
    watchLateTips: () => Promise.resolve(),
  };
  const expiry = { checkExpiry: jest.fn(() => Promise.resolve()) };
  const tracker = new Tracker(ctx, new Settler(ctx), evaluator as never, expiry as never, {
    apply: () => Promise.resolve(),
  });
  return { ctx, store, tracker, reads, evaluated, expiry };
}

/** A transaction in `state`, landed at `landedSlot`. */
async function landed(r: ReturnType<typeof rig>, txId: string, state: StoredTx['state'], landedSlot: number) {
  await r.store.accept({
    tx_id: txId,
    state,
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_at: NOW - 10_000,
    enqueued_slot: landedSlot - 5,
    expires_at_slot: SLOT + 100,
    wires: ['AA=='],
    signatures: [`${txId}-sig`],
    blockhashes: ['hash'],
    nonce_accounts: [null],
    fee_payers: ['payer'],
    history: [{ state, slot: landedSlot, ts: NOW - 1000 }],
    attempts: [],
    retries: 0,
    last_error: null,
    failure: null,
    landed_slot: landedSlot,
    stopped: false,
  });
}

/** Feed the detector a few slots of one consensus's commitment pattern, up to the rig's slot. */
function consensus(r: ReturnType<typeof rig>, kind: 'alpenglow' | 'towerbft') {
  for (let s = SLOT - 40; s <= SLOT; s++) {
    r.ctx.chain.consensus.observeSlot({ slot: s, status: 'processed', parent: s - 1 });
    const finalized = kind === 'alpenglow' ? s : s - 32;
    r.ctx.chain.consensus.observeSlot({ slot: finalized, status: 'finalized' });
  }
  expect(r.ctx.chain.consensus.snapshot().kind).toBe(kind);
}

/** The pass runs on its own (`void this.track('final')`): let it finish (no timers, only resolved promises). */
async function settled() {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

test('under Alpenglow a finalized-slot report reads at once the landings it covers, and only those', async () => {
  const r = rig();
  consensus(r, 'alpenglow');
  await landed(r, 'covered', 'confirmed', SLOT - 3);
  await landed(r, 'processed-covered', 'processed', SLOT - 2);
  await landed(r, 'later', 'confirmed', SLOT - 1);
  r.tracker.onFinalizedSlot(SLOT - 2);
  await settled();
  expect(r.reads.flat().sort()).toEqual(['covered-sig', 'processed-covered-sig']);
  expect(r.evaluated.sort()).toEqual(['covered', 'processed-covered']);
  // A narrow pass: expiry moves with the slot's pass, not with this one.
  expect(r.expiry.checkExpiry).not.toHaveBeenCalled();
  // The same report again starts nothing (the finalized slot did not advance).
  r.tracker.onFinalizedSlot(SLOT - 2);
  await settled();
  expect(r.reads).toHaveLength(1);
});

test('under TowerBFT, and while the consensus is unknown, a finalized-slot report starts no pass', async () => {
  for (const kind of ['towerbft', 'unknown'] as const) {
    const r = rig();
    if (kind === 'towerbft') consensus(r, 'towerbft');
    await landed(r, 'covered', 'confirmed', SLOT - 40);
    r.tracker.onFinalizedSlot(SLOT - 32);
    await settled();
    expect(r.reads).toEqual([]);
    expect(r.ctx.chain.finalizedSlot).toBe(SLOT - 32);
    // The slot's pass reads it (its slot is final).
    await r.tracker.track('slot');
    expect(r.reads.flat()).toContain('covered-sig');
  }
});
