import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import { Webhook } from 'standardwebhooks';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * Webhooks over the wire (#18): two receivers, one answering 503 for its first seconds, one killed mid-run and
 * started again on the same port (down across a sidecar restart too), each receive every state of every
 * transaction, in order per transaction, every request's signature verified with the `standardwebhooks` package.
 */

const SECRET = `whsec_${Buffer.from('relay webhook test secret, 32 b').toString('base64')}`;
const verifier = new Webhook(SECRET);

interface Delivery {
  id: string;
  type: string;
  data: { tx_id: string; state?: string; bundle_id?: string; stage?: string };
}

/** A webhook receiver: verifies each request, answers with `answer()`, keeps what it accepted. */
class Receiver {
  readonly accepted: Delivery[] = [];
  /** webhook-ids of requests answered with an error. */
  readonly refusedIds: string[] = [];
  readonly badSignatures: string[] = [];
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly answer: () => number) {}

  async start(port = 0): Promise<void> {
    const server = createServer(
      (req, res) => void this.handle(req).then((status) => res.writeHead(status).end()),
    );
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  private async handle(req: IncomingMessage): Promise<number> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = req.headers as Record<string, string>;
    try {
      verifier.verify(body, headers);
    } catch (error) {
      this.badSignatures.push(`${headers['webhook-id']}: ${(error as Error).message}`);
      return 400;
    }
    const status = this.answer();
    if (status >= 300) {
      this.refusedIds.push(headers['webhook-id'] as string);
      return status;
    }
    const payload = JSON.parse(body) as { type: string; timestamp: string; data: Delivery['data'] };
    expect(new Date(payload.timestamp).toISOString()).toBe(payload.timestamp);
    this.accepted.push({ id: headers['webhook-id'] as string, type: payload.type, data: payload.data });
    return 204;
  }

  /** Killed: the listener and every open connection go at once. */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** Statuses per transaction in arrival order, each webhook-id counted once (at-least-once may repeat one). */
  statesByTx(): Map<string, string[]> {
    const seen = new Set<string>();
    const states = new Map<string, string[]>();
    for (const d of this.accepted) {
      if (d.type !== 'tx_status_changed' || seen.has(d.id)) continue;
      seen.add(d.id);
      states.set(d.data.tx_id, [...(states.get(d.data.tx_id) ?? []), d.data.state as string]);
    }
    return states;
  }

  settledBundles(): Set<string> {
    return new Set(
      this.accepted
        .filter((d) => d.type === 'bundle_settled')
        .map((d) => `${d.data.bundle_id}:${d.data.stage}`),
    );
  }
}

let stack: Stack<Sidecar>;
let refusing = true;
const flaky = new Receiver(() => (refusing ? 503 : 204));
const killed = new Receiver(() => 204);

beforeAll(async () => {
  await flaky.start();
  await killed.start();
  stack = await startRelayStack({
    env: {
      BYPASS_AGENT: '1',
      RELAY_WEBHOOK_URL: `${flaky.url},${killed.url}`,
      RELAY_WEBHOOK_SECRET: SECRET,
    },
    sidecar: { webhooks: { retryBaseMs: 100, retryCapMs: 800, tickMs: 50 } },
  });
}, 30_000);

afterAll(async () => {
  await stack?.close();
  await flaky.kill();
  await killed.kill();
});

async function finalizedRecord(txId: string) {
  await waitUntil(
    async () => (await get(stack.sidecar.url, `/tx/${txId}`)).body.state === 'finalized',
    30_000,
    `${txId} finalized`,
  );
  return (await get(stack.sidecar.url, `/tx/${txId}`)).body;
}

