import { createServer, connect, type Server, type Socket } from 'node:net';
import { isRelayError } from '@solrelay/core';
import { waitUntil } from '@solrelay/testkit';
import type pg from 'pg';
import { PgTxStore } from '../../src/store/pg-store';
import type { StoredTx } from '../../src/store/records';
import { StoreConflict, type StoreChange } from '../../src/store/store';
import { usePgStoreTests } from '../helpers/migrated-postgres';
import { T0, attempt, status, tx } from '../helpers/store-records';

// What only PostgreSQL has to prove (the contract suite covers the rest): records come back exactly as written,
// dedupe and "one unsettled attempt" hold between processes (two stores on one database stand in for two hosts),
// a change's events commit with it, and a COMMIT of unknown outcome is never reported as done.
const pgt = usePgStoreTests();
const { sql, open: openStore } = pgt;

/** The backend of this database whose statement matches `pattern` (LIKE), once it waits on a lock. */
function waitingOnLock(db: pg.Pool, pattern: string): Promise<number> {
  return waitUntil(
    async () => {
      const { rows } = await db.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE $1 AND wait_event_type = 'Lock'`,
        [pattern],
      );
      return rows[0]?.pid;
    },
    15_000,
    `a statement like ${pattern} waiting on a lock`,
  );
}

/**
 * A deferred constraint trigger on `transactions` that runs at each update's commit and waits there on advisory lock
 * 4242: while the test holds it, a transition's statement is committing, sent and unanswered.
 */
async function holdCommitsOnLock(db: pg.Pool): Promise<void> {
  await db.query(`
    CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER hold_commit AFTER UPDATE ON transactions
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_hold_commit();`);
}

test('a record comes back exactly as written: numbers as numbers, times in ms, nulls, optional fields, packing', async () => {
  const store = await openStore();
  const record = tx('tx_full', 'sig-full', {
    priority: 'high',
    max_tip: 2 ** 40 + 7,
    enqueued_at: T0 + 123,
    enqueued_slot: 2 ** 33,
    enqueued_block_height: 2 ** 32 + 1,
    expires_at_slot: 2 ** 33 + 150,
    wires: ['AQID', 'BAUG'],
    signatures: ['sig-full', 'sig-two'],
    blockhashes: ['hash-1', 'hash-2'],
    nonce_accounts: [null, 'nonce-account'],
    fee_payers: ['payer-1', 'payer-2'],
    last_error: { code: 'RELAY_E_ATTEMPT_LOST', message: 'lost', details: {} } as StoredTx['last_error'],
  });
  const created = await store.accept(record);
  expect(created.tx).toEqual(record);
  expect(created.tx).not.toBe(record);
  const flying = attempt(1, 'b-full', {
    tip_lamports: 2 ** 45,
    reserved_lamports: 2 ** 45 + 5000,
    created_at: T0 + 1001,
    created_slot: 2 ** 33 + 2,
    tipper: null,
  });
  await store.addAttempt('tx_full', flying);
  const packed = await store.transition(
    'tx_full',
    { attempt: { n: 1, stage: 'journaled', bundleId: 'b-full' } },
    {
      attempts: [
        {
          n: 1,
          set: {
            bundle_id: 'b-packed',
            passengers: [{ tx_id: 'tx_rider', signatures: ['sig-rider'] }],
            passenger_wires: ['CgsM'],
          },
        },
      ],
    },
  );
  const expected: StoredTx = {
    ...record,
    attempts: [
      {
        ...flying,
        bundle_id: 'b-packed',
        passengers: [{ tx_id: 'tx_rider', signatures: ['sig-rider'] }],
        passenger_wires: ['CgsM'],
      },
    ],
  };
  expect(packed).toEqual(expected);
  const read = (await store.get('tx_full')) as StoredTx;
  expect(read).toEqual(expected);
  // Nested objects keep their key order (served and logged as written: jsonb would sort their keys).
  const [readAttempt, wroteAttempt] = [read.attempts[0], expected.attempts[0]];
  for (const [got, wrote] of [
    [read.history, expected.history],
    [read.last_error, expected.last_error],
    [readAttempt?.timeline, wroteAttempt?.timeline],
    [readAttempt?.decision, wroteAttempt?.decision],
    [readAttempt?.floor_at_submit, wroteAttempt?.floor_at_submit],
    [readAttempt?.passengers, wroteAttempt?.passengers],
  ])
    expect(JSON.stringify(got)).toBe(JSON.stringify(wrote));
  expect(await store.spentSince(T0 + 1001)).toBe(2 ** 45 + 5000);
  expect(await store.spentSince(T0 + 1002)).toBe(0);
  // Terminal: the wires, the tip and the riders' wires go in the same commit; the riders stay named.
  const done = await store.transition(
    'tx_full',
    { state: 'pending' },
    {
      set: { state: 'expired', stopped: true },
      attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped' } }],
    },
  );
  expect(done.wires).toBeNull();
  expect(done.attempts[0]).toMatchObject({
    tip_tx: null,
    passenger_wires: null,
    passengers: [{ tx_id: 'tx_rider' }],
  });
  const { rows } = await sql().query(
    `SELECT t.wires, a.tip_tx, a.passenger_wires, t.terminal_at IS NOT NULL AS terminal, a.settled_at IS NOT NULL AS settled
     FROM transactions t JOIN attempts a USING (tx_id) WHERE tx_id = 'tx_full'`,
  );
  expect(rows).toEqual([{ wires: null, tip_tx: null, passenger_wires: null, terminal: true, settled: true }]);
});

test('two stores (two processes) accepting one first signature at once make one record: the UNIQUE constraint decides', async () => {
  const [a, b] = [await openStore({ sole: false }), await openStore({ sole: false })];
  const results = await Promise.all(
    Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).accept(tx(`tx_${i}`, 'sig-contested'))),
  );
  expect(results.filter((r) => r.created)).toHaveLength(1);
  const winner = results.find((r) => r.created)?.tx.tx_id;
  expect(new Set(results.map((r) => r.tx.tx_id))).toEqual(new Set([winner]));
  const { rows } = await sql().query(
    `SELECT tx_id FROM transactions WHERE first_signature = 'sig-contested'`,
  );
  expect(rows).toEqual([{ tx_id: winner }]);
});

test('two stores adding an attempt to one transaction at once: one attempt, one reservation, the other refused', async () => {
  const [a, b] = [await openStore({ sole: false }), await openStore({ sole: false })];
  await a.accept(tx('tx_a', 'sig-a'));
  const results = await Promise.allSettled([
    a.addAttempt('tx_a', attempt(1, 'b-from-a'), { expect: { state: 'pending', stopped: false } }),
    b.addAttempt('tx_a', attempt(1, 'b-from-b', { created_at: T0 + 2000 }), {
      expect: { state: 'pending', stopped: false },
    }),
  ]);
  const refused = results.filter((r) => r.status === 'rejected');
  expect(refused).toHaveLength(1);
  expect((refused[0] as PromiseRejectedResult).reason).toBeInstanceOf(StoreConflict);
  expect((await a.get('tx_a'))?.attempts).toHaveLength(1);
  expect(await b.spentSince(T0)).toBe(15_000);
});

test('one host: counts, spend and dedupe answer from what the store holds, the spend ledger read back at open', async () => {
  const store = await openStore();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.accept(tx('tx_b', 'sig-b'));
  const limit = { limit: 20_000, since: T0 - 1 };
  await store.addAttempt('tx_a', attempt(1, 'b-a'), { spendLimit: limit });
  // Two reservations checked at once against 20,000 with 15,000 spent: each counts the other's, one is refused.
  await store.accept(tx('tx_c', 'sig-c'));
  const racing = await Promise.allSettled([
    store.addAttempt('tx_b', attempt(1, 'b-b', { reserved_lamports: 3_000 }), { spendLimit: limit }),
    store.addAttempt('tx_c', attempt(1, 'b-c', { reserved_lamports: 3_000 }), { spendLimit: limit }),
  ]);
  expect(racing.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
  expect(await store.spentSince(T0)).toBe(18_000);
  expect(await store.counts()).toEqual({
    active: 3,
    waiting: { high: 0, normal: 3, low: 0 },
    ownWaiting: { high: 0, normal: 3, low: 0 },
    evicted: {},
  });
  // What the database holds agrees, and a store opened on it reads the ledger back.
  const { rows } = await sql().query<{ n: string }>(
    'SELECT sum(lamports)::text AS n FROM spend_reservations WHERE released_at IS NULL',
  );
  expect(rows).toEqual([{ n: '18000' }]);
  await store.close();
  const reopened = await openStore();
  expect(await reopened.spentSince(T0)).toBe(18_000);
  expect((await reopened.counts()).active).toBe(3);
  // A row the store does not hold (another writer's) is not found by dedupe, but the accept's insert finds it.
  const other = await openStore({ sole: false });
  await other.accept(tx('tx_elsewhere', 'sig-elsewhere'));
  expect(await reopened.byFirstSignature('sig-elsewhere')).toBeUndefined();
  const again = await reopened.accept(tx('tx_again', 'sig-elsewhere'));
  expect(again).toMatchObject({ created: false, tx: { tx_id: 'tx_elsewhere' } });
});

test('one host: a second sole store on the database is refused, naming the holder; the lock lost fences writes until it is taken again', async () => {
  const store = await openStore();
  await store.accept(tx('tx_a', 'sig-a'));
  const refused = await PgTxStore.open(pgt.url, { maintenanceMs: 0 }).catch((error: unknown) => error);
  expect(refused).toMatchObject({
    code: 'RELAY_E_DB_IN_USE',
    details: { holder: expect.stringMatching(/pid \d+/) },
  });
  // Several hosts (not sole) take no lock.
  const other = await openStore({ sole: false });
  expect((await other.get('tx_a'))?.state).toBe('pending');

  // The lock's session ended by the server (a failover ends every session): writes stop at once, and start again once
  // the probe has taken the lock back.
  const told: string[] = [];
  store.watchAvailability((change) => told.push(change.kind));
  const db = sql();
  await db.query(
    // This test's database only: the server is shared with other test files.
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE application_name = 'relay-lock' AND datname = current_database()`,
  );
  await waitUntil(async () => !store.healthy, 10_000, 'the store to notice its lock lost');
  const fenced = await store
    .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
    .catch((error: unknown) => error);
  expect(fenced).toMatchObject({ code: 'RELAY_E_DB_UNAVAILABLE' });
  await waitUntil(async () => store.healthy, 10_000, 'the store to take its lock again');
  expect(told).toEqual(['down', 'up']);
  expect((await store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
  // Closed, the lock is free for the next sidecar.
  await store.close();
  const next = await openStore();
  expect((await next.get('tx_a'))?.state).toBe('submitted');
});

test('the partial unique index refuses a second unsettled attempt even when the last one is not in flight', async () => {
  const store = await openStore();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.addAttempt('tx_a', attempt(1, 'b1'));
  // Landed, then its slot died: pending again, the landed attempt not yet settled (not in flight, but unsettled).
  await store.transition(
    'tx_a',
    { state: 'pending' },
    {
      set: { state: 'landed', landed_slot: 1010 },
      attempts: [{ n: 1, set: { stage: 'landed', slot_landed: 1010 } }],
    },
  );
  await store.transition('tx_a', { state: 'landed' }, { set: { state: 'pending', landed_slot: null } });
  const refused = await store.addAttempt('tx_a', attempt(2, 'b2')).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(StoreConflict);
  expect(refused).toMatchObject({
    expected: 'no attempt in flight',
    current: { attempts: [{ stage: 'landed' }] },
  });
  expect(await store.spentSince(T0)).toBe(15_000);
  // Settled: the next attempt goes in.
  await store.transition('tx_a', {}, { attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped' } }] });
  expect((await store.addAttempt('tx_a', attempt(2, 'b2'))).attempts.map((a) => a.attempt)).toEqual([1, 2]);
});

test('heldTips answers from the database, not from what the store holds: a tip whose row the server lost is not held', async () => {
  const store = await openStore();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.accept(tx('tx_b', 'sig-b'));
  await store.addAttempt('tx_a', attempt(1, 'ba'));
  await store.addAttempt('tx_b', attempt(1, 'bb'));
  const tips = [
    { txId: 'tx_a', attempt: 1, tipSignature: 'tip-ba' },
    { txId: 'tx_b', attempt: 1, tipSignature: 'tip-bb' },
    // Another signature on a held attempt (a tip re-signed elsewhere) is not this tip.
    { txId: 'tx_b', attempt: 1, tipSignature: 'tip-other' },
  ];
  expect([...(await store.heldTips(tips))].sort()).toEqual(['tx_a#1#tip-ba', 'tx_b#1#tip-bb']);
  // The server loses tx_a's attempt (as a failover that lost an acknowledged commit would); the store still holds it.
  await sql().query(`DELETE FROM attempts WHERE tx_id = 'tx_a'`);
  expect((await store.get('tx_a'))?.attempts).toHaveLength(1);
  expect([...(await store.heldTips(tips))]).toEqual(['tx_b#1#tip-bb']);
  expect(await store.heldTips([])).toEqual(new Set());
});

test("a change's events and lifecycle entries commit with it; a refused one writes none", async () => {
  const store = await openStore({ hostId: 'box:7777' });
  await store.accept(tx('tx_a', 'sig-a'), [status('tx_a', 'pending')]);
  await store.addAttempt('tx_a', attempt(1, 'b1'));
  const entry = { v: 1, bundle_id: 'b1', tx_id: 'tx_a', attempt: 1, stage: 'submitted' };
  await store.transition(
    'tx_a',
    { state: 'pending' },
    {
      set: { state: 'submitted' },
      events: [status('tx_a', 'submitted'), { kind: 'lifecycle', entry: entry as never }],
    },
  );
  await expect(
    store.transition(
      'tx_a',
      { state: 'pending' },
      { set: { state: 'failed' }, events: [status('tx_a', 'failed')] },
    ),
  ).rejects.toBeInstanceOf(StoreConflict);
  const db = sql();
  const events = await db.query(
    `SELECT name, tx_id, host_id, payload->>'state' AS state FROM events ORDER BY xid, id`,
  );
  expect(events.rows).toEqual([
    { name: 'tx_status_changed', tx_id: 'tx_a', host_id: 'box:7777', state: 'pending' },
    { name: 'tx_status_changed', tx_id: 'tx_a', host_id: 'box:7777', state: 'submitted' },
  ]);
  const entries = await db.query(
    'SELECT bundle_id, tx_id, attempt, stage, host_id, entry FROM lifecycle_entries',
  );
  expect(entries.rows).toEqual([
    { bundle_id: 'b1', tx_id: 'tx_a', attempt: 1, stage: 'submitted', host_id: 'box:7777', entry },
  ]);
});

test('retention deletes the oldest terminal records in batches, keeping the newest and every live one', async () => {
  const store = await openStore();
  for (let i = 0; i < 7; i++) {
    await store.accept(tx(`tx_${i}`, `sig-${i}`));
    if (i < 6)
      await store.transition(`tx_${i}`, { state: 'pending' }, { set: { state: 'expired', stopped: true } });
  }
  expect(await store.pruneTerminal(2, 3)).toBe(4);
  expect((await store.all()).map((t) => t.tx_id)).toEqual(['tx_4', 'tx_5', 'tx_6']);
  expect(await store.pruneTerminal(2, 3)).toBe(0);
});

test('a commit whose answer is lost rejects with RELAY_E_DB_COMMIT_UNKNOWN, tells nothing and re-reads', async () => {
  const store = await openStore({ database: { lockTimeoutMs: 60_000 } });
  await store.accept(tx('tx_a', 'sig-a'));
  const db = sql();
  // A deferred constraint trigger runs at commit; it waits on an advisory lock this test holds, so the transition's
  // statement (its own transaction, in autocommit) is committing, sent and unanswered, when its connection is cut.
  await holdCommitsOnLock(db);
  const holder = await db.connect();
  try {
    await holder.query('SELECT pg_advisory_lock(4242)');
    const told: StoreChange[] = [];
    store.changes.subscribe((c) => told.push(c));
    const moving = store
      .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
      .catch((error: unknown) => error);
    const pid = await waitingOnLock(db, '%UPDATE transactions SET%');
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    const error = await moving;
    expect(isRelayError(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'RELAY_E_DB_COMMIT_UNKNOWN',
      details: { tx_id: 'tx_a', operation: 'transition' },
    });
    expect(told).toEqual([]);
    expect(store.healthy).toBe(false);
  } finally {
    await holder.query('SELECT pg_advisory_unlock_all()');
    holder.release();
  }
  // Re-read: the truth is in the database (here the commit never finished), the store's lists hold it again, and
  // its probe finds it healthy.
  expect((await store.get('tx_a'))?.state).toBe('pending');
  expect((await store.live()).map((t) => t.state)).toEqual(['pending']);
  await waitUntil(() => store.healthy, 10_000, 'the store healthy again');
  expect((await store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
});

test('a write on a record another writer moved misses the compare-and-set, re-reads it and decides again', async () => {
  const store = await openStore();
  await store.accept(tx('tx_a', 'sig-a'));
  const db = sql();
  // Another store (another host) moves the record while this store holds it at its older version.
  const other = await openStore({ sole: false });
  await other.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } });
  const refused = await store
    .transition('tx_a', { state: 'pending' }, { set: { state: 'expired', stopped: true } })
    .catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(StoreConflict);
  expect(refused).toMatchObject({ current: { state: 'submitted' } });
  expect((await store.get('tx_a'))?.state).toBe('submitted');
  const { rows } = await db.query(`SELECT state, version FROM transactions WHERE tx_id = 'tx_a'`);
  expect(rows).toEqual([{ state: 'submitted', version: '2' }]);
});

test('a write whose connection is ended mid-statement is answered RELAY_E_DB_COMMIT_UNKNOWN; read again, nothing was committed', async () => {
  // Several hosts (not sole): a reservation checked against spend-limit waits for the limit's advisory lock (in
  // relay_spend_check, migrations/004, inside the one statement that would write it).
  const store = await openStore({ sole: false, database: { lockTimeoutMs: 60_000 } });
  await store.accept(tx('tx_a', 'sig-a'));
  const db = sql();
  const holder = await db.connect();
  try {
    // Another session holds spend-limit's lock: the store's reservation waits for it, its statement not done.
    await holder.query('BEGIN');
    await holder.query(`SELECT pg_advisory_xact_lock(${0x72656c6179})`);
    const adding = store
      .addAttempt('tx_a', attempt(1, 'b1'), { spendLimit: { limit: 1_000_000, since: T0 - 1 } })
      .catch((error: unknown) => error);
    const pid = await waitingOnLock(db, '%relay_spend_check%');
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    // One autocommit statement: a backend ended during it may be ended just after its commit (the server checks for
    // the termination while answering), so the store cannot know, and says so; it reads the row again before use.
    expect(await adding).toMatchObject({ code: 'RELAY_E_DB_COMMIT_UNKNOWN', details: { retry_after_s: 1 } });
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
  }
  expect((await store.get('tx_a'))?.attempts).toEqual([]);
  expect(await store.spentSince(T0 - 1)).toBe(0);
});

test('every pooled connection busy past the timeout: the write is refused with RELAY_E_DB_UNAVAILABLE, no outage declared', async () => {
  const store = await openStore({
    database: { poolMax: 1, poolMin: 1, connectionTimeoutMs: 300, lockTimeoutMs: 60_000 },
  });
  await store.accept(tx('tx_a', 'sig-a'));
  await store.accept(tx('tx_b', 'sig-b'));
  const told: string[] = [];
  store.watchAvailability((change) => told.push(change.kind));
  const db = sql();
  const holder = await db.connect();
  try {
    // Another session holds tx_a's row: the store's one connection waits on it, and the next write has none.
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM transactions WHERE tx_id = 'tx_a' FOR UPDATE`);
    const moving = store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } });
    await waitingOnLock(db, '%UPDATE transactions SET%');
    const refused = await store
      .transition('tx_b', { state: 'pending' }, { set: { state: 'submitted' } })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'RELAY_E_DB_UNAVAILABLE', details: { retry_after_s: 1 } });
    expect(store.healthy).toBe(true);
    expect(told).toEqual([]);
    await holder.query('ROLLBACK');
    expect((await moving).state).toBe('submitted');
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    holder.release();
  }
  // Nothing of the refused write was kept: the record moves once asked again.
  expect((await store.transition('tx_b', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
});

test('a write in autocommit that loses its connection while it runs is of unknown outcome: RELAY_E_DB_COMMIT_UNKNOWN', async () => {
  const store = await openStore({ database: { lockTimeoutMs: 60_000 } });
  await store.accept(tx('tx_a', 'sig-a'));
  const db = sql();
  const holder = await db.connect();
  try {
    // Another session holds the row: the store's statement waits for it. Sent, it may commit as the connection
    // goes: the store cannot tell, and says so.
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM transactions WHERE tx_id = 'tx_a' FOR UPDATE`);
    const moving = store
      .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
      .catch((error: unknown) => error);
    const pid = await waitingOnLock(db, '%UPDATE transactions SET%');
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(await moving).toMatchObject({ code: 'RELAY_E_DB_COMMIT_UNKNOWN', details: { tx_id: 'tx_a' } });
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
  }
  expect((await store.get('tx_a'))?.state).toBe('pending');
});

/**
 * A TCP proxy to the test server that the test can take away (every connection cut, new ones refused) and bring back
 * on the same port: the database unavailable and back, as the store sees it, without stopping the shared server.
 */
async function databaseProxy(
  to: number,
): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = connect(to, '127.0.0.1');
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('error', () => undefined);
          socket.on('close', () => {
            sockets.delete(socket);
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream).pipe(client);
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        port = (s.address() as { port: number }).port;
        server = s;
        resolve();
      });
    });
  await listen();
  return {
    port,
    async cut() {
      const s = server as Server | null;
      server = null;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => (s ? s.close(() => resolve()) : resolve()));
    },
    restore: listen,
  };
}

