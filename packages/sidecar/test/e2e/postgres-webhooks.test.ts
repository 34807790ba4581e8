import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { post, waitUntil, type Stack } from '@solrelay/testkit';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import type { Sidecar } from '../../src/service';
import { useMigratedPostgres } from '../helpers/migrated-postgres';
import { startBypassStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * Webhooks on PostgreSQL (#28): each change inserts its `webhook_outbox` rows with its events, and deliveries are
 * leased from the table. A delivery owed while the receiver was down is delivered after the sidecar restarts on an
 * EMPTY data directory (no local outbox), with the same webhook-id it was first tried with, each signed.
 */
const postgres = useMigratedPostgres();
const SECRET = `whsec_${Buffer.from('relay webhook test secret, 32 b').toString('base64')}`;
const verifier = new Webhook(SECRET);
const TIP = 50_000;

/** Answers `status` to every delivery; keeps the webhook-id of each, and the verified body of those it took. */
const receiver = {
  status: 503,
  tried: [] as string[],
  accepted: [] as Array<{ id: string; type: string; data: { tx_id: string; state?: string } }>,
  badSignatures: 0,
};

let server: Server;
let stack: Stack<Sidecar>;
let db: pg.Pool;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = req.headers as Record<string, string>;
      receiver.tried.push(headers['webhook-id'] as string);
      try {
        verifier.verify(body, headers);
      } catch {
        receiver.badSignatures++;
      }
      if (receiver.status === 200)
        receiver.accepted.push({ id: headers['webhook-id'] as string, ...JSON.parse(body) });
      res.writeHead(receiver.status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = await postgres.fresh();
  db = new pg.Pool({ connectionString: url, max: 2 });
  stack = await startBypassStack(TIP, {
    env: {
      RELAY_DATABASE_URL: url,
      RELAY_WEBHOOK_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
      RELAY_WEBHOOK_SECRET: SECRET,
    },
    sidecar: { webhooks: { retryBaseMs: 100, retryCapMs: 800, tickMs: 50 } },
  });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await db?.end();
  await new Promise((resolve) => server?.close(resolve));
});

test('a delivery owed while the receiver was down is delivered after a restart on an empty data dir, same webhook-id', async () => {
  const enqueued = await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer() });
  const txId: string = enqueued.body.tx_id;
  await waitAllFinalized(stack.sidecar.url, [txId], 60_000);

  // Owed in the table, one row per event, written by the changes themselves; tried and refused (503) meanwhile.
  const owed = async () =>
    (
      await db.query<{ webhook_id: string; event_name: string; attempts: number; done: boolean }>(
        `SELECT webhook_id, event_name, attempts, done_at IS NOT NULL AS done FROM webhook_outbox
         WHERE tx_id = $1 ORDER BY id`,
        [txId],
      )
    ).rows;
  const rows = await owed();
  const statuses = (
    await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM events WHERE tx_id = $1 AND name = 'tx_status_changed'`,
      [txId],
    )
  ).rows[0]!.n;
  expect(rows.filter((r) => r.event_name === 'tx_status_changed').map((r) => r.webhook_id)).toEqual(
    Array.from({ length: statuses }, (_, i) => `msg_${txId}_s${i}`),
  );
  expect(rows.some((r) => r.event_name === 'bundle_settled')).toBe(true);
  expect(rows.every((r) => !r.done)).toBe(true);
  await waitUntil(() => receiver.tried.includes(`msg_${txId}_s0`), 10_000, 'a delivery tried and refused');
  const refused = [...new Set(receiver.tried)];

  // Restarted on a new, empty data dir, with the receiver back: everything owed arrives, with the same ids.
  receiver.status = 200;
  const dir = mkdtempSync(join(tmpdir(), 'relay-webhooks-'));
  await stack.restart({ RELAY_DATA_DIR: join(dir, 'data'), LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl') });
  await waitUntil(async () => (await owed()).every((r) => r.done), 30_000, 'every row delivered');

  const ids = rows.map((r) => r.webhook_id);
  const accepted = receiver.accepted.filter((d) => d.data.tx_id === txId);
  expect([...new Set(accepted.map((d) => d.id))].sort()).toEqual([...ids].sort());
  for (const id of refused) expect(ids).toContain(id);
  // In order per transaction: the statuses arrive as the history has them.
  const states = accepted.filter((d) => d.type === 'tx_status_changed').map((d) => d.id);
  expect([...new Set(states)]).toEqual(ids.filter((id) => id.startsWith(`msg_${txId}_s`)));
  expect(receiver.badSignatures).toBe(0);
  const outcomes = await db.query(`SELECT DISTINCT outcome FROM webhook_outbox WHERE tx_id = $1`, [txId]);
  expect(outcomes.rows).toEqual([{ outcome: 'delivered' }]);
}, 180_000);
