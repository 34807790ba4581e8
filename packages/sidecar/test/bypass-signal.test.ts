import type { AttemptBuilder } from '../src/attempts/builder';
import { BypassDecider } from '../src/deciders/bypass';
import { SettleSignals } from '../src/settle/signals';
import { KeyedLock } from '../src/util/keyed-lock';
import type { StoredTx } from '../src/store/records';

/**
 * Settlement never calls a decider: it emits `back-to-pending`, and bypass (subscribed at wiring time) submits at
 * its fixed tip, at once (on the signal, after reading the record), only when bypass is on and the transaction still
 * waits.
 */

/** Lets the decider's read of the record and its submit run. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

function rig(enabled: boolean, tx: Partial<StoredTx> | null, slot = 10) {
  const records = new Map<string, StoredTx>();
  if (tx)
    records.set('tx_1', {
      tx_id: 'tx_1',
      state: 'pending',
      stopped: false,
      attempts: [],
      tip: 'auto',
      enqueued_slot: 5,
      expires_at_slot: 20,
      ...tx,
    } as StoredTx);
  type Ports = ConstructorParameters<typeof BypassDecider>[0];
  const ports = {
    store: {
      get: (id: string) => Promise.resolve(records.get(id)),
      awaitingAttempt: () => Promise.resolve([...records.values()]),
    } as unknown as Ports['store'],
    chain: {
      slot,
      deadlineOf: (t: { expires_at_slot: number }) => t.expires_at_slot,
    } as unknown as Ports['chain'],
    bypass: { enabled, tipLamports: 7000 },
    log: { warn: jest.fn() } as unknown as Ports['log'],
    locks: new KeyedLock(),
  } satisfies Ports;
  const submits: unknown[] = [];
  const attempts = {
    submit: (body: unknown, source: string) => {
      submits.push({ body, source });
      return Promise.resolve({ tx_id: 'tx_1', bundle_id: 'b', tip_lamports: 7000 });
    },
  } as unknown as AttemptBuilder;
  const signals = new SettleSignals();
  const decider = new BypassDecider(ports, attempts);
  const unsubscribe = decider.subscribe(signals);
  return { signals, submits, unsubscribe, decider };
}

test('bypass on: a transaction put back to pending is submitted at the fixed tip, at once', async () => {
  const r = rig(true, {});
  r.signals.emit('back-to-pending', { txId: 'tx_1' });
  await settled();
  expect(r.submits).toEqual([
    { body: { tx_id: 'tx_1', tip_lamports: 7000, reason: 'bypass: fixed tip' }, source: 'bypass' },
  ]);
});

test('bypass off, a stopped transaction, or an unsubscribed decider: nothing is submitted', async () => {
  const off = rig(false, {});
  off.signals.emit('back-to-pending', { txId: 'tx_1' });
  await settled();
  expect(off.submits).toEqual([]);
  const stopped = rig(true, { stopped: true });
  stopped.signals.emit('back-to-pending', { txId: 'tx_1' });
  await settled();
  expect(stopped.submits).toEqual([]);
  const gone = rig(true, {});
  gone.unsubscribe();
  gone.signals.emit('back-to-pending', { txId: 'tx_1' });
  await settled();
  expect(gone.submits).toEqual([]);
});

test('a tip-included transaction is resubmitted with no relay tip', async () => {
  const r = rig(true, { tip: 'included' });
  r.signals.emit('back-to-pending', { txId: 'tx_1' });
  await settled();
  expect(r.submits).toEqual([
    { body: { tx_id: 'tx_1', tip_lamports: 0, reason: 'bypass: fixed tip' }, source: 'bypass' },
  ]);
});

test('past its expiry slot a transaction is left to the expiry pass: neither the signal nor the sweep submits it', async () => {
  // A transaction refused a tip until then (spend limit) was retried every slot past its expiry, each refused submit
  // holding the lock the expiry pass skips while busy: it stayed pending for good (a fleet trial found it).
  const late = rig(true, {}, 21);
  late.signals.emit('back-to-pending', { txId: 'tx_1' });
  await late.decider.sweep();
  await settled();
  expect(late.submits).toEqual([]);
  const onTime = rig(true, {}, 20);
  await onTime.decider.sweep();
  await settled();
  expect(onTime.submits).toHaveLength(1);
});
