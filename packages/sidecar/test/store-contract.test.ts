import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Journal } from '../src/journal/journal';
import { PgTxStore } from '../src/store/pg-store';
import { attemptKey, storeCodec, type StoredTx } from '../src/store/records';
import {
  InMemoryTxStore,
  JournalTxStore,
  SpendLimitReached,
  StoreConflict,
  tipKey,
  type StoreChange,
  type TxStore,
} from '../src/store/store';
import { useMigratedPostgres } from './helpers/migrated-postgres';
import { T0, attempt, status, tx } from './helpers/store-records';

/**
 * One contract, every store: the journal (the default), the in-memory twin and PostgreSQL answer it the same way. Transitions are compare-and-set and return the new record; records handed out never
 * change under their holder; the change feed delivers what each commit caused, in commit order; spend is reserved
 * with its attempt, atomically.
 */

interface Harness {
  store: TxStore;
  /** Close and open the store again from what it made durable (null: nothing is durable). */
  reopen: (() => Promise<TxStore>) | null;
  /**
   * Run retention now, for a store that deletes old terminal records in batches rather than at each commit
   * (PostgreSQL: `pruneTerminal`, so no transition deletes rows); absent where retention is part of every commit.
   */
  retention?: () => Promise<void>;
  dispose: () => Promise<void>;
}

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function openJournalStore(dir: string, retain = 20_000): Promise<JournalTxStore> {
  const { journal } = await Journal.open(join(dir, 'journal'), storeCodec(retain), { unsafeNoFsync: true });
  return new JournalTxStore(journal);
}

// A real PostgreSQL 15 (testkit): each PgTxStore gets a fresh database migrated to the shipped schema.
const postgres = useMigratedPostgres();

function pgStore(sole: boolean): (retain?: number) => Promise<Harness> {
  return async (retain) => {
    const url = await postgres.fresh();
    // No maintenance timer: the retention test runs the batch itself.
    const openPgStore = () =>
      PgTxStore.open(url, { maintenanceMs: 0, sole, ...(retain ? { retainTerminal: retain } : {}) });
    let store = await openPgStore();
    return {
      get store() {
        return store;
      },
      reopen: async () => {
        await store.close();
        store = await openPgStore();
        return store;
      },
      retention: async () => {
        await store.pruneTerminal();
      },
      dispose: () => store.close(),
    };
  };
}

const stores: Array<[string, (retain?: number) => Promise<Harness>]> = [
  [
    'InMemoryTxStore',
    (retain) => {
      const store = new InMemoryTxStore(retain);
      return Promise.resolve({ store, reopen: null, dispose: () => store.close() });
    },
  ],
  [
    'JournalTxStore',
    async (retain) => {
      const dir = await mkdtemp(join(tmpdir(), 'relay-store-'));
      dirs.push(dir);
      let store: TxStore = await openJournalStore(dir, retain);
      return {
        get store() {
          return store;
        },
        reopen: async () => {
          await store.close();
          store = await openJournalStore(dir, retain);
          return store;
        },
        dispose: () => store.close(),
      };
    },
  ],
  // One host (counts, spend and dedupe from memory), and the database's own answers (several hosts).
  ['PgTxStore', pgStore(true)],
  ['PgTxStore, not sole', pgStore(false)],
];

