import { get, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startMigrationStack, type MigrationStack } from '../helpers/migration-stack';
import { counterValue } from '../helpers/relay-stack';

/**
 * Through a TowerBFT -> Alpenglow migration (issue 31, DESIGN §12; the simnet's `migration` mode, SIMD-0371: after
 * the boundary slot blocks carry no user transactions until the transition block becomes Alpenglow's genesis), over
 * the wire, on a clock the test drives one slot at a time (each slot only once relay has read the last): relay
 * learns the boundary from the cluster (`getAlpenglowMigrationSlot`), holds every bundle from the boundary on (the
 * engine receives none while blocks are vote-only), counts no retry for it, expires nothing, and every transaction
 * enqueued around the boundary ends truthfully: finalized after the window, as the chain says.
 */
const BOUNDARY = 60;
let m: MigrationStack;
let stack: Stack<Sidecar>;
let url: string;
let received: MigrationStack['received'];
let enqueue: MigrationStack['enqueue'];
let stored: MigrationStack['stored'];

beforeAll(async () => {
  m = await startMigrationStack({ boundarySlot: BOUNDARY });
  ({ stack, url, received, enqueue, stored } = m);
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

test('no bundle goes out in the vote-only window, no retry is counted, nothing expires; all finalize after it', async () => {
  const { cluster } = stack.simnet;
  const relay = stack.sidecar.relay;
  await m.untilBoundaryKnown();

  // Before the boundary: two transactions, sent at once (bypass).
  await m.stepTo(BOUNDARY - 3);
  const before: string[] = [await enqueue(1), await enqueue(2)];
  // One more, sent in the slot before the boundary block: it lands in that block or, should its window slide past
  // it, in none of the vote-only blocks after; either way it ends finalized with no retry counted.
  await m.stepTo(BOUNDARY - 1);
  before.push(await enqueue(5));
  await m.untilSent(before[2] as string);
  // At the boundary relay holds: wait for it, then for every attempt either on the wire's far side or queued.
  await stepSlotsUntil(stack, async () => relay.consensus().holdSends, 30_000, 'relay to hold sending');
  expect(cluster.slot).toBe(BOUNDARY);
  await waitUntil(
    async () => {
      let journaled = 0;
      for (const id of before) {
        const last = (await stored(id)).attempts.at(-1);
        if (last?.stage === 'journaled') journaled++;
      }
      return journaled === relay.sendsWaiting;
    },
    15_000,
    'no send on the wire',
  );

  // In the window: two more, held.
  await stepSlotsUntil(stack, async () => relay.consensus().migrating, 30_000, 'the window to open');
  expect(cluster.consensusPhase).toBe('vote-only');
  const during = [await enqueue(3), await enqueue(4)];
  await waitUntil(
    async () => (await Promise.all(during.map(stored))).every((tx) => tx.attempts.length > 0),
    15_000,
    'attempts for them',
  );
  expect((await get(url, '/readyz')).body.error?.details?.reasons ?? []).toContainEqual(
    expect.stringMatching(/^consensus: migration at slot 60/),
  );

  // The window closes (the transition block becomes Alpenglow's genesis); everything finalizes after it.
  await stepSlotsUntil(stack, async () => !relay.consensus().holdSends, 30_000, 'the window to close');
  expect(cluster.consensusPhase).toBe('alpenglow');
  const all = [...before, ...during];
  await stepSlotsUntil(
    stack,
    async () => {
      for (const id of all) if ((await get(url, `/tx/${id}`)).body.state !== 'finalized') return false;
      return true;
    },
    60_000,
    'all five finalized',
  );

  // The engine received no bundle while blocks were vote-only, and some it received were held for the window.
  expect(received.length).toBeGreaterThan(0);
  expect(received.filter((r) => r.phase === 'vote-only')).toEqual([]);
  expect(await counterValue(url, 'relay_sends_held_for_migration_total')).toBeGreaterThanOrEqual(2);
  expect(relay.consensus()).toMatchObject({ kind: 'alpenglow', migrating: false, holdSends: false });
  const genesis = cluster.migrationState.genesisSlot as number;
  for (const id of all) {
    const record = (await get(url, `/tx/${id}`)).body;
    // No retry counted for the window, never expired, and the chain agrees: finalized, after the window.
    expect(record.retries).toBe(0);
    expect(record.history.map((h: { state: string }) => h.state)).not.toContain('expired');
    const status = cluster.signatureStatus(record.tx_signatures[0]);
    expect(status?.confirmationStatus).toBe('finalized');
    expect((status?.slot ?? 0) < BOUNDARY + 1 || (status?.slot ?? 0) > genesis).toBe(true);
  }
  for (const id of during) {
    const status = cluster.signatureStatus((await get(url, `/tx/${id}`)).body.tx_signatures[0]);
    expect(status?.slot).toBeGreaterThan(genesis);
  }
}, 120_000);
