import pg from 'pg';
import { PgTxStore } from '../../src/store/pg-store';
import { useMigratedPostgres } from '../helpers/migrated-postgres';

// Retention of what the events leave behind on PostgreSQL: done webhook deliveries and old lifecycle entries go in
// batches from maintenance; owed deliveries and recent entries stay.
const postgres = useMigratedPostgres();

let store: PgTxStore;
let db: pg.Pool;

beforeAll(async () => {
  const url = await postgres.fresh();
  store = await PgTxStore.open(url, {
    maintenanceMs: 0,
    doneWebhookRetentionMs: 60_000,
    lifecycleRetentionDays: 2,
  });
  db = new pg.Pool({ connectionString: url, max: 2 });
});

afterAll(async () => {
  await store?.close();
  await db?.end();
});

async function outboxRow(webhookId: string, doneAgo: string | null, outcome: string | null): Promise<void> {
  await db.query(
    `INSERT INTO webhook_outbox (endpoint, tx_id, webhook_id, event_xid, event_id, event_name, payload, done_at, outcome)
     VALUES ('http://127.0.0.1:1/hooks', 'tx_1', $1, pg_current_xact_id(), nextval('webhook_outbox_id_seq'),
             'tx_status_changed', '{}', now() - $2::interval, $3)`,
    [webhookId, doneAgo, outcome],
  );
}

async function lifecycleRow(bundleId: string, ago: string): Promise<void> {
  await db.query(
    `INSERT INTO lifecycle_entries (bundle_id, tx_id, attempt, stage, entry, written_at)
     VALUES ($1, 'tx_1', 1, 'submitted', json_build_object('bundle_id', $1::text), now() - $2::interval)`,
    [bundleId, ago],
  );
}

test('done deliveries past their hour and entries past their days are deleted in batches; the rest stays', async () => {
  for (let i = 0; i < 5; i++) await outboxRow(`old_${i}`, '2 minutes', i % 2 ? 'delivered' : 'expired');
  await outboxRow('recent', '1 second', 'delivered');
  await outboxRow('owed', null, null);
  for (let i = 0; i < 3; i++) await lifecycleRow(`old_${i}`, '3 days');
  await lifecycleRow('recent', '1 day');

  expect(await store.pruneDelivered(2)).toEqual({ webhooks: 5, lifecycle: 3 });
  const outbox = await db.query(`SELECT webhook_id FROM webhook_outbox ORDER BY id`);
  expect(outbox.rows.map((r) => r.webhook_id)).toEqual(['recent', 'owed']);
  const entries = await db.query(`SELECT bundle_id FROM lifecycle_entries ORDER BY seq`);
  expect(entries.rows.map((r) => r.bundle_id)).toEqual(['recent']);
  // Maintenance runs it (nothing left to delete now).
  await store.maintain();
  expect((await db.query(`SELECT count(*)::int AS n FROM webhook_outbox`)).rows[0].n).toBe(2);
});

test("the lifecycle API's recent bundles: each one's latest entry, ordered by its first row, the oldest of the n first", async () => {
  await db.query('DELETE FROM lifecycle_entries');
  const row = (bundle: string, stage: string) =>
    db.query(
      `INSERT INTO lifecycle_entries (bundle_id, tx_id, attempt, stage, entry)
       VALUES ($1, 'tx_1', 1, $2, json_build_object('bundle_id', $1::text, 'stage', $2::text))`,
      [bundle, stage],
    );
  // Interleaved: b1 submitted first, b3 last; b1 and b2 move on after b3 was submitted.
  await row('b1', 'submitted');
  await row('b2', 'submitted');
  await row('b3', 'submitted');
  await row('b1', 'landed');
  await row('b2', 'landed');
  await row('b1', 'finalized');
  expect(await store.lifecycleEntries.recent(2)).toEqual([
    { bundle_id: 'b2', stage: 'landed' },
    { bundle_id: 'b3', stage: 'submitted' },
  ]);
  expect(await store.lifecycleEntries.recent(10)).toEqual([
    { bundle_id: 'b1', stage: 'finalized' },
    { bundle_id: 'b2', stage: 'landed' },
    { bundle_id: 'b3', stage: 'submitted' },
  ]);
  expect(await store.lifecycleEntries.recent(0)).toEqual([]);
});
