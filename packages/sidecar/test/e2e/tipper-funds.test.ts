import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { RENT_EXEMPT_MINIMUM, drainTipper, startBypassStack } from '../helpers/relay-stack';

/**
 * In-flight tips are reserved against the tipper's balance (DESIGN §8, issue #16 item 6): an attempt is built only
 * when the tipper holds the tips and fees of its attempts that may still land, plus this tip and fee, plus the
 * rent-exempt minimum. Otherwise the transaction waits, and /status, /readyz, its record and /metrics name the
 * tipper and the shortfall; once the tipper is funded it goes out. It is never failed, and never costs a retry,
 * because relay's own wallet is short.
 *
 * Before: relay checked each tip alone against the balance it last read (rent + min-tip + fee), so two tips that the
 * balance could pay only one of were both sent; the second bundle failed in the engine's simulation and, over
 * JSON-RPC, counted a retry against the user's transaction (with `max-retries` 0 it stopped and expired).
 */
const TIP = 50_000;
const FEE = 5_000;
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startBypassStack(TIP, { policy: { 'min-tip': 1_000, 'max-retries': 0 } });
  url = stack.sidecar.url;
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('a tip the balance cannot pay besides those in flight waits for funds, then lands; nothing fails', async () => {
  const tipper = stack.tipper.publicKey.toBase58();
  // Room for one tip and a little: not for two.
  const keep = RENT_EXEMPT_MINIMUM + TIP + FEE + 5_000;
  await drainTipper(stack, keep);
  await waitUntil(
    async () => (await get(url, '/status')).body.tipper.balance_lamports === keep,
    10_000,
    'relay to read the drained balance',
  );
  expect((await get(url, '/status')).body.paused_reason).toBeNull();

  const ids: string[] = [];
  for (const answer of await Promise.all([
    post(url, '/tx/enqueue', { transaction: stack.transfer(41) }),
    post(url, '/tx/enqueue', { transaction: stack.transfer(42) }),
  ])) {
    expect(answer.status).toBe(202);
    ids.push(answer.body.tx_id as string);
  }
  const records = async () => Promise.all(ids.map(async (id) => (await get(url, `/tx/${id}`)).body));

  // One goes out; the other waits, unsent, naming the tipper and what it lacks.
  const waiting = await waitUntil(
    async () =>
      (await records()).find(
        (r) => r.state === 'pending' && r.last_error?.code === 'RELAY_E_TIPPER_UNDERFUNDED',
      ),
    20_000,
    'one transaction to wait for the tipper',
  ).catch(async (error: unknown) => {
    console.log('records', JSON.stringify(await records(), null, 1));
    throw error;
  });
  expect(waiting.attempts).toEqual([]);
  expect(waiting.retries).toBe(0);
  expect(waiting.last_error.details.tipper).toBe(tipper);
  expect(waiting.last_error.details.shortfall_lamports).toBeGreaterThan(0);
  const status = (await get(url, '/status')).body;
  expect(status.paused_reason).toContain(tipper);
  expect(status.paused_reason).toMatch(/short by \d+/);
  const pooled = status.tippers.find((t: { pubkey: string }) => t.pubkey === tipper);
  expect(pooled.balance_lamports).toBeLessThanOrEqual(keep);
  expect((await get(url, '/readyz')).status).toBe(503);
  const metrics = (await get(url, '/metrics')).body as string;
  expect(metrics).toMatch(new RegExp(`relay_tipper_underfunded_total\\{tipper="${tipper}"\\} [1-9]`));

  // Funded: the waiting transaction goes out and both land, each with one attempt and no retry.
  stack.simnet.cluster.airdrop(tipper, 1_000_000_000);
  await waitUntil(
    async () => (await records()).every((r) => r.state === 'finalized'),
    30_000,
    'both finalized',
  ).catch(async (error: unknown) => {
    console.log('records', JSON.stringify(await records(), null, 1));
    console.log('status', JSON.stringify((await get(url, '/status')).body, null, 1));
    throw error;
  });
  for (const record of await records()) {
    expect(record.retries).toBe(0);
    expect(record.failure).toBeNull();
    expect(record.attempts).toHaveLength(1);
  }
  expect((await get(url, '/status')).body.paused_reason).toBeNull();
}, 60_000);
