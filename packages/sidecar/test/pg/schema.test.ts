import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { useMigratedPostgres } from '../helpers/migrated-postgres';

// The draft schema's guarantees, checked by the database itself: each test gets a fresh copy of a template database
// with relay's migrations applied.
const server = useMigratedPostgres();

let pool: pg.Pool;
beforeEach(async () => {
  pool = new pg.Pool({ connectionString: await server.fresh(), max: 2 });
});
afterEach(async () => {
  await pool.end();
});

async function insertTx(txId: string, firstSignature: string): Promise<void> {
  await pool.query(
    `INSERT INTO transactions (tx_id, state, priority, tip_mode, first_signature, signatures, blockhashes,
       nonce_accounts, fee_payers, wires, enqueued_at, enqueued_slot, expires_at_slot)
     VALUES ($1, 'pending', 'normal', 'auto', $2, ARRAY[$2], ARRAY['hash'], ARRAY[NULL]::text[], ARRAY['payer'],
       ARRAY['AQID'], now(), 100, 250)`,
    [txId, firstSignature],
  );
}

async function insertAttempt(txId: string, n: number, stage: string): Promise<void> {
  const settled = stage === 'finalized' || stage === 'failed';
  await pool.query(
    `INSERT INTO attempts (tx_id, attempt, bundle_id, stage, tip_lamports, bundle_signatures, created_at,
       created_slot, floor_at_submit, decision, settled_at)
     VALUES ($1, $2, $3, $4, 5000, ARRAY['sig'], now(), 101, '{}', '{}', ${settled ? 'now()' : 'NULL'})`,
    [txId, n, `${txId}-bundle-${n}`, stage],
  );
}

/** The SQLSTATE and constraint a statement fails with (null when it succeeds). */
async function failure(statement: Promise<unknown>): Promise<{ code: string; constraint: string } | null> {
  try {
    await statement;
    return null;
  } catch (error) {
    const { code, constraint } = error as { code: string; constraint: string };
    return { code, constraint };
  }
}

test('a second unsettled attempt of a transaction is refused by the partial unique index; once settled, the next goes in', async () => {
  await insertTx('tx_a', 'sigA');
  await insertAttempt('tx_a', 1, 'submitted');
  expect(await failure(insertAttempt('tx_a', 2, 'journaled'))).toEqual({
    code: '23505',
    constraint: 'attempts_one_unsettled',
  });
  // Another transaction's unsettled attempt is no conflict.
  await insertTx('tx_b', 'sigB');
  await insertAttempt('tx_b', 1, 'journaled');
  // Attempt 1 settles (failed): attempt 2 may now be built.
  await pool.query(
    `UPDATE attempts SET stage = 'failed', settled_at = now() WHERE tx_id = 'tx_a' AND attempt = 1`,
  );
  await insertAttempt('tx_a', 2, 'journaled');
  // Reopening the settled one while attempt 2 is unsettled is refused too, whoever tries.
  expect(
    await failure(
      pool.query(
        `UPDATE attempts SET stage = 'submitted', settled_at = NULL WHERE tx_id = 'tx_a' AND attempt = 1`,
      ),
    ),
  ).toEqual({ code: '23505', constraint: 'attempts_one_unsettled' });
  const { rows } = await pool.query(
    `SELECT attempt, stage FROM attempts WHERE tx_id = 'tx_a' ORDER BY attempt`,
  );
  expect(rows).toEqual([
    { attempt: 1, stage: 'failed' },
    { attempt: 2, stage: 'journaled' },
  ]);
});

test('dedupe by first signature: a second transaction with the same first signature is refused', async () => {
  await insertTx('tx_1', 'sameFirstSignature');
  expect(await failure(insertTx('tx_2', 'sameFirstSignature'))).toEqual({
    code: '23505',
    constraint: 'transactions_first_signature_key',
  });
  const { rows } = await pool.query(
    `SELECT tx_id FROM transactions WHERE first_signature = 'sameFirstSignature'`,
  );
  expect(rows).toEqual([{ tx_id: 'tx_1' }]);
});

test('the fence columns come in pairs, and a terminal state carries its time', async () => {
  await insertTx('tx_f', 'sigF');
  expect(
    (await failure(pool.query(`UPDATE transactions SET owner_host = 'h1' WHERE tx_id = 'tx_f'`)))?.code,
  ).toBe('23514');
  expect(
    (await failure(pool.query(`UPDATE transactions SET state = 'expired' WHERE tx_id = 'tx_f'`)))?.code,
  ).toBe('23514');
  await pool.query(
    `UPDATE transactions SET owner_host = 'h1', owner_epoch = 1, state = 'expired', terminal_at = now(), wires = NULL
     WHERE tx_id = 'tx_f'`,
  );
});

