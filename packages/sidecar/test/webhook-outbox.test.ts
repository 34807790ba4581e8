import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptyTimeline, txStatusChangedEvent, type TxState } from '@solrelay/core';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { EventHub, type HubEvent } from '../src/events/hub';
import { Journal } from '../src/journal/journal';
import { Metrics } from '../src/metrics';
import { systemClock } from '../src/runtime/clock';
import type { StoredAttempt, StoredTx } from '../src/store/records';
import { WebhookDispatcher } from '../src/webhooks/dispatcher';
import {
  missedEvents,
  outboxCodec,
  TERMINAL_CURSORS_KEPT,
  type OutboxOp,
  type OutboxState,
} from '../src/webhooks/outbox';
import { waitUntil } from '@solrelay/testkit';

/**
 * The outbox and its dispatcher with the receiver faked (a fetch function): what a crash kept out of the outbox is
 * added from the store's records at start, snapshots restore what is owed without re-counting it, a transaction's
 * deliveries stay in order through failures, and a delivery is given up only after the retry window.
 */

const SECRET = `whsec_${Buffer.from('outbox unit test secret of 32 b').toString('base64')}`;
const ENDPOINT = 'http://receiver.test/hooks';
const silent = pino({ level: 'silent' });

interface Sent {
  id: string;
  type: string;
  state: string | undefined;
  txId: string;
}

/** A fake receiver: answers each request with `answer(sent)`; records the ones it accepted, verifying each. */
function receiver(answer: (sent: Sent, tries: number) => number = () => 204) {
  const accepted: Sent[] = [];
  const tries = new Map<string, number>();
  const verifier = new Webhook(SECRET);
  const fetch = (async (_url: string, init: RequestInit) => {
    const headers = init.headers as Record<string, string>;
    const body = init.body as string;
    verifier.verify(body, headers);
    const payload = JSON.parse(body) as { type: string; data: { tx_id: string; state?: string } };
    const sent = {
      id: headers['webhook-id'] as string,
      type: payload.type,
      state: payload.data.state,
      txId: payload.data.tx_id,
    };
    const n = (tries.get(sent.id) ?? 0) + 1;
    tries.set(sent.id, n);
    const status = answer(sent, n);
    if (status < 300) accepted.push(sent);
    return new Response(null, { status });
  }) as unknown as typeof globalThis.fetch;
  return { accepted, tries, fetch };
}

function attempt(n: number, stage: StoredAttempt['stage']): StoredAttempt {
  return {
    attempt: n,
    bundle_id: String(n).repeat(64),
    tip_lamports: 1_000,
    tip_tx: null,
    tip_signature: null,
    tip_account: null,
    tip_last_valid_block_height: null,
    bundle_signatures: [],
    created_at: 1,
    created_slot: 10,
    slot_submitted: 11,
    target_slot: 12,
    window_end_slot: 15,
    leader: null,
    stage,
    outcome: stage === 'failed' ? 'fee_too_low' : null,
    slot_landed: stage === 'finalized' ? 13 : null,
    floor_at_submit: { p25: 1, p50: 1, p75: 1, p95: 1, p99: 1, ema_p50: 1 } as never,
    decision: {
      mode: 'reflex',
      bypass: true,
      escalated: false,
      reason: 'test',
      trace: null,
      source: 'bypass',
    },
    reserved_lamports: 0,
    released: false,
    leaked: false,
    timeline: {
      ...emptyTimeline(),
      [stage === 'finalized' ? 'finalized' : 'failed']: { slot: 20, ts: 2_000 },
    },
    send_errors: 0,
  };
}

function record(id: string, states: TxState[], attempts: StoredAttempt[] = []): StoredTx {
  return {
    tx_id: id,
    state: states[states.length - 1] as TxState,
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_at: 1,
    enqueued_slot: 10,
    expires_at_slot: 160,
    wires: null,
    signatures: [`sig-${id}`],
    blockhashes: ['hash'],
    nonce_accounts: [null],
    fee_payers: ['payer'],
    history: states.map((state, i) => ({ state, slot: 10 + i, ts: 1_000 + i })),
    attempts,
    retries: 0,
    last_error: null,
    failure: null,
    landed_slot: null,
    stopped: false,
  };
}

