import type { TipperStatus, TxRecord } from '@solrelay/core';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { RENT_EXEMPT_MINIMUM, drainTipper, startBypassStack } from '../helpers/relay-stack';

/**
 * A pool of tippers (issue #16 item 10): `KEYPAIR_PATH` lists several keypair files. Every bundle write-locks its
 * tipper account, so with one tipper unrelated bundles share one auction group; with a pool each attempt takes the
 * tipper used longest ago that can pay it, so bundles in flight together lock different accounts. Each attempt
 * records its tipper (so the tip is accounted against the account that pays it), /status, /metrics and
 * `relay status` show every tipper's balance, and a drained tipper is passed over while the others carry on.
 * (Before: `KEYPAIR_PATH` named one file; a list failed start-up as an unreadable path.)
 */
const TIP = 50_000;
const FEE = 5_000;
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startBypassStack(TIP, { tippers: 3, policy: { 'max-retries': 0 } });
  url = stack.sidecar.url;
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

const pubkeys = () => stack.tippers.map((k) => k.publicKey.toBase58());
const balances = () => pubkeys().map((k) => stack.simnet.cluster.getBalance(k));

async function enqueueAll(n: number, base: number): Promise<string[]> {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) => post(url, '/tx/enqueue', { transaction: stack.transfer(base + i) })),
  );
  for (const answer of answers) expect(answer.status).toBe(202);
  return answers.map((a) => a.body.tx_id as string);
}

async function finalized(ids: string[]): Promise<TxRecord[]> {
  const read = (): Promise<TxRecord[]> =>
    Promise.all(ids.map(async (id) => (await get(url, `/tx/${id}`)).body as TxRecord));
  await waitUntil(
    async () => (await read()).every((r) => r.state === 'finalized'),
    30_000,
    'finalized',
  ).catch(async (error: unknown) => {
    console.log('records', JSON.stringify(await read(), null, 1));
    throw error;
  });
  return read();
}

test('/status and /metrics show every tipper of the pool', async () => {
  await waitUntil(
    async () =>
      (await get(url, '/status')).body.tippers?.every((t: TipperStatus) => t.balance_lamports !== null),
    10_000,
    'every balance read',
  );
  const status = (await get(url, '/status')).body;
  expect(status.tippers.map((t: { pubkey: string }) => t.pubkey)).toEqual(pubkeys());
  // The first of the pool is still `tipper` (for callers that read one).
  expect(status.tipper.pubkey).toBe(pubkeys()[0]);
  for (const t of status.tippers) {
    expect(t.balance_lamports).toBeGreaterThan(1_000_000_000);
    expect(t.reserved_lamports).toBe(0);
  }
  // The OpenAPI document describes this shape.
  const schemas = (await get(url, '/openapi.json')).body.components.schemas;
  for (const key of schemas.Status.required) expect(status).toHaveProperty(key);
  for (const t of status.tippers) for (const key of schemas.Tipper.required) expect(t).toHaveProperty(key);
  const metrics = (await get(url, '/metrics')).body as string;
  for (const key of pubkeys())
    expect(metrics).toMatch(new RegExp(`relay_tipper_balance_lamports\\{tipper="${key}"\\} \\d+`));
});

test('bundles in flight together use different tippers; each tip is paid by the tipper its attempt names', async () => {
  const before = balances();
  const records = await finalized(await enqueueAll(3, 51));
  const used = records.map((r) => r.attempts[0]?.tipper as string);
  expect(new Set(used).size).toBe(3);
  expect(new Set(used)).toEqual(new Set(pubkeys()));
  for (const r of records) {
    expect(r.attempts).toHaveLength(1);
    expect(r.retries).toBe(0);
  }
  // On chain: each tipper paid exactly one tip and one fee.
  await waitUntil(
    () => balances().every((b, i) => b === (before[i] as number) - TIP - FEE),
    10_000,
    'each tipper to have paid one tip',
  );
}, 45_000);

test('a drained tipper is passed over while the others carry on, without pausing', async () => {
  const [drained] = pubkeys() as [string];
  await drainTipper(stack, RENT_EXEMPT_MINIMUM + 1_000, stack.tippers[0]);
  await waitUntil(
    async () =>
      (await get(url, '/status')).body.tippers.find((t: TipperStatus) => t.pubkey === drained)
        .balance_lamports ===
      RENT_EXEMPT_MINIMUM + 1_000,
    10_000,
    'relay to read the drained balance',
  );
  const records = await finalized(await enqueueAll(4, 61));
  for (const r of records) {
    expect(r.attempts).toHaveLength(1);
    expect(r.attempts[0]?.tipper).not.toBe(drained);
  }
  expect(stack.simnet.cluster.getBalance(drained)).toBe(RENT_EXEMPT_MINIMUM + 1_000);
  const status = (await get(url, '/status')).body;
  expect(status.paused_reason).toBeNull();
  expect((await get(url, '/readyz')).status).toBe(200);
}, 45_000);
