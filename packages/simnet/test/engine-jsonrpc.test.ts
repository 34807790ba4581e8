import { credentials, status } from '@grpc/grpc-js';
import { VersionedTransaction } from '@solana/web3.js';
import bs58 from 'bs58';
import { JitoJsonRpcClient } from 'jito-js-rpc';
import { SearcherServiceClient } from 'jito-ts/dist/gen/block-engine/searcher';
import { SearcherClient } from 'jito-ts/dist/sdk/block-engine/searcher';
import { Bundle } from 'jito-ts/dist/sdk/block-engine/types';
import { signatureOf } from '../src/chain';
import { startGrpcEngine, type StartedGrpcEngine } from '../src/engine/grpc';
import { deriveBundleId } from '../src/engine/wire';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';
import {
  advanceToBeforeBundleEngineWindow,
  advanceToNoBundleEngineAhead,
  b64,
  plainTx,
  rpc,
  startHarness,
  tipTx,
  type Harness,
} from './engine-harness';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ seed: 42 });
});

afterAll(async () => {
  await h.close();
});

afterEach(() => {
  h.faults.reset();
  h.engine.auction.setFixedClearingTip(null);
  h.engine.auction.setRegime(null);
  h.engine.rateLimiter.enabled = false;
  h.engine.rateLimiter.reset();
});

describe('jito-js-rpc 0.2.2 against the simnet block engine', () => {
  test('getTipAccounts, sendBundle, inflight Landed, then getBundleStatuses finalized', async () => {
    const client = new JitoJsonRpcClient(`${h.http.url}/api/v1`, 'test-uuid');
    const tipAccounts = await client.getTipAccounts();
    expect(tipAccounts.result).toEqual([...MAINNET_TIP_ACCOUNTS]);

    advanceToBeforeBundleEngineWindow(h);
    h.engine.auction.setFixedClearingTip(5_000);
    const txs = [tipTx(h, 20_000), plainTx(h)];
    const sent = await client.sendBundle([txs.map(b64), { encoding: 'base64' }]);
    const expectedId = deriveBundleId(txs.map(signatureOf));
    expect(sent.result).toBe(expectedId);

    const pending = await client.getInFlightBundleStatuses([[expectedId]]);
    expect(pending.result?.value[0]).toMatchObject({
      bundle_id: expectedId,
      status: 'Pending',
      landed_slot: null,
    });

    h.cluster.advance(1);
    const landed = await client.getInFlightBundleStatuses([[expectedId]]);
    expect(landed.result?.value[0]).toMatchObject({ status: 'Landed', landed_slot: h.cluster.slot });
    const processed = await client.getBundleStatuses([[expectedId]]);
    expect(processed.result?.value[0]).toMatchObject({
      bundle_id: expectedId,
      transactions: txs.map(signatureOf),
      slot: h.cluster.slot,
      confirmation_status: 'processed',
      err: { Ok: null },
    });

    h.cluster.advance(32);
    const finalized = await client.getBundleStatuses([[expectedId]]);
    expect(finalized.result?.value[0]?.confirmation_status).toBe('finalized');
  });

  test('base58 is the default encoding and a resent identical bundle keeps its id', async () => {
    advanceToBeforeBundleEngineWindow(h);
    const tx = tipTx(h, 50_000);
    const first = await rpc(h.http.url, 'sendBundle', [[bs58.encode(tx)]]);
    const again = await rpc(h.http.url, 'sendBundle', [[bs58.encode(tx)]]);
    expect(first.status).toBe(200);
    expect(again.body.result).toBe(first.body.result);
    expect(first.body.result).toBe(deriveBundleId([signatureOf(tx)]));
  });

  test('per-method paths answer like /bundles', async () => {
    const tips = await rpc(h.http.url, 'getTipAccounts', [], { path: '/api/v1/getTipAccounts' });
    expect(tips.body.result).toHaveLength(8);
    const statuses = await rpc(h.http.url, 'getInflightBundleStatuses', [['00'.repeat(32)]], {
      path: '/api/v1/getInflightBundleStatuses',
    });
    expect(statuses.body.result).toMatchObject({
      value: [{ bundle_id: '00'.repeat(32), status: 'Invalid', landed_slot: null }],
    });
    const unknown = await rpc(h.http.url, 'getBundleStatuses', [['00'.repeat(32)]], {
      path: '/api/v1/getBundleStatuses',
    });
    expect(unknown.body.result).toMatchObject({ value: [] });
  });

  test('sendTransaction with bundleOnly=true answers the signature and the bundle id in x-bundle-id', async () => {
    const tx = tipTx(h, 30_000);
    const sent = await rpc(h.http.url, 'sendTransaction', [b64(tx), { encoding: 'base64' }], {
      path: '/api/v1/transactions?bundleOnly=true',
    });
    expect(sent.body.result).toBe(signatureOf(tx));
    expect(sent.headers.get('x-bundle-id')).toBe(deriveBundleId([signatureOf(tx)]));
  });
});

