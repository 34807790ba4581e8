// Execution drift: a share of transactions whose state moved between their simulation and their inclusion fail at
// inclusion although the simulation passed (faults.executionDriftRate). Over the wire with web3.js and the engine's
// JSON-RPC, on a manual clock.
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle.js';
import { SimCluster, TestKeypair, createTransferTx, fundedKeypair, signatureOf } from '../src/chain';
import { Faults } from '../src/faults';
import { Rng } from '../src/rng';
import { startSimnet, type Simnet } from '../src/simnet';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';
import { rpc } from './engine-harness';

let sim: Simnet;
let connection: Connection;

beforeAll(async () => {
  sim = await startSimnet({ seed: 21, clock: 'manual', rateLimit: false, regions: 1 });
  connection = new Connection(sim.endpoints.rpcUrl, 'processed');
  sim.cluster.advance(2);
});

afterAll(async () => {
  await sim.stop();
});

afterEach(() => sim.faults.reset());

test('a transaction whose preflight passed lands failed: its fee charged, nothing else applied', async () => {
  const payer = sim.fundedKeypair(1_000_000_000);
  const recipient = Keypair.generate().publicKey;
  const tx = new Transaction({
    feePayer: payer.publicKey,
    recentBlockhash: sim.cluster.latestBlockhash().blockhash,
  });
  tx.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 5_000_000 }));
  tx.sign(payer);
  const before = sim.faults.injected.executionDrifts;
  sim.faults.set({ executionDriftRate: 1 });
  // Preflight (simulateTransaction) passes: the signature comes back.
  const signature = await connection.sendRawTransaction(tx.serialize());
  sim.cluster.advance(1);
  const status = (await connection.getSignatureStatuses([signature])).value[0];
  expect(status?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
  expect(await connection.getBalance(recipient)).toBe(0);
  expect(await connection.getBalance(payer.publicKey)).toBe(1_000_000_000 - 5_000);
  expect(sim.faults.injected.executionDrifts).toBe(before + 1);
  const got = await new Connection(sim.endpoints.rpcUrl, 'confirmed').getTransaction(signature, {
    commitment: 'confirmed',
    maxSupportedTransactionVersion: 0,
  });
  expect(got).toBeNull(); // not yet confirmed on a manual clock
  sim.cluster.advance(2);
  const confirmed = await new Connection(sim.endpoints.rpcUrl, 'confirmed').getTransaction(signature, {
    commitment: 'confirmed',
    maxSupportedTransactionVersion: 0,
  });
  expect(confirmed?.meta?.fee).toBe(5_000);
  expect(confirmed?.meta?.logMessages?.at(-1)).toMatch(/execution drift/);
});

test('a bundle with a drifted member fails whole: rejected.simulationFailure naming it, inflight Failed', async () => {
  const results: BundleResult[] = [];
  const onResult = (r: BundleResult) => results.push(r);
  sim.engine.on('result', onResult);
  try {
    for (let i = 0; i < 400; i++) {
      const next = sim.cluster.leaderAt(sim.cluster.slot + 1);
      if (next?.bundleEngine && next.identity !== sim.cluster.leaderAt(sim.cluster.slot)?.identity) break;
      sim.cluster.advance(1);
    }
    const payer = sim.fundedKeypair(1_000_000_000);
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
        toPubkey: new PublicKey(MAINNET_TIP_ACCOUNTS[2] as string),
        lamports: 50_000,
      }),
    );
    tx.sign(payer);
    sim.faults.set({ executionDriftRate: 1 });
    const sent = await rpc(sim.endpoints.engineUrl, 'sendBundle', [
      [tx.serialize().toString('base64')],
      { encoding: 'base64' },
    ]);
    const id = sent.body.result as string;
    sim.cluster.advance(1);
    expect(sim.engine.getBundle(id)).toMatchObject({ state: 'failed', failure: 'simulation_failure' });
    const failure = results.find((r) => r.bundleId === id && r.rejected)?.rejected?.simulationFailure;
    expect(failure?.msg).toMatch(/InstructionError/);
    expect(await connection.getBalance(payer.publicKey)).toBe(1_000_000_000);
  } finally {
    sim.engine.off('result', onResult);
  }
});

test('a share: about the rate, the same transactions for the same seed, none at 0; the rate is validated', () => {
  const run = (seed: number, rate: number): string[] => {
    const faults = new Faults();
    const cluster = new SimCluster({ rng: new Rng(seed).fork('chain'), faults });
    faults.set({ executionDriftRate: rate });
    const payer = fundedKeypair(cluster, 10_000_000_000);
    cluster.advance(1);
    const signatures: string[] = [];
    for (let i = 0; i < 80; i++) {
      const wire = createTransferTx({
        from: payer,
        transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 + i }],
        recentBlockhash: cluster.latestBlockhash().blockhash,
      });
      expect(cluster.submitTransaction(wire).ok).toBe(true);
      signatures.push(signatureOf(wire));
      if (i % 10 === 9) cluster.advance(1);
    }
    cluster.advance(1);
    const failed = signatures.filter((sig) => cluster.signatureStatus(sig)?.err != null);
    expect(signatures.every((sig) => cluster.signatureStatus(sig) !== null)).toBe(true);
    cluster.close();
    return failed.map((sig) => String(signatures.indexOf(sig)));
  };
  const share = run(3, 0.25);
  expect(share.length).toBeGreaterThanOrEqual(10);
  expect(share.length).toBeLessThanOrEqual(30);
  expect(run(3, 0)).toEqual([]);
  expect(() => sim.faults.set({ executionDriftRate: 1.5 })).toThrow(/probability/);
});
