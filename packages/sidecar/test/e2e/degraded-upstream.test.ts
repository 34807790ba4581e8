import { Transaction } from '@solana/web3.js';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import bs58 from 'bs58';
import type { Sidecar } from '../../src/service';
import { counterValue, startRelayStack, testIntervals } from '../helpers/relay-stack';

/**
 * Upstreams that stay reachable but go wrong: a tip floor serving frozen data, a cluster whose slots stop, an
 * uncled block whose tip lands on its own. /status and /readyz must say so, and a leaked tip must be counted.
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' },
    sidecar: { intervals: { ...testIntervals, slotStallMs: 1500 } },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/readyz')).status === 200, 15_000, 'ready');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

afterEach(() => {
  stack.simnet.faults.reset();
});

test('a tip floor serving an old sample shows as stale in /status, and heals when fresh again', async () => {
  stack.simnet.faults.set({ staleTipFloor: true });
  await waitUntil(
    async () => /^stale: .*300 s old/.test((await get(url, '/status')).body.upstream.tip_floor.detail ?? ''),
    5000,
    'the stale tip floor in /status',
  );
  expect((await get(url, '/status')).body.upstream.tip_floor.ok).toBe(false);
  stack.simnet.faults.reset();
  await waitUntil(
    async () => (await get(url, '/status')).body.upstream.tip_floor.ok === true,
    5000,
    'the tip floor fresh again',
  );
}, 20_000);

test('a slot stall makes /readyz 503 naming the slots and /status the silent stream; both heal', async () => {
  stack.simnet.faults.set({ slotStall: true });
  await waitUntil(async () => (await get(url, '/readyz')).status === 503, 5000, 'not ready');
  const readyz = (await get(url, '/readyz')).body;
  expect(readyz.error.details.reasons.join('; ')).toMatch(/slots: no new slot for \d+ s/);
  // The stream may still bring updates of older slots (their commitment catching up) for a moment after the last new
  // one, and is judged silent only when those stop too: waited for (a loaded CI run read it a moment early).
  await waitUntil(
    async () => (await get(url, '/status')).body.upstream.stream.ok === false,
    5000,
    'the silent stream in /status',
  );
  const status = (await get(url, '/status')).body;
  expect(status.upstream.stream).toMatchObject({ ok: false });
  expect(status.upstream.stream.detail).toMatch(/no new slot/);
  stack.simnet.faults.reset();
  await waitUntil(async () => (await get(url, '/readyz')).status === 200, 5000, 'ready again');
  expect((await get(url, '/status')).body.upstream.stream.ok).toBe(true);
}, 20_000);

test('an uncled block: the tip re-broadcast on its own is counted leaked, and the transaction still finalizes', async () => {
  const leakedBefore = await leakedLamports();
  // Every block carrying a bundle is uncled: its transactions are re-broadcast one per slot, the user
  // transaction first, the tip in a later slot (outside any bundle).
  stack.simnet.faults.set({ uncleRate: 1 });
  const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(7) });
  expect(enqueued.status).toBe(202);
  const txId: string = enqueued.body.tx_id;
  await waitUntil(
    async () => (await leakedLamports()) > leakedBefore,
    20_000,
    'the leaked tip to be counted',
  );
  stack.simnet.faults.reset();
  await waitUntil(
    async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
    20_000,
    'finalized',
  );
  expect((await leakedLamports()) - leakedBefore).toBe(50_000);
  const record = (await get(url, `/tx/${txId}`)).body;
  const bundles = new Set((record.attempts as Array<{ bundle_id: string }>).map((a) => a.bundle_id));
  // The leaked attempt's entry: failed, with the slot its tip landed in. Not necessarily the first attempt's: on a
  // loaded machine an earlier attempt may be lost before a later one's block is uncled (a CI run waited in vain on
  // the first one's). Its lifecycle entry is written after the record's change (a CI run read it a moment before,
  // without the slot): waited for, not raced.
  const entries = async () =>
    (await get(url, '/lifecycle?last=50')).body.entries as Array<Record<string, unknown>>;
  const leakedEntries = async () =>
    (await entries()).filter(
      (e) => bundles.has(e.bundle_id as string) && e.stage === 'failed' && typeof e.slot_landed === 'number',
    );
  await waitUntil(
    async () => (await leakedEntries()).length > 0,
    10_000,
    'the leaked attempt’s lifecycle entry with the slot its tip landed in',
  ).catch(async (error: unknown) => {
    const mine = (await entries()).filter((e) => bundles.has(e.bundle_id as string));
    throw new Error(
      `${(error as Error).message}; attempts ${JSON.stringify(record.attempts)}, entries ${JSON.stringify(mine)}`,
    );
  });
  const lifecycle = await entries();
  expect(await leakedEntries()).toHaveLength(1);
  const first = (await leakedEntries())[0];
  expect(first).toMatchObject({ stage: 'failed', tip_lamports: 50_000 });
  expect(first?.slot_landed).toEqual(expect.any(Number));
  // The user transaction landed through the re-broadcast, not through a bundle: no bundle of it is finalized.
  expect(lifecycle.filter((e) => e.tx_id === txId && e.stage === 'finalized')).toEqual([]);
}, 45_000);

test('an orphaned block (no dead-slot notice): the landing goes back to pending once the root passes it, and the transaction finalizes in another block', async () => {
  const orphanedBefore = await counter('relay_orphaned_landings_total');
  const deadBefore = await counter('relay_dead_slots_total');
  const { cluster } = stack.simnet;
  // Slots by hand while the fault is on, so the block that takes the transaction stays the tip (and is read by
  // relay) until the next slot orphans it: a condition, not a race with a 60 ms slot.
  cluster.stop();
  let txId = '';
  try {
    stack.simnet.faults.set({ orphanedBlockRate: 1 });
    const transaction = stack.transfer(11);
    const signature = bs58.encode(Transaction.from(Buffer.from(transaction, 'base64')).signature as Buffer);
    const enqueued = await post(url, '/tx/enqueue', { transaction });
    expect(enqueued.status).toBe(202);
    txId = enqueued.body.tx_id;
    const landedIn = async (): Promise<boolean> => {
      const state = (await get(url, `/tx/${txId}`)).body.state;
      return state === 'landed' || state === 'processed';
    };
    // One slot at a time until the chain holds the transaction; then the clock waits for relay to read it (on a
    // loaded machine that can take a while), and only the next slot orphans the block.
    for (let i = 0; i < 400 && cluster.signatureStatus(signature) === null; i++) {
      cluster.advance(1);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(cluster.signatureStatus(signature)).not.toBeNull();
    await waitUntil(landedIn, 20_000, 'relay to read the landing');
    expect(await landedIn()).toBe(true);
  } finally {
    stack.simnet.faults.reset();
    cluster.start(); // the next slot leaves that block on an abandoned fork; nothing says so
  }
  await waitUntil(
    async () => (await counter('relay_orphaned_landings_total')) > orphanedBefore,
    20_000,
    'relay to see the landing gone once the root passes it',
  );
  await waitUntil(
    async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
    20_000,
    'finalized',
  );
  expect(await counter('relay_dead_slots_total')).toBe(deadBefore); // nothing announced a dead slot
  const record = (await get(url, `/tx/${txId}`)).body;
  const states = (record.history as Array<{ state: string }>).map((h) => h.state);
  // Landed (or processed) in the orphaned block, back to pending, then on to finalized in a block that stayed.
  const firstLanding = states.findIndex((s) => s === 'processed' || s === 'landed');
  expect(states.indexOf('pending', firstLanding)).toBeGreaterThan(firstLanding);
  const lifecycle = (await get(url, '/lifecycle?last=100')).body.entries as Array<Record<string, unknown>>;
  const gone = lifecycle.find((e) => e.tx_id === txId && e.stage === 'failed' && e.slot_landed !== null);
  expect(gone?.slot_landed).toEqual(expect.any(Number));
  const finalized = (record.history as Array<{ state: string; slot: number }>).find(
    (h) => h.state === 'finalized',
  );
  expect(finalized?.slot).toBeGreaterThan(gone?.slot_landed as number);
}, 90_000);

test('a lagging RPC node behind the load balancer: a landing it has not seen yet is not taken for a lost bundle', async () => {
  // Every read answered 30 slots (1.8 s) behind: longer than the window grace, so judging the window at relay's own
  // slot would call the bundle lost before the node shows its landing, and pay for a second attempt.
  stack.simnet.engine.auction.setFixedClearingTip(1_000);
  stack.simnet.faults.set({ rpcLagSlots: 30, rpcLaggingShare: 1 });
  const laggedBefore = stack.simnet.faults.injected.rpcLagged;
  try {
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(13) });
    expect(enqueued.status).toBe(202);
    const txId: string = enqueued.body.tx_id;
    await waitUntil(
      async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
      30_000,
      'finalized',
    );
    const record = (await get(url, `/tx/${txId}`)).body;
    expect(record.attempts).toHaveLength(1);
    expect(record.retries).toBe(0);
    expect(stack.simnet.faults.injected.rpcLagged).toBeGreaterThan(laggedBefore);
  } finally {
    stack.simnet.faults.reset();
    stack.resetAuction();
  }
}, 45_000);

function counter(name: string): Promise<number> {
  return counterValue(url, name);
}

async function leakedLamports(): Promise<number> {
  return counter('relay_tips_leaked_lamports_total');
}