async function openOutbox(dir: string) {
  return (await Journal.open<OutboxState, OutboxOp>(join(dir, 'webhooks'), outboxCodec)).journal;
}

const dispatchers: WebhookDispatcher[] = [];
function dispatcher(
  journal: Journal<OutboxState, OutboxOp>,
  fetch: typeof globalThis.fetch,
  extra: Partial<ConstructorParameters<typeof WebhookDispatcher>[0]> = {},
) {
  const d = new WebhookDispatcher({
    urls: [ENDPOINT],
    secret: SECRET,
    journal,
    metrics: new Metrics(),
    log: silent,
    clock: systemClock,
    retryBaseMs: 5,
    retryCapMs: 20,
    tickMs: 5,
    random: () => 0.5,
    fetch,
    ...extra,
  });
  dispatchers.push(d);
  return d;
}

afterEach(() => {
  for (const d of dispatchers.splice(0)) d.close();
});

const dir = () => mkdtemp(join(tmpdir(), 'relay-outbox-'));

/** A `tx_status_changed` as the hub hands it to its listeners. */
function statusEvent(txId: string, state: TxState): HubEvent {
  return {
    id: 'x',
    seq: 1,
    name: 'tx_status_changed',
    frame: '',
    data: txStatusChangedEvent({
      tx_id: txId,
      state,
      bundle_id: null,
      tx_signatures: [],
      failure: null,
      ts: 1,
    }),
  };
}

test('the first start takes the store as announced: cursors seeded, nothing sent', async () => {
  const journal = await openOutbox(await dir());
  const r = receiver();
  const d = dispatcher(journal, r.fetch);
  const found = await d.recover([record('tx_a', ['pending', 'submitted']), record('tx_b', ['pending'])]);
  expect(found).toEqual({ backfilled: 0, unconfigured: 0 });
  expect(journal.state.initialized).toBe(true);
  expect(journal.state.cursors.get('tx_a')?.statuses).toBe(2);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(r.accepted).toEqual([]);
  await journal.close();
});

test('what a crash kept out of the outbox is added from the records at the next start, in order', async () => {
  const path = await dir();
  // Before the crash: the outbox took tx_a's first status; the store went on to finalize it (bundle 1 failed,
  // bundle 2 finalized) and accepted tx_b, none of which reached the outbox.
  const before = await openOutbox(path);
  const live = dispatcher(before, receiver().fetch);
  await live.recover([]);
  const hub = new EventHub({ bootId: 'boot', keepAliveMs: 0 });
  hub.onEvent(live.onEvent);
  hub.publish(
    'tx_status_changed',
    txStatusChangedEvent({
      tx_id: 'tx_a',
      state: 'pending',
      bundle_id: null,
      tx_signatures: [],
      failure: null,
      ts: 1,
    }),
  );
  await waitUntil(() => before.state.cursors.get('tx_a')?.statuses === 1, 5_000, 'the first status taken');
  live.close();
  hub.dispose();
  await before.close();

  const after = await openOutbox(path);
  const r = receiver();
  const d = dispatcher(after, r.fetch);
  const states: TxState[] = ['pending', 'submitted', 'landed', 'processed', 'confirmed', 'finalized'];
  const found = await d.recover([
    record('tx_a', states, [attempt(1, 'failed'), attempt(2, 'finalized')]),
    record('tx_b', ['pending']),
  ]);
  expect(found.backfilled).toBe(5 + 2 + 1);
  await waitUntil(() => r.accepted.length === 8, 5_000, 'the backfill delivered');
  const txA = r.accepted.filter((s) => s.txId === 'tx_a');
  expect(txA.filter((s) => s.type === 'tx_status_changed').map((s) => s.state)).toEqual(states.slice(1));
  // The ids the live events would have had: a receiver that got some of them before the crash dedupes.
  expect(txA.filter((s) => s.type === 'tx_status_changed').map((s) => s.id)).toEqual(
    [1, 2, 3, 4, 5].map((index) => `msg_tx_a_s${index}`),
  );
  expect(txA.filter((s) => s.type === 'bundle_settled')).toHaveLength(2);
  expect(r.accepted.filter((s) => s.txId === 'tx_b').map((s) => s.state)).toEqual(['pending']);
  // A third start finds nothing missing.
  d.close();
  await after.close();
  const third = await openOutbox(path);
  const again = dispatcher(third, receiver().fetch);
  expect(
    (await again.recover([record('tx_a', states, [attempt(1, 'failed'), attempt(2, 'finalized')])]))
      .backfilled,
  ).toBe(0);
  await third.close();
});

