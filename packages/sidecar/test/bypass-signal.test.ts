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

function rig(enabled: boolean, tx: Partial<StoredTx> | null) {
  const records = new Map<string, StoredTx>();
  if (tx)
    records.set('tx_1', {
      tx_id: 'tx_1',
      state: 'pending',
      stopped: false,
      attempts: [],
      tip: 'auto',
      ...tx,
    } as StoredTx);
  type Ports = ConstructorParameters<typeof BypassDecider>[0];
  const ports = {
    store: { get: (id: string) => Promise.resolve(records.get(id)) } as Ports['store'],
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
  const unsubscribe = new BypassDecider(ports, attempts).subscribe(signals);
  return { signals, submits, unsubscribe };
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
