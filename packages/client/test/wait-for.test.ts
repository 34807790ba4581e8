import { RelayClient, isWaitTimeoutError, type FetchFunction, type TxState } from '../src';
import { txStatusChangedEvent } from '@solrelay/core/wire';
import { record } from './helpers/records';

// waitFor's deadline logic with a scripted sidecar (no network): the stream never delivers, so only the final
// read at the deadline can tell the truth.

function sidecarWith(states: TxState[]): FetchFunction {
  return async (input) => {
    if (String(input).includes('/tx/events/')) throw new TypeError('fetch failed');
    const state = states.length > 1 ? (states.shift() as TxState) : (states[0] as TxState);
    return new Response(JSON.stringify(record(state)), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  };
}

test('at the deadline waitFor re-reads the record: a transaction that got there meanwhile resolves, not times out', async () => {
  const relay = new RelayClient({
    baseUrl: 'http://relay.test',
    fetch: sidecarWith(['submitted', 'confirmed']),
  });
  await expect(relay.handle('tx_1').waitFor('confirmed', { timeoutMs: 300 })).resolves.toMatchObject({
    state: 'confirmed',
  });
  relay.close();
});

test('a real timeout names the verified last state', async () => {
  const relay = new RelayClient({ baseUrl: 'http://relay.test', fetch: sidecarWith(['processed']) });
  const error = await relay
    .handle('tx_1')
    .waitFor('finalized', { timeoutMs: 300 })
    .catch((e: unknown) => e);
  expect(isWaitTimeoutError(error)).toBe(true);
  expect(error).toMatchObject({
    tx_id: 'tx_1',
    target: 'finalized',
    last_state: 'processed',
    verified: true,
  });
  relay.close();
});

test('abort and close reject a pending wait with the signal reason / ClientClosedError', async () => {
  const relay = new RelayClient({ baseUrl: 'http://relay.test', fetch: sidecarWith(['pending']) });
  const controller = new AbortController();
  const aborted = relay.handle('tx_1').waitFor('finalized', { signal: controller.signal });
  controller.abort(new Error('caller gave up'));
  await expect(aborted).rejects.toThrow('caller gave up');
  const closed = relay.handle('tx_1').waitFor('finalized');
  relay.close();
  await expect(closed).rejects.toMatchObject({ name: 'ClientClosedError' });
  // @ts-expect-error -- failed is not a state one waits for
  await expect(new RelayClient({ baseUrl: 'http://x' }).handle('tx_1').waitFor('failed')).rejects.toThrow(
    TypeError,
  );
});

test("waitFor resolves with core's tx_status_changed view of the record, the same the sidecar's stream sends", async () => {
  const landed = record('landed', {
    bundle_id: 'b'.repeat(64),
    tx_signatures: ['sigA', 'sigB'],
    // Only a failed transaction reports its failure class: the shared builder drops it in any other state.
    failure: 'dropped',
    history: [{ state: 'landed', slot: 9, ts: 1_234 }],
  });
  const relay = new RelayClient({
    baseUrl: 'http://relay.test',
    fetch: async () =>
      new Response(JSON.stringify(landed), { status: 200, headers: { 'content-type': 'application/json' } }),
  });
  const status = await relay.handle('tx_1').waitFor('landed', { timeoutMs: 1_000 });
  expect(status).toEqual(
    txStatusChangedEvent({ ...landed, ts: 1_234 }), // what GET /tx/events/{id} sends first for this record
  );
  expect(status).toEqual({
    tx_id: 'tx_1',
    state: 'landed',
    bundle_id: 'b'.repeat(64),
    tx_signatures: ['sigA', 'sigB'],
    failure: null,
    ts: 1_234,
  });
  relay.close();
});
