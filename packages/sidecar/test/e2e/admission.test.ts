import { DEFAULT_CLEARING_TIP_PER_CU, get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * Admission against what relay can send: one regional engine at its real budget (1 bundle a second), slots of
 * 200 ms and `expiry-slots` 60, so a transaction has (60 − 20 reserve) × 200 ms = 8 s to be sent: about eight fit.
 * A burst of sixteen: the ones that cannot be sent in time are refused at once (429, RELAY_E_CAPACITY_EXCEEDED,
 * Retry-After), and none of the accepted ones expires.
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    simnet: { slotMs: 200, rateLimit: true, regions: 1 },
    // No packing: a bundle carries one transaction, so the rates below are bundles a second times the landed share.
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '20000', BUNDLE_ENGINE_RPS: '1', BUNDLE_PACK_MAX: '1' },
    policy: { 'expiry-slots': 60 },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/readyz')).status === 200, 15_000, 'ready');
  // Let relay measure the slot time (it assumes mainnet's 400 ms until it has seen half a window of slots go by).
  await waitUntil(
    async () => {
      const slotMs = (await get(url, '/status')).body.capacity.slot_ms;
      return slotMs > 150 && slotMs < 300;
    },
    30_000,
    'relay to measure the 200 ms slots',
  );
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('a burst beyond what one region can send in time: the excess is refused at once, every accepted lands', async () => {
  const status = (await get(url, '/status')).body;
  // One region's budget, 90 % of it spent (SEND_PACING).
  expect(status.capacity).toMatchObject({ send_rate_per_s: 0.9, waiting: 0, refused_total: 0 });

  const accepted: string[] = [];
  const refusals: Array<{ status: number; code: string; retryAfter: string | null }> = [];
  const burstStarted = Date.now();
  const transactions = Array.from({ length: 16 }, (_, i) => stack.transfer(200 + i));
  const answers = await Promise.all(
    transactions.map((transaction) =>
      fetch(`${url}/tx/enqueue`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ transaction }),
      }),
    ),
  );
  const burstMs = Date.now() - burstStarted;
  for (const response of answers) {
    const body = (await response.json()) as { tx_id?: string; error?: { code: string } };
    if (response.status === 202) accepted.push(body.tx_id as string);
    else
      refusals.push({
        status: response.status,
        code: body.error?.code ?? '',
        retryAfter: response.headers.get('retry-after'),
      });
  }
  // (60 − 20) slots at the measured slot time, one send a second: that many wait, plus the one sent at once, plus one
  // for each second the burst took to arrive (a slow machine's burst is partly sent while it arrives).
  const fits = Math.floor(((40 * status.capacity.slot_ms) / 1000) * 0.9) + 1;
  expect(accepted.length).toBeGreaterThanOrEqual(1);
  expect(accepted.length).toBeLessThanOrEqual(fits + 1 + Math.ceil(burstMs / 1000));
  expect(refusals.length).toBeGreaterThan(0);
  expect(refusals.length).toBe(16 - accepted.length);
  for (const refusal of refusals) {
    expect(refusal).toMatchObject({ status: 429, code: 'RELAY_E_CAPACITY_EXCEEDED' });
    expect(Number(refusal.retryAfter)).toBeGreaterThanOrEqual(1);
  }
  expect((await get(url, '/status')).body.capacity.refused_total).toBe(refusals.length);

  // Accepted means sent in time: each lands; none is accepted and then expires.
  await waitUntil(
    async () => {
      for (const id of accepted) {
        const state = (await get(url, `/tx/${id}`)).body.state;
        if (state === 'expired' || state === 'failed') throw new Error(`${id} ended ${state}`);
        if (state !== 'confirmed' && state !== 'finalized') return false;
      }
      return true;
    },
    60_000,
    'every accepted transaction confirmed',
  );
}, 90_000);

test('once the backlog has gone out, a new transaction is accepted again', async () => {
  await waitUntil(async () => (await get(url, '/status')).body.capacity.waiting === 0, 30_000, 'no backlog');
  const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(999) });
  expect(enqueued.status).toBe(202);
});

