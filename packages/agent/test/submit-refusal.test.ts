import {
  RELAY_ERROR_CODES,
  RelayError,
  httpStatusOf,
  relayErrorFromBody,
  type RelayErrorCode,
} from '@solrelay/core';
import { waitUntil } from '@solrelay/testkit';
import type { RelayAgent, RelayAgentOptions } from '../src';
import { submitRefusalOf } from '../src/sidecar-errors';
import { FakeRelay, startAgent as startAgentOnFakes } from './helpers/fakes';

// A refused submit is read by the error body's code, never by the HTTP status: several causes share a 404 (an
// unknown transaction, an unknown route, no agent connected), and only an unknown or finished transaction may make
// the agent stop tracking it.
const agents: RelayAgent[] = [];
afterEach(() => {
  for (const agent of agents.splice(0)) agent.stop();
});

function startAgent(relay: FakeRelay, options: Partial<RelayAgentOptions> = {}) {
  return startAgentOnFakes(agents, relay, options);
}

/** Give the agent's promise chains a moment to run after an event (nothing should happen). */
const settle = () => new Promise((r) => setTimeout(r, 50));

/** A refusal as the agent gets it: the client rebuilds it from the answer's JSON body. */
function refusalFromBody(code: RelayErrorCode, details: Record<string, unknown> = {}): RelayError {
  return relayErrorFromBody({ error: { code, message: `refused: ${code}`, details } }, httpStatusOf(code));
}

describe('submitRefusalOf', () => {
  test('only RELAY_E_TX_NOT_FOUND, RELAY_E_TX_OWNED_ELSEWHERE and a terminal RELAY_E_TX_WRONG_STATE end tracking; no other code does', () => {
    const ending = new Set<string>(['unknown_tx', 'tx_ended']);
    const ends = new Set(['RELAY_E_TX_NOT_FOUND', 'RELAY_E_TX_OWNED_ELSEWHERE']);
    for (const code of RELAY_ERROR_CODES) {
      const refusal = submitRefusalOf(refusalFromBody(code, { state: 'pending' }));
      expect({ code, ends: ending.has(refusal) }).toEqual({ code, ends: ends.has(code) });
    }
    expect(submitRefusalOf(refusalFromBody('RELAY_E_TX_NOT_FOUND', { tx_id: 'tx_1' }))).toBe('unknown_tx');
    // Another host of the fleet runs it: its own agent decides.
    expect(
      submitRefusalOf(
        refusalFromBody('RELAY_E_TX_OWNED_ELSEWHERE', { tx_id: 'tx_1', owner_host: 'relay-b' }),
      ),
    ).toBe('unknown_tx');
    for (const state of ['finalized', 'failed', 'expired'])
      expect(submitRefusalOf(refusalFromBody('RELAY_E_TX_WRONG_STATE', { state }))).toBe('tx_ended');
    for (const state of ['submitted', 'landed', 'pending (attempts stopped)', undefined])
      expect(submitRefusalOf(refusalFromBody('RELAY_E_TX_WRONG_STATE', { state }))).toBe('not_pending');
  });

  test('every 404 but RELAY_E_TX_NOT_FOUND, and every 5xx, is retried later', () => {
    const retried = RELAY_ERROR_CODES.filter(
      (code) => (httpStatusOf(code) === 404 && code !== 'RELAY_E_TX_NOT_FOUND') || httpStatusOf(code) >= 500,
    );
    expect(retried).toEqual(
      expect.arrayContaining(['RELAY_E_REQUEST_UNKNOWN_ROUTE', 'RELAY_E_INTERNAL_ERROR']),
    );
    for (const code of retried)
      expect({ code, refusal: submitRefusalOf(refusalFromBody(code)) }).toEqual({
        code,
        refusal: 'retry_later',
      });
  });

  test('the token codes stop the agent; a policy check the agent runs itself re-reads the state, spend-limit does not', () => {
    expect(submitRefusalOf(refusalFromBody('RELAY_E_AUTH_MISSING_TOKEN'))).toBe('token_refused');
    expect(submitRefusalOf(refusalFromBody('RELAY_E_AUTH_INVALID_TOKEN'))).toBe('token_refused');
    // The same set the agent re-read on before it read codes: every 422 answer except a spent budget.
    for (const code of RELAY_ERROR_CODES) {
      const rereads = submitRefusalOf(refusalFromBody(code)) === 'stale_copy';
      const expected = httpStatusOf(code) === 422 && code !== 'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED';
      expect({ code, rereads }).toEqual({ code, rereads: expected });
    }
  });

  test('anything that is not a RelayError (a plain throw, a body with an unknown code) is retried later', () => {
    expect(submitRefusalOf(new Error('boom'))).toBe('retry_later');
    expect(submitRefusalOf({ status: 404 })).toBe('retry_later');
    expect(submitRefusalOf(undefined)).toBe('retry_later');
    // A 404 page from something that is not relay: the client makes it RELAY_E_UPSTREAM_INVALID_RESPONSE.
    expect(submitRefusalOf(relayErrorFromBody('<html>Not Found</html>', 404))).toBe('retry_later');
  });
});