test('a snapshot keeps what is owed and the cursors, without counting the owed events twice', async () => {
  const path = await dir();
  const journal = await openOutbox(path);
  const d = dispatcher(journal, receiver(() => 503).fetch, { retryBaseMs: 60_000, retryCapMs: 60_000 });
  await d.recover([]);
  for (const state of ['pending', 'submitted'] as const) {
    d.onEvent(statusEvent('tx_a', state));
  }
  await waitUntil(() => journal.state.messages.size === 2, 5_000, 'both queued');
  await journal.compact();
  d.close();
  await journal.close();
  const reopened = await openOutbox(path);
  expect(reopened.state.messages.size).toBe(2);
  expect(reopened.state.cursors.get('tx_a')).toEqual({ statuses: 2, settled: [], terminal: false });
  expect(reopened.state.initialized).toBe(true);
  await reopened.close();
});

test('a transaction’s deliveries stay in order through failures; other transactions are not held up', async () => {
  const journal = await openOutbox(await dir());
  // The receiver refuses tx_a's first delivery three times (a 422: that message, not the endpoint); tx_b's go
  // through at once and the endpoint is never taken for down.
  const r = receiver((sent, tries) =>
    sent.txId === 'tx_a' && sent.state === 'pending' && tries <= 3 ? 422 : 204,
  );
  const d = dispatcher(journal, r.fetch);
  await d.recover([]);
  for (const txId of ['tx_a', 'tx_b']) {
    for (const state of ['pending', 'submitted', 'landed'] as const) {
      d.onEvent(statusEvent(txId, state));
    }
  }
  await waitUntil(() => r.accepted.length === 6, 5_000, 'all six delivered');
  expect(r.accepted.filter((s) => s.txId === 'tx_a').map((s) => s.state)).toEqual([
    'pending',
    'submitted',
    'landed',
  ]);
  expect(r.accepted.filter((s) => s.txId === 'tx_b').map((s) => s.state)).toEqual([
    'pending',
    'submitted',
    'landed',
  ]);
  expect([...r.tries.values()].reduce((a, b) => a + b, 0)).toBe(6 + 3);
  expect(d.status()[0]).toMatchObject({
    pending: 0,
    delivered: 6,
    failed_attempts: 3,
    consecutive_failures: 0,
  });
  // A delivered message leaves the outbox after its answer is journaled (a moment after the receiver saw it).
  await waitUntil(() => journal.state.messages.size === 0, 5_000, 'the outbox emptied');
  await journal.close();
});

test('a delivery is given up only once the retry window has passed, and counted', async () => {
  const journal = await openOutbox(await dir());
  const r = receiver(() => 500);
  // A clock the test moves: the window cannot pass by itself on a slow machine.
  let now = Date.now(); // signatures carry it; receivers refuse timestamps far from theirs
  const d = dispatcher(journal, r.fetch, { retryWindowMs: 60_000, clock: { now: () => now } });
  await d.recover([]);
  d.onEvent(statusEvent('tx_a', 'pending'));
  await waitUntil(() => (d.status()[0]?.failed_attempts ?? 0) >= 1, 5_000, 'the first try');
  expect(d.status()[0]).toMatchObject({ pending: 1, expired: 0, last_error: 'HTTP 500' });
  now += 59_000;
  await new Promise((resolve) => setTimeout(resolve, 30));
  expect(d.status()[0]).toMatchObject({ pending: 1, expired: 0 });
  now += 1_000;
  await waitUntil(() => d.status()[0]?.expired === 1, 5_000, 'given up');
  expect(d.status()[0]?.pending).toBe(0);
  await waitUntil(() => journal.state.messages.size === 0, 5_000, 'recorded as done');
  await journal.close();
});