describe('validation pipeline: the exact error strings of jito.md §1.8', () => {
  async function expectRejection(params: unknown[], message: string | RegExp, code = -32602) {
    const answer = await rpc(h.http.url, 'sendBundle', params);
    expect(answer.status).toBe(400);
    expect(answer.body.error?.code).toBe(code);
    if (typeof message === 'string') expect(answer.body.error?.message).toBe(message);
    else expect(answer.body.error?.message).toMatch(message);
  }

  test('expired blockhash', async () => {
    const old = h.cluster.latestBlockhash().blockhash;
    h.cluster.advance(152);
    await expectRejection(
      [[b64(tipTx(h, 10_000, { blockhash: old }))], { encoding: 'base64' }],
      'bundle contains an expired blockhash',
    );
  });

  test('unknown blockhash', async () => {
    const fake = bs58.encode(Buffer.alloc(32, 7));
    await expectRejection(
      [[b64(tipTx(h, 10_000, { blockhash: fake }))], { encoding: 'base64' }],
      'bundle contains an invalid blockhash',
    );
  });

  test('no tip account write-locked', async () => {
    await expectRejection(
      [[b64(plainTx(h))], { encoding: 'base64' }],
      'Bundles must write lock at least one tip account to be eligible for the auction.',
    );
  });

  test('more than 5 transactions', async () => {
    const six = Array.from({ length: 6 }, () => b64(tipTx(h, 10_000)));
    await expectRejection([six, { encoding: 'base64' }], /exceeded maximum number of transactions/);
  });

  test('bad encoding', async () => {
    await expectRejection(
      [['not base64 at all!'], { encoding: 'base64' }],
      'transaction #0 could not be decoded',
    );
    await expectRejection([['0OIl'], { encoding: 'base58' }], 'transaction #0 could not be decoded');
    await expectRejection(
      [[b64(tipTx(h, 10_000)), 'AAAA'], { encoding: 'base64' }],
      'transaction #1 could not be decoded',
    );
  });

  test('unsigned (zero signature)', async () => {
    const tx = tipTx(h, 10_000);
    tx.fill(0, 1, 65);
    await expectRejection(
      [[b64(tx)], { encoding: 'base64' }],
      'transaction 1111111111111111111111111111111111111111111111111111111111111111 is invalid',
    );
  });

  test('a corrupted signature', async () => {
    const tx = tipTx(h, 10_000);
    tx[10] = (tx[10] as number) ^ 0xff;
    await expectRejection([[b64(tx)], { encoding: 'base64' }], `transaction ${signatureOf(tx)} is invalid`);
  });

  test('already processed', async () => {
    const tx = tipTx(h, 10_000);
    expect(h.cluster.submitTransaction(tx).ok).toBe(true);
    h.cluster.advance(1);
    await expectRejection(
      [[b64(tx)], { encoding: 'base64' }],
      'bundle contains an already processed transaction',
    );
  });

  test('unsupported encoding name', async () => {
    await expectRejection([[b64(tipTx(h, 10_000))], { encoding: 'hex' }], /unsupported encoding/);
  });

  test('wrong content type', async () => {
    const answer = await rpc(h.http.url, 'getTipAccounts', [], { headers: { 'content-type': 'text/plain' } });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: -32600, message: 'Invalid content type' });
  });

  test('unknown method and malformed JSON', async () => {
    const unknown = await rpc(h.http.url, 'simulateBundle', []);
    expect(unknown.body.error).toMatchObject({ code: -32601, message: 'Method not found' });
    const broken = await rpc(h.http.url, '', [], { body: '{"jsonrpc":' });
    expect(broken.body.error).toMatchObject({ code: -32700, message: 'Parse error' });
  });
});

