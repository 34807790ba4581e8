import {
  MAINNET_TIP_ACCOUNTS,
  TestKeypair,
  createTransferTx,
  startSimnet,
  type Simnet,
} from '@solrelay/simnet';
import { TipLedger } from '../../src/faults-chain';

/**
 * The fault matrix's tip ledger (src/faults-chain.ts) against a real simnet on a manual clock: a bundle of a user
 * transaction and a tipper-paid tip, sent to the block engine as relay sends it, lands whole; its tip must be credited
 * to that bundle whoever paid the user transaction's fee. The lagging-engine-bank phase pays each good transaction
 * from a fee payer created just before it (not one of the payers the ledger was given): the ledger used to watch only
 * the payers given, saw nothing before such a tip in its block, and counted the tip as landed alone (35 "leaked" tips
 * in the phase's first run, every one the only tip of a transaction that landed with its bundle).
 */

let sim: Simnet;
let tipper: TestKeypair;
let payer: TestKeypair;
let ledger: TipLedger;

beforeAll(async () => {
  sim = await startSimnet({ seed: 31, clock: 'manual', rateLimit: false, regions: 1 });
  tipper = TestKeypair.generate();
  payer = TestKeypair.generate();
  sim.cluster.airdrop(tipper.publicKey, 10_000_000_000);
  sim.cluster.airdrop(payer.publicKey, 10_000_000_000);
  sim.cluster.advance(2);
  ledger = new TipLedger(sim, [payer.publicKey], tipper.publicKey);
});

afterAll(async () => {
  ledger?.stop();
  await sim?.stop();
});

/** Advance until the next slot is a bundle-engine leader's, so a bundle sent now competes in it. */
function toBundleEngineSlot(): void {
  for (let i = 0; i < 400; i++) {
    if (sim.cluster.leaderAt(sim.cluster.slot + 1)?.bundleEngine) return;
    sim.cluster.advance(1);
  }
  throw new Error('no bundle-engine leader within 400 slots');
}

let memo = 0;
/** A bundle (user transfer from `from`, then the tipper's tip of `tip` lamports), sent to the engine; its id. */
function sendBundle(from: TestKeypair, tip: number): { bundleId: string; tipSignature: string } {
  memo += 1;
  const { blockhash } = sim.cluster.latestBlockhash();
  const user = createTransferTx({
    from,
    transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 + memo }],
    recentBlockhash: blockhash,
  });
  const tipTx = createTransferTx({
    from: tipper,
    transfers: [{ to: MAINNET_TIP_ACCOUNTS[memo % 8] as string, lamports: tip }],
    recentBlockhash: blockhash,
  });
  const outcome = sim.engine.submitBundle([user, tipTx]);
  if (!outcome.ok) throw new Error(`the engine refused the bundle: ${JSON.stringify(outcome.error)}`);
  const bundle = sim.engine.getBundle(outcome.bundleId);
  return { bundleId: outcome.bundleId, tipSignature: bundle?.signatures[1] as string };
}

/** Send, then produce slots until the engine reports the bundle landed. */
function land(from: TestKeypair, tip: number): { bundleId: string; tipSignature: string } {
  toBundleEngineSlot();
  const sent = sendBundle(from, tip);
  for (let i = 0; i < 8 && sim.engine.getBundle(sent.bundleId)?.state === 'pending'; i++)
    sim.cluster.advance(1);
  expect(sim.engine.getBundle(sent.bundleId)).toMatchObject({ state: 'landed' });
  return sent;
}

test("a tip is credited to its landed bundle when the user transaction's payer is one the ledger was given", () => {
  const sent = land(payer, 60_000);
  const tip = ledger.snapshot().tips.find((t) => t.signature === sent.tipSignature);
  expect(tip).toMatchObject({ bundleId: sent.bundleId, credited: true, lamports: 60_000 });
});

test('a tip is credited to its landed bundle when the user transaction pays from a payer created just before it', () => {
  const fresh = TestKeypair.generate();
  sim.cluster.airdrop(fresh.publicKey, 1_000_000_000);
  const sent = land(fresh, 70_000);
  const tip = ledger.snapshot().tips.find((t) => t.signature === sent.tipSignature);
  expect(tip).toMatchObject({ bundleId: sent.bundleId, credited: true, lamports: 70_000 });
});