test('a transaction whose own blockhash is old gets the deadline that blockhash has left, not expiry-slots', async () => {
  await waitUntil(async () => (await get(url, '/status')).body.capacity.waiting === 0, 60_000, 'no backlog');
  const { cluster } = stack.simnet;
  // Relay has watched the stream since about height 10: from height 140 on, the block 125 below the tip is one it saw.
  await waitUntil(() => cluster.blockHeightAt('processed') >= 140, 60_000, 'block height 140');
  // A blockhash 125 blocks into its 150-block life, from a block relay saw on its stream (relay started well before).
  const height = cluster.blockHeightAt('processed');
  let old: { blockhash: string; blockHeight: number } | null = null;
  for (let slot = cluster.slot; slot > 0 && !old; slot--) {
    const block = cluster.block(slot);
    if (block && block.status !== 'dead' && block.blockHeight === height - 125) old = block;
  }
  expect(old).not.toBeNull();
  // A small backlog: four fresh transfers at once (about eight fit in expiry-slots 60 at one bundle a second).
  const fresh: string[] = [];
  for (let i = 0; i < 4; i++) {
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(1_400 + i) });
    expect(enqueued.status).toBe(202);
    fresh.push(enqueued.body.tx_id);
  }
  // Behind them, the old blockhash's 25 blocks (less the reserve, 12: at most half) are about 2.6 s at 200 ms slots:
  // too little for the three or more still waiting at 0.9 a second. Refused, naming what its blockhash had left.
  const aged = await post(url, '/tx/enqueue', {
    transaction: stack.transfer(1_500, undefined, (old as { blockhash: string }).blockhash),
  });
  expect(aged.status).toBe(429);
  expect(aged.body.error.code).toBe('RELAY_E_CAPACITY_EXCEEDED');
  expect(aged.body.error.details.blockhash_blocks_left).toBeGreaterThanOrEqual(20);
  expect(aged.body.error.details.blockhash_blocks_left).toBeLessThanOrEqual(25);
  // The same moment, a fresh blockhash has expiry-slots' 40 usable slots (8 s): accepted.
  const next = await post(url, '/tx/enqueue', { transaction: stack.transfer(1_501) });
  expect(next.status).toBe(202);
  fresh.push(next.body.tx_id);
  await waitUntil(
    async () => {
      for (const id of fresh)
        if (!['finalized', 'failed', 'expired'].includes((await get(url, `/tx/${id}`)).body.state))
          return false;
      return true;
    },
    60_000,
    'the fresh transactions ended',
  );
}, 240_000);

test('bundles that lose: admission counts only the share that lands, and sells less', async () => {
  await waitUntil(async () => (await get(url, '/status')).body.capacity.waiting === 0, 30_000, 'no backlog');
  // Every bundle so far landed (a fading loss could leave it a hair below 1).
  expect((await get(url, '/status')).body.capacity.landed_share).toBeGreaterThan(0.95);
  // A market this tip cannot win: every bundle the engine takes loses its auction (fee_too_low).
  const { auction } = stack.simnet.engine;
  auction.setFixedClearingTipPerCu(null);
  auction.setFixedClearingTip(10_000_000);
  const losing: string[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(1_200 + i) });
      expect(enqueued.status).toBe(202);
      losing.push(enqueued.body.tx_id);
    }
    await waitUntil(
      async () => (await get(url, '/status')).body.capacity.landed_share <= 0.8,
      60_000,
      'the landed share to fall with the lost bundles',
    );
    const share = (await get(url, '/status')).body.capacity.landed_share as number;
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        fetch(`${url}/tx/enqueue`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ transaction: stack.transfer(1_300 + i) }),
        }),
      ),
    );
    const refusals: Array<{ send_rate_per_s: number }> = [];
    for (const response of answers) {
      const body = (await response.json()) as {
        tx_id?: string;
        error?: { details: { send_rate_per_s: number } };
      };
      if (response.status === 202) losing.push(body.tx_id as string);
      else refusals.push(body.error?.details as { send_rate_per_s: number });
    }
    expect(refusals.length).toBeGreaterThan(0);
    // Each refusal names the rate it counted: one region's 0.9 bundles a second times the landed share (it may have
    // fallen further during the burst, never below its floor of a quarter).
    for (const { send_rate_per_s: rate } of refusals) {
      expect(rate).toBeLessThanOrEqual(Math.round(0.9 * share * 100) / 100 + 0.01);
      expect(rate).toBeGreaterThanOrEqual(0.9 * 0.25 - 0.01);
    }
  } finally {
    auction.setFixedClearingTip(null);
    auction.setFixedClearingTipPerCu(DEFAULT_CLEARING_TIP_PER_CU);
  }
  // Nothing is left behind: each transaction ends (landing at the restored market, or failed after its retries).
  await waitUntil(
    async () => {
      for (const id of losing)
        if (!['finalized', 'failed', 'expired'].includes((await get(url, `/tx/${id}`)).body.state))
          return false;
      return true;
    },
    60_000,
    'every transaction of the losing market ended',
  );
}, 150_000);