describe('rate limits and engine faults', () => {
  test('1 request per second per IP by default; a UUID gets more', async () => {
    h.engine.rateLimiter.enabled = true;
    const first = await rpc(h.http.url, 'getTipAccounts', []);
    const second = await rpc(h.http.url, 'getTipAccounts', []);
    expect(first.status).toBe(200);
    expect(second.status).toBe(429);
    expect(second.body).toEqual({
      jsonrpc: '2.0',
      error: {
        code: -32097,
        message: expect.stringMatching(/^Rate limit exceeded\. Limit: 1 per second/),
        data: null,
      },
      id: null,
    });
    // The same IP with a UUID has its own, larger budget.
    const withUuid = await Promise.all(
      [1, 2, 3].map(() => rpc(h.http.url, 'getTipAccounts', [], { headers: { 'x-jito-auth': 'my-uuid' } })),
    );
    expect(withUuid.map((r) => r.status)).toEqual([200, 200, 200]);
    const viaQuery = await rpc(h.http.url, 'getTipAccounts', [], { path: '/api/v1/bundles?uuid=other' });
    expect(viaQuery.status).toBe(200);
  });

  test('a 429 storm answers both -32097 message variants with id null', async () => {
    h.faults.set({ engineRateLimitRate: 1 });
    const messages = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const answer = await rpc(h.http.url, 'getTipAccounts', []);
      expect(answer.status).toBe(429);
      expect(answer.body.id).toBeNull();
      expect(answer.body.error?.code).toBe(-32097);
      messages.add(answer.body.error?.message.startsWith('Network congested') ? 'global' : 'perIp');
    }
    expect(messages).toEqual(new Set(['global', 'perIp']));
  });

  test('5xx fault and added latency', async () => {
    h.faults.set({ engine5xxRate: 1 });
    const failed = await fetch(`${h.http.url}/api/v1/bundles`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getTipAccounts', params: [] }),
    });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    h.faults.set({ engine5xxRate: 0, engineLatencyMs: 150 });
    const started = Date.now();
    const slow = await rpc(h.http.url, 'getTipAccounts', []);
    expect(slow.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });
});

