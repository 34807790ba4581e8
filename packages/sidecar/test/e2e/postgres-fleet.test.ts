import { join } from 'node:path';
import { SseReader, TEST_INTERVALS, get, post, quietLogger, waitUntil, type Stack } from '@solrelay/testkit';
import pg from 'pg';
import { configFromEnv } from '../../src/config';
import { startSidecar, type Sidecar } from '../../src/service';
import type { PgTxStore } from '../../src/store/pg-store';
import { useMigratedPostgres } from '../helpers/migrated-postgres';
import { counterValue, startRelayStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * Two sidecars of one fleet (`RELAY_FLEET=1`) on one PostgreSQL against the simulated cluster, both paying tips from
 * the same tipper: each runs what it accepted, the fleet dedupes by first signature, a client of either host sees
 * the other's work, and a host whose session lapses while it still runs (a pause past its lease, as the database
 * sees it) hands its work to the other without a second tip: every transaction finalizes with one tip on chain.
 */
const postgres = useMigratedPostgres();
const TIP = 50_000;
const FEE = 5_000;

let stack: Stack<Sidecar>;
let b: Sidecar;
let db: pg.Pool;
const readers: SseReader[] = [];

beforeAll(async () => {
  const url = await postgres.fresh();
  db = new pg.Pool({ connectionString: url, max: 2 });
  const fleet = {
    RELAY_DATABASE_URL: url,
    RELAY_FLEET: '1',
    BYPASS_AGENT: '1',
    BYPASS_TIP_LAMPORTS: String(TIP),
  };
  stack = await startRelayStack({ env: { ...fleet, RELAY_HOST_ID: 'host-a' } });
  b = await startSidecar(
    configFromEnv(
      {
        ...stack.env,
        RELAY_HOST_ID: 'host-b',
        RELAY_DATA_DIR: join(stack.dir, 'data-b'),
        LIFECYCLE_PATH: join(stack.dir, 'lifecycle-b.jsonl'),
      },
      stack.dir,
    ),
    { logger: quietLogger, intervals: TEST_INTERVALS },
  );
  for (const url of [stack.sidecar.url, b.url])
    await waitUntil(async () => (await get(url, '/status')).body.slot > 0, 10_000, 'first slot');
}, 60_000);

afterAll(async () => {
  for (const r of readers.splice(0)) r.close();
  await b?.close();
  await stack?.close();
  await db?.end();
});

async function owners(ids: readonly string[]): Promise<Record<string, string>> {
  const { rows } = await db.query<{ tx_id: string; owner_host: string }>(
    'SELECT tx_id, owner_host FROM transactions WHERE tx_id = ANY($1)',
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.tx_id, r.owner_host]));
}

/** Every transaction of `ids` finalized with exactly one finalized attempt; returns the tips those attempts paid. */
async function oneTipEach(url: string, ids: readonly string[]): Promise<number> {
  let paid = 0;
  for (const id of ids) {
    const record = (await get(url, `/tx/${id}`)).body;
    const finalized = record.attempts.filter((a: { stage: string }) => a.stage === 'finalized');
    expect({ id, state: record.state, finalized: finalized.length }).toEqual({
      id,
      state: 'finalized',
      finalized: 1,
    });
    paid += finalized[0].tip_lamports + FEE;
  }
  return paid;
}

test('each host runs what it accepted; one first signature is one transaction; either host shows the other’s work', async () => {
  const a = stack.sidecar;
  const events = await SseReader.open(`${b.url}/internal/events`);
  const own = await SseReader.open(`${b.url}/internal/events?scope=host`);
  readers.push(events, own);
  const onA = await post(a.url, '/tx/enqueue', { transaction: stack.transfer() });
  const onB = await post(b.url, '/tx/enqueue', { transaction: stack.transfer() });
  expect([onA.status, onB.status]).toEqual([202, 202]);
  const [txA, txB] = [onA.body.tx_id as string, onB.body.tx_id as string];
  expect(await owners([txA, txB])).toEqual({ [txA]: 'host-a', [txB]: 'host-b' });

  await waitAllFinalized(a.url, [txA, txB], 45_000);
  // Host B's stream carried host A's transaction to the end, from the fleet's event log.
  await events.waitFor(
    (r) =>
      r.events('tx_status_changed').some((m) => {
        const data = JSON.parse(m.data) as { tx_id: string; state: string };
        return data.tx_id === txA && data.state === 'finalized';
      }),
    15_000,
  );
  expect((await get(b.url, `/tx/${txA}`)).body.state).toBe('finalized');
  // The agent's scope on host B: host B's own transaction, none of host A's.
  const txIds = (r: SseReader) =>
    new Set(r.events('tx_status_changed').map((m) => (JSON.parse(m.data) as { tx_id: string }).tx_id));
  await own.waitFor((r) => txIds(r).has(txB), 15_000);
  expect(txIds(own).has(txA)).toBe(false);
  expect(own.events('slot_update').length).toBeGreaterThan(0);
  const badScope = await get(b.url, '/internal/events?scope=everyone');
  expect([badScope.status, badScope.body.error.code]).toEqual([400, 'RELAY_E_REQUEST_INVALID_FIELD']);

  // The same bytes sent to the other host: the fleet's dedupe answers with the first transaction.
  const transfer = stack.transfer();
  const first = await post(a.url, '/tx/enqueue', { transaction: transfer });
  const again = await post(b.url, '/tx/enqueue', { transaction: transfer });
  expect(again.body.tx_id).toBe(first.body.tx_id);
  const { rows } = await db.query('SELECT count(*)::int AS n FROM transactions');
  expect(rows).toEqual([{ n: 3 }]);
  await waitAllFinalized(a.url, [first.body.tx_id], 45_000);

  const fleet = (await get(a.url, '/status')).body.fleet;
  expect(
    fleet.hosts
      .filter((h: { live: boolean }) => h.live)
      .map((h: { host_id: string }) => h.host_id)
      .sort(),
  ).toEqual(['host-a', 'host-b']);
}, 120_000);

