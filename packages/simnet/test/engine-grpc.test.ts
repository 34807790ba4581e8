import { credentials, status } from '@grpc/grpc-js';
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  VersionedTransaction,
} from '@solana/web3.js';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle';
import { SearcherServiceClient } from 'jito-ts/dist/gen/block-engine/searcher';
import { SearcherClient } from 'jito-ts/dist/sdk/block-engine/searcher';
import { Bundle } from 'jito-ts/dist/sdk/block-engine/types';
import { startGrpcEngine, type StartedGrpcEngine } from '../src/engine/grpc';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';
import { advanceToBeforeBundleEngineWindow, plainTx, startHarness, type Harness } from './engine-harness';

let h: Harness;
let insecure: StartedGrpcEngine;
let client: SearcherClient;
const results: BundleResult[] = [];
const streamErrors: Error[] = [];
let cancelStream: () => void;

async function waitFor<T>(probe: () => T | undefined | false, what: string, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function buildBundle(tipLamports: number): Bundle {
  const user = VersionedTransaction.deserialize(plainTx(h));
  const bundle = new Bundle([user], 5);
  const withTip = bundle.addTipTx(
    h.payer.toWeb3(),
    tipLamports,
    new PublicKey(MAINNET_TIP_ACCOUNTS[3] as string),
    h.cluster.latestBlockhash().blockhash,
  );
  if (withTip instanceof Error) throw withTip;
  return withTip;
}

beforeAll(async () => {
  h = await startHarness({ seed: 77 });
  insecure = await startGrpcEngine({ engine: h.engine });
  client = new SearcherClient(new SearcherServiceClient(insecure.address, credentials.createInsecure()));
  cancelStream = client.onBundleResult(
    (result) => results.push(result),
    (error) => streamErrors.push(error),
  );
});

afterAll(async () => {
  expect(streamErrors).toEqual([]);
  cancelStream();
  await insecure.close();
  await h.close();
});

afterEach(() => {
  h.faults.reset();
  h.engine.auction.setFixedClearingTip(null);
  h.engine.auction.setRegime(null);
  h.engine.rateLimiter.enabled = false;
});

describe('jito-ts 4.2.1 SearcherClient over an insecure channel', () => {
  test('getTipAccounts', async () => {
    const answer = await client.getTipAccounts();
    expect(answer).toEqual({ ok: true, value: [...MAINNET_TIP_ACCOUNTS] });
  });

  test("getNextScheduledLeader and getConnectedLeaders match the cluster schedule, for the server's region", async () => {
    // jito-ts asks with no regions: the connected region's leaders only (searcher.proto).
    const region = h.engine.homeRegion;
    const next = await client.getNextScheduledLeader();
    if (!next.ok) throw next.error;
    const { currentSlot, nextLeaderSlot, nextLeaderIdentity } = next.value;
    expect(currentSlot).toBe(h.cluster.slot);
    expect(nextLeaderSlot).toBeGreaterThan(currentSlot);
    const leader = h.cluster.leaderAt(nextLeaderSlot);
    expect(leader).toEqual({ identity: nextLeaderIdentity, bundleEngine: true });
    expect(h.engine.regionOf(nextLeaderIdentity)).toBe(region);
    for (let slot = currentSlot + 1; slot < nextLeaderSlot; slot++) {
      const between = h.cluster.leaderAt(slot);
      expect(between?.bundleEngine && h.engine.regionOf(between.identity) === region).toBe(false);
    }

    const connected = await client.getConnectedLeaders();
    if (!connected.ok) throw connected.error;
    const bundleEngineValidators = h.cluster
      .validators()
      .filter((v) => v.bundleEngine && h.engine.regionOf(v.identity) === region);
    expect(bundleEngineValidators.length).toBeGreaterThan(0);
    expect(Object.keys(connected.value).sort()).toEqual(bundleEngineValidators.map((v) => v.identity).sort());
    for (const [identity, list] of Object.entries(connected.value)) {
      for (const slot of list.slots) expect(h.cluster.leaderAt(slot)?.identity).toBe(identity);
    }
    expect(connected.value[nextLeaderIdentity]?.slots).toContain(nextLeaderSlot);
  });

  test('sendBundle (Bundle + addTipTx): the stream sees accepted, processed, finalized', async () => {
    advanceToBeforeBundleEngineWindow(h);
    h.engine.auction.setFixedClearingTip(10_000);
    const sent = await client.sendBundle(buildBundle(25_000));
    if (!sent.ok) throw sent.error;
    const bundleId = sent.value;
    expect(bundleId).toMatch(/^[0-9a-f]{64}$/);

    h.cluster.advance(1);
    const landedSlot = h.cluster.slot;
    await waitFor(() => results.find((r) => r.bundleId === bundleId && r.processed), 'processed');
    h.cluster.advance(32);
    await waitFor(() => results.find((r) => r.bundleId === bundleId && r.finalized), 'finalized');

    const mine = results.filter((r) => r.bundleId === bundleId);
    expect(
      mine.map((r) => Object.keys(r).find((k) => k !== 'bundleId' && r[k as keyof BundleResult])),
    ).toEqual(['accepted', 'processed', 'finalized']);
    expect(mine[0]?.accepted).toEqual({
      slot: landedSlot,
      validatorIdentity: h.cluster.leaderAt(landedSlot)?.identity,
    });
    expect(mine[1]?.processed).toMatchObject({ slot: landedSlot, bundleIndex: 0 });
  });

  test('a tip below the clearing price is rejected as stateAuctionBidRejected and never lands', async () => {
    advanceToBeforeBundleEngineWindow(h);
    h.engine.auction.setFixedClearingTip(500_000);
    const bundle = buildBundle(499_999);
    const sent = await client.sendBundle(bundle);
    if (!sent.ok) throw sent.error;
    h.cluster.advance(5);
    const rejected = await waitFor(
      () => results.find((r) => r.bundleId === sent.value && r.rejected),
      'rejected',
    );
    expect(rejected.rejected?.stateAuctionBidRejected).toMatchObject({ simulatedBidLamports: 499_999 });
    expect(results.some((r) => r.bundleId === sent.value && (r.processed || r.accepted))).toBe(false);
  });

  test('busy, hottest account: a low tip per CU is rejected naming both ranks; a high one lands', async () => {
    h.engine.auction.setRegime('busy');
    h.cluster.advance(2);
    const hot = h.engine.hotAccounts[0] as string;
    // A swap-like user transaction asking 200,000 CU that write-locks the hot account; jito-ts appends its tip tx
    // (one System transfer: 3,000 CU requested), so the bundle asks 203,000 CU.
    const swapBundle = (tip: number) => {
      const payer = Keypair.fromSeed(h.payer.seed);
      const swap = new Transaction({
        feePayer: payer.publicKey,
        recentBlockhash: h.cluster.latestBlockhash().blockhash,
      });
      swap.add(
        ComputeBudgetProgram.setComputeUnitLimit({ units: 200_000 }),
        SystemProgram.transfer({
          fromPubkey: payer.publicKey,
          toPubkey: new PublicKey(hot),
          lamports: 1_000_000 + tip,
        }),
      );
      swap.sign(payer);
      const bundle = new Bundle([VersionedTransaction.deserialize(swap.serialize())], 5).addTipTx(
        payer,
        tip,
        new PublicKey(MAINNET_TIP_ACCOUNTS[5] as string),
        h.cluster.latestBlockhash().blockhash,
      );
      if (bundle instanceof Error) throw bundle;
      return bundle;
    };

    advanceToBeforeBundleEngineWindow(h);
    const low = await client.sendBundle(swapBundle(1_000));
    if (!low.ok) throw low.error;
    expect(h.engine.getBundle(low.value)?.computeUnits).toBe(203_000);
    h.cluster.advance(6);
    const rejected = await waitFor(
      () => results.find((r) => r.bundleId === low.value && r.rejected),
      'rejected',
    );
    const bid = rejected.rejected?.stateAuctionBidRejected;
    expect(bid?.simulatedBidLamports).toBe(1_000);
    expect(bid?.msg).toContain('(0.00493 lamports per requested CU over 203000 CU)');
    expect(
      Number(/the winning bid paid ([0-9.]+) lamports per CU/.exec(bid?.msg ?? '')?.[1]),
    ).toBeGreaterThan(0.00493);

    advanceToBeforeBundleEngineWindow(h);
    const high = await client.sendBundle(swapBundle(2_000_000));
    if (!high.ok) throw high.error;
    h.cluster.advance(1);
    await waitFor(() => results.find((r) => r.bundleId === high.value && r.processed), 'processed');
  });

  test('invalid bundles come back as INVALID_ARGUMENT with the JSON-RPC texts', async () => {
    const user = VersionedTransaction.deserialize(plainTx(h));
    const answer = await client.sendBundle(new Bundle([user], 5));
    expect(answer.ok).toBe(false);
    if (answer.ok) return;
    expect(answer.error.code).toBe(status.INVALID_ARGUMENT);
    expect(answer.error.message).toBe(
      'Invalid argument provided: Bundles must write lock at least one tip account to be eligible for the auction.',
    );
  });

  test('rate limit and 429 storms are RESOURCE_EXHAUSTED', async () => {
    h.engine.rateLimiter.enabled = true;
    h.engine.rateLimiter.reset();
    const first = await client.sendBundle(buildBundle(20_000));
    const second = await client.sendBundle(buildBundle(20_000));
    expect(first.ok).toBe(true);
    expect(second.ok).toBe(false);
    if (!second.ok) expect(second.error.code).toBe(status.RESOURCE_EXHAUSTED);
    h.engine.rateLimiter.enabled = false;
    h.faults.set({ engineRateLimitRate: 1 });
    const stormed = await client.getTipAccounts();
    expect(stormed.ok).toBe(false);
    if (!stormed.ok) expect(stormed.error.code).toBe(status.RESOURCE_EXHAUSTED);
  });
});