test('the database going away and back is told once each way; meanwhile every statement is RELAY_E_DB_UNAVAILABLE', async () => {
  const direct = new URL(pgt.url);
  const proxy = await databaseProxy(Number(direct.port));
  const viaProxy = new URL(pgt.url);
  viaProxy.port = String(proxy.port);
  const store = await openStore({}, viaProxy.toString());
  await store.accept(tx('tx_a', 'sig-a'));
  const told: string[] = [];
  store.watchAvailability((change) => told.push(change.kind));
  expect(store.problem).toBeNull();

  await proxy.cut();
  // Reads that go to the database (all, a record this store does not hold) fail; what it holds it still answers from
  // memory (one host: the counts too).
  expect((await store.counts()).active).toBe(1);
  for (const read of [() => store.all(), () => store.get('tx_elsewhere')])
    await expect(read()).rejects.toMatchObject({
      code: 'RELAY_E_DB_UNAVAILABLE',
      details: {
        url: `postgres://relay:***@127.0.0.1:${proxy.port}/${direct.pathname.slice(1)}`,
        retry_after_s: 1,
      },
    });
  expect((await store.get('tx_a'))?.state).toBe('pending');
  await expect(
    store.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } }),
  ).rejects.toMatchObject({ code: 'RELAY_E_DB_UNAVAILABLE' });
  // The API's other readers of the database (the lifecycle log, SSE's event log) answer the same coded error (a 503),
  // never a raw driver error (a 500).
  await expect(store.lifecycleEntries.recent(5)).rejects.toMatchObject({ code: 'RELAY_E_DB_UNAVAILABLE' });
  await expect(store.lifecycleEntries.find('bundle')).rejects.toMatchObject({
    code: 'RELAY_E_DB_UNAVAILABLE',
  });
  await expect(store.eventLog.end()).rejects.toMatchObject({ code: 'RELAY_E_DB_UNAVAILABLE' });
  // Told once, however many statements failed; readiness has the words, naming the database (password redacted).
  expect(told).toEqual(['down']);
  expect(store.healthy).toBe(false);
  expect(store.problem).toContain(`PostgreSQL at postgres://relay:***@127.0.0.1:${proxy.port}/`);
  expect(store.problem).not.toContain(direct.password);

  // Back on the same address: the store's probe finds it with nobody calling, and says so once.
  await proxy.restore();
  await waitUntil(() => store.healthy, 15_000, 'the store to find the database back');
  expect(told).toEqual(['down', 'up']);
  expect(store.problem).toBeNull();
  // Nothing was written meanwhile.
  expect((await store.get('tx_a'))?.state).toBe('pending');
  await proxy.cut();
});

