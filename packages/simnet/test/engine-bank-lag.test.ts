// A lagging engine bank (faults.engineBankLagSlots): a bundle whose fee payer was created within the last N slots
// fails the engine's simulation with AccountNotFound, though the cluster would execute it; once the lag has passed
// the same transaction lands. Over the wire with web3.js and the engine's JSON-RPC, on a manual clock.
import {
  Connection,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  VersionedTransaction,
} from '@solana/web3.js';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle.js';
import { startSimnet, type Simnet } from '../src/simnet';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';
import { rpc } from './engine-harness';

let sim: Simnet;
let connection: Connection;

beforeAll(async () => {
  sim = await startSimnet({ seed: 23, clock: 'manual', rateLimit: false, regions: 1 });
  connection = new Connection(sim.endpoints.rpcUrl, 'processed');
  sim.cluster.advance(2);
});

afterAll(async () => {
  await sim.stop();
});

afterEach(() => sim.faults.reset());

/** Advance until the next slot is a bundle-engine leader's. */
function toBundleEngineSlot(): void {
  for (let i = 0; i < 400; i++) {
    if (sim.cluster.leaderAt(sim.cluster.slot + 1)?.bundleEngine) return;
    sim.cluster.advance(1);
  }
  throw new Error('no bundle-engine leader within 400 slots');
}

function tippedTransfer(payer: Keypair): string {
  const tx = new Transaction({
    feePayer: payer.publicKey,
    recentBlockhash: sim.cluster.latestBlockhash().blockhash,
  });
  tx.add(
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 1_000_000,
    }),
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: new PublicKey(MAINNET_TIP_ACCOUNTS[1] as string),
      lamports: 50_000,
    }),
  );
  tx.sign(payer);
  return tx.serialize().toString('base64');
}

async function sendBundle(wire: string): Promise<string> {
  const sent = await rpc(sim.endpoints.engineUrl, 'sendBundle', [[wire], { encoding: 'base64' }]);
  return sent.body.result as string;
}

test("a payer created inside the lag fails the engine's simulation (AccountNotFound); after it, the bundle lands", async () => {
  const results: BundleResult[] = [];
  const onResult = (r: BundleResult) => results.push(r);
  sim.engine.on('result', onResult);
  try {
    sim.faults.set({ engineBankLagSlots: 4 });
    const before = sim.faults.injected.engineBankLagFailures;
    const payer = Keypair.generate();
    sim.cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
    toBundleEngineSlot();
    const wire = tippedTransfer(payer);
    // The cluster itself executes it: relay's RPC view.
    const simulated = await connection.simulateTransaction(
      VersionedTransaction.deserialize(Buffer.from(wire, 'base64')),
      { sigVerify: false, replaceRecentBlockhash: false },
    );
    expect(simulated.value.err).toBeNull();
    const first = await sendBundle(wire);
    sim.cluster.advance(1);
    if (sim.faults.injected.engineBankLagFailures === before)
      throw new Error(
        'the bundle did not meet the lag: the test setup is wrong (the lag passed before its slot)',
      );
    expect(sim.engine.getBundle(first)).toMatchObject({ state: 'failed', failure: 'simulation_failure' });
    const failure = results.find((r) => r.bundleId === first && r.rejected)?.rejected?.simulationFailure;
    expect(failure?.msg).toMatch(/AccountNotFound/);
    expect(failure?.txSignature).toBeTruthy();
    expect(await connection.getBalance(payer.publicKey)).toBe(1_000_000_000);
    // Past the lag the same bytes go through.
    sim.cluster.advance(4);
    toBundleEngineSlot();
    const second = await sendBundle(wire);
    sim.cluster.advance(1);
    expect(sim.engine.getBundle(second)).toMatchObject({ state: 'landed' });
  } finally {
    sim.engine.off('result', onResult);
  }
});

test('off (0, the default): a payer created a slot ago lands at once, and nothing is recorded', async () => {
  const before = sim.faults.injected.engineBankLagFailures;
  const payer = Keypair.generate();
  sim.cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
  expect(sim.cluster.createdAtSlot(payer.publicKey.toBase58())).toBeNull();
  toBundleEngineSlot();
  const id = await sendBundle(tippedTransfer(payer));
  sim.cluster.advance(1);
  expect(sim.engine.getBundle(id)).toMatchObject({ state: 'landed' });
  expect(sim.faults.injected.engineBankLagFailures).toBe(before);
});
