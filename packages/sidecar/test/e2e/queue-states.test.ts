import { Transaction } from '@solana/web3.js';
import type { QueueResponse } from '@solrelay/core';
import { get, post, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';
import bs58 from 'bs58';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * `GET /queue` tells each transaction's real state (#18): a transaction sent and then confirmed on chain is shown
 * as such, beside one still waiting to be sent, and the counts by state say the same. No agent and no fallback
 * (RELAY_AGENT_GRACE_S=0): only the test submits, so the second transaction stays pending. The chain's clock is
 * driven by hand, so the first one holds at confirmed (finalized is 30 slots further) while the queue is read.
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({ env: { RELAY_AGENT_GRACE_S: '0' } });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/status')).body.tip.p50 > 0, 15_000, 'tip data');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

const stateOf = async (txId: string): Promise<string> => (await get(url, `/tx/${txId}`)).body.state;

test('a submitted, then confirmed, transaction shows its state in /queue, apart from one waiting to be sent', async () => {
  const { cluster } = stack.simnet;
  cluster.stop();
  try {
    const sentWire = stack.transfer(21);
    const signature = bs58.encode(Transaction.from(Buffer.from(sentWire, 'base64')).signature as Buffer);
    const sent: string = (await post(url, '/tx/enqueue', { transaction: sentWire })).body.tx_id;
    const waiting: string = (await post(url, '/tx/enqueue', { transaction: stack.transfer(22) })).body.tx_id;
    const submit = await post(url, '/internal/submit', { tx_id: sent, tip_lamports: 50_000, reason: 'test' });
    expect(submit.status).toBe(202);

    await stepSlotsUntil(stack, async () => (await stateOf(sent)) !== 'pending', 30_000, 'relay to send it');
    const inFlight = (await get(url, '/queue')).body as QueueResponse;
    const sentEntry = inFlight.entries.find((e) => e.tx_id === sent);
    // Sent: submitted, or further on if a slot already took it; never shown as waiting to be sent.
    expect(['submitted', 'landed', 'processed', 'confirmed']).toContain(sentEntry?.state);
    expect(inFlight.entries.find((e) => e.tx_id === waiting)?.state).toBe('pending');
    expect(inFlight.by_state.pending).toBe(1);
    expect(inFlight.pending).toBe(2);

    await stepSlotsUntil(
      stack,
      async () => cluster.signatureStatus(signature)?.confirmationStatus === 'confirmed',
      30_000,
      'the chain to confirm it',
    );
    await stepSlotsUntil(
      stack,
      async () => (await stateOf(sent)) === 'confirmed',
      30_000,
      'relay to read that',
    );
    const confirmed = (await get(url, '/queue')).body as QueueResponse;
    expect(Object.fromEntries(confirmed.entries.map((e) => [e.tx_id, e.state]))).toEqual({
      [sent]: 'confirmed',
      [waiting]: 'pending',
    });
    expect(confirmed.by_state).toEqual({ pending: 1, submitted: 0, landed: 0, processed: 0, confirmed: 1 });
    expect(confirmed.pending).toBe(2);
  } finally {
    cluster.start();
  }
}, 60_000);
