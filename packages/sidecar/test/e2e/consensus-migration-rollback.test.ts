import { get, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startMigrationStack, type MigrationStack } from '../helpers/migration-stack';

/**
 * SIMD-0371's earlier draft: the boundary block (the one block of the migration that may hold user transactions) is
 * on a fork the migration certificate does not descend from, and is deleted with the blocks after the transition
 * (the simnet's `boundaryForkAbandoned`), silently, as a block on an abandoned fork. A transaction relay saw land in
 * it is re-checked, found gone, sent again after the window and finalized with no retry counted; the chain agrees.
 * The clock is stepped by the test, one slot once relay has read the last (issue 31, DESIGN §12). What re-checks it is
 * the tracker's proof for a landing gone without notice (the root passed its slot, the statuses and the history show
 * none of it), which Alpenglow's finality right after the window satisfies within a slot or two.
 */
const BOUNDARY = 60;
let m: MigrationStack;
let stack: Stack<Sidecar>;
let url: string;
let received: MigrationStack['received'];
let enqueue: MigrationStack['enqueue'];
let stored: MigrationStack['stored'];

beforeAll(async () => {
  m = await startMigrationStack({
    boundarySlot: BOUNDARY,
    boundaryForkAbandoned: true,
  });
  ({ stack, url, received, enqueue, stored } = m);
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

test('a landing in the abandoned boundary block is re-checked, sent again after the window, and finalized', async () => {
  const { cluster } = stack.simnet;
  const relay = stack.sidecar.relay;
  await m.untilBoundaryKnown();
  await m.stepTo(BOUNDARY - 1);
  const txId = await enqueue(1);
  await m.untilSent(txId);
  const signature: string = (await get(url, `/tx/${txId}`)).body.tx_signatures[0];
  // The boundary block takes it; relay sees it land there.
  await stepSlotsUntil(stack, async () => relay.consensus().holdSends, 30_000, 'the boundary block');
  expect(cluster.signatureStatus(signature)?.slot).toBe(BOUNDARY);
  await waitUntil(async () => (await stored(txId)).landed_slot === BOUNDARY, 15_000, 'relay to see it land');

  // The migration deletes the boundary block: the landing is gone from the chain.
  await stepSlotsUntil(stack, async () => cluster.consensusPhase === 'alpenglow', 30_000, 'Alpenglow');
  expect(cluster.signatureStatus(signature)).toBeNull();
  await stepSlotsUntil(
    stack,
    async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
    60_000,
    'it to finalize after the window',
  );
  const record = (await get(url, `/tx/${txId}`)).body;
  const status = cluster.signatureStatus(signature);
  expect(status?.confirmationStatus).toBe('finalized');
  expect(status?.slot).toBeGreaterThan(cluster.migrationState.genesisSlot as number);
  expect(record.retries).toBe(0);
  expect(record.history.map((h: { state: string }) => h.state)).toContain('pending');
  expect(received.filter((r) => r.phase === 'vote-only')).toEqual([]);
}, 120_000);
