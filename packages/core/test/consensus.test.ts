import { ConsensusDetector, FinalizedHeightGuard, giveUpSlot, LOSS_GRACE, lossGrace } from '../src/consensus';

/** Feed a slot's processed update, then the finalized updates a cluster would send by then. */
function towerbft(d: ConsensusDetector, from: number, to: number): void {
  for (let s = from; s <= to; s++) {
    d.observeSlot({ slot: s, status: 'processed', parent: s - 1 });
    d.observeSlot({ slot: s - 2, status: 'confirmed' });
    if (s > 32) d.observeSlot({ slot: s - 32, status: 'finalized' });
  }
}

function alpenglow(d: ConsensusDetector, from: number, to: number, firstParent = from - 1): void {
  for (let s = from; s <= to; s++) {
    d.observeSlot({ slot: s, status: 'processed', parent: s === from ? firstParent : s - 1 });
    d.observeSlot({ slot: s, status: 'confirmed' });
    d.observeSlot({ slot: s, status: 'finalized' });
  }
}

describe('ConsensusDetector', () => {
  it('is unknown until a few finalized slots show a pattern', () => {
    const d = new ConsensusDetector();
    expect(d.snapshot().kind).toBe('unknown');
    towerbft(d, 1, 33);
    expect(d.snapshot().kind).toBe('unknown');
    towerbft(d, 34, 40);
    expect(d.snapshot()).toMatchObject({ kind: 'towerbft', migrating: false });
  });

  it('tells Alpenglow by confirmed and finalized arriving together right behind processed', () => {
    const d = new ConsensusDetector();
    alpenglow(d, 1, 3);
    expect(d.snapshot().kind).toBe('alpenglow');
  });

  it('opens a migration window past the announced boundary and closes it when Alpenglow finalizes past it', () => {
    const d = new ConsensusDetector();
    d.observeMigrationSlot(60);
    towerbft(d, 1, 59);
    expect(d.snapshot()).toMatchObject({ migrating: false, holdSends: false });
    // At the boundary: whatever is sent now lands past it, in the vote-only window.
    towerbft(d, 60, 60);
    expect(d.snapshot()).toMatchObject({ migrating: false, holdSends: true });
    towerbft(d, 61, 64);
    expect(d.snapshot()).toMatchObject({ kind: 'towerbft', migrating: true, migrationSlot: 60 });
    expect(d.inMigrationWindow(63)).toBe(true);
    expect(d.inMigrationWindow(60)).toBe(false);
    // Blocks after the transition (62) deleted: slot 65 builds on 62.
    alpenglow(d, 65, 67, 62);
    const snap = d.snapshot();
    expect(snap).toMatchObject({
      kind: 'alpenglow',
      migrating: false,
      holdSends: false,
      lastRollbackSlot: 65,
    });
    expect(d.inMigrationWindow(64)).toBe(true);
    expect(d.inMigrationWindow(70)).toBe(false);
  });

  it('treats a node that cannot answer the migration slot as unknown, not as "none"', () => {
    const d = new ConsensusDetector();
    d.observeMigrationSlot(60);
    d.observeMigrationSlot(undefined);
    expect(d.snapshot().migrationSlot).toBe(60);
    d.observeMigrationSlot(null);
    expect(d.snapshot().migrationSlot).toBeNull();
  });
});

describe('ConsensusDetector.voteOnlyWindows', () => {
  it('is none until the tip passes the boundary, open while the window lasts, closed where Alpenglow was seen', () => {
    const d = new ConsensusDetector();
    expect(d.voteOnlyWindows()).toEqual([]);
    d.observeMigrationSlot(60);
    towerbft(d, 1, 60);
    expect(d.voteOnlyWindows()).toEqual([]);
    towerbft(d, 61, 64);
    expect(d.voteOnlyWindows()).toEqual([{ first: 61, last: null }]);
    alpenglow(d, 65, 67, 62);
    // Closed the slot before the first block Alpenglow finalized past the boundary (65, also where the rollback
    // showed): 65 is an Alpenglow block, not a vote-only one.
    expect(d.voteOnlyWindows()).toEqual([{ first: 61, last: 64 }]);
    // The first Alpenglow block from getAgGenesisCert is exact, and wins over the guess.
    d.observeGenesisSlot(63);
    expect(d.voteOnlyWindows()).toEqual([{ first: 61, last: 62 }]);
  });

  it('a detector started long after the switch does not count every slot since the boundary as vote-only', () => {
    // A sidecar restarted at slot 500 of a cluster that migrated at boundary 60, Alpenglow from block 65.
    const fresh = () => {
      const d = new ConsensusDetector();
      d.observeSlot({ slot: 500, status: 'processed', parent: 499 });
      return d;
    };
    // The poll's two answers (handed over together): closed at once, at the genesis block.
    const polled = fresh();
    polled.observeMigrationSlot(60);
    polled.observeGenesisSlot(65);
    expect(polled.voteOnlyWindows()).toEqual([{ first: 61, last: 64 }]);
    expect(polled.snapshot()).toMatchObject({ migrating: false, holdSends: false });
    // The genesis answer first, then the boundary: the same.
    const reversed = fresh();
    reversed.observeGenesisSlot(65);
    reversed.observeMigrationSlot(60);
    expect(reversed.voteOnlyWindows()).toEqual([{ first: 61, last: 64 }]);
    // A node without getAgGenesisCert: the stream's Alpenglow finality closes it at the best bound it gives (the slot
    // before 501, the first it saw finalized), and the genesis, once known, makes it exact.
    const streamOnly = fresh();
    streamOnly.observeMigrationSlot(60);
    alpenglow(streamOnly, 501, 503);
    expect(streamOnly.voteOnlyWindows()).toEqual([{ first: 61, last: 500 }]);
    streamOnly.observeGenesisSlot(65);
    expect(streamOnly.voteOnlyWindows()).toEqual([{ first: 61, last: 64 }]);
  });
});

