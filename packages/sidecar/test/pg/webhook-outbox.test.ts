import { waitUntil } from '@solrelay/testkit';
import pg from 'pg';
import pino from 'pino';
import { Metrics } from '../../src/metrics';
import { systemClock } from '../../src/runtime/clock';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher';
import { PgWebhookOutbox } from '../../src/webhooks/pg-outbox';
import { useMigratedPostgres } from '../helpers/migrated-postgres';

/**
 * The webhook outbox on PostgreSQL (review of #28: M1, M6, m1, m11), over a real server: the leases a killed host
 * left behind are written into `webhook_outbox` as it would have left them, and a PgWebhookOutbox with its dispatcher
 * delivers to a receiver that records the order it was called in.
 */
const server = useMigratedPostgres();
const ENDPOINT = 'http://receiver.test/hooks';
const SECRET = `whsec_${Buffer.from('pg outbox unit test secret, 32 b').toString('base64')}`;

let pool: pg.Pool;
const running: Array<{ outbox: PgWebhookOutbox; dispatcher: WebhookDispatcher }> = [];
let eventId = 0;

beforeEach(async () => {
  pool = new pg.Pool({ connectionString: await server.fresh(), max: 4 });
});
afterEach(async () => {
  for (const { outbox, dispatcher } of running.splice(0)) {
    dispatcher.close();
    await outbox.close();
  }
  await pool.end();
});

interface Row {
  txId: string;
  webhookId: string;
  /** Leased by this host and epoch for this long from now (a killed host's lease). */
  lease?: { host: string; epoch: number; forMs: number };
  /** `created_at` this long ago (default: the column's default). */
  createdAgoMs?: number;
}