test('a re-read after a lost answer waits for the COMMIT the server is still finishing, then sees its outcome', async () => {
  // The store reaches the database through a proxy the test cuts: the client's connection is gone, the server's
  // backend is not (as when the network drops mid-COMMIT, or the server waits on a synchronous standby).
  const direct = new URL(pgt.url);
  const proxy = await databaseProxy(Number(direct.port));
  const viaProxy = new URL(pgt.url);
  viaProxy.port = String(proxy.port);
  const proxied = await openStore({ database: { lockTimeoutMs: 60_000 } }, viaProxy.toString());
  await proxied.accept(tx('tx_a', 'sig-a'));
  const db = sql();
  // A deferred constraint trigger runs at commit and waits on an advisory lock this test holds: the transition's
  // statement is committing (it holds a transaction id, its row written) when its connection is cut.
  await holdCommitsOnLock(db);
  const holder = await db.connect();
  let released = false;
  try {
    await holder.query('SELECT pg_advisory_lock(4242)');
    const moving = proxied
      .transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } })
      .catch((error: unknown) => error);
    const pid = await waitingOnLock(db, '%UPDATE transactions SET%');
    await proxy.cut();
    expect(await moving).toMatchObject({
      code: 'RELAY_E_DB_COMMIT_UNKNOWN',
      details: { tx_id: 'tx_a', operation: 'transition' },
    });
    await proxy.restore();

    // The lost COMMIT is still running on the server: its backend holds its transaction id.
    const running = await db.query<{ xid: string | null }>(
      'SELECT backend_xid::text AS xid FROM pg_stat_activity WHERE pid = $1',
      [pid],
    );
    expect(running.rows[0]?.xid).toMatch(/^\d+$/);
    // Every read of the record, one by one or in a list, waits for that commit's outcome and, while the server has
    // none, answers none: never the row as it was before the commit (state pending), which a plain SELECT sees now.
    const before = await db.query<{ state: string }>(`SELECT state FROM transactions WHERE tx_id = 'tx_a'`);
    expect(before.rows).toEqual([{ state: 'pending' }]);
    await expect(proxied.get('tx_a')).rejects.toMatchObject({
      code: 'RELAY_E_DB_COMMIT_UNKNOWN',
      details: { tx_id: 'tx_a', operation: 'transition', retry_after_s: 1 },
    });
    await expect(proxied.live()).rejects.toMatchObject({ code: 'RELAY_E_DB_COMMIT_UNKNOWN' });
    await expect(proxied.byFirstSignature('sig-a')).rejects.toMatchObject({
      code: 'RELAY_E_DB_COMMIT_UNKNOWN',
    });
    await expect(
      proxied.transition('tx_a', { state: 'pending' }, { set: { state: 'expired', stopped: true } }),
    ).rejects.toMatchObject({ code: 'RELAY_E_DB_COMMIT_UNKNOWN' });

    // The commit finishes: the next read that answers gives its outcome (asked again while still unknown).
    await holder.query('SELECT pg_advisory_unlock_all()');
    released = true;
    const reread = await waitUntil(
      async () => {
        try {
          return { tx: await proxied.get('tx_a') };
        } catch (error) {
          if (isRelayError(error, 'RELAY_E_DB_COMMIT_UNKNOWN')) return null;
          throw error;
        }
      },
      15_000,
      'the record re-read',
    );
    expect(reread.tx?.state).toBe('submitted');
  } finally {
    if (!released) await holder.query('SELECT pg_advisory_unlock_all()');
    holder.release();
  }
  expect((await proxied.live()).map((t) => t.state)).toEqual(['submitted']);
  const { rows } = await db.query(`SELECT state, version FROM transactions WHERE tx_id = 'tx_a'`);
  expect(rows).toEqual([{ state: 'submitted', version: '2' }]);
  // The store writes on from the outcome (its held version is the committed one), once its probe has taken the
  // sole-writer lock again (the cut ended the lock's connection too; writes are fenced until then).
  await db.query('DROP TRIGGER hold_commit ON transactions');
  await waitUntil(() => proxied.healthy, 15_000, 'the store to take its sole-writer lock again');
  expect(
    (await proxied.transition('tx_a', { state: 'submitted' }, { set: { state: 'expired', stopped: true } }))
      .state,
  ).toBe('expired');
  await proxy.cut();
});

