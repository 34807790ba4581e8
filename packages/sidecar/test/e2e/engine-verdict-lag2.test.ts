import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { get, post, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import type { StoredTx } from '../../src/store/records';
import { metricSeries, startRelayStack } from '../helpers/relay-stack';

/**
 * Issue 31's own case, on a stepped clock so that it is exactly this case every run: over gRPC, a payer funded at
 * slot s, its transaction enqueued while slot s + 1 is being produced, and the engine simulating on a bank two slots
 * behind (`engineBankLagSlots: 2`): the engine fails it (AccountNotFound: on its bank the payer does not exist yet),
 * relay's RPC at a context slot at least the verdict's executes it, and the next attempt, two slots on, lands. It is
 * never `failed`, and the verdict relay cleared counts no retry.
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    simnet: { clock: 'manual' },
    env: { BUNDLE_ENGINE_TRANSPORT: 'grpc', BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' },
  });
  url = stack.sidecar.url;
  await stepSlotsUntil(stack, async () => (await get(url, '/readyz')).status === 200, 30_000, 'ready');
}, 60_000);

afterAll(async () => {
  stack?.simnet.faults.reset();
  await stack?.close();
});

const counter = (series: string): Promise<number> => metricSeries(url, series);
const rechecks = (result: string): Promise<number> =>
  counter(`relay_engine_verdict_rechecks_total{result="${result}"}`);

/**
 * Enqueue `transaction` (base64) while the clock stands at slot `s`, and wait until its first bundle is sent: it
 * reaches the engine before slot s + 1 is produced, so it is auctioned in s + 1. Its stored record, read afresh.
 */
async function sendDuringSlot(transaction: string, s: number): Promise<() => Promise<StoredTx>> {
  const enqueued = await post(url, '/tx/enqueue', { transaction });
  expect(enqueued.status).toBe(202);
  const txId = enqueued.body.tx_id as string;
  const stored = async () => (await stack.sidecar.relay.stored(txId)) as StoredTx;
  await waitUntil(
    async () => (await stored()).attempts[0]?.stage === 'submitted',
    15_000,
    'the first bundle sent',
  );
  expect(stack.simnet.cluster.slot).toBe(s);
  return stored;
}

test("funded at s, enqueued during s + 1, the engine's bank two slots behind: cleared, sent again, lands, never failed", async () => {
  const { cluster, faults } = stack.simnet;
  faults.set({ engineBankLagSlots: 2 }); // before the funding: the simnet records when the payer came to exist
  const lagFailuresBefore = faults.injected.engineBankLagFailures;
  const clearedBefore = await counter('relay_engine_verdict_rechecks_total{result="cleared"}');
  const payer = Keypair.generate();
  const s = cluster.slot;
  cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
  const stored = await sendDuringSlot(stack.transfer(1_000, payer), s);
  await stepSlotsUntil(stack, async () => (await stored()).state === 'finalized', 60_000, 'finalized');
  const record = await stored();
  expect(faults.injected.engineBankLagFailures).toBeGreaterThan(lagFailuresBefore);
  expect(await counter('relay_engine_verdict_rechecks_total{result="cleared"}')).toBeGreaterThan(
    clearedBefore,
  );
  expect(record.attempts.length).toBeGreaterThan(1);
  expect(record.attempts[0]).toMatchObject({ stage: 'failed', outcome: 'dropped' });
  expect(record.history.map((h) => h.state)).not.toContain('failed');
  expect(record.retries).toBe(0);
  // It landed within a few slots of the enqueue: the lag's two slots, the re-check and a resend.
  expect((record.landed_slot ?? 0) - s).toBeLessThanOrEqual(20);
}, 120_000);

/**
 * The same case with relay's own RPC lagging too (review finding M3 of issue 31): every JSON-RPC request relay makes
 * is answered by a node four slots behind (`rpcLagSlots: 4`, `rpcLaggingShare: 1`), which answers balances and
 * simulations from its own bank, as a real lagging node does. A payer funded in block s, its transaction enqueued
 * while the clock stands at s (auctioned for s + 1), the engine's bank two slots behind: the engine fails it
 * (AccountNotFound), and relay's re-check must not take the lagging node's older bank (where the payer does not exist
 * either) for proof: it asks at `minContextSlot` (relay's slot, >= s), the node refuses (-32016) until its bank gets
 * there, and then the transaction executes. It is never `failed`, and it lands. Checked by mutation: without
 * `minContextSlot` in the re-check's simulation, relay fails it (history pending, submitted, failed).
 */
test("funded in block s, enqueued at s, the engine's bank and relay's RPC node both behind: never failed, lands", async () => {
  const { cluster, faults } = stack.simnet;
  // Before the funding: the simnet records creations (engine) and undo logs (lagging RPC node) while these are on.
  faults.set({ engineBankLagSlots: 2, rpcLagSlots: 4, rpcLaggingShare: 1 });
  const lagFailuresBefore = faults.injected.engineBankLagFailures;
  const laggedBefore = faults.injected.rpcLagged;
  const reproducedBefore = await rechecks('reproduced');
  // The payer is funded by a transfer that lands in block s (an airdrop is credited at once and recorded a block later,
  // which would leave relay's own slot, the re-check's floor, racing the funding's block).
  const funder = Keypair.generate();
  cluster.airdrop(funder.publicKey.toBase58(), 2_000_000_000);
  const payer = Keypair.generate();
  const funding = new Transaction({
    feePayer: funder.publicKey,
    recentBlockhash: cluster.latestBlockhash('processed').blockhash,
  }).add(
    SystemProgram.transfer({
      fromPubkey: funder.publicKey,
      toPubkey: payer.publicKey,
      lamports: 1_000_000_000,
    }),
  );
  funding.sign(funder);
  expect(cluster.submitTransaction(funding.serialize()).ok).toBe(true);
  cluster.advance(1);
  const s = cluster.slot;
  expect(cluster.getBalance(payer.publicKey.toBase58())).toBe(1_000_000_000);
  // Relay has seen slot s; the node it reads from has not seen the funding (its bank is four slots older).
  await waitUntil(async () => (await get(url, '/status')).body.slot >= s, 10_000, 'relay at slot s');
  expect(cluster.behind(4).getBalance(payer.publicKey.toBase58())).toBe(0);
  // On a blockhash the lagging node knows: stack.transfer's (the confirmed one) is newer than its bank, where the
  // simulation would answer BlockhashNotFound, which proves nothing either way.
  const spend = new Transaction({
    feePayer: payer.publicKey,
    recentBlockhash: cluster.latestBlockhash('finalized').blockhash,
  }).add(
    SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: funder.publicKey, lamports: 1_000 }),
  );
  spend.sign(payer);
  const stored = await sendDuringSlot(spend.serialize().toString('base64'), s);
  await stepSlotsUntil(
    stack,
    async () => ['finalized', 'failed'].includes((await stored()).state),
    60_000,
    'finalized or failed',
  );
  const record = await stored();
  expect(record.history.map((h) => h.state)).not.toContain('failed');
  expect(record.state).toBe('finalized');
  expect(faults.injected.engineBankLagFailures).toBeGreaterThan(lagFailuresBefore);
  expect(faults.injected.rpcLagged).toBeGreaterThan(laggedBefore);
  expect(await rechecks('reproduced')).toBe(reproducedBefore);
  expect(record.attempts.length).toBeGreaterThan(1);
  expect(record.attempts[0]).toMatchObject({ stage: 'failed', outcome: 'dropped' });
  expect((record.landed_slot ?? 0) - s).toBeLessThanOrEqual(20);
}, 120_000);

/**
 * The other half of the case: a transaction that truly cannot execute (its payer never existed) fails within
 * a few slots, as fast as before the re-check: the engine fails it on its lagging bank, relay's own RPC reproduces
 * the failure at a context slot at least the verdict's, and the transaction is `failed` with no second attempt.
 */
test("a payer that never existed, the engine's bank two slots behind: reproduced on relay's RPC, failed within a few slots", async () => {
  const { cluster, faults } = stack.simnet;
  faults.reset();
  faults.set({ engineBankLagSlots: 2 });
  const reproducedBefore = await rechecks('reproduced');
  const s = cluster.slot;
  const stored = await sendDuringSlot(stack.transfer(1_000, Keypair.generate()), s);
  await stepSlotsUntil(stack, async () => (await stored()).state === 'failed', 60_000, 'failed');
  const record = await stored();
  expect(record.attempts).toHaveLength(1);
  expect(record.failure).toBe('insufficient_funds');
  expect(await rechecks('reproduced')).toBeGreaterThan(reproducedBefore);
  const failedAt = record.history.find((h) => h.state === 'failed')?.slot ?? Number.POSITIVE_INFINITY;
  expect(failedAt - s).toBeLessThanOrEqual(4);
}, 120_000);