describe.each(stores)('%s', (_name, open) => {
  let h: Harness;
  beforeEach(async () => {
    h = await open();
  });
  afterEach(async () => {
    await h.dispose();
  });

  test('accept writes a new record; the same first signature returns it and writes nothing', async () => {
    const first = await h.store.accept(tx('tx_a', 'sig-a'), [status('tx_a', 'pending')]);
    expect(first.created).toBe(true);
    expect(first.tx.tx_id).toBe('tx_a');
    const again = await h.store.accept(tx('tx_b', 'sig-a'));
    expect(again).toMatchObject({ created: false, tx: { tx_id: 'tx_a' } });
    expect(await h.store.get('tx_b')).toBeUndefined();
    expect((await h.store.byFirstSignature('sig-a'))?.tx_id).toBe('tx_a');
    expect((await h.store.counts()).active).toBe(1);
  });

  test('two accepts of one first signature at once make one record', async () => {
    const [x, y] = await Promise.all([
      h.store.accept(tx('tx_x', 'sig-same')),
      h.store.accept(tx('tx_y', 'sig-same')),
    ]);
    expect([x.created, y.created].sort()).toEqual([false, true]);
    expect(x.tx.tx_id).toBe(y.tx.tx_id);
    expect((await h.store.live()).length).toBe(1);
  });

  test('addAttempt reserves its spend with it, and refuses a second attempt in flight', async () => {
    await h.store.accept(tx('tx_a', 'sig-a'));
    const withAttempt = await h.store.addAttempt('tx_a', attempt(1, 'b1'), { set: { last_error: null } });
    expect(withAttempt.attempts.map((a) => a.bundle_id)).toEqual(['b1']);
    expect(await h.store.spentSince(T0)).toBe(15_000);
    expect((await h.store.byBundle('b1'))?.tx_id).toBe('tx_a');
    const refused = h.store.addAttempt('tx_a', attempt(2, 'b2'));
    await expect(refused).rejects.toBeInstanceOf(StoreConflict);
    expect(await h.store.spentSince(T0)).toBe(15_000);
    expect((await h.store.get('tx_a'))?.attempts).toHaveLength(1);
  });

  test('spend-limit holds across attempts reserved at the same moment: the store checks as it reserves', async () => {
    for (const id of ['tx_a', 'tx_b', 'tx_c']) await h.store.accept(tx(id, `sig-${id}`));
    // 15,000 each; a limit of 40,000 takes two of three, however the commits interleave.
    const limit = { limit: 40_000, since: T0 };
    const results = await Promise.allSettled(
      ['tx_a', 'tx_b', 'tx_c'].map((id) =>
        h.store.addAttempt(id, attempt(1, `b-${id}`), { spendLimit: limit }),
      ),
    );
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(1);
    expect((refused[0] as PromiseRejectedResult).reason).toBeInstanceOf(SpendLimitReached);
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({ limit: 40_000, actual: 45_000 });
    expect(await h.store.spentSince(T0)).toBe(30_000);
    // No limit (0) refuses nothing.
    await h.store.accept(tx('tx_d', 'sig-tx_d'));
    await expect(
      h.store.addAttempt('tx_d', attempt(1, 'b-tx_d'), { spendLimit: { limit: 0, since: T0 } }),
    ).resolves.toMatchObject({ tx_id: 'tx_d' });
  });

  test('a raised reservation replaces the one counted; its increase is checked against spend-limit as it commits', async () => {
    for (const id of ['tx_a', 'tx_b']) await h.store.accept(tx(id, `sig-${id}`));
    await h.store.addAttempt('tx_a', attempt(1, 'b-a'));
    await h.store.addAttempt('tx_b', attempt(1, 'b-b'));
    expect(await h.store.spentSince(T0)).toBe(30_000);
    const limit = { limit: 50_000, since: T0 };
    const raise = (id: string, lamports: number) =>
      h.store.transition(
        id,
        { attempt: { n: 1, stage: 'journaled' } },
        {
          attempts: [{ n: 1, set: { tip_lamports: lamports - 5_000, reserved_lamports: lamports } }],
          spendLimit: limit,
        },
      );
    // Two raises of 15,000 each at once: the limit takes one (30,000 + 15,000), however the commits interleave.
    const results = await Promise.allSettled([raise('tx_a', 30_000), raise('tx_b', 30_000)]);
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(1);
    expect((refused[0] as PromiseRejectedResult).reason).toBeInstanceOf(SpendLimitReached);
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({ limit: 50_000, actual: 60_000 });
    expect(await h.store.spentSince(T0)).toBe(45_000);
    const raised = results.findIndex((r) => r.status === 'fulfilled') === 0 ? 'tx_a' : 'tx_b';
    expect((await h.store.get(raised))?.attempts[0]).toMatchObject({
      reserved_lamports: 30_000,
      tip_lamports: 25_000,
    });
    // The refused one is unchanged; released, the raised one counts nothing.
    const other = raised === 'tx_a' ? 'tx_b' : 'tx_a';
    expect((await h.store.get(other))?.attempts[0]?.reserved_lamports).toBe(15_000);
    await h.store.transition(
      raised,
      {},
      { attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped', released: true } }] },
    );
    expect(await h.store.spentSince(T0)).toBe(15_000);
  });

  test('addAttempt refuses a record that does not match its expectation', async () => {
    await h.store.accept(tx('tx_a', 'sig-a', { stopped: true }));
    await expect(
      h.store.addAttempt('tx_a', attempt(1, 'b1'), { expect: { state: 'pending', stopped: false } }),
    ).rejects.toMatchObject({ name: 'StoreConflict', txId: 'tx_a' });
    await expect(h.store.addAttempt('tx_missing', attempt(1, 'b1'))).rejects.toBeInstanceOf(StoreConflict);
    expect(await h.store.spentSince(T0)).toBe(0);
  });

  test('a transition is a compare-and-set: it returns the new record, and refuses a stale expectation', async () => {
    await h.store.accept(tx('tx_a', 'sig-a'));
    await h.store.addAttempt('tx_a', attempt(1, 'b1'));
    const before = (await h.store.get('tx_a')) as StoredTx;
    const next = await h.store.transition(
      'tx_a',
      { state: 'pending', attempt: { n: 1, stage: 'journaled' } },
      {
        set: { state: 'submitted' },
        history: [{ state: 'submitted', slot: 1003, ts: T0 + 2000 }],
        attempts: [{ n: 1, set: { stage: 'submitted', slot_submitted: 1003 } }],
      },
    );
    expect(next.state).toBe('submitted');
    expect(next.attempts[0]?.stage).toBe('submitted');
    expect(next.history.map((e) => e.state)).toEqual(['pending', 'submitted']);
    // The snapshot handed out before is unchanged.
    expect(before.state).toBe('pending');
    expect(before.attempts[0]?.stage).toBe('journaled');
    expect(before.history).toHaveLength(1);
    // The same expectation again no longer holds: refused, with the current record.
    const stale = await h.store
      .transition('tx_a', { state: 'pending' }, { set: { state: 'failed' } })
      .catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(StoreConflict);
    expect((stale as StoreConflict).current?.state).toBe('submitted');
    const wrongStage = h.store.transition(
      'tx_a',
      { attempt: { n: 1, stage: 'journaled' } },
      { attempts: [{ n: 1, set: { send_errors: 1 } }] },
    );
    await expect(wrongStage).rejects.toBeInstanceOf(StoreConflict);
    const wrongBundle = h.store.transition(
      'tx_a',
      { attempt: { n: 1, bundleId: 'not-b1' } },
      { attempts: [{ n: 1, set: { bundle_id: 'b1-resigned' } }] },
    );
    await expect(wrongBundle).rejects.toBeInstanceOf(StoreConflict);
    expect((await h.store.get('tx_a'))?.attempts[0]?.bundle_id).toBe('b1');
  });

  test('writes to one record apply in call order: a transition checks what the one before it left', async () => {
    await h.store.accept(tx('tx_a', 'sig-a'));
    const first = h.store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } });
    const second = h.store.transition('tx_a', { state: 'submitted' }, { set: { state: 'landed' } });
    const racing = h.store.transition('tx_a', { state: 'pending' }, { set: { state: 'expired' } });
    await expect(first).resolves.toMatchObject({ state: 'submitted' });
    await expect(second).resolves.toMatchObject({ state: 'landed' });
    await expect(racing).rejects.toBeInstanceOf(StoreConflict);
  });

  test('a re-signed tip keeps the old bundle id findable; a released attempt stops counting as spend', async () => {
    await h.store.accept(tx('tx_a', 'sig-a'));
    await h.store.addAttempt('tx_a', attempt(1, 'b1'));
    await h.store.transition(
      'tx_a',
      { attempt: { n: 1, stage: 'journaled', bundleId: 'b1' } },
      { attempts: [{ n: 1, set: { bundle_id: 'b1-resigned' } }] },
    );
    expect((await h.store.byBundle('b1'))?.tx_id).toBe('tx_a');
    expect((await h.store.byBundle('b1-resigned'))?.tx_id).toBe('tx_a');
    await h.store.transition(
      'tx_a',
      { attempt: { n: 1 } },
      { attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped', released: true } }] },
    );
    expect(await h.store.spentSince(T0)).toBe(0);
    // Found paid after all (a leak): counted again.
    await h.store.transition('tx_a', {}, { attempts: [{ n: 1, set: { leaked: true, released: false } }] });
    expect(await h.store.spentSince(T0)).toBe(15_000);
    expect(await h.store.hasSpendOlderThan(T0 + 10_000)).toBe(true);
    await h.store.pruneSpend(T0 + 10_000);
    expect(await h.store.spentSince(0)).toBe(0);
  });

  test('heldTips names the tips it holds on that attempt with that signature', async () => {
    await h.store.accept(tx('tx_a', 'sig-a'));
    await h.store.addAttempt('tx_a', attempt(1, 'b1'));
    const held = await h.store.heldTips([
      { txId: 'tx_a', attempt: 1, tipSignature: 'tip-b1' },
      { txId: 'tx_a', attempt: 1, tipSignature: 'tip-elsewhere' },
      { txId: 'tx_a', attempt: 2, tipSignature: 'tip-b1' },
      { txId: 'tx_none', attempt: 1, tipSignature: 'tip-none' },
    ]);
    expect([...held]).toEqual([tipKey({ txId: 'tx_a', attempt: 1, tipSignature: 'tip-b1' })]);
  });

  test('named queries: live, awaiting an attempt, landed in a slot, followed, counts', async () => {
    await h.store.accept(tx('tx_wait', 'sig-1', { priority: 'high' }));
    await h.store.accept(tx('tx_stopped', 'sig-2', { stopped: true }));
    await h.store.accept(tx('tx_flying', 'sig-3'));
    await h.store.addAttempt('tx_flying', attempt(1, 'bf'));
    await h.store.accept(tx('tx_landed', 'sig-4'));
    await h.store.transition(
      'tx_landed',
      { state: 'pending' },
      { set: { state: 'landed', landed_slot: 1010 } },
    );
    await h.store.accept(tx('tx_done', 'sig-5'));
    await h.store.addAttempt('tx_done', attempt(1, 'bd'));
    await h.store.transition(
      'tx_done',
      { state: 'pending' },
      {
        set: { state: 'failed', failure: 'dropped', stopped: true },
        attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped', released: true } }],
        evicted: 'failed',
      },
    );
    const ids = (list: StoredTx[]) => list.map((t) => t.tx_id).sort();
    expect(ids(await h.store.live())).toEqual(['tx_flying', 'tx_landed', 'tx_stopped', 'tx_wait']);
    expect(ids(await h.store.awaitingAttempt())).toEqual(['tx_wait']);
    expect(ids(await h.store.landedIn(1010))).toEqual(['tx_landed']);
    expect(ids(await h.store.landedIn(1011))).toEqual([]);
    const followed = await h.store.followed(1000);
    expect(ids(followed.live)).toEqual(['tx_flying', 'tx_landed', 'tx_stopped', 'tx_wait']);
    expect(ids(followed.ended)).toEqual(['tx_done']);
    expect(ids((await h.store.followed(1003)).ended)).toEqual([]);
    const counts = await h.store.counts();
    expect(counts.active).toBe(4);
    // Waiting: pending and not stopped (an attempt in flight still waits to go out).
    expect(counts.waiting).toEqual({ high: 1, normal: 1, low: 0 });
    expect(counts.evicted).toEqual({ failed: 1 });
    expect(ids(await h.store.all())).toHaveLength(5);
    // What the tippers' pass reads: the same records, from memory on every store.
    expect(ids(await h.store.held())).toEqual(ids(await h.store.all()));
  });

  test('a terminal record drops its wire bytes; retention forgets the oldest terminal ones', async () => {
    const small = await open(2);
    try {
      for (const id of ['t1', 't2', 't3']) {
        await small.store.accept(tx(id, `sig-${id}`));
        await small.store.addAttempt(id, attempt(1, `b-${id}`));
        const done = await small.store.transition(
          id,
          { state: 'pending' },
          {
            set: { state: 'expired', stopped: true },
            attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped', released: true } }],
            evicted: 'expired',
          },
        );
        expect(done.state).toBe('expired');
      }
      await small.retention?.();
      expect(await small.store.get('t1')).toBeUndefined();
      expect(await small.store.byFirstSignature('sig-t1')).toBeUndefined();
      const kept = (await small.store.get('t3')) as StoredTx;
      expect(kept.wires).toBeNull();
      expect(kept.attempts[0]?.tip_tx).toBeNull();
      expect((await small.store.counts()).evicted).toEqual({ expired: 3 });
    } finally {
      await small.dispose();
    }
  });

  test('the change feed delivers each commit once, in commit order, with what it caused', async () => {
    const seen: StoreChange[] = [];
    const stop = h.store.changes.subscribe((c) => seen.push(c));
    await h.store.accept(tx('tx_a', 'sig-a'), [status('tx_a', 'pending')]);
    await h.store.accept(tx('tx_a2', 'sig-a')); // a repeat: nothing committed, nothing told
    await Promise.all([
      h.store.transition(
        'tx_a',
        { state: 'pending' },
        { set: { state: 'submitted' }, events: [status('tx_a', 'submitted')] },
      ),
      h.store.accept(tx('tx_b', 'sig-b'), [status('tx_b', 'pending')]),
    ]);
    await h.store.transition(
      'tx_a',
      { state: 'submitted' },
      { set: { state: 'landed' }, events: [status('tx_a', 'landed')] },
    );
    // A refused transition tells nothing.
    await h.store
      .transition(
        'tx_a',
        { state: 'pending' },
        { set: { state: 'failed' }, events: [status('tx_a', 'failed')] },
      )
      .catch(() => undefined);
    stop();
    await h.store.transition(
      'tx_b',
      { state: 'pending' },
      { set: { state: 'submitted' }, events: [status('tx_b', 'submitted')] },
    );
    const seqs = seen.map((c) => c.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    const told = seen.flatMap((c) =>
      c.events.map((e) => (e.kind === 'tx_status_changed' ? `${e.data.tx_id}:${e.data.state}` : e.kind)),
    );
    expect(told).toHaveLength(4);
    expect(told.filter((t) => t.startsWith('tx_a:'))).toEqual([
      'tx_a:pending',
      'tx_a:submitted',
      'tx_a:landed',
    ]);
    expect(told).toContain('tx_b:pending');
    // Each change carries the record as the commit left it.
    expect(seen[seen.length - 1]?.tx).toMatchObject({ tx_id: 'tx_a', state: 'landed' });
  });

  test('what a store made durable is what it answers after a restart', async () => {
    if (!h.reopen) return expect(h.reopen).toBeNull(); // the in-memory twin keeps nothing, by design
    await h.store.accept(tx('tx_a', 'sig-a'));
    await h.store.addAttempt('tx_a', attempt(1, 'b1'));
    await h.store.transition(
      'tx_a',
      { state: 'pending' },
      {
        set: { state: 'submitted', retries: 1 },
        attempts: [{ n: 1, set: { stage: 'submitted', slot_submitted: 1003, region: 'ny' } }],
      },
    );
    const before = (await h.store.get('tx_a')) as StoredTx;
    expect(before.attempts[0]).toMatchObject({ stage: 'submitted', region: 'ny' });
    const reopened = await h.reopen();
    expect(await reopened.get('tx_a')).toEqual(before);
    expect(await reopened.spentSince(T0)).toBe(15_000);
    expect((await reopened.byBundle('b1'))?.tx_id).toBe('tx_a');
    await expect(reopened.addAttempt('tx_a', attempt(2, 'b2'))).rejects.toBeInstanceOf(StoreConflict);
  });

  test("a terminal transaction's spend stays counted for the hour, also after a restart; a recount does not count it twice", async () => {
    await h.store.accept(tx('tx_a', 'sig-a'));
    await h.store.addAttempt('tx_a', attempt(1, 'b1'));
    const land = (set: Partial<StoredTx>, stage: 'landed' | 'finalized') =>
      h.store.transition('tx_a', {}, { set, attempts: [{ n: 1, set: { stage, slot_landed: 1004 } }] });
    await land({ state: 'landed', landed_slot: 1004 }, 'landed');
    await land({ state: 'finalized' }, 'finalized');
    // Reserved at T0 + 1000 (the attempt's creation). The local ledgers count a terminal transaction's spend by its
    // second (spend-ledger.test), so only the window's start at that moment is the same for every store.
    expect(await h.store.spentSince(T0 + 1000)).toBe(15_000);
    // Marked paid again (a late leak report on an attempt that was never released): still once.
    await h.store.transition('tx_a', {}, { attempts: [{ n: 1, set: { released: false } }] });
    expect(await h.store.spentSince(T0 + 1000)).toBe(15_000);
    const store = h.reopen ? await h.reopen() : h.store;
    expect(await store.spentSince(T0 + 1000)).toBe(15_000);
    expect(await store.hasSpendOlderThan(T0 + 2000)).toBe(true);
    await store.pruneSpend(T0 + 2000);
    expect(await store.spentSince(0)).toBe(0);
  });

  test('a raised reservation is what the spend ledger holds after a restart', async () => {
    if (!h.reopen) return expect(h.reopen).toBeNull();
    await h.store.accept(tx('tx_a', 'sig-a'));
    await h.store.addAttempt('tx_a', attempt(1, 'b1'));
    await h.store.transition(
      'tx_a',
      { attempt: { n: 1, stage: 'journaled' } },
      { attempts: [{ n: 1, set: { tip_lamports: 40_000, reserved_lamports: 45_000 } }] },
    );
    expect(await h.store.spentSince(T0)).toBe(45_000);
    const reopened = await h.reopen();
    expect(await reopened.spentSince(T0)).toBe(45_000);
    expect((await reopened.get('tx_a'))?.attempts[0]).toMatchObject({ reserved_lamports: 45_000 });
  });
});