describe('auction and leaders over JSON-RPC', () => {
  test('a tip below the clearing price never lands: Pending, then Failed', async () => {
    advanceToBeforeBundleEngineWindow(h);
    h.engine.auction.setFixedClearingTip(100_000);
    const tx = tipTx(h, 99_999);
    const sent = await rpc(h.http.url, 'sendBundle', [[b64(tx)], { encoding: 'base64' }]);
    const id = sent.body.result as string;
    const statuses: string[] = [];
    for (let i = 0; i < 8; i++) {
      const answer = await rpc(h.http.url, 'getInflightBundleStatuses', [[id]]);
      statuses.push((answer.body.result as { value: Array<{ status: string }> }).value[0]?.status ?? '');
      h.cluster.advance(1);
    }
    expect(statuses[0]).toBe('Pending');
    expect(statuses).not.toContain('Landed');
    expect(statuses[statuses.length - 1]).toBe('Failed');
    expect(h.cluster.signatureStatus(signatureOf(tx))).toBeNull();
    const landed = await rpc(h.http.url, 'getBundleStatuses', [[id]]);
    expect(landed.body.result).toMatchObject({ value: [] });
  });

  test('a bid at the clearing price lands in the first bundle-engine slot', async () => {
    advanceToBeforeBundleEngineWindow(h);
    h.engine.auction.setFixedClearingTip(100_000);
    const tx = tipTx(h, 100_000);
    await rpc(h.http.url, 'sendBundle', [[b64(tx)], { encoding: 'base64' }]);
    h.cluster.advance(1);
    expect(h.cluster.signatureStatus(signatureOf(tx))?.slot).toBe(h.cluster.slot);
    expect(h.cluster.leaderAt(h.cluster.slot)?.bundleEngine).toBe(true);
  });

  test('a bundle sent while only non-bundle-engine leaders are ahead is dropped', async () => {
    const harness = await startHarness({ seed: 9, bundleEngineShare: 0.5 });
    try {
      advanceToNoBundleEngineAhead(harness, harness.engine.leaderLookaheadSlots);
      const results: unknown[] = [];
      harness.engine.on('result', (r) => results.push(r));
      const tx = tipTx(harness, 1_000_000);
      const sent = await rpc(harness.http.url, 'sendBundle', [[b64(tx)], { encoding: 'base64' }]);
      expect(sent.status).toBe(200);
      await new Promise((resolve) => setImmediate(resolve));
      expect(results).toEqual([
        {
          bundleId: sent.body.result,
          rejected: { droppedBundle: { msg: 'Bundle Dropped, no connected leader up soon.' } },
        },
      ]);
      const status = await rpc(harness.http.url, 'getInflightBundleStatuses', [[sent.body.result]]);
      expect(status.body.result).toMatchObject({ value: [{ status: 'Failed' }] });
      harness.cluster.advance(12);
      expect(harness.cluster.signatureStatus(signatureOf(tx))).toBeNull();
    } finally {
      await harness.close();
    }
  });

  test('bundleDropRate drops accepted bundles: they never land', async () => {
    h.faults.set({ bundleDropRate: 1 });
    advanceToBeforeBundleEngineWindow(h);
    const tx = tipTx(h, 5_000_000);
    const sent = await rpc(h.http.url, 'sendBundle', [[b64(tx)], { encoding: 'base64' }]);
    h.cluster.advance(6);
    expect(h.cluster.signatureStatus(signatureOf(tx))).toBeNull();
    expect(h.engine.getBundle(sent.body.result as string)?.failure).toBe('dropped');
  });

  test('tip floor route: an array of one object in SOL; frozen with an old time while stale', async () => {
    const fresh = (await (await fetch(`${h.http.url}/api/v1/bundles/tip_floor`)).json()) as Array<
      Record<string, unknown>
    >;
    expect(fresh).toHaveLength(1);
    const entry = fresh[0] as Record<string, number | string>;
    expect(Object.keys(entry).sort()).toEqual(
      [
        'time',
        'landed_tips_25th_percentile',
        'landed_tips_50th_percentile',
        'landed_tips_75th_percentile',
        'landed_tips_95th_percentile',
        'landed_tips_99th_percentile',
        'ema_landed_tips_50th_percentile',
      ].sort(),
    );
    expect(entry.landed_tips_50th_percentile).toBeLessThan(0.01); // SOL, not lamports
    expect(entry.landed_tips_50th_percentile).toBeGreaterThanOrEqual(0.000001);
    expect(Math.abs(Date.parse(entry.time as string) - Date.now())).toBeLessThan(60_000);

    h.faults.set({ staleTipFloor: true });
    const stale1 = (await (await fetch(`${h.http.url}/api/v1/bundles/tip_floor`)).json()) as Array<{
      time: string;
    }>;
    h.cluster.advance(20);
    const stale2 = (await (await fetch(`${h.http.url}/api/v1/bundles/tip_floor`)).json()) as Array<{
      time: string;
    }>;
    expect(stale2).toEqual(stale1);
    expect(Date.now() - Date.parse(stale1[0]?.time as string)).toBeGreaterThan(4 * 60_000);
  });
});

