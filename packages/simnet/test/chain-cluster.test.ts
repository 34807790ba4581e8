import { readFileSync } from 'node:fs';
import { SimCluster, BLOCKHASH_VALID_BLOCKS } from '../src/chain/cluster';
import { encodeTransactionError, transactionErrorFromLiteSvm } from '../src/chain/errors';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import type {
  BlockContext,
  BundleCandidate,
  BundleExecution,
  BundleSource,
  SlotEvent,
} from '../src/chain/types';
import { Faults } from '../src/faults';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';

const TIP_ACCOUNT = MAINNET_TIP_ACCOUNTS[0] as string;
const SOL = 1_000_000_000;

/** A block engine stand-in: hands one queued bundle to the next bundle-engine leader and keeps the outcomes. */
class QueuedBundles implements BundleSource {
  queue: BundleCandidate[] = [];
  results: BundleExecution[] = [];
  asked: BlockContext[] = [];
  bundlesForSlot(ctx: BlockContext): BundleCandidate[] {
    this.asked.push(ctx);
    return this.queue.splice(0);
  }
  onBundleResults(_ctx: BlockContext, results: BundleExecution[]): void {
    this.results.push(...results);
  }
}

/** Advance until the current slot's successor is led by a bundle-engine validator. */
function advanceToBundleLeader(cluster: SimCluster): void {
  while (!cluster.leaderAt(cluster.currentSlot + 1)?.bundleEngine) cluster.advance(1);
}

