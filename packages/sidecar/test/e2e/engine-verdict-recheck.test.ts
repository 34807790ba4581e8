import { Keypair } from '@solana/web3.js';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { metricSeries, startRelayStack } from '../helpers/relay-stack';

/**
 * An engine's fatal verdict is re-checked on relay's own RPC before it becomes `failed` (issue 31; DESIGN §11, last
 * point). Over gRPC, against the simulated engine with a lagging bank (`engineBankLagSlots`): a payer funded just
 * before its transaction is enqueued is `AccountNotFound` in the engine's view, executes in relay's, is sent again
 * and lands, never `failed`. A transaction that truly cannot execute (it moves more than its payer holds) is failed
 * by the same re-check, at its first verdict.
 */
let stack: Stack<Sidecar>;
let url: string;
/** 3 s at the stack's 60 ms slots: far longer than the wait for a bundle-engine leader (the first attempt meets the lag
 * for sure), well inside a blockhash's 150 slots (later attempts land). */
const LAG_SLOTS = 50;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { BUNDLE_ENGINE_TRANSPORT: 'grpc', BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' },
    // Room for the losses a busy box has besides the lag's ("no connected leader up soon", a lost auction), which do
    // count; the lag's own count none (asserted exactly below).
    policy: { 'max-retries': 20 },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/status')).body.slot > 0, 10_000, 'first slot');
}, 30_000);

afterAll(async () => {
  stack?.simnet.faults.reset();
  await stack?.close();
});

const counter = (series: string): Promise<number> => metricSeries(url, series);

function rechecks(result: string): Promise<number> {
  return counter(`relay_engine_verdict_rechecks_total{result="${result}"}`);
}

async function freshPayer(): Promise<Keypair> {
  const payer = Keypair.generate();
  stack.simnet.cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
  return payer;
}

/** The parts of `GET /tx/:id` these tests read. */
interface TxRecord {
  state: string;
  retries: number;
  history: Array<{ state: string }>;
  attempts: Array<{ stage: string; outcome: string | null; slot_submitted: number | null }>;
  last_error: { details: { reason: string } } | null;
}

/** Enqueue `wire` and wait until its transaction is `state`; its id and record then (what it was, if it never got there). */
async function enqueueUntil(
  wire: string,
  state: string,
  ms: number,
): Promise<{ txId: string; record: TxRecord }> {
  const enqueued = await post(url, '/tx/enqueue', { transaction: wire });
  expect(enqueued.status).toBe(202);
  const txId: string = enqueued.body.tx_id;
  await waitUntil(
    async () => (await get(url, `/tx/${txId}`)).body.state === state,
    ms,
    `the transaction to be ${state}`,
  ).catch(async (error: unknown) => {
    const r = (await get(url, `/tx/${txId}`)).body;
    const attempts = (r as TxRecord).attempts.map((a) => [a.stage, a.outcome, a.slot_submitted]);
    throw new Error(
      `${(error as Error).message}: ${JSON.stringify({ state: r.state, last_error: r.last_error, attempts })}`,
    );
  });
  return { txId, record: (await get(url, `/tx/${txId}`)).body as TxRecord };
}

test("a payer funded a slot before the enqueue fails on the engine's lagging bank, then lands: never failed", async () => {
  stack.simnet.faults.set({ engineBankLagSlots: LAG_SLOTS });
  const lagFailuresBefore = stack.simnet.faults.injected.engineBankLagFailures;
  const clearedBefore = await rechecks('cleared');
  const payer = await freshPayer();
  const { record } = await enqueueUntil(stack.transfer(1_000, payer), 'finalized', 60_000);
  // The engine did fail it in simulation, and relay's view cleared it.
  expect(stack.simnet.faults.injected.engineBankLagFailures).toBeGreaterThan(lagFailuresBefore);
  expect(await rechecks('cleared')).toBeGreaterThan(clearedBefore);
  expect(record.attempts.length).toBeGreaterThan(1);
  // The verdicts relay's RPC cleared counted no retry: of the attempts lost, only the others can have (an auction lost
  // on a busy box, a verdict that could not be re-checked).
  const cleared = (await rechecks('cleared')) - clearedBefore;
  const lost = record.attempts.length - 1;
  expect(record.retries).toBeLessThanOrEqual(lost - cleared);
  expect(record.attempts[0]).toMatchObject({ stage: 'failed', outcome: 'dropped' });
  expect(record.history.map((h) => h.state)).not.toContain('failed');
  stack.simnet.faults.set({ engineBankLagSlots: 0 });
}, 90_000);

test('a transaction that truly cannot execute fails at its first verdict, reproduced on relay', async () => {
  const reproducedBefore = await rechecks('reproduced');
  const payer = await freshPayer();
  // More than the payer holds: the transfer's own instruction fails wherever it runs.
  const { record } = await enqueueUntil(stack.transfer(5_000_000_000, payer), 'failed', 30_000);
  expect(record.attempts).toHaveLength(1);
  expect(record.last_error?.details.reason).toMatch(/reproduced on relay's RPC/);
  expect(await rechecks('reproduced')).toBeGreaterThan(reproducedBefore);
}, 60_000);

test('a failed transaction that lands afterwards (a broken proof) is logged and counted, never silently', async () => {
  const countedBefore = await counter('relay_landed_after_terminal_total{state="failed"}');
  // A payer that does not exist: the engine fails it, relay's RPC reproduces it, and it is failed.
  const payer = Keypair.generate();
  const wire = stack.transfer(1_000, payer);
  const { txId } = await enqueueUntil(wire, 'failed', 30_000);
  // Then the world moves on: the payer is funded and someone sends the same bytes straight to the cluster.
  stack.simnet.cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
  await stack.connection().sendRawTransaction(Buffer.from(wire, 'base64'), { skipPreflight: true });
  await waitUntil(
    async () => (await counter('relay_landed_after_terminal_total{state="failed"}')) > countedBefore,
    30_000,
    'the landing after failed to be counted',
  );
  // The record stays as it was: terminal states are final; the metric is the alarm.
  expect((await get(url, `/tx/${txId}`)).body.state).toBe('failed');
}, 60_000);