test('a second open session for one host id is refused; the next start gets a higher epoch', async () => {
  const open = `INSERT INTO host_sessions (host_id, lease_expires_at) VALUES ('box:7777', now() + interval '5 s')
    RETURNING epoch`;
  const first = await pool.query<{ epoch: string }>(open);
  expect(await failure(pool.query(open))).toEqual({ code: '23505', constraint: 'host_sessions_one_open' });
  await pool.query(`UPDATE host_sessions SET ended_at = now() WHERE host_id = 'box:7777'`);
  const next = await pool.query<{ epoch: string }>(open);
  expect(Number(next.rows[0]?.epoch)).toBeGreaterThan(Number(first.rows[0]?.epoch));
});

test('events: the cursor orders by (xid, id); rows land in daily partitions, which retention drops whole', async () => {
  // The migration made today's partition and the next two; adding them again (as the store's maintenance will, and
  // in case this runs past midnight after the template was made) creates what is missing, then nothing.
  await pool.query('SELECT relay_events_add_partitions(2)');
  const again = await pool.query<{ n: number }>('SELECT relay_events_add_partitions(2) AS n');
  expect(again.rows[0]?.n).toBe(0);
  await pool.query(`INSERT INTO events (name, tx_id, payload) VALUES ('tx_enqueued', 'tx_1', '{}')`);
  await pool.query(`INSERT INTO events (name, tx_id, payload) VALUES ('tx_status_changed', 'tx_1', '{}')`);
  // A row is behind the cursor once no transaction that could commit before it is still open. xids are the
  // cluster's, so a transaction open in another database of this server (another test file) holds the cursor back
  // too: read until both rows are behind it, as the store's tailer does.
  const behindCursor = () =>
    pool.query<{ name: string; partition: string }>(
      `SELECT name, tableoid::regclass::text AS partition FROM events
       WHERE xid < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY xid, id`,
    );
  let { rows } = await behindCursor();
  for (const deadline = Date.now() + 30_000; rows.length < 2 && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    ({ rows } = await behindCursor());
  }
  expect(rows.map((r) => r.name)).toEqual(['tx_enqueued', 'tx_status_changed']);
  expect(rows[0]?.partition).toMatch(/^events_\d{8}$/);
  const daily = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'events'::regclass
     AND inhrelid::regclass::text ~ '^events_[0-9]{8}$'`,
  );
  expect(Number(daily.rows[0]?.n)).toBeGreaterThanOrEqual(3);
  // Nothing is dropped that is not wholly older than the cut; everything is, ten days on.
  const none = await pool.query<{ n: number }>(
    `SELECT relay_events_drop_partitions(now() - interval '1 day') AS n`,
  );
  expect(none.rows[0]?.n).toBe(0);
  const dropped = await pool.query<{ n: number }>(
    `SELECT relay_events_drop_partitions(now() + interval '10 days') AS n`,
  );
  expect(dropped.rows[0]?.n).toBe(Number(daily.rows[0]?.n));
  const left = await pool.query<{ n: string }>('SELECT count(*) AS n FROM events');
  expect(Number(left.rows[0]?.n)).toBe(0);
}, 60_000);

describe("the README's queries", () => {
  const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Running on PostgreSQL'));
  const queries = [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1] as string);

  test('there are two: stuck transactions, then spend this hour', () => {
    expect(queries).toHaveLength(2);
  });

  test('stuck transactions: finds one unchanged for 5 minutes whose owner is dead, with its unsettled attempt', async () => {
    await pool.query(
      `INSERT INTO host_sessions (host_id, epoch, started_at, heartbeat_at, lease_expires_at)
       VALUES ('box:7777', 41, now() - interval '10 minutes', now() - interval '6 minutes', now() - interval '6 minutes')`,
    );
    await insertTx('tx_stuck', 'sigStuck');
    await insertTx('tx_fresh', 'sigFresh');
    await insertAttempt('tx_stuck', 1, 'submitted');
    await pool.query(
      `UPDATE transactions SET owner_host = 'box:7777', owner_epoch = 41, updated_at = now() - interval '5 minutes'
       WHERE tx_id = 'tx_stuck'`,
    );
    const { rows } = await pool.query(queries[0] as string);
    expect(rows).toEqual([
      expect.objectContaining({ tx_id: 'tx_stuck', owner_alive: false, attempt: 1, stage: 'submitted' }),
    ]);
  });

  test('spend this hour: unreleased reservations of the last hour, in all and by tipper', async () => {
    await pool.query(
      `INSERT INTO spend_reservations (tx_id, attempt, tipper, reserved_at, lamports, released_at) VALUES
         ('a', 1, 'TipperA', now() - interval '10 minutes', 1000, NULL),
         ('b', 1, 'TipperA', now() - interval '50 minutes', 2000, NULL),
         ('c', 1, 'TipperA', now() - interval '5 minutes', 500, now()),
         ('d', 1, 'TipperB', now() - interval '61 minutes', 700, NULL),
         ('e', 1, NULL, now(), 300, NULL)`,
    );
    const { rows } = await pool.query(queries[1] as string);
    expect(rows.map((r) => [r.tipper, Number(r.attempts), Number(r.lamports)])).toEqual([
      ['all tippers', 3, 3300],
      ['TipperA', 2, 3000],
      ['(tip included)', 1, 300],
    ]);
  });
});
