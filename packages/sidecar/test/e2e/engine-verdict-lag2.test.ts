import { Keypair } from '@solana/web3.js';
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

test("funded at s, enqueued during s + 1, the engine's bank two slots behind: cleared, sent again, lands, never failed", async () => {
  const { cluster, faults } = stack.simnet;
  faults.set({ engineBankLagSlots: 2 }); // before the funding: the simnet records when the payer came to exist
  const lagFailuresBefore = faults.injected.engineBankLagFailures;
  const clearedBefore = await counter('relay_engine_verdict_rechecks_total{result="cleared"}');
  const payer = Keypair.generate();
  const s = cluster.slot;
  cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
  const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(1_000, payer) });
  expect(enqueued.status).toBe(202);
  const txId = enqueued.body.tx_id as string;
  const stored = async () => (await stack.sidecar.relay.stored(txId)) as StoredTx;
  // The clock stands at s: the bundle reaches the engine before slot s + 1 is produced, so it is auctioned in s + 1.
  await waitUntil(
    async () => (await stored()).attempts[0]?.stage === 'submitted',
    15_000,
    'the first bundle sent',
  );
  expect(cluster.slot).toBe(s);
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