test('a host whose session lapses while it runs hands its work over: the other finishes it, one tip each on chain', async () => {
  const a = stack.sidecar;
  const connection = stack.connection();
  const before = await connection.getBalance(stack.tipper.publicKey, 'finalized');
  const ids: string[] = [];
  for (let i = 0; i < 8; i++) {
    const answer = await post(a.url, '/tx/enqueue', { transaction: stack.transfer() });
    expect(answer.status).toBe(202);
    ids.push(answer.body.tx_id as string);
  }
  // The database's clock says host A's lease has passed (a pause, a partition): host B's sweep adopts its live work
  // while host A still runs with it in memory, some of it in flight. Host A is told at its next heartbeat, and takes
  // back only what no one adopted; host B's sweep is run at once (its timer could lose that race to host A's renewal,
  // which is as correct but proves nothing here).
  await db.query(
    `UPDATE host_sessions SET started_at = now() - interval '1 minute', lease_expires_at = now() - interval '1 second'
     WHERE host_id = 'host-a' AND ended_at IS NULL`,
  );
  // (If host B's own timer is sweeping right now, this finds the sweep lock taken and that sweep adopts instead.)
  await (b.store as PgTxStore).sweep();
  await waitUntil(
    async () => {
      const { rows } = await db.query(
        `SELECT count(*)::int AS n FROM events WHERE name = 'tx_adopted' AND host_id = 'host-b' AND tx_id = ANY($1)`,
        [ids],
      );
      return rows[0].n > 0;
    },
    5_000,
    'host B to adopt host A’s live work',
  );

  await waitAllFinalized(b.url, ids, 90_000);
  const moved = Object.values(await owners(ids)).filter((o) => o === 'host-b').length;
  const { rows: told } = await db.query(
    `SELECT count(DISTINCT tx_id)::int AS n FROM events
     WHERE name = 'tx_adopted' AND host_id = 'host-b' AND tx_id = ANY($1)`,
    [ids],
  );
  const swept = told[0].n as number;
  // What host B adopted is host B's; host A's renewal took back only what no one had adopted.
  expect(moved).toBe(swept);
  expect(await counterValue(b.url, 'relay_fleet_adopted_total')).toBeGreaterThanOrEqual(swept);
  // Host A registered again under a new epoch, and is live again.
  await waitUntil(async () => (await get(a.url, '/status')).body.fleet?.live === true, 20_000, 'host A back');

  const paid = await oneTipEach(b.url, ids);
  await waitUntil(
    async () => before - (await connection.getBalance(stack.tipper.publicKey, 'finalized')) === paid,
    20_000,
    `the tipper to have paid exactly one tip per transaction (${paid} lamports)`,
  );
}, 180_000);

test('a host that stops hands its work over at once (its session ended): the other finishes it', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const answer = await post(b.url, '/tx/enqueue', { transaction: stack.transfer() });
    ids.push(answer.body.tx_id as string);
  }
  await b.close();
  await waitAllFinalized(stack.sidecar.url, ids, 90_000);
  expect(Object.values(await owners(ids))).toEqual(ids.map(() => 'host-a'));
  const adopted = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM events WHERE name = 'tx_adopted' AND host_id = 'host-a' AND tx_id = ANY($1)`,
    [ids],
  );
  expect(adopted.rows[0]?.n).toBeGreaterThan(0);
  await oneTipEach(stack.sidecar.url, ids);
}, 150_000);