test('a 404 with RELAY_E_REQUEST_UNKNOWN_ROUTE does not forget the transaction: it cools down and is submitted again', async () => {
  const relay = new FakeRelay();
  const refusal = new RelayError('RELAY_E_REQUEST_UNKNOWN_ROUTE', {
    method: 'POST',
    path: '/internal/submit',
  });
  expect(refusal.status).toBe(404);
  relay.submitError = refusal;
  const { agent, log } = await startAgent(relay, { refusedCooldownSlots: 2 });
  relay.enqueue('tx_r');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the refused submit');
  await waitUntil(() => agent.tracked('tx_r')?.status === 'pending', 5_000, 'back to pending');
  expect(agent.tracked('tx_r')).toMatchObject({ status: 'pending', cooldown_until_slot: 102 });
  expect(log.errors).toContain('submit tx_r refused: No route POST /internal/submit');
  expect(log.lines.some((l) => l.startsWith('skip tx_r'))).toBe(false);
  relay.submitError = null;
  relay.advance(101, 101); // inside the cooldown
  await settle();
  expect(relay.submits).toHaveLength(1);
  relay.advance(102, 102);
  await waitUntil(() => relay.submits.length === 2, 5_000, 'the submit after the cooldown');
  expect(relay.submits[1]).toMatchObject({ tx_id: 'tx_r' });
  expect(agent.tracked('tx_r')?.status).toBe('submitted');
});

test('a 404 with RELAY_E_TX_NOT_FOUND forgets the transaction: no further decisions for it', async () => {
  const relay = new FakeRelay();
  relay.submitError = new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: 'tx_gone' });
  const { agent, log } = await startAgent(relay, { refusedCooldownSlots: 2 });
  relay.enqueue('tx_gone');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the refused submit');
  await waitUntil(() => agent.tracked('tx_gone') === null, 5_000, 'the transaction forgotten');
  relay.submitError = null;
  for (let s = 101; s <= 104; s++) relay.advance(s, s);
  await settle();
  expect(relay.submits).toHaveLength(1);
  expect(log.errors.filter((l) => l.startsWith('submit tx_gone refused'))).toEqual([]);
});

test('a 5xx does not forget the transaction', async () => {
  for (const code of ['RELAY_E_INTERNAL_ERROR', 'RELAY_E_UPSTREAM_UNREACHABLE'] as const) {
    const relay = new FakeRelay();
    relay.submitError = refusalFromBody(code, { reason: 'test', upstream: 'relay' });
    expect(relay.submitError.status).toBeGreaterThanOrEqual(500);
    const { agent } = await startAgent(relay, { refusedCooldownSlots: 2 });
    relay.enqueue('tx_5');
    await waitUntil(() => relay.submits.length === 1, 5_000, 'the refused submit');
    await waitUntil(() => agent.tracked('tx_5')?.status === 'pending', 5_000, `${code}: back to pending`);
    relay.submitError = null;
    relay.advance(101, 101);
    relay.advance(102, 102);
    await waitUntil(() => relay.submits.length === 2, 5_000, `${code}: the submit after the cooldown`);
  }
});

test('a 409 with RELAY_E_TX_WRONG_STATE naming a terminal state forgets the transaction', async () => {
  const relay = new FakeRelay();
  relay.submitError = new RelayError('RELAY_E_TX_WRONG_STATE', {
    tx_id: 'tx_x',
    state: 'expired',
    expected: 'pending with no attempt in flight',
  });
  const { agent, log } = await startAgent(relay, { refusedCooldownSlots: 2 });
  relay.enqueue('tx_x');
  await waitUntil(() => relay.submits.length === 1, 5_000, 'the refused submit');
  await waitUntil(() => agent.tracked('tx_x') === null, 5_000, 'the transaction forgotten');
  expect(log.lines.some((l) => l.startsWith('skip tx_x reason='))).toBe(true);
  relay.submitError = null;
  for (let s = 101; s <= 104; s++) relay.advance(s, s);
  await settle();
  expect(relay.submits).toHaveLength(1);
});
