import type { Keypair } from '@solana/web3.js';
import type { TxAttempt } from '@solrelay/core';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { repricedFrom } from '../../src/store/records';
import { counterValue, startRelayStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * A pack keeps every member's rank by raising its tip (DESIGN §11, issue 30): the auction ranks a bundle by its tip
 * per requested CU, so a pack under the lead's own tip would rank below each member's bid. Here every transaction is
 * submitted at the same tip with no per-CU headroom (no min-tip floor above its bid), so a rider joins only if the
 * pack's tip is raised to rank the whole pack at that bid. One region takes a bundle a second, so eight transfers from
 * eight payers wait and packs form. Every one finalizes; each landed pack's tip per CU is at least the bid of every
 * member and no more than what its members would have tipped alone together; the raised tip is the one that landed
 * (signed again before the first send: the old bytes never reached the engine); the tipper paid exactly the tips and
 * fees of the bundles that landed.
 */
const TIP = 20_000;
const FEE = 5_000;
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    simnet: { slotMs: 150, rateLimit: true, regions: 1 },
    clearingTip: 1_000,
    // No decider for an hour: this test submits every attempt itself, as an agent would.
    env: { RELAY_AGENT_GRACE_S: '3600', BUNDLE_ENGINE_RPS: '1', BUNDLE_PACK_MAX: '4' },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/status')).body.slot > 0, 15_000, 'first slot');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('a pack raises its tip so each member keeps its own bid per CU; the raised tip is the one paid, once', async () => {
  const connection = stack.connection();
  const tipper = stack.tipper.publicKey;
  const before = await connection.getBalance(tipper, 'confirmed');
  const payers: Keypair[] = Array.from({ length: 8 }, () => stack.simnet.fundedKeypair(10_000_000));
  const ids: string[] = [];
  for (const [i, payer] of payers.entries()) {
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(700 + i, payer) });
    expect(enqueued.status).toBe(202);
    ids.push(enqueued.body.tx_id as string);
  }
  // Each at the same tip, its bid per CU its own tip over its own bundle's CU (no pricing given). The first goes out
  // at once and takes the region's token; the other seven, submitted together while it is out, wait a second for the
  // next one, so packs form however slow the machine is.
  const submit = (id: string) =>
    post(url, '/internal/submit', { tx_id: id, tip_lamports: TIP, reason: 'test' }).then((answer) => {
      expect(answer.status).toBe(202);
      return answer.body.bundle_id as string;
    });
  const firstBundle = await submit(ids[0] as string);
  await waitUntil(
    () => stack.simnet.engine.getBundle(firstBundle) !== undefined,
    10_000,
    'the first bundle sent',
  );
  await Promise.all(ids.slice(1).map(submit));
  await waitAllFinalized(url, ids, 60_000);

  const records = await Promise.all(ids.map(async (id) => (await get(url, `/tx/${id}`)).body));
  const ownBid = new Map<string, number>();
  const ownCu = new Map<string, number>();
  for (const record of records) {
    // Each one's own bid is its tip over its own bundle's CU (no pricing given); a pack keeps it as the lead's bid.
    const first = (record.attempts as TxAttempt[])[0] as TxAttempt;
    const bid = first.bid_per_cu as number;
    ownBid.set(record.tx_signatures[0] as string, bid);
    ownCu.set(record.tx_signatures[0] as string, Math.round(TIP / bid));
  }
  const { engine } = stack.simnet;
  let tipsAndFees = 0;
  let raisedPacks = 0;
  for (const record of records) {
    const carrier = (record.attempts as TxAttempt[]).find((a) => a.stage === 'finalized');
    if (!carrier) continue;
    tipsAndFees += carrier.tip_lamports + FEE;
    const bundle = engine.getBundle(carrier.bundle_id);
    expect(bundle?.state).toBe('landed');
    const members = (bundle?.signatures ?? []).slice(0, -1);
    if (members.length < 2) {
      expect(carrier.tip_lamports).toBe(TIP);
      continue;
    }
    // A pack: its tip per CU (over the whole bundle's requested CU) ranks every member at its own bid, and it costs
    // no more than the members alone.
    raisedPacks += carrier.tip_lamports > TIP ? 1 : 0;
    const perCu = carrier.tip_lamports / (carrier.compute_units as number);
    expect(carrier.tip_per_cu).toBeCloseTo(perCu, 9);
    for (const signature of members) expect(perCu).toBeGreaterThanOrEqual(ownBid.get(signature) as number);
    expect(carrier.tip_lamports).toBeLessThanOrEqual(TIP * members.length);
    // A retry of the lead would reprice from its own tip and bundle, not the pack's (the riders' rank is not its own).
    const stored = (await stack.sidecar.relay.stored(record.tx_id))?.attempts.find(
      (a) => a.bundle_id === carrier.bundle_id,
    );
    const own = stored ? repricedFrom(stored) : null;
    expect(own?.tip_lamports).toBe(TIP);
    // Its own bundle's CU: its transaction and its tip transaction (whose requested CU, a per-tip nonce of 450-1,399,
    // may differ from the first one's if the tip was signed again on a fresh blockhash), not the pack's.
    const ownBundleCu = ownCu.get(record.tx_signatures[0] as string) as number;
    expect(Math.abs((own?.compute_units ?? 0) - ownBundleCu)).toBeLessThan(950);
    expect(own?.compute_units ?? 0).toBeLessThan(carrier.compute_units as number);
  }
  expect(raisedPacks).toBeGreaterThan(0);
  expect(await counterValue(url, 'relay_pack_tips_raised_total')).toBe(raisedPacks);
  // The tipper paid the landed bundles' tips (the raised ones) and fees: no old tip, no rider's own tip.
  await waitUntil(
    async () => before - (await connection.getBalance(tipper, 'confirmed')) === tipsAndFees,
    10_000,
    `the tipper's balance to drop by ${tipsAndFees}`,
  );
}, 90_000);
