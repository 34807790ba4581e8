import type { Keypair } from '@solana/web3.js';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { counterValue, startPackingStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * Packing (#17): with BUNDLE_PACK_MAX=4, transactions waiting for the one region's budget (1 bundle a second) ride in
 * the bundle that goes out next, under its one tip. Eight transfers from eight payers (no common write lock) land in
 * fewer bundles than eight; every one finalizes; a passenger's own attempt is never sent and pays nothing; the tipper
 * pays exactly the tips and fees of the bundles that landed.
 *
 * Same-payer packs (DESIGN §11, issue 30): a backend with one hot wallet sends a burst of transfers all paid by that
 * wallet. They share a write lock (the fee payer), so they could never ride together and went out one bundle at a
 * time. Transactions that share only their fee payer now ride together when the payer can pay them all in bundle
 * order (their fees and transfers, read from their bytes, within its balance less the rent-exempt minimum).
 */
const FEE = 5_000;
const RENT_EXEMPT = 890_880;
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startPackingStack();
  url = stack.sidecar.url;
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

interface AttemptView {
  attempt: number;
  bundle_id: string;
  tip_lamports: number;
  stage: string;
  outcome: string | null;
}

test('waiting transactions ride in one bundle under one tip; all finalize, each tip paid once', async () => {
  const connection = stack.connection();
  const tipper = stack.tipper.publicKey;
  const before = await connection.getBalance(tipper, 'confirmed');
  const payers: Keypair[] = Array.from({ length: 8 }, () => stack.simnet.fundedKeypair(10_000_000));
  const enqueued = await Promise.all(
    payers.map((payer, i) => post(url, '/tx/enqueue', { transaction: stack.transfer(400 + i, payer) })),
  );
  const ids = enqueued.map((r) => {
    expect(r.status).toBe(202);
    return r.body.tx_id as string;
  });
  await waitAllFinalized(url, ids, 60_000);

  // At least one pack formed (eight waited for one bundle a second).
  expect(await counterValue(url, 'relay_packed_bundles_total')).toBeGreaterThan(0);

  const { engine } = stack.simnet;
  // The lifecycle log's entry of each bundle lists its signatures in bundle order.
  const { entries } = (await get(url, '/lifecycle?last=100')).body as {
    entries: Array<{ bundle_id: string; stage: string; transactions: string[] }>;
  };
  const logged = new Map(entries.map((e) => [e.bundle_id, e]));
  const landedBundles = new Set<string>();
  let tipsAndFees = 0;
  let riders = 0;
  for (const id of ids) {
    const record = (await get(url, `/tx/${id}`)).body;
    const attempts = record.attempts as AttemptView[];
    const finalized = attempts.filter((a) => a.stage === 'finalized');
    if (finalized.length === 1) {
      const carrier = finalized[0] as AttemptView;
      landedBundles.add(carrier.bundle_id);
      tipsAndFees += carrier.tip_lamports + FEE;
      // The engine got the bundle whole and in order: this transaction, then its passengers, then the tip.
      const bundle = engine.getBundle(carrier.bundle_id);
      const entry = logged.get(carrier.bundle_id);
      expect(entry?.stage).toBe('finalized');
      const signatures = entry?.transactions ?? [];
      expect(bundle?.state).toBe('landed');
      // The engine's copy: user transactions in order, then the tip (the engine lists the first signature of each).
      expect(bundle?.signatures).toEqual(signatures);
      expect(signatures[0]).toBe(record.tx_signatures[0]);
      expect(signatures.length).toBeGreaterThanOrEqual(2);
      expect(signatures.length).toBeLessThanOrEqual(5);
      riders += signatures.length - 2;
      continue;
    }
    // A passenger: landed in another transaction's bundle; its own attempts never went out and paid nothing.
    expect(finalized).toHaveLength(0);
    for (const a of attempts) {
      expect(a.stage).toBe('failed');
      expect(engine.getBundle(a.bundle_id)).toBeUndefined();
    }
  }
  // Every transaction is either a carrier or rode in one of the landed bundles, and fewer bundles than transactions
  // landed.
  expect(landedBundles.size + riders).toBe(8);
  expect(riders).toBeGreaterThan(0);
  // Every transaction's signature is in exactly one landed bundle.
  const carried = new Map<string, number>();
  for (const bundleId of landedBundles)
    for (const signature of engine.getBundle(bundleId)?.signatures ?? [])
      carried.set(signature, (carried.get(signature) ?? 0) + 1);
  for (const id of ids) {
    const signature = (await get(url, `/tx/${id}`)).body.tx_signatures[0] as string;
    expect(carried.get(signature)).toBe(1);
  }
  // The tipper paid the landed bundles' tips and fees, nothing for a passenger's own (unsent) tip.
  await waitUntil(
    async () => before - (await connection.getBalance(tipper, 'confirmed')) === tipsAndFees,
    10_000,
    `the tipper's balance to drop by ${tipsAndFees}`,
  );
}, 90_000);

test('a burst from one fee payer packs: fewer bundles than transactions, all finalized, each paid once', async () => {
  const connection = stack.connection();
  const wallet = stack.simnet.fundedKeypair(1_000_000_000);
  const tipperBefore = await connection.getBalance(stack.tipper.publicKey, 'confirmed');
  const walletBefore = await connection.getBalance(wallet.publicKey, 'confirmed');
  const amounts = Array.from({ length: 8 }, (_, i) => 1_000 + i);
  const passengersBefore = await counterValue(url, 'relay_packed_passengers_total');
  const ids: string[] = [];
  for (const lamports of amounts) {
    const answer = await post(url, '/tx/enqueue', { transaction: stack.transfer(lamports, wallet) });
    expect(answer.status).toBe(202);
    ids.push(answer.body.tx_id as string);
  }
  await waitAllFinalized(url, ids, 60_000);

  const { engine } = stack.simnet;
  const landed = new Set<string>();
  let tipsAndFees = 0;
  for (const id of ids) {
    const record = (await get(url, `/tx/${id}`)).body;
    const carrier = (record.attempts as AttemptView[]).find((a) => a.stage === 'finalized');
    if (!carrier) continue;
    landed.add(carrier.bundle_id);
    tipsAndFees += carrier.tip_lamports + FEE;
    expect(engine.getBundle(carrier.bundle_id)?.state).toBe('landed');
  }
  // Fewer bundles than transactions: some rode with others of the same wallet.
  expect(landed.size).toBeLessThan(ids.length);
  expect((await counterValue(url, 'relay_packed_passengers_total')) - passengersBefore).toBe(
    ids.length - landed.size,
  );
  // Every transaction's signature in exactly one landed bundle.
  const carried = new Map<string, number>();
  for (const bundleId of landed)
    for (const signature of engine.getBundle(bundleId)?.signatures ?? [])
      carried.set(signature, (carried.get(signature) ?? 0) + 1);
  for (const id of ids)
    expect(carried.get((await get(url, `/tx/${id}`)).body.tx_signatures[0] as string)).toBe(1);
  // The wallet paid its transfers (testkit's transfer sends the rent-exempt minimum on top, for the new recipient)
  // and one fee each; the tipper the landed bundles' tips and fees.
  const transfers = amounts.reduce((sum, lamports) => sum + RENT_EXEMPT + lamports + FEE, 0);
  await waitUntil(
    async () =>
      walletBefore - (await connection.getBalance(wallet.publicKey, 'confirmed')) === transfers &&
      tipperBefore - (await connection.getBalance(stack.tipper.publicKey, 'confirmed')) === tipsAndFees,
    10_000,
    `the wallet to pay ${transfers} and the tipper ${tipsAndFees}`,
  ).catch(async (error: Error) => {
    const wallet_ = walletBefore - (await connection.getBalance(wallet.publicKey, 'confirmed'));
    const tipper_ = tipperBefore - (await connection.getBalance(stack.tipper.publicKey, 'confirmed'));
    throw new Error(`${error.message}: the wallet paid ${wallet_}, the tipper ${tipper_}`);
  });
}, 90_000);