describe('giveUpSlot', () => {
  const tx = { enqueued_slot: 100, expires_at_slot: 250 };

  it('is the expiry slot when no window is known (TowerBFT or Alpenglow alone)', () => {
    expect(giveUpSlot(tx, [], 260)).toBe(250);
  });

  it('moves later by every vote-only slot the transaction lived through', () => {
    expect(giveUpSlot(tx, [{ first: 201, last: 204 }], 260)).toBe(254);
  });

  it('counts only the window slots after its enqueue', () => {
    // Enqueued inside the window at 102: slots 103..104 count, 101..102 do not.
    expect(giveUpSlot({ enqueued_slot: 102, expires_at_slot: 252 }, [{ first: 101, last: 104 }], 260)).toBe(
      254,
    );
    // Enqueued after the window: nothing.
    expect(giveUpSlot({ enqueued_slot: 110, expires_at_slot: 260 }, [{ first: 101, last: 104 }], 270)).toBe(
      260,
    );
  });

  it('counts nothing for a window that starts after the deadline (relay had stopped trying already)', () => {
    expect(giveUpSlot(tx, [{ first: 251, last: 254 }], 260)).toBe(250);
  });

  it('counts a window that straddles the deadline whole', () => {
    // Slots 249..256: each keeps the deadline ahead of it.
    expect(giveUpSlot(tx, [{ first: 249, last: 256 }], 260)).toBe(258);
  });

  it('measures a later window against the deadline the earlier one moved', () => {
    // 201..204 moves 250 to 254; 252..253 then lies before it and counts too; order given does not matter.
    expect(
      giveUpSlot(
        tx,
        [
          { first: 252, last: 253 },
          { first: 201, last: 204 },
        ],
        260,
      ),
    ).toBe(256);
  });

  it('is never reached while a window that started before it is still open', () => {
    for (const slot of [250, 251, 300, 1_000]) {
      const open = [{ first: 240, last: null }];
      expect(giveUpSlot(tx, open, slot)).toBeGreaterThan(slot);
    }
    // Open but started after the deadline: nothing.
    expect(giveUpSlot(tx, [{ first: 251, last: null }], 300)).toBe(250);
  });
});

describe('FinalizedHeightGuard', () => {
  it('proves nothing with a height that stepped back, nor with the next one, nor while migrating', () => {
    const g = new FinalizedHeightGuard();
    expect(g.accept(100, false)).toBe(100);
    expect(g.accept(101, true)).toBeNull();
    expect(g.accept(90, false)).toBeNull();
    expect(g.accept(91, false)).toBeNull();
    expect(g.accept(92, false)).toBe(92);
    expect(g.accept(null, false)).toBeNull();
  });
});

test('the loss grace is set per consensus, and while the consensus is unknown it is the longer of the two', () => {
  expect(lossGrace('towerbft')).toEqual(LOSS_GRACE.towerbft);
  expect(lossGrace('alpenglow')).toEqual(LOSS_GRACE.alpenglow);
  const unknown = lossGrace('unknown');
  expect(unknown.slots).toBe(Math.max(LOSS_GRACE.towerbft.slots, LOSS_GRACE.alpenglow.slots));
  expect(unknown.ms).toBe(Math.max(LOSS_GRACE.towerbft.ms, LOSS_GRACE.alpenglow.ms));
  for (const g of Object.values(LOSS_GRACE)) {
    expect(g.slots).toBeGreaterThanOrEqual(1);
    expect(g.ms).toBeGreaterThan(0);
  }
});
