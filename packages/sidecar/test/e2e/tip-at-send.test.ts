import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { counterValue, startRelayStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * A tip that aged while its bundle queued for the engine's budget is signed again on a fresh blockhash as the bundle
 * first goes out (#17). One region at its real budget (1 bundle a second) and 150 ms slots: a burst of eight waits
 * up to seven seconds, about 47 slots, for its turn, so the later tips' blockhashes are well past the 20-block
 * refresh age. Every transaction lands with one tip, and a refreshed attempt's original bytes never reached the
 * engine. Packing is off (`BUNDLE_PACK_MAX=1`): the eight share a fee payer and would otherwise ride together (a pack
 * changes the bundle id too), and what is measured here is each bundle waiting its own turn.
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    simnet: { slotMs: 150, rateLimit: true, regions: 1 },
    env: {
      BYPASS_AGENT: '1',
      BYPASS_TIP_LAMPORTS: '20000',
      BUNDLE_ENGINE_RPS: '1',
      BUNDLE_PACK_MAX: '1',
    },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/readyz')).status === 200, 15_000, 'ready');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('tips aged in the queue are signed again before the first send; each transaction pays one tip', async () => {
  const connection = stack.connection();
  const tipper = stack.tipper.publicKey;
  const before = await connection.getBalance(tipper, 'confirmed');
  const submitted = new Map<string, string>(); // tx_id -> bundle id the submit answered
  const ids: string[] = [];
  for (let i = 0; i < 8; i++) {
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(300 + i) });
    expect(enqueued.status).toBe(202);
    ids.push(enqueued.body.tx_id);
  }
  // The bundle id each attempt was journaled with (bypass builds it at enqueue; the later ones then queue for seconds).
  for (const id of ids) {
    await waitUntil(
      async () => {
        const record = (await get(url, `/tx/${id}`)).body;
        if (record.attempts.length > 0) submitted.set(id, record.attempts[0].bundle_id);
        return submitted.has(id);
      },
      5_000,
      `an attempt of ${id}`,
    );
  }
  await waitAllFinalized(url, ids, 60_000);

  expect(await counterValue(url, 'relay_tips_refreshed_total')).toBeGreaterThan(0);
  const { engine, cluster } = stack.simnet;
  let tipsAndFees = 0;
  let refreshed = 0;
  for (const id of ids) {
    const record = (await get(url, `/tx/${id}`)).body;
    const attempts = record.attempts as Array<{ bundle_id: string; tip_lamports: number; stage: string }>;
    for (const attempt of attempts)
      if (attempt.stage === 'finalized') tipsAndFees += attempt.tip_lamports + 5_000;
    expect(attempts.filter((a) => a.stage === 'finalized')).toHaveLength(1);
    const first = attempts[0] as { bundle_id: string };
    if (first.bundle_id === submitted.get(id)) continue;
    refreshed++;
    // Signed again before its first send: the engine never saw the bytes it was journaled with, and the tip it got
    // is on a newer blockhash than the original would have been (issued after the transaction was enqueued).
    expect(engine.getBundle(submitted.get(id) as string)).toBeUndefined();
    const bundle = engine.getBundle(first.bundle_id);
    const tipBlockhash = bundle?.blockhashes[bundle.blockhashes.length - 1] as string;
    expect(cluster.blockhashInfo(tipBlockhash)?.slot ?? 0).toBeGreaterThan(record.enqueued_slot + 10);
  }
  expect(refreshed).toBeGreaterThan(0);
  // The tipper paid exactly the landed tips and their fees: no refreshed tip's predecessor landed too.
  await waitUntil(
    async () => before - (await connection.getBalance(tipper, 'confirmed')) === tipsAndFees,
    10_000,
    `the tipper's balance to drop by ${tipsAndFees}`,
  );
}, 90_000);
