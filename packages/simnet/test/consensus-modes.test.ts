import { SimCluster } from '../src/chain/cluster';
import { RpcMethods } from '../src/rpc/methods';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import type { SlotEvent } from '../src/chain/types';
import type { SimClusterOptions } from '../src/chain/cluster';

const SOL = 1_000_000_000;

function setup(options: SimClusterOptions) {
  const cluster = new SimCluster({ seed: 5, slotsPerEpoch: 32, ...options });
  const events: SlotEvent[] = [];
  const rollbacks: Array<{ slot: number; signatures: string[]; reason: string }> = [];
  cluster.on('slot', (e) => events.push(e));
  cluster.on('rollback', (r) => rollbacks.push(r));
  const user = TestKeypair.generate();
  cluster.airdrop(user.publicKey, 10 * SOL);
  cluster.advance(1);
  const transfer = (lamports = SOL) =>
    createTransferTx({
      from: user,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
  return { cluster, events, rollbacks, user, transfer };
}

const statusesOf = (events: SlotEvent[], slot: number) =>
  events.filter((e) => e.slot === slot).map((e) => e.status);

describe('consensus: towerbft (the default)', () => {
  it('confirms two slots and roots 32 slots after processed, with no bank id on slot events', () => {
    const { cluster, events } = setup({});
    expect(cluster.consensus).toBe('towerbft');
    cluster.advance(40);
    expect(cluster.slotAt('confirmed')).toBe(cluster.slot - 2);
    expect(cluster.slotAt('finalized')).toBe(cluster.slot - 32);
    expect(events.some((e) => e.bankId !== undefined)).toBe(false);
  });
});

describe('consensus: alpenglow', () => {
  it('one finalization certificate sets confirmed and finalized together, after processed', () => {
    const { cluster, events } = setup({ consensus: 'alpenglow' });
    cluster.advance(1);
    const slot = cluster.slot;
    // Manual clock: the certificate is delivered when the next slot is produced.
    expect(statusesOf(events, slot)).toEqual(['processed']);
    expect(cluster.slotAt('finalized')).toBeLessThan(slot);
    cluster.advance(1);
    expect(statusesOf(events, slot)).toEqual(['processed', 'confirmed', 'finalized']);
    expect(cluster.slotAt('confirmed')).toBe(slot);
    expect(cluster.slotAt('finalized')).toBe(slot);
    const seen = events.filter((e) => e.slot === slot);
    expect(new Set(seen.map((e) => e.bankId)).size).toBe(1);
    expect(seen[0]?.bankId).toBeGreaterThan(0);
  });

  it('a transaction is finalized one certificate after it lands', () => {
    const { cluster, transfer } = setup({ consensus: 'alpenglow' });
    const tx = transfer();
    cluster.submitTransaction(tx);
    cluster.advance(1);
    expect(cluster.signatureStatus(signatureOf(tx))?.confirmationStatus).toBe('processed');
    cluster.advance(1);
    expect(cluster.signatureStatus(signatureOf(tx))?.confirmationStatus).toBe('finalized');
  });

  it('on the automatic clock the certificate arrives finalizationDelayMs after processed', async () => {
    const cluster = new SimCluster({
      seed: 5,
      slotMs: 1000,
      consensus: 'alpenglow',
      finalizationDelayMs: 20,
    });
    const events: SlotEvent[] = [];
    cluster.on('slot', (e) => events.push(e));
    cluster.start();
    try {
      // Wait on the condition, not on time: the certificate for the first slot produced.
      await new Promise<void>((resolve) => {
        const check = () => (events.some((e) => e.status === 'finalized') ? resolve() : setTimeout(check, 5));
        check();
      });
      const first = events.find((e) => e.status === 'finalized') as SlotEvent;
      expect(statusesOf(events, first.slot)).toEqual(['processed', 'confirmed', 'finalized']);
      // The next slot is not produced yet: the certificate came from its own timer.
      expect(cluster.currentSlot).toBe(first.slot);
    } finally {
      cluster.close();
    }
  });
});

describe('consensus: migration (SIMD-0371)', () => {
  const migration = { boundarySlot: 10, transitionAfterSlots: 2, certificateAfterSlots: 2 };

  it('runs TowerBFT, packs no user transaction after the boundary, then deletes the blocks after the transition and runs Alpenglow', () => {
    const { cluster, events, rollbacks, transfer } = setup({ consensus: 'migration', migration });
    cluster.advance(9 - cluster.currentSlot);
    expect(cluster.consensusPhase).toBe('towerbft');
    cluster.advance(1); // slot 10: the boundary block, a normal one
    const before = transfer();
    cluster.submitTransaction(before);
    cluster.advance(1); // slot 11: vote-only
    expect(cluster.consensusPhase).toBe('vote-only');
    expect(cluster.signatureStatus(signatureOf(before))).toBeNull();
    const heightAtCertificate = (() => {
      cluster.advance(3); // 12 = transition block, 14 = certified
      return cluster.blockHeight;
    })();
    expect(cluster.migrationState.transitionSlot).toBe(12);
    expect(cluster.signatureStatus(signatureOf(before))).toBeNull();
    expect(cluster.slotAt('confirmed')).toBe(12); // TowerBFT: two slots behind processed
    cluster.advance(1); // slot 15: blocks 13 and 14 deleted; Alpenglow on 12
    expect(cluster.consensusPhase).toBe('alpenglow');
    expect(cluster.migrationState.genesisSlot).toBe(12);
    expect(rollbacks.map((r) => [r.slot, r.reason, r.signatures.length])).toEqual([
      [14, 'migration', 0],
      [13, 'migration', 0],
    ]);
    // The queued transaction lands in the first Alpenglow block (its blockhash is older than the window).
    expect(cluster.signatureStatus(signatureOf(before))?.slot).toBe(15);
    expect(cluster.blockHeight).toBeLessThan(heightAtCertificate);
    expect(cluster.slotAt('finalized')).toBe(12);
    cluster.advance(1);
    expect(statusesOf(events, 15)).toEqual(['processed', 'confirmed', 'finalized']);
    expect(events.filter((e) => e.slot >= 11).every((e) => e.bankId !== undefined)).toBe(true);
  });

  it('never lets the finalized block height step backwards', () => {
    const { cluster } = setup({ consensus: 'migration', migration, finalizationSlots: 4 });
    let last = 0;
    for (let i = 0; i < 30; i++) {
      cluster.advance(1);
      const h = cluster.blockHeightAt('finalized');
      expect(h).toBeGreaterThanOrEqual(last);
      last = h;
    }
  });

  it('with the boundary fork abandoned, a user transaction in the boundary block is rolled back and never confirmed', () => {
    const { cluster, rollbacks, transfer, user } = setup({
      consensus: 'migration',
      migration: { ...migration, boundaryForkAbandoned: true },
    });
    cluster.advance(9 - cluster.currentSlot);
    const balance = cluster.getBalance(user.publicKey);
    const tx = transfer();
    cluster.submitTransaction(tx);
    cluster.advance(1); // slot 10: the boundary block, carrying it
    expect(cluster.signatureStatus(signatureOf(tx))?.slot).toBe(10);
    cluster.advance(4);
    expect(cluster.signatureStatus(signatureOf(tx))?.confirmationStatus).toBe('processed');
    expect(cluster.slotAt('confirmed')).toBeLessThan(10);
    cluster.advance(1); // slot 15: everything after slot 9 deleted
    expect(rollbacks.find((r) => r.slot === 10)?.signatures).toEqual([signatureOf(tx)]);
    expect(cluster.migrationState.genesisSlot).toBe(9);
    expect(cluster.signatureStatus(signatureOf(tx))).toBeNull();
    expect(cluster.getBalance(user.publicKey)).toBe(balance);
  });
});

describe("consensus: the RPC's Agave 4.3 methods", () => {
  it('answer -32601 under towerbft (as before), and the migration slot and genesis certificate otherwise', () => {
    const tower = new RpcMethods(new SimCluster({ seed: 5 }));
    expect(() => tower.call('getAlpenglowMigrationSlot', [])).toThrow('Method not found');
    const cluster = new SimCluster({
      seed: 5,
      consensus: 'migration',
      migration: { boundarySlot: 10 },
    });
    const rpc = new RpcMethods(cluster);
    expect(rpc.call('getAlpenglowMigrationSlot', [])).toBe(10);
    expect(rpc.call('getAgGenesisCert', [])).toBeNull();
    cluster.advance(15);
    expect(rpc.call('getAgGenesisCert', [])).toMatchObject({ block: { slot: 12 } });
  });
});

describe('consensus: a migration announced while the cluster runs (scheduleMigration)', () => {
  it('answers null and runs TowerBFT until announced, then migrates at the announced boundary', () => {
    const cluster = new SimCluster({ seed: 1, consensus: 'migration', migration: { boundarySlot: null } });
    const rpc = new RpcMethods(cluster);
    cluster.advance(20);
    expect(rpc.call('getAlpenglowMigrationSlot', [])).toBeNull();
    expect(cluster.consensusPhase).toBe('towerbft');
    expect(() => cluster.scheduleMigration(cluster.currentSlot)).toThrow(/must lie after/);
    const boundary = cluster.currentSlot + 10;
    cluster.scheduleMigration(boundary);
    expect(() => cluster.scheduleMigration(boundary + 5)).toThrow(/once/);
    expect(rpc.call('getAlpenglowMigrationSlot', [])).toBe(boundary);
    cluster.advance(11);
    expect(cluster.consensusPhase).toBe('vote-only');
    cluster.advance(5);
    expect(cluster.consensusPhase).toBe('alpenglow');
    expect(cluster.migrationState.transitionSlot).toBe(boundary + 2);
  });

  it('is refused by a cluster of another mode, or one started with its boundary planned', () => {
    expect(() => new SimCluster({ seed: 1 }).scheduleMigration(100)).toThrow(/only/);
    expect(() =>
      new SimCluster({ seed: 1, consensus: 'migration', migration: { boundarySlot: 50 } }).scheduleMigration(
        100,
      ),
    ).toThrow(/only/);
  });
});
