import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { LifecycleEntrySchema, lifecycleEntryProblems } from '@solrelay/core';
import { SseReader } from '@solrelay/testkit';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { ComputeBudgetInstruction, ComputeBudgetProgram, Transaction } from '@solana/web3.js';
import { startRelayStack, statesUntilFinalized } from '../helpers/relay-stack';

let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({ env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' } });
  await waitUntil(async () => (await get(stack.sidecar.url, '/status')).body.slot > 0, 10_000, 'first slot');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('bypass: enqueue to finalized, every state in order, a complete lifecycle entry', async () => {
  const events = await SseReader.open(`${stack.sidecar.url}/internal/events`);
  const tx = stack.transfer();
  const enqueued = await post(stack.sidecar.url, '/tx/enqueue', { transaction: tx });
  expect(enqueued.status).toBe(202);
  const txId: string = enqueued.body.tx_id;
  expect(txId).toMatch(/^tx_[0-9A-HJKMNP-TV-Z]{26}$/);
  expect(enqueued.body.state).toBe('pending');

  const perTx = await SseReader.open(`${stack.sidecar.url}/tx/events/${txId}`);
  await perTx.waitFor((r) => r.ended, 30_000);
  const perTxStates = perTx.events('tx_status_changed').map((m) => JSON.parse(m.data).state);
  expect(perTxStates[perTxStates.length - 1]).toBe('finalized');

  const states = await statesUntilFinalized(events, txId);
  expect(states).toEqual(['pending', 'submitted', 'landed', 'processed', 'confirmed', 'finalized']);
  expect(events.events('tx_enqueued').map((m) => JSON.parse(m.data).tx_id)).toContain(txId);
  const submit = events
    .events('submit_requested')
    .map((m) => JSON.parse(m.data))
    .find((d) => d.tx_id === txId);
  expect(submit).toMatchObject({ tip_lamports: 50_000, tx_id: txId });
  const settled = events
    .events('bundle_settled')
    .map((m) => JSON.parse(m.data))
    .find((d) => d.tx_id === txId);
  expect(settled).toMatchObject({ stage: 'finalized', failure_type: null, bundle_id: submit.bundle_id });
  const ids = events.messages.map((m) => Number(m.id!.split('-')[1]));
  expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  events.close();

  const record = await get(stack.sidecar.url, `/tx/${txId}`);
  expect(record.body.state).toBe('finalized');
  expect(record.body.attempts).toHaveLength(1);
  expect(record.body.history.map((h: { state: string }) => h.state)).toEqual(states);

  const bundle = await get(stack.sidecar.url, `/bundle/${submit.bundle_id}`);
  expect(bundle.status).toBe(200);
  const entry = bundle.body;
  expect(LifecycleEntrySchema.safeParse(entry).success).toBe(true);
  expect(lifecycleEntryProblems(entry)).toEqual([]);
  expect(entry.stage).toBe('finalized');
  expect(entry.decision_mode).toBe('reflex');
  expect(entry.bypass).toBe(true);
  expect(createHash('sha256').update(entry.transactions.join(',')).digest('hex')).toBe(entry.bundle_id);
  expect(Object.keys(entry.timeline)).toEqual([
    'submitted',
    'landed',
    'processed',
    'confirmed',
    'finalized',
    'failed',
  ]);
  for (const stage of ['submitted', 'landed', 'processed', 'confirmed', 'finalized'])
    expect(entry.timeline[stage]).not.toBeNull();
  expect(entry.submitted_to_processed_ms).toBeGreaterThanOrEqual(0);
  expect(entry.confirmed_to_finalized_ms).toBeGreaterThan(0);

  // The on-chain truth agrees: the user signature is finalized.
  const status = await stack.connection().getSignatureStatuses([record.body.tx_signatures[0]]);
  expect(status.value[0]?.confirmationStatus).toBe('finalized');

  // The audit log on disk has one whole line per stage change of this bundle.
  const lines = (await readFile(stack.env.LIFECYCLE_PATH!, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const stages = lines.filter((l) => l.bundle_id === submit.bundle_id).map((l) => l.stage);
  expect(stages[stages.length - 1]).toBe('finalized');
  expect(stages[0]).toBe('submitted');
}, 60_000);

test('a repeat enqueue of the same transaction returns the same tx_id with 200', async () => {
  const tx = stack.transfer(7);
  const first = await post(stack.sidecar.url, '/tx/enqueue', { transaction: tx });
  const second = await post(stack.sidecar.url, '/tx/enqueue', { transactions: [tx] });
  expect(first.status).toBe(202);
  expect(second.status).toBe(200);
  expect(second.body.tx_id).toBe(first.body.tx_id);
});

test('the bundle the engine received asks at most 1,400 compute units for its tip transaction', async () => {
  // Jito ranks bundles by tip per requested CU: read the tip transaction as the engine got it, with web3.js.
  const enqueued = await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer(3) });
  expect(enqueued.status).toBe(202);
  const txId: string = enqueued.body.tx_id;
  await waitUntil(
    async () => (await get(stack.sidecar.url, `/tx/${txId}`)).body.attempts.length > 0,
    15_000,
    'an attempt',
  );
  const bundleId: string = (await get(stack.sidecar.url, `/tx/${txId}`)).body.attempts[0].bundle_id;
  await waitUntil(
    () => stack.simnet.engine.getBundle(bundleId) !== undefined,
    15_000,
    'the engine to hold it',
  );
  const bundle = stack.simnet.engine.getBundle(bundleId);
  const tip = bundle?.transactions.find((t) => t.signers[0] === stack.tipper.publicKey.toBase58());
  expect(tip).toBeDefined();
  const parsed = Transaction.from(tip?.wire as Uint8Array);
  const limit = parsed.instructions.find((i) => i.programId.equals(ComputeBudgetProgram.programId));
  expect(limit && ComputeBudgetInstruction.decodeInstructionType(limit)).toBe('SetComputeUnitLimit');
  expect(ComputeBudgetInstruction.decodeSetComputeUnitLimit(limit!).units).toBeLessThanOrEqual(1_400);
});
