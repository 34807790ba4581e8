import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import pg from 'pg';
import type { Sidecar } from '../../src/service';
import { useMigratedPostgres } from '../helpers/migrated-postgres';
import { startRelayStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * The sidecar on PostgreSQL (`RELAY_DATABASE_URL`) against the simulated cluster: a transaction goes from enqueue to
 * finalized with one tip paid, its record, attempt, spend, events and lifecycle entries are rows of the database
 * (no journal is written), and a restart answers from the database. An unmigrated database refuses to start.
 */
const postgres = useMigratedPostgres();
const TIP = 50_000;
const FEE = 5_000;

let stack: Stack<Sidecar>;
let db: pg.Pool;

beforeAll(async () => {
  const url = await postgres.fresh();
  db = new pg.Pool({ connectionString: url, max: 2 });
  stack = await startRelayStack({
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(TIP), RELAY_DATABASE_URL: url },
  });
  await waitUntil(async () => (await get(stack.sidecar.url, '/status')).body.slot > 0, 10_000, 'first slot');
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await db?.end();
});

test('enqueue to finalized on PostgreSQL: one tip paid, every row in the database, none in a journal', async () => {
  const url = stack.sidecar.url;
  const connection = stack.connection();
  const before = await connection.getBalance(stack.tipper.publicKey, 'confirmed');
  const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer() });
  expect(enqueued.status).toBe(202);
  const txId: string = enqueued.body.tx_id;
  // The host session owns it while it is live: /status says so, and so does the row.
  const fleet = (await get(url, '/status')).body.fleet;
  expect(fleet).toMatchObject({ host_id: expect.stringMatching(/^\S+:\d+$/), lease_ms: 5000, live: true });
  const owner = await db.query(
    `SELECT owner_host, owner_epoch::int AS epoch FROM transactions WHERE tx_id = $1`,
    [txId],
  );
  expect(owner.rows).toEqual([{ owner_host: fleet.host_id, epoch: fleet.epoch }]);
  expect(fleet.hosts).toEqual([
    expect.objectContaining({ host_id: fleet.host_id, epoch: fleet.epoch, live: true, ended_at: null }),
  ]);
  await waitAllFinalized(url, [txId], 45_000);

  const record = (await get(url, `/tx/${txId}`)).body;
  expect(record.attempts).toHaveLength(1);
  expect(record.attempts[0]).toMatchObject({ stage: 'finalized', tip_lamports: TIP });
  // On chain: the tipper paid one tip and one fee.
  await waitUntil(
    async () => before - (await connection.getBalance(stack.tipper.publicKey, 'confirmed')) === TIP + FEE,
    10_000,
    'the tipper to have paid one tip',
  );

  const row = await db.query(
    `SELECT state, wires, terminal_at IS NOT NULL AS terminal,
            (SELECT count(*)::int FROM attempts WHERE tx_id = $1) AS attempts,
            (SELECT count(*)::int FROM spend_reservations WHERE tx_id = $1 AND released_at IS NULL) AS reserved
     FROM transactions WHERE tx_id = $1`,
    [txId],
  );
  expect(row.rows).toEqual([{ state: 'finalized', wires: null, terminal: true, attempts: 1, reserved: 1 }]);
  const told = await db.query(
    `SELECT payload->>'state' AS state FROM events
     WHERE tx_id = $1 AND name = 'tx_status_changed' ORDER BY xid, id`,
    [txId],
  );
  expect(told.rows.map((r) => r.state)).toEqual([
    'pending',
    'submitted',
    'landed',
    'processed',
    'confirmed',
    'finalized',
  ]);
  const entries = await db.query(`SELECT stage FROM lifecycle_entries WHERE tx_id = $1 ORDER BY seq`, [txId]);
  expect(entries.rows.map((r) => r.stage)).toContain('finalized');
  expect(existsSync(join(stack.dir, 'data', 'journal'))).toBe(false);

  // A restart answers from the database.
  const restarted = await stack.restart();
  const again = (await get(restarted.url, `/tx/${txId}`)).body;
  expect(again).toMatchObject({ tx_id: txId, state: 'finalized', attempts: [{ stage: 'finalized' }] });
  // ... under a new epoch of the same host, the earlier one ended.
  const after = (await get(restarted.url, '/status')).body.fleet;
  expect(after.epoch).toBeGreaterThan(fleet.epoch);
  expect(after.hosts.map((h: { epoch: number; live: boolean }) => [h.epoch, h.live])).toEqual([
    [fleet.epoch, false],
    [after.epoch, true],
  ]);
}, 90_000);

test('an unmigrated database refuses to start with its coded error, naming both versions', async () => {
  const empty = await postgres.server().createDatabase();
  await expect(stack.restart({ RELAY_DATABASE_URL: empty })).rejects.toMatchObject({
    code: 'RELAY_E_DB_SCHEMA_BEHIND',
    details: { current: 0, latest: 5 },
  });
}, 30_000);