test('an endpoint owed more than its cap gives up its oldest deliveries', async () => {
  const journal = await openOutbox(await dir());
  const d = dispatcher(journal, receiver(() => 503).fetch, {
    maxOwed: 2,
    retryBaseMs: 60_000,
    retryCapMs: 60_000,
  });
  await d.recover([]);
  for (const txId of ['tx_1', 'tx_2', 'tx_3', 'tx_4']) d.onEvent(statusEvent(txId, 'pending'));
  await waitUntil(() => d.status()[0]?.expired === 2, 5_000, 'two given up');
  expect(d.status()[0]?.pending).toBe(2);
});

test('deliveries owed to an endpoint no longer configured are dropped at start', async () => {
  const path = await dir();
  const journal = await openOutbox(path);
  const d = dispatcher(journal, receiver(() => 503).fetch, { retryBaseMs: 60_000, retryCapMs: 60_000 });
  await d.recover([]);
  d.onEvent({
    id: 'x',
    seq: 1,
    name: 'bundle_settled',
    frame: '',
    data: {
      bundle_id: 'b',
      stage: 'failed',
      failure_type: 'dropped',
      tx_id: 'tx_a',
      tip_lamports: 1,
      retries: 0,
      ts: 1,
    },
  });
  await waitUntil(() => journal.state.messages.size === 1, 5_000, 'queued');
  d.close();
  const other = dispatcher(journal, receiver().fetch, { urls: ['http://elsewhere.test/'] });
  expect(await other.recover([])).toEqual({ backfilled: 0, unconfigured: 1 });
  expect(journal.state.messages.size).toBe(0);
  await journal.close();
});

test('terminal cursors are bounded; a terminal record without one is not backfilled', () => {
  const state = outboxCodec.initial();
  for (let i = 0; i <= TERMINAL_CURSORS_KEPT; i++) {
    outboxCodec.apply(state, {
      k: 'add',
      m: {
        id: `m${i}`,
        type: 'tx_status_changed',
        ts: 1,
        key: `tx_${i}`,
        owed: [],
        queuedAt: 1,
        data: txStatusChangedEvent({
          tx_id: `tx_${i}`,
          state: 'finalized',
          bundle_id: null,
          tx_signatures: [],
          failure: null,
          ts: 1,
        }),
      },
    });
  }
  expect(state.cursors.size).toBe(TERMINAL_CURSORS_KEPT);
  expect(state.cursors.has('tx_0')).toBe(false);
  expect(state.cursors.has(`tx_${TERMINAL_CURSORS_KEPT}`)).toBe(true);
  // A late settlement of an aged-out transaction does not start a cursor that would re-send its history.
  outboxCodec.apply(state, {
    k: 'add',
    m: {
      id: 'late',
      type: 'bundle_settled',
      ts: 1,
      key: 'tx_0',
      owed: [],
      queuedAt: 1,
      data: {
        bundle_id: 'b',
        stage: 'failed',
        failure_type: 'dropped',
        tx_id: 'tx_0',
        tip_lamports: 1,
        retries: 0,
        ts: 1,
      },
    },
  });
  expect(state.cursors.has('tx_0')).toBe(false);
  // Without a cursor: an ended transaction was announced before its cursor aged out; a live one was never taken.
  expect(missedEvents(record('tx_0', ['pending', 'finalized']), undefined, 0)).toEqual([]);
  expect(missedEvents(record('tx_new', ['pending', 'submitted']), undefined, 0).map((e) => e.type)).toEqual([
    'tx_status_changed',
    'tx_status_changed',
  ]);
});