describe('the 429 back-off penalty over the wire (manual limiter clock)', () => {
  let p: Harness;
  let now = 0;
  let grpc: StartedGrpcEngine;
  let searcher: SearcherClient;

  beforeAll(async () => {
    p = await startHarness({ seed: 43, engine: { rateLimit: { enabled: true, now: () => now } } });
    grpc = await startGrpcEngine({ engine: p.engine });
    searcher = new SearcherClient(new SearcherServiceClient(grpc.address, credentials.createInsecure()));
  });

  afterAll(async () => {
    await grpc.close();
    await p.close();
  });

  test('JSON-RPC: over the budget a 429 names the penalty; within it even a refilled budget is refused', async () => {
    now = 10_000;
    expect((await rpc(p.http.url, 'getTipAccounts', [])).status).toBe(200);
    const over = await rpc(p.http.url, 'getTipAccounts', []);
    expect(over.status).toBe(429);
    expect(over.body.error?.message).toBe(
      'Rate limit exceeded. Limit: 1 per second for txn requests. Back-off triggered: Retry after 1606ms',
    );
    expect(over.headers.get('retry-after')).toBe('2');
    now += 1_200; // a token is back, the penalty is not over
    const during = await rpc(p.http.url, 'getTipAccounts', []);
    expect(during.status).toBe(429);
    expect(during.body.error?.message).toMatch(/Retry after 406ms$/);
    now += 406;
    expect((await rpc(p.http.url, 'getTipAccounts', [])).status).toBe(200);
  });

  test('gRPC SendBundle: RESOURCE_EXHAUSTED with the same penalty text; tunable over /admin/rate-limit', async () => {
    now = 100_000;
    const admin = await fetch(`${p.http.url}/admin/rate-limit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ penaltyMs: 5_000 }),
    });
    expect(await admin.json()).toMatchObject({ enabled: true, penaltyMs: 5_000 });
    const bundle = () => new Bundle([VersionedTransaction.deserialize(tipTx(p, 10_000))], 5);
    expect((await searcher.sendBundle(bundle())).ok).toBe(true);
    const refused = await searcher.sendBundle(bundle());
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.error.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(refused.error.message).toMatch(/Back-off triggered: Retry after 5000ms$/);
    now += 4_999;
    const still = await searcher.sendBundle(bundle());
    expect(!still.ok && still.error.message).toMatch(/Retry after 1ms$/);
    now += 1;
    expect((await searcher.sendBundle(bundle())).ok).toBe(true);
  });
});

test('the engine keeps what it received, accepted and refused, with each bundle id and first signatures', async () => {
  const { total: before } = h.engine.received();
  const tip = tipTx(h, 10_000);
  const accepted = await rpc(h.http.url, 'sendBundle', [[b64(tip)], { encoding: 'base64' }]);
  expect(accepted.status).toBe(200);
  const refused = await rpc(h.http.url, 'sendBundle', [[b64(plainTx(h))], { encoding: 'base64' }]);
  expect(refused.status).toBe(400);
  await rpc(h.http.url, 'sendBundle', [[b64(tipTx(h, 10_000)), 'AAAA'], { encoding: 'base64' }]);
  const { bundles, total } = h.engine.received(before);
  expect(total).toBe(before + 3);
  const tipSignature = signatureOf(tip);
  expect(bundles.map((b) => ({ ...b, receivedMs: typeof b.receivedMs }))).toEqual([
    {
      seq: before + 1,
      receivedMs: 'number',
      region: h.engine.homeRegion,
      signatures: [tipSignature],
      bundleId: accepted.body.result,
      refused: null,
    },
    expect.objectContaining({
      seq: before + 2,
      bundleId: expect.stringMatching(/^[0-9a-f]{64}$/),
      refused: 'Bundles must write lock at least one tip account to be eligible for the auction.',
    }),
    expect.objectContaining({
      seq: before + 3,
      signatures: [expect.any(String), null],
      bundleId: null,
      refused: 'transaction #1 could not be decoded',
    }),
  ]);
  expect(bundles[0]?.bundleId).toBe(deriveBundleId([tipSignature]));
});
