// A bundle's lifetime in the engine: one auction, then dropped if it lost (as Jito once described it; the 'auction'
// switch), or every tick of its leader window (`bundleLifetime: 'window'`, the default). Pure auction-model checks, then
// the engine over JSON-RPC and its result stream on a manual clock.
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle.js';
import { SlotBudget, resolveSlot, type Bid } from '../src/engine/auction-model';
import type { BundleLifetime } from '../src/engine/engine';
import {
  advanceToBeforeBundleEngineWindow,
  b64,
  rpc,
  startHarness,
  tipTx,
  type Harness,
} from './engine-harness';

describe('the auction model', () => {
  const pool = 'pool';
  const bid = (id: string, tip: number, arrivalMs: number, oneTick?: boolean): Bid => ({
    id,
    kind: 'real',
    tipLamports: tip,
    computeUnits: 200_000,
    writeLocks: [`${id}-payer`, pool],
    readLocks: [],
    arrivalMs,
    ...(oneTick ? { oneTick } : {}),
  });

  test('a bid outbid on a contended account at its tick wins the next one unless it lives one tick', () => {
    const run = (oneTick: boolean) =>
      resolveSlot(
        [bid('rich', 50_000, 0), bid('mine', 10_000, 0, oneTick)],
        8,
        new SlotBudget(48_000_000, 8),
        {
          contended: new Set([pool]),
        },
      );
    const window = run(false);
    expect(window.included.map((e) => [e.bid.id, e.tick])).toEqual([
      ['rich', 0],
      ['mine', 1],
    ]);
    const once = run(true);
    expect(once.included.map((e) => e.bid.id)).toEqual(['rich']);
    expect(once.lost.get('mine')).toMatchObject({ reason: 'outbid', account: pool, tick: 0 });
  });

  test('a one-tick bid that arrives later competes at its arrival tick, not before', () => {
    const r = resolveSlot(
      [bid('rich', 50_000, 0), bid('late', 10_000, 120, true)],
      8,
      new SlotBudget(48_000_000, 8),
      {
        contended: new Set([pool]),
      },
    );
    // Arrives in tick 2 (100-149 ms), after the rich bid took the pool at tick 0: alone at its tick, it wins.
    expect(r.included.map((e) => [e.bid.id, e.tick])).toEqual([
      ['rich', 0],
      ['late', 2],
    ]);
  });
});

describe.each<[BundleLifetime, string]>([
  ['auction', 'Failed'],
  ['window', 'Landed'],
])('the engine with bundleLifetime %s', (lifetime, outcome) => {
  let h: Harness;
  const results: BundleResult[] = [];
  const onResult = (result: BundleResult) => results.push(result);

  beforeAll(async () => {
    h = await startHarness({ seed: 42, engine: { bundleLifetime: lifetime } });
    h.engine.on('result', onResult);
  });

  afterAll(async () => {
    h.engine.off('result', onResult);
    await h.close();
  });

  test(`a bundle that loses its window's first auction and would win the next: ${outcome}`, async () => {
    expect(h.engine.bundleLifetime).toBe(lifetime);
    advanceToBeforeBundleEngineWindow(h);
    const window = h.engine.nextScheduledLeader();
    expect(window).not.toBeNull();
    h.engine.auction.setFixedClearingTip(50_000); // every bid below loses every tick of the next slot
    const tx = tipTx(h, 20_000);
    const sent = await rpc(h.http.url, 'sendBundle', [[b64(tx)], { encoding: 'base64' }]);
    const id = sent.body.result as string;
    const tracked = h.engine.getBundle(id);
    expect(tracked?.window?.lastSlot).toBeGreaterThan(tracked?.window?.firstSlot ?? Infinity);
    h.cluster.advance(1); // the window's first slot: lost to the pinned competitor
    // One auction: its arrival tick; the window: every tick of the slot, the last one last.
    expect(h.engine.getBundle(id)?.lastLoss).toMatchObject({
      reason: 'pinned',
      tick: lifetime === 'auction' ? 0 : 7,
    });
    h.engine.auction.setFixedClearingTip(null); // the next slot of the window would take it
    h.cluster.advance(1);
    const status = await rpc(h.http.url, 'getInflightBundleStatuses', [[id]]);
    expect((status.body.result as { value: Array<{ status: string }> }).value[0]?.status).toBe(outcome);
    const rejected = results.find((r) => r.bundleId === id && r.rejected?.stateAuctionBidRejected);
    if (lifetime === 'auction') {
      expect(h.engine.getBundle(id)?.failure).toBe('auction_lost');
      expect(rejected?.rejected?.stateAuctionBidRejected?.msg).toMatch(/clearing tip 50000 lamports/);
      // Reported as soon as the first auction was lost, at that slot's processed event, not at the window's end.
      expect(
        results.filter((r) => r.bundleId === id).map((r) => Object.keys(r).find((k) => k !== 'bundleId')),
      ).toEqual(['rejected']);
    } else {
      expect(rejected).toBeUndefined();
      expect(h.engine.getBundle(id)?.landedSlot).toBe(h.cluster.slot);
    }
  });
});