async function insert(row: Row): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO webhook_outbox (endpoint, tx_id, webhook_id, event_xid, event_id, event_name, payload, lease_host,
       lease_epoch, lease_expires_at, created_at)
     VALUES ($1, $2, $3, pg_current_xact_id(), $4, 'tx_status_changed', $5::json, $6, $7,
       CASE WHEN $6::text IS NULL THEN NULL ELSE now() + make_interval(secs => $8::float8 / 1000) END,
       CASE WHEN $9::float8 IS NULL THEN clock_timestamp()
            ELSE clock_timestamp() - make_interval(secs => $9::float8 / 1000) END)
     RETURNING id::text`,
    [
      ENDPOINT,
      row.txId,
      row.webhookId,
      ++eventId,
      JSON.stringify({ tx_id: row.txId, state: 'pending', ts: Date.now() }),
      row.lease?.host ?? null,
      row.lease?.epoch ?? null,
      row.lease?.forMs ?? null,
      row.createdAgoMs ?? null,
    ],
  );
  return (rows[0] as { id: string }).id;
}

/** What a killed run left of `txId`: statuses s0 and s1 leased by it (`lease`), s2 written but not yet leased. */
async function killedRun(txId: string, lease: NonNullable<Row['lease']>): Promise<void> {
  await insert({ txId, webhookId: `msg_${txId}_s0`, lease });
  await insert({ txId, webhookId: `msg_${txId}_s1`, lease });
  await insert({ txId, webhookId: `msg_${txId}_s2` });
}

/** Every row: its webhook-id, outcome and lease holder. */
async function table(): Promise<
  Array<{ webhook_id: string; outcome: string | null; lease_host: string | null }>
> {
  const { rows } = await pool.query(`SELECT webhook_id, outcome, lease_host FROM webhook_outbox ORDER BY id`);
  return rows;
}

/** A receiver answering `answer(webhook-id)`; `calls` is every request in the order made, `took` the accepted. */
function receiver(answer: (id: string) => number = () => 204) {
  const calls: string[] = [];
  const took: string[] = [];
  const fetch = (async (_url: string, init: RequestInit) => {
    const id = (init.headers as Record<string, string>)['webhook-id'] as string;
    calls.push(id);
    const status = answer(id);
    if (status < 300) took.push(id);
    return new Response(null, { status });
  }) as unknown as typeof globalThis.fetch;
  return { calls, took, fetch };
}

async function start(
  hostId: string,
  epoch: number,
  fetch: typeof globalThis.fetch,
  o: { leaseMs?: number; pollMs?: number; retryWindowMs?: number; onError?: (error: unknown) => void } = {},
): Promise<PgWebhookOutbox> {
  const outbox = new PgWebhookOutbox(pool, {
    endpoints: [ENDPOINT],
    hostId,
    epoch,
    pollMs: o.pollMs ?? 50,
    leaseMs: o.leaseMs,
    onError: o.onError,
  });
  const dispatcher = new WebhookDispatcher({
    urls: [ENDPOINT],
    secret: SECRET,
    outbox,
    metrics: new Metrics(),
    log: pino({ level: 'silent' }),
    clock: systemClock,
    retryBaseMs: 20,
    retryCapMs: 50,
    tickMs: 10,
    random: () => 0.5,
    retryWindowMs: o.retryWindowMs,
    fetch,
  });
  running.push({ outbox, dispatcher });
  await outbox.start((entries) => dispatcher.take(entries));
  return outbox;
}

test('M1: rows behind another host’s live lease wait for it; the transaction arrives in id order after the kill', async () => {
  // Host B was killed holding tx_a's first two rows (its lease runs 3 s more); s2 it had not leased yet.
  await killedRun('tx_a', { host: 'b:1', epoch: 1, forMs: 3000 });
  await insert({ txId: 'tx_other', webhookId: 'msg_tx_other_s0' });
  const r = receiver();
  await start('a:1', 2, r.fetch);
  // A row written after the restart, for the same transaction.
  await insert({ txId: 'tx_a', webhookId: 'msg_tx_a_s3' });

  // Another transaction is not held back.
  await waitUntil(() => r.took.includes('msg_tx_other_s0'), 5_000, 'the other transaction delivered');
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(r.calls.filter((id) => id.startsWith('msg_tx_a_'))).toEqual([]);
  // Held back, not leased by A while B's lease lives.
  expect((await table()).filter((row) => row.lease_host === 'a:1')).toEqual([]);

  await waitUntil(() => r.took.length === 5, 10_000, 'every row delivered once B’s lease ran out');
  expect(r.calls.filter((id) => id.startsWith('msg_tx_a_'))).toEqual([
    'msg_tx_a_s0',
    'msg_tx_a_s1',
    'msg_tx_a_s2',
    'msg_tx_a_s3',
  ]);
  await waitUntil(
    async () => (await table()).every((row) => row.outcome === 'delivered'),
    5_000,
    'every row marked delivered',
  );
}, 30_000);

test('M1: a restarted host takes over its own earlier run’s leases at once, and delivers in id order', async () => {
  // This host id's killed run (epoch 1) held s0 and s1 for another hour; s2 it had not leased.
  await killedRun('tx_c', { host: 'a:1', epoch: 1, forMs: 3_600_000 });
  const r = receiver();
  await start('a:1', 2, r.fetch);
  await waitUntil(() => r.took.length === 3, 5_000, 'all three delivered without waiting out the old lease');
  expect(r.calls).toEqual(['msg_tx_c_s0', 'msg_tx_c_s1', 'msg_tx_c_s2']);
}, 30_000);

test('M6: a row repeating a webhook-id this host holds is ended as a duplicate in the lease, not leased and leaked', async () => {
  // Two rows with one id for one endpoint (two transactions' settlements of one packed bundle, before settlement ids
  // named their transaction), and a third repeating it written while the first is held (its receiver refusing).
  let refuse = true;
  const r = receiver(() => (refuse ? 503 : 204));
  await insert({ txId: 'tx_d', webhookId: 'msg_bundle_finalized' });
  await insert({ txId: 'tx_e', webhookId: 'msg_bundle_finalized' });
  await start('a:1', 2, r.fetch);
  await waitUntil(() => r.calls.length >= 1, 5_000, 'the first tried');
  await insert({ txId: 'tx_f', webhookId: 'msg_bundle_finalized' });
  // The pollers lease (or end) the third meanwhile.
  await waitUntil(
    async () => (await table()).filter((row) => row.outcome === 'duplicate').length === 2,
    5_000,
    'both repeats ended as duplicates',
  );
  const rows = await table();
  expect(rows.map((row) => row.outcome)).toEqual([null, 'duplicate', 'duplicate']);
  // Only the tracked row is leased; the duplicates hold no lease.
  expect(rows.map((row) => row.lease_host)).toEqual(['a:1', null, null]);
  refuse = false;
  await waitUntil(() => r.took.length === 1, 5_000, 'the tracked row delivered');
  await waitUntil(async () => (await table())[0]?.outcome === 'delivered', 5_000, 'and marked delivered');
  expect(new Set(r.calls)).toEqual(new Set(['msg_bundle_finalized']));
}, 30_000);

test('m1: a done() UPDATE that fails is re-issued at the next renew; the row is not delivered again', async () => {
  // The database refuses to mark rows done while `refuse_done` holds a row (a trigger: a real failure of that UPDATE).
  await pool.query(`CREATE TABLE refuse_done (x int)`);
  await pool.query(`INSERT INTO refuse_done VALUES (1)`);
  await pool.query(`CREATE FUNCTION refuse_done() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.done_at IS NOT NULL AND EXISTS (SELECT 1 FROM refuse_done) THEN
        RAISE EXCEPTION 'done refused for the test';
      END IF;
      RETURN NEW;
    END $$`);
  await pool.query(`CREATE TRIGGER refuse_done BEFORE UPDATE ON webhook_outbox
    FOR EACH ROW EXECUTE FUNCTION refuse_done()`);
  await insert({ txId: 'tx_g', webhookId: 'msg_tx_g_s0' });
  const errors: string[] = [];
  const r = receiver();
  // Leases of 1.5 s: renewed every 500 ms. Were the row forgotten, its lease would run out and it would be leased and
  // delivered again within the 3.2 s waited (shorter leases let a loaded machine's late renew lapse one: 300 ms
  // leases failed once beside other suites).
  await start('a:1', 2, r.fetch, {
    leaseMs: 1_500,
    onError: (error) => errors.push((error as Error).message),
  });
  await waitUntil(() => r.took.length === 1, 5_000, 'the row delivered');
  await new Promise((resolve) => setTimeout(resolve, 3_200));
  expect(r.calls).toEqual(['msg_tx_g_s0']);
  expect(errors).toContain('done refused for the test');
  expect(await table()).toEqual([{ webhook_id: 'msg_tx_g_s0', outcome: null, lease_host: 'a:1' }]);

  await pool.query(`DELETE FROM refuse_done`);
  await waitUntil(async () => (await table())[0]?.outcome === 'delivered', 5_000, 'marked done at a renew');
  expect(r.calls).toEqual(['msg_tx_g_s0']);
}, 30_000);

test('m11: a row queued long ago but leased after newer ones is given up at its retry window, unsent', async () => {
  // Row 1 queued just now, its delivery never answered (in flight throughout). Row 2, a later id behind it in the
  // same lane, was queued two hours ago (a commit that landed late): past the one-hour window, so the dispatcher's
  // sweep must give it up without sending it, though it was leased after a row still inside the window.
  await insert({ txId: 'tx_h', webhookId: 'msg_tx_h_s0' });
  await insert({ txId: 'tx_h', webhookId: 'msg_tx_h_s1', createdAgoMs: 2 * 3_600_000 });
  const calls: string[] = [];
  const hang = (async (_url: string, init: RequestInit) => {
    calls.push((init.headers as Record<string, string>)['webhook-id'] as string);
    return new Promise<Response>((_resolve, reject) =>
      init.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
    );
  }) as unknown as typeof globalThis.fetch;
  await start('a:1', 2, hang, { retryWindowMs: 3_600_000 });
  await waitUntil(async () => (await table())[1]?.outcome === 'expired', 5_000, 'the overdue row given up');
  expect((await table())[0]?.outcome).toBeNull();
  expect(calls).toEqual(['msg_tx_h_s0']);
}, 30_000);

test('m11: created_at is when the row was written, not when its transaction began', async () => {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_sleep(0.05)');
    const { rows } = await client.query<{ later: boolean }>(
      `INSERT INTO webhook_outbox (endpoint, tx_id, webhook_id, event_xid, event_id, event_name, payload)
       VALUES ($1, 'tx_j', 'msg_tx_j_s0', pg_current_xact_id(), 1, 'tx_status_changed', '{}')
       RETURNING created_at > now() AS later`,
      [ENDPOINT],
    );
    await client.query('COMMIT');
    expect(rows[0]?.later).toBe(true);
  } finally {
    client.release();
  }
});

test('m6: a wake scans above the rows this run holds, and the poll finds a row below them that came free', async () => {
  // Row 1 is another host's, its lease running out in 300 ms. Rows 2 and 3 this run leases and holds (their receiver
  // refusing): the wake's scan starts above row 3.
  await insert({ txId: 'tx_m', webhookId: 'msg_tx_m_s0', lease: { host: 'b:1', epoch: 1, forMs: 300 } });
  await insert({ txId: 'tx_k', webhookId: 'msg_tx_k_s0' });
  await insert({ txId: 'tx_l', webhookId: 'msg_tx_l_s0' });
  const r = receiver(() => 503);
  const outbox = await start('a:1', 2, r.fetch, { pollMs: 2_000 });
  const leasedBy = async () =>
    (await table()).filter((row) => row.lease_host === 'a:1').map((row) => row.webhook_id);
  expect(await leasedBy()).toEqual(['msg_tx_k_s0', 'msg_tx_l_s0']);
  await new Promise((resolve) => setTimeout(resolve, 400));
  // A local commit's wake: the new row (above those held) is leased; row 3, freed below them, waits for the poll.
  await insert({ txId: 'tx_n', webhookId: 'msg_tx_n_s0' });
  outbox.wake();
  await waitUntil(
    async () => (await leasedBy()).includes('msg_tx_n_s0'),
    1_000,
    'the new row leased by the wake',
  );
  expect(await leasedBy()).not.toContain('msg_tx_m_s0');
  await waitUntil(
    async () => (await leasedBy()).includes('msg_tx_m_s0'),
    5_000,
    'the freed row leased by the poll',
  );
}, 30_000);