test('open refuses an unmigrated database with its coded error, naming both versions', async () => {
  const empty = await pgt.postgres.server().createDatabase();
  await expect(PgTxStore.open(empty, { maintenanceMs: 0 })).rejects.toMatchObject({
    code: 'RELAY_E_DB_SCHEMA_BEHIND',
    details: { current: 0, latest: 5 },
  });
});

test('a burst of transitions holding every connection they may take never keeps an enqueue or a submit waiting', async () => {
  // A pool of 6 keeps 2 for the decision path (accept, addAttempt): transitions take at most 4 at once.
  const store = await openStore({ database: { poolMax: 6, poolMin: 6, lockTimeoutMs: 60_000 } });
  for (let i = 0; i < 6; i++) await store.accept(tx(`tx_busy_${i}`, `sig-busy-${i}`));
  await store.accept(tx('tx_decide', 'sig-decide'));
  const db = sql();
  // Only the burst's commits wait on the lock (the submit's update of tx_decide must not).
  await db.query(`
    CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER hold_commit AFTER UPDATE ON transactions DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW WHEN (NEW.tx_id LIKE 'tx_busy_%') EXECUTE FUNCTION test_hold_commit();`);
  const holder = await db.connect();
  try {
    await holder.query('SELECT pg_advisory_lock(4242)');
    // Six transitions, each held at its commit while the test holds the lock: four hold connections, two wait for
    // one of the transitions' places, none of the pool's last two.
    const moving = Array.from({ length: 6 }, (_, i) =>
      store.transition(`tx_busy_${i}`, { state: 'pending' }, { set: { state: 'submitted' } }),
    );
    await waitUntil(
      async () => {
        const { rows } = await db.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
           WHERE datname = current_database() AND query LIKE '%UPDATE transactions SET%' AND wait_event_type = 'Lock'`,
        );
        return Number(rows[0]?.n) === 4;
      },
      15_000,
      'four transitions held at their commits',
    );
    // The decision path still has its connections: an enqueue and a submit commit while the burst is held.
    const accepted = await store.accept(tx('tx_new', 'sig-new'));
    expect(accepted.created).toBe(true);
    const submitted = await store.addAttempt('tx_decide', attempt(1, 'b-decide'), {
      expect: { state: 'pending' },
    });
    expect(submitted.attempts.map((a) => a.bundle_id)).toEqual(['b-decide']);
    await holder.query('SELECT pg_advisory_unlock_all()');
    expect((await Promise.all(moving)).map((t) => t.state)).toEqual(Array(6).fill('submitted'));
  } finally {
    await holder.query('SELECT pg_advisory_unlock_all()');
    holder.release();
  }
});