function setup(seed = 5, faults = new Faults()) {
  const cluster = new SimCluster({ seed, slotsPerEpoch: 32, faults });
  const source = new QueuedBundles();
  cluster.setBundleSource(source);
  const user = TestKeypair.generate();
  cluster.airdrop(user.publicKey, 10 * SOL);
  cluster.advance(1);
  const tx = (from: TestKeypair, to: string, lamports: number) =>
    createTransferTx({
      from,
      transfers: [{ to, lamports }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
  return { cluster, source, user, faults, tx };
}

describe('bank and bundles', () => {
  it('applies a bundle atomically: a failing second transaction changes no balance and records no signature', () => {
    const { cluster, source, user, tx } = setup();
    const recipient = TestKeypair.generate().publicKey;
    const payment = tx(user, recipient, 2 * SOL);
    const overdraft = tx(user, TIP_ACCOUNT, 100 * SOL);
    const before = { user: cluster.getBalance(user.publicKey), tip: cluster.getBalance(TIP_ACCOUNT) };
    advanceToBundleLeader(cluster);
    source.queue.push({ bundleId: 'b1', transactions: [payment, overdraft] });
    cluster.advance(1);

    expect(source.results).toEqual([
      expect.objectContaining({
        bundleId: 'b1',
        landed: false,
        failedIndex: 1,
        err: { InstructionError: [0, { Custom: 1 }] },
      }),
    ]);
    expect(cluster.getBalance(user.publicKey)).toBe(before.user); // not even fees
    expect(cluster.getBalance(recipient)).toBe(0);
    expect(cluster.getBalance(TIP_ACCOUNT)).toBe(before.tip);
    expect(cluster.signatureStatus(signatureOf(payment))).toBeNull();
    expect(cluster.signatureStatus(signatureOf(overdraft))).toBeNull();
  });

  it('lands a good bundle in order in one slot, and asks only bundle-engine leaders', () => {
    const { cluster, source, user, tx } = setup();
    const recipient = TestKeypair.generate().publicKey;
    advanceToBundleLeader(cluster);
    const payment = tx(user, recipient, SOL);
    const tip = tx(user, TIP_ACCOUNT, 10_000);
    source.queue.push({ bundleId: 'b2', transactions: [payment, tip] });
    cluster.advance(1);
    expect(source.results[0]).toMatchObject({ landed: true, slot: cluster.slot });
    expect(cluster.signatureStatus(signatureOf(payment))?.slot).toBe(cluster.slot);
    expect(cluster.signatureStatus(signatureOf(tip))?.slot).toBe(cluster.slot);
    expect(cluster.getBalance(recipient)).toBe(SOL);
    cluster.advance(40);
    expect(source.asked.length).toBeGreaterThan(0);
    expect(source.asked.every((ctx) => ctx.leader.bundleEngine)).toBe(true);
  });

  it('refuses a transaction whose blockhash is older than 150 blocks', () => {
    const { cluster, user } = setup();
    const old = cluster.latestBlockhash('processed');
    expect(old.lastValidBlockHeight).toBe(cluster.blockHeight + BLOCKHASH_VALID_BLOCKS);
    cluster.advance(BLOCKHASH_VALID_BLOCKS - 1);
    const fresh = TestKeypair.generate().publicKey;
    const stillValid = createTransferTx({
      from: user,
      transfers: [{ to: fresh, lamports: SOL }],
      recentBlockhash: old.blockhash,
    });
    expect(cluster.isBlockhashValid(old.blockhash)).toBe(true);
    expect(cluster.submitTransaction(stillValid)).toMatchObject({ ok: true });
    cluster.advance(1); // lands at height issue + 150: the last valid one
    expect(cluster.signatureStatus(signatureOf(stillValid))?.err).toBeNull();
    cluster.advance(1);
    expect(cluster.blockHeight).toBeGreaterThan(old.lastValidBlockHeight);
    expect(cluster.isBlockhashValid(old.blockhash)).toBe(false);
    const expired = createTransferTx({
      from: user,
      transfers: [{ to: fresh, lamports: 1 }],
      recentBlockhash: old.blockhash,
    });
    expect(cluster.submitTransaction(expired)).toMatchObject({ ok: false, err: 'BlockhashNotFound' });
  });

  it('refuses duplicates (AlreadyProcessed from its own status cache) and bad signatures', () => {
    const { cluster, user, tx } = setup();
    const wire = tx(user, TestKeypair.generate().publicKey, SOL);
    expect(cluster.submitTransaction(wire).ok).toBe(true);
    expect(cluster.submitTransaction(wire).ok).toBe(true); // resend while queued: deduplicated
    cluster.advance(1);
    expect(cluster.transactionCount).toBeGreaterThan(0);
    expect(cluster.submitTransaction(wire)).toMatchObject({ ok: false, err: 'AlreadyProcessed' });
    const tampered = Uint8Array.from(tx(user, TestKeypair.generate().publicKey, SOL));
    tampered[10] = (tampered[10] as number) ^ 0xff;
    expect(cluster.submitTransaction(tampered)).toMatchObject({ ok: false, err: 'SignatureFailure' });
    expect(cluster.submitTransaction(new Uint8Array([1, 2, 3]))).toMatchObject({
      ok: false,
      err: 'SanitizeFailure',
    });
  });

  it('expireBlockhashes invalidates every blockhash issued so far', () => {
    const { cluster, user, tx, faults } = setup();
    const wire = tx(user, TestKeypair.generate().publicKey, SOL);
    faults.expireBlockhashes();
    expect(cluster.submitTransaction(wire)).toMatchObject({ ok: false, err: 'BlockhashNotFound' });
    cluster.advance(1);
    expect(cluster.isBlockhashValid(cluster.latestBlockhash('processed').blockhash)).toBe(true);
  });
});

describe('uncled blocks and dead slots', () => {
  it('an uncled block re-broadcasts its bundle transactions one by one: the tip lands, the payment fails', () => {
    const { cluster, source, user, tx, faults } = setup();
    const recipient = TestKeypair.generate().publicKey;
    const balance = cluster.getBalance(user.publicKey);
    const tipBefore = cluster.getBalance(TIP_ACCOUNT);
    const tip = tx(user, TIP_ACCOUNT, 50_000);
    const payment = tx(user, recipient, balance - SOL);
    const rollbacks: Array<{ slot: number; uncledBundleIds?: string[] }> = [];
    cluster.on('rollback', (r) => rollbacks.push(r));
    advanceToBundleLeader(cluster);
    faults.set({ uncleRate: 1 });
    source.queue.push({ bundleId: 'uncled', transactions: [tip, payment] });
    cluster.advance(1);
    faults.reset();
    const uncledSlot = cluster.slot;
    expect(source.results[0]).toMatchObject({ landed: true, slot: uncledSlot });
    expect(cluster.signatureStatus(signatureOf(payment))?.confirmationStatus).toBe('processed');

    cluster.advance(1); // the block dies; the tip transaction is re-broadcast into this slot
    expect(rollbacks).toEqual([expect.objectContaining({ slot: uncledSlot, uncledBundleIds: ['uncled'] })]);
    const tipStatus = cluster.signatureStatus(signatureOf(tip));
    expect(tipStatus).toMatchObject({ slot: cluster.slot, err: null });
    expect(cluster.signatureStatus(signatureOf(payment))).toBeNull();

    // Before the payment is re-broadcast, the user spends elsewhere: now it fails on its own.
    expect(cluster.submitTransaction(tx(user, TestKeypair.generate().publicKey, 2 * SOL)).ok).toBe(true);
    cluster.advance(1);
    expect(cluster.signatureStatus(signatureOf(payment))).toMatchObject({
      slot: cluster.slot,
      err: { InstructionError: [0, { Custom: 1 }] },
    });
    expect(cluster.getBalance(TIP_ACCOUNT)).toBe(tipBefore + 50_000);
    expect(cluster.getBalance(recipient)).toBe(0);
  });

  it('a dead slot shows processed, then is marked dead before confirmation, restoring accounts and forgetting signatures', () => {
    const { cluster, user, tx, faults } = setup();
    const recipient = TestKeypair.generate().publicKey;
    const balance = cluster.getBalance(user.publicKey);
    const height = cluster.blockHeight;
    const wire = tx(user, recipient, SOL);
    cluster.submitTransaction(wire);
    const events: SlotEvent[] = [];
    const rollbacks: Array<{ slot: number; signatures: string[] }> = [];
    cluster.on('slot', (e) => events.push(e));
    cluster.on('rollback', (r) => rollbacks.push(r));
    faults.set({ deadSlotRate: 1 });
    cluster.advance(1);
    faults.reset();
    const deadSlot = cluster.slot;
    const blockhash = cluster.latestBlockhash('processed').blockhash;
    expect(cluster.signatureStatus(signatureOf(wire))).toMatchObject({
      slot: deadSlot,
      confirmationStatus: 'processed',
    });
    expect(cluster.getBalance(recipient)).toBe(SOL);

    cluster.advance(1);
    expect(events.filter((e) => e.slot === deadSlot).map((e) => e.status)).toEqual(['processed', 'dead']);
    expect(rollbacks).toEqual([{ slot: deadSlot, signatures: [signatureOf(wire)], reason: 'dead' }]);
    expect(cluster.signatureStatus(signatureOf(wire))).toBeNull();
    expect(cluster.getBalance(recipient)).toBe(0);
    expect(cluster.getBalance(user.publicKey)).toBe(balance);
    expect(cluster.isBlockhashValid(blockhash)).toBe(false);
    // The next block takes the dead one's place: block height does not count the dead block.
    expect(cluster.blockHeight).toBe(height + 1);
    expect(cluster.block(cluster.slot)?.parentSlot).toBe(deadSlot - 1);
    cluster.advance(5);
    expect(events.some((e) => e.slot === deadSlot && e.status === 'confirmed')).toBe(false);
  });

  it('airdrops survive a dead slot', () => {
    const { cluster, user, tx, faults } = setup();
    cluster.submitTransaction(tx(user, TestKeypair.generate().publicKey, SOL));
    faults.set({ deadSlotRate: 1 });
    cluster.advance(1);
    faults.reset();
    const before = cluster.getBalance(user.publicKey);
    const signature = cluster.airdrop(user.publicKey, 3 * SOL);
    cluster.advance(1);
    expect(cluster.getBalance(user.publicKey)).toBe(before + 3 * SOL + SOL + 5_000);
    expect(cluster.signatureStatus(signature)?.slot).toBe(cluster.slot);
  });
});

describe('slot clock, commitment and leaders', () => {
  it('moves a slot to confirmed 2 slots and finalized 32 slots after processed', () => {
    const cluster = new SimCluster({ seed: 2 });
    const seen = new Map<string, number>();
    cluster.on('slot', (e) => seen.set(`${e.slot}:${e.status}`, cluster.currentSlot));
    cluster.advance(40);
    expect(seen.get('5:processed')).toBe(5);
    expect(seen.get('5:confirmed')).toBe(7);
    expect(seen.get('5:finalized')).toBe(37);
    expect(cluster.slotAt('confirmed')).toBe(38);
    expect(cluster.slotAt('finalized')).toBe(8);
    expect(cluster.blockHeightAt('finalized')).toBe(8);
  });

  it('runs on a wall clock (50 ms slots) and stalls on slotStall', async () => {
    const faults = new Faults();
    const cluster = new SimCluster({ seed: 3, slotMs: 50, faults });
    const times = new Map<string, number>();
    cluster.on('slot', (e) => times.set(`${e.slot}:${e.status}`, Date.now()));
    cluster.start();
    // Wait for the slots themselves, not for a guess of how long they take (a loaded machine delays timers).
    const deadline = Date.now() + 10_000;
    while (!times.has('2:confirmed') && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const confirmDelay = (times.get('2:confirmed') as number) - (times.get('2:processed') as number);
    // Confirmed two slots after processed: at least two 50 ms ticks apart (a late timer only adds to it).
    expect(confirmDelay).toBeGreaterThanOrEqual(80);
    faults.set({ slotStall: true });
    const stalledAt = cluster.slot;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(cluster.slot).toBe(stalledAt);
    cluster.close();
  });

  it('skips slots at skipRate without advancing block height', () => {
    const cluster = new SimCluster({ seed: 4, skipRate: 0.3 });
    cluster.advance(100);
    expect(cluster.slot).toBeLessThanOrEqual(100);
    expect(cluster.blockHeight).toBeLessThan(95);
    expect(cluster.blockHeight).toBeGreaterThan(40);
  });

  it('assigns leaders in 4-slot windows, by stake, with ~90% of validators on the bundle engine', () => {
    const cluster = new SimCluster({ seed: 9, slotsPerEpoch: 64, validatorCount: 20 });
    expect(cluster.validators().filter((v) => v.bundleEngine)).toHaveLength(18);
    for (let slot = 0; slot < 64; slot++) {
      expect(cluster.leaderAt(slot)?.identity).toBe(cluster.leaderAt(slot - (slot % 4))?.identity);
    }
    const schedule = cluster.leaderSchedule(0) as Record<string, number[]>;
    const stakes = new Map(cluster.validators().map((v) => [v.identity, v.stake]));
    for (const identity of Object.keys(schedule)) expect(stakes.has(identity)).toBe(true);
  });

  it('rolls the leader schedule over epochs; only the next epoch is known ahead', () => {
    const cluster = new SimCluster({ seed: 9, slotsPerEpoch: 32 });
    expect(cluster.leaderSchedule(40)).not.toBeNull(); // epoch 1, known during epoch 0
    expect(cluster.leaderSchedule(64)).toBeNull(); // epoch 2 not yet
    expect(cluster.leaderAt(64)).toBeNull();
    const nextEpoch = cluster.leaderSchedule(40);
    cluster.advance(35);
    expect(cluster.epochInfo('processed')).toMatchObject({
      epoch: 1,
      slotIndex: 3,
      firstSlot: 32,
      slotsInEpoch: 32,
    });
    expect(cluster.leaderSchedule(cluster.slot)).toEqual(nextEpoch);
    expect(cluster.leaderSchedule(64)).not.toBeNull();
    expect(cluster.leaderSchedule(64)).not.toEqual(nextEpoch);
    expect(
      Object.values(cluster.leaderSchedule(64) as Record<string, number[]>)
        .flat()
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 32 }, (_, i) => i));
  });

  it('replays the same leader schedule and blockhashes from the same seed, and a different one from another', () => {
    const a = new SimCluster({ seed: 77 });
    const b = new SimCluster({ seed: 77 });
    const c = new SimCluster({ seed: 78 });
    a.advance(10);
    b.advance(10);
    expect(a.leaderSchedule(0)).toEqual(b.leaderSchedule(0));
    expect(a.leaderSchedule(500)).toEqual(b.leaderSchedule(500));
    expect(a.latestBlockhash('processed')).toEqual(b.latestBlockhash('processed'));
    expect(a.leaderSchedule(0)).not.toEqual(c.leaderSchedule(0));
  });
});

describe('transaction errors', () => {
  it('encodes bincode bytes Yellowstone clients decode', () => {
    expect([...encodeTransactionError('BlockhashNotFound')]).toEqual([7, 0, 0, 0]);
    expect([...encodeTransactionError('AlreadyProcessed')]).toEqual([6, 0, 0, 0]);
    expect([...encodeTransactionError('InsufficientFundsForFee')]).toEqual([4, 0, 0, 0]);
    expect([...encodeTransactionError({ InstructionError: [2, { Custom: 1 }] })]).toEqual([
      8, 0, 0, 0, 2, 25, 0, 0, 0, 1, 0, 0, 0,
    ]);
    expect([...encodeTransactionError({ InsufficientFundsForRent: { account_index: 1 } })]).toEqual([
      31, 0, 0, 0, 1,
    ]);
  });

  it("maps LiteSVM's numeric enums by the names in its own type declarations", () => {
    const dts = readFileSync(require.resolve('litesvm/dist/internal.d.ts'), 'utf8');
    const names = (enumName: string): string[] =>
      (dts.match(new RegExp(`enum ${enumName} \\{([^}]*)\\}`))?.[1] ?? '')
        .split(',')
        .map((entry) => entry.split('=')[0]?.trim() ?? '')
        .filter(Boolean);
    names('TransactionErrorFieldless').forEach((name, index) =>
      expect(transactionErrorFromLiteSvm(index)).toBe(name),
    );
    const instructionNames = names('InstructionErrorFieldless');
    expect(instructionNames.length).toBeGreaterThan(50);
    instructionNames.forEach((name, index) =>
      expect(transactionErrorFromLiteSvm({ index: 0, err: () => index })).toEqual({
        InstructionError: [0, name],
      }),
    );
  });
});
