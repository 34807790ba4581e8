// getRecentPrioritizationFees reflects the background market's contention on the accounts asked about (Agave's
// semantics: per slot the higher of the block's lowest price and each asked account's lowest), through the unmodified
// web3.js Connection against a whole simnet on a manual clock.
import { Connection, Keypair, PublicKey } from '@solana/web3.js';
import { startSimnet, type Simnet } from '../src/simnet';

let sim: Simnet;
let connection: Connection;

beforeAll(async () => {
  sim = await startSimnet({ seed: 12, clock: 'manual', rateLimit: false, regions: 1 });
  connection = new Connection(sim.endpoints.rpcUrl, 'confirmed');
});

afterAll(async () => {
  await sim.stop();
});

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

async function feesOf(account: string, fromSlot: number): Promise<number[]> {
  const fees = await connection.getRecentPrioritizationFees({
    lockedWritableAccounts: [new PublicKey(account)],
  });
  return fees.filter((f) => f.slot > fromSlot).map((f) => f.prioritizationFee);
}

test('hot accounts carry the background price, quiet ones ~0, the block lowest 0; busier regimes price higher', async () => {
  const hot = sim.engine.hotAccounts;
  sim.engine.auction.setRegime('calm');
  const calmFrom = sim.cluster.slot;
  sim.cluster.advance(40);
  const top = await feesOf(hot[0] as string, calmFrom);
  const last = await feesOf(hot[hot.length - 1] as string, calmFrom);
  const quiet = await feesOf(Keypair.generate().publicKey.toBase58(), calmFrom);
  const block = (await connection.getRecentPrioritizationFees())
    .filter((f) => f.slot > calmFrom)
    .map((f) => f.prioritizationFee);
  expect(top.length).toBeGreaterThanOrEqual(35);
  expect(block.every((fee) => fee === 0)).toBe(true);
  expect(quiet.every((fee) => fee === 0)).toBe(true);
  // The most popular pool is priced in nearly every slot; the least popular one is often left unpriced.
  expect(top.filter((fee) => fee > 0).length).toBeGreaterThan(0.9 * top.length);
  expect(last.filter((fee) => fee > 0).length).toBeLessThan(top.filter((fee) => fee > 0).length);
  // Calm tips of thousands of lamports over hundreds of thousands of CU: thousands of micro-lamports per CU.
  expect(median(top)).toBeGreaterThan(1_000);

  sim.engine.auction.setRegime('spike');
  const spikeFrom = sim.cluster.slot;
  sim.cluster.advance(40);
  const spikeTop = await feesOf(hot[0] as string, spikeFrom);
  expect(median(spikeTop)).toBeGreaterThan(median(top));
  sim.engine.auction.setRegime(null);
});

test("the entry is the slot auction's lowest winning price per CU on the account, in micro-lamports", () => {
  const slot = sim.cluster.slot;
  const auction = sim.engine.auction.slot(slot);
  const entry = sim.engine.backgroundPrioritizationFees(slot);
  expect(entry?.min).toBe(0);
  expect(auction?.hotAccountPricePerCu.size).toBeGreaterThan(0);
  for (const [account, perCu] of auction?.hotAccountPricePerCu ?? new Map<string, number>()) {
    expect(entry?.writable.get(account)).toBe(Math.round(perCu * 1_000_000));
    // The price is a winner's: some background bid included on that account paid exactly that per CU.
    expect(perCu).toBeGreaterThan(0);
  }
  expect([...(entry?.writable.keys() ?? [])].every((key) => sim.engine.hotAccounts.includes(key))).toBe(true);
});

test('off: only executed transactions set the fees', async () => {
  const plain = await startSimnet({
    seed: 12,
    clock: 'manual',
    rateLimit: false,
    regions: 1,
    engine: { backgroundPrioritizationFees: false },
  });
  try {
    const from = plain.cluster.slot;
    plain.cluster.advance(10);
    const rpc = new Connection(plain.endpoints.rpcUrl, 'confirmed');
    const fees = await rpc.getRecentPrioritizationFees({
      lockedWritableAccounts: [new PublicKey(plain.engine.hotAccounts[0] as string)],
    });
    expect(fees.filter((f) => f.slot > from).every((f) => f.prioritizationFee === 0)).toBe(true);
    expect(plain.engine.backgroundPrioritizationFees(plain.cluster.slot)).toBeNull();
  } finally {
    await plain.stop();
  }
});
