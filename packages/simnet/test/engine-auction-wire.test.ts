// The auction as Jito documents it, seen from outside: bundles sent over JSON-RPC to the simnet engine on a real
// SimCluster (400 ms slots: 8 ticks of 50 ms), results as the gRPC stream carries them.
import { ComputeBudgetProgram, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle.js';
import { signatureOf } from '../src/chain';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';
import {
  advanceToBeforeBundleEngineWindow,
  b64,
  rpc,
  startHarness,
  tipTx,
  type Harness,
} from './engine-harness';

let h: Harness;
let results: BundleResult[] = [];
const onResult = (result: BundleResult) => results.push(result);

beforeAll(async () => {
  // The light compute profile's denser background (more, lighter bundles: several on the hottest account by tick 0
  // of a busy slot) makes a 1,000-lamport bid there lose every tick, which the ranking tests below rely on. The
  // default mainnet profile's calibration is checked in engine-auction.test.ts.
  h = await startHarness({ seed: 42, engine: { auction: { computeProfile: 'light' } } });
  h.engine.on('result', onResult);
});

afterAll(async () => {
  h.engine.off('result', onResult);
  await h.close();
});

afterEach(() => {
  h.engine.auction.setFixedClearingTip(null);
  h.engine.auction.setRegime(null);
  results = [];
});

let nonce = 0;
/**
 * A swap-like transaction: SetComputeUnitLimit(`units`), a payment that write-locks `account` (1,000,000 lamports,
 * above the rent-exempt minimum, so it may create it) and a tip transfer, signed by the harness payer.
 */
function swapTx(account: string, units: number, tip: number): Uint8Array {
  nonce += 1;
  const payer = Keypair.fromSeed(h.payer.seed);
  const tx = new Transaction({
    feePayer: payer.publicKey,
    recentBlockhash: h.cluster.latestBlockhash().blockhash,
  }).add(
    ComputeBudgetProgram.setComputeUnitLimit({ units }),
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: new PublicKey(account),
      lamports: 1_000_000 + nonce,
    }),
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: new PublicKey(MAINNET_TIP_ACCOUNTS[nonce % 8] as string),
      lamports: tip,
    }),
  );
  tx.sign(payer);
  return tx.serialize();
}

async function send(...txs: Uint8Array[]): Promise<string> {
  const sent = await rpc(h.http.url, 'sendBundle', [txs.map(b64), { encoding: 'base64' }]);
  expect(sent.status).toBe(200);
  return sent.body.result as string;
}

async function inflight(id: string): Promise<string> {
  const answer = await rpc(h.http.url, 'getInflightBundleStatuses', [[id]]);
  return (answer.body.result as { value: Array<{ status: string }> }).value[0]?.status ?? '';
}

/** Pin the regime and let a few slots be generated under it. */
function regime(name: 'calm' | 'busy' | 'spike'): void {
  h.engine.auction.setRegime(name);
  h.cluster.advance(2);
}

test('the engine exports the hot accounts, most popular first', () => {
  expect(h.engine.hotAccounts).toHaveLength(20);
  expect(h.engine.hotAccounts).toBe(h.engine.auction.hotAccounts);
  expect(h.engine.state().auction?.ticks).toBe(8);
});

test('busy: a swap on the hottest account loses to higher tip-per-CU bids, and wins with a higher one', async () => {
  regime('busy');
  const hot = h.engine.hotAccounts[0] as string;
  advanceToBeforeBundleEngineWindow(h);
  const cheap = swapTx(hot, 200_000, 1_000);
  const cheapId = await send(cheap);
  expect(h.engine.getBundle(cheapId)?.computeUnits).toBe(200_000);
  for (let i = 0; i < 6 && (await inflight(cheapId)) === 'Pending'; i++) h.cluster.advance(1);
  expect(await inflight(cheapId)).toBe('Failed');
  expect(h.cluster.signatureStatus(signatureOf(cheap))).toBeNull();
  const rejected = results.find((r) => r.bundleId === cheapId && r.rejected)?.rejected
    ?.stateAuctionBidRejected;
  expect(rejected?.simulatedBidLamports).toBe(1_000);
  expect(rejected?.msg).toMatch(/0\.00500 lamports per requested CU over 200000 CU/);
  // At its last tick either the account's write CU or the block's space went to higher-ranked bids.
  expect(rejected?.msg).toMatch(new RegExp(`outbid on ${hot}|block space ran out`));
  const winner = /the winning bid paid ([0-9.]+) lamports per CU/.exec(rejected?.msg ?? '');
  expect(Number(winner?.[1])).toBeGreaterThan(0.005);

  advanceToBeforeBundleEngineWindow(h);
  const rich = swapTx(hot, 200_000, 5_000_000); // 25 lamports per CU: above the background's heavy tail
  const richId = await send(rich);
  h.cluster.advance(1);
  expect(await inflight(richId)).toBe('Landed');
  expect(h.cluster.signatureStatus(signatureOf(rich))?.slot).toBe(h.cluster.slot);
});