// Written by the released build itself (fixtures/released-data-dir.gen.cjs says how): a snapshot generation from a
// compaction, then later operations.
test('a data directory written by the released sidecar (164dff9) opens with every record, attempt and spend', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'relay-released-'));
  dirs.push(dir);
  await cp(join(__dirname, 'fixtures', 'released-data-dir'), dir, { recursive: true });
  const store = await openJournalStore(dir);
  try {
    expect((await store.live()).map((t) => t.tx_id).sort()).toEqual(['tx_pending', 'tx_sent']);
    const sent = (await store.get('tx_sent')) as StoredTx;
    expect(sent).toMatchObject({
      state: 'submitted',
      attempts: [{ stage: 'submitted', bundle_id: 'bundleSent1' }],
    });
    expect((await store.get('tx_final'))?.state).toBe('finalized');
    expect((await store.get('tx_failed'))?.failure).toBe('simulation_failed');
    expect((await store.byFirstSignature('sigPending'))?.tx_id).toBe('tx_pending');
    expect((await store.byBundle('bundleFinal1'))?.tx_id).toBe('tx_final');
    // Reserved: the submitted attempt and the finalized one; the failed one was released.
    expect(await store.spentSince(0)).toBe(2 * 17_000);
    expect((await store.counts()).evicted).toEqual({ failed: 1 });
    expect(attemptKey('tx_sent', 1)).toBe('tx_sent#1');
    // It takes new transitions, durably.
    await store.transition(
      'tx_sent',
      { state: 'submitted', attempt: { n: 1, stage: 'submitted' } },
      { set: { state: 'landed', landed_slot: 1004 } },
    );
    expect((await store.landedIn(1004)).map((t) => t.tx_id)).toEqual(['tx_sent']);
  } finally {
    await store.close();
  }
});