test('every state of every transaction reaches both receivers, signed, in order, through 503s, a killed receiver and a sidecar restart', async () => {
  const url = () => stack.sidecar.url;
  const txIds: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await post(url(), '/tx/enqueue', { transaction: stack.transfer(100 + i) });
    expect(res.status).toBe(202);
    txIds.push(res.body.tx_id);
  }
  // The 503 receiver has refused something, and the other has taken something: then it is killed mid-run.
  await waitUntil(
    async () => flaky.refusedIds.length > 0 && killed.accepted.length > 0,
    15_000,
    'first tries',
  );
  await killed.kill();
  for (let i = 0; i < 2; i++) {
    const res = await post(url(), '/tx/enqueue', { transaction: stack.transfer(200 + i) });
    txIds.push(res.body.tx_id);
  }
  refusing = false;
  const records = [];
  for (const id of txIds) records.push(await finalizedRecord(id));

  // Every one was timed to each commitment once; the tipper and the hour's spend are exported beside.
  const metricsBefore = (await get(url(), '/metrics')).body as string;
  for (const commitment of ['processed', 'confirmed', 'finalized']) {
    expect(metricsBefore).toContain(`relay_time_to_commitment_seconds_count{commitment="${commitment}"} 5\n`);
  }
  expect(metricsBefore).toMatch(/relay_tipper_balance_lamports\{tipper="\w+"\} [1-9]/);
  expect(metricsBefore).toMatch(/relay_spend_window_lamports [1-9]/);
  expect(metricsBefore).toMatch(/relay_spend_limit_lamports [1-9]/);

  // Deliveries are owed to the killed receiver; the sidecar restarts with them owed.
  const owed = (await get(url(), '/status')).body.webhooks.find((w: { url: string }) => w.url === killed.url);
  expect(owed.pending).toBeGreaterThan(0);
  expect(owed.consecutive_failures).toBeGreaterThan(0);
  await stack.restart();
  await killed.start(killed.port);

  const expected = new Map(
    records.map((r: { tx_id: string; history: Array<{ state: string }> }) => [
      r.tx_id,
      r.history.map((h) => h.state),
    ]),
  );
  const finalizedBundles = new Set(
    records.map(
      (r: { attempts: Array<{ bundle_id: string; stage: string }> }) =>
        `${r.attempts.find((a) => a.stage === 'finalized')?.bundle_id}:finalized`,
    ),
  );
  for (const receiver of [flaky, killed]) {
    // A transaction's bundle_settled comes right after its finalized status, in the same order on every endpoint.
    await waitUntil(
      () =>
        txIds.every((id) => receiver.statesByTx().get(id)?.at(-1) === 'finalized') &&
        [...finalizedBundles].every((bundle) => receiver.settledBundles().has(bundle)),
      30_000,
      `every transaction finalized at ${receiver.url}`,
    ).catch((error: unknown) => {
      console.log('received', JSON.stringify(Object.fromEntries(receiver.statesByTx())));
      throw error;
    });
    expect(receiver.badSignatures).toEqual([]);
    expect(receiver.statesByTx()).toEqual(expected);
    for (const bundle of finalizedBundles) expect(receiver.settledBundles()).toContain(bundle);
  }
  // A retried delivery keeps its webhook-id, so a receiver can dedupe.
  const acceptedIds = new Set(flaky.accepted.map((d) => d.id));
  expect(flaky.refusedIds.length).toBeGreaterThan(0);
  for (const id of flaky.refusedIds) expect(acceptedIds).toContain(id);

  await waitUntil(
    async () =>
      (await get(url(), '/status')).body.webhooks.every((w: { pending: number }) => w.pending === 0),
    10_000,
    'nothing owed',
  );
  const status = (await get(url(), '/status')).body.webhooks;
  expect(status.map((w: { url: string }) => w.url)).toEqual([flaky.url, killed.url]);
  const metrics = (await get(url(), '/metrics')).body as string;
  expect(metrics).toMatch(/relay_webhook_deliveries_total\{endpoint="[^"]+",result="delivered"\} [1-9]/);
  expect(metrics).toMatch(/relay_webhook_delivery_lag_seconds_count [1-9]/);
}, 120_000);