test('busy: a bundle that contends with nobody lands at the minimum tip of 1,000 lamports', async () => {
  regime('busy');
  advanceToBeforeBundleEngineWindow(h);
  const tx = tipTx(h, 1_000); // two System transfers to fresh accounts: 6,000 CU requested
  const id = await send(tx);
  expect(h.engine.getBundle(id)?.computeUnits).toBe(6_000);
  h.cluster.advance(1);
  expect(await inflight(id)).toBe('Landed');
  expect(h.cluster.signatureStatus(signatureOf(tx))?.slot).toBe(h.cluster.slot);
});

test('rank is tip per requested CU: 10x the compute needs 10x the tip for the same rank', async () => {
  regime('calm');
  // Three bundles on one shared account, all landing in the first tick: the block orders them by rank.
  const shared = Keypair.generate().publicKey.toBase58();
  advanceToBeforeBundleEngineWindow(h);
  const small = await send(swapTx(shared, 40_000, 100_000)); // 2.5 per CU
  const bigCheap = await send(swapTx(shared, 400_000, 500_000)); // 1.25 per CU: 5x the lamports, lower rank
  const bigRich = await send(swapTx(shared, 400_000, 1_100_000)); // 2.75 per CU: 11x the lamports, higher rank
  h.cluster.advance(1);
  const index = (id: string) => results.find((r) => r.bundleId === id && r.processed)?.processed?.bundleIndex;
  const order = [bigRich, small, bigCheap].map(index);
  expect(order.every((i) => typeof i === 'number')).toBe(true);
  expect(order).toEqual([...(order as number[])].sort((a, b) => a - b));
});

test('the tip floor comes from what landed: after a spike its percentiles are higher than after calm', async () => {
  const floor = async () => {
    // advance(160) blocks the loop for seconds: let the server's keep-alive timers close idle sockets first, or the
    // client may reuse one the server is closing (ECONNRESET).
    await new Promise((resolve) => setTimeout(resolve, 20));
    const response = await fetch(`${h.http.url}/api/v1/bundles/tip_floor`);
    const [entry] = (await response.json()) as Array<Record<string, number>>;
    return {
      p50: (entry?.landed_tips_50th_percentile ?? 0) * 1e9,
      p75: (entry?.landed_tips_75th_percentile ?? 0) * 1e9,
    };
  };
  h.engine.auction.setRegime('calm');
  h.cluster.advance(160);
  const calm = await floor();
  h.engine.auction.setRegime('spike');
  h.cluster.advance(160);
  const spike = await floor();
  expect(spike.p50).toBeGreaterThan(calm.p50);
  expect(spike.p75).toBeGreaterThan(calm.p75);

  // A real bundle's landed tip is in it: the floor is handed the 7,777,777 lamports of a bundle that landed.
  h.engine.auction.setRegime('calm');
  const recorded: number[] = [];
  const original = h.engine.tipFloor.record.bind(h.engine.tipFloor);
  h.engine.tipFloor.record = (slot: number, tips: readonly number[]) => {
    recorded.push(...tips);
    original(slot, tips);
  };
  try {
    advanceToBeforeBundleEngineWindow(h);
    await send(tipTx(h, 7_777_777));
    h.cluster.advance(6);
  } finally {
    h.engine.tipFloor.record = original;
  }
  expect(recorded).toContain(7_777_777);
});
