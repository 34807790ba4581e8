import {
  WEBHOOK_RETRY_BASE_MS,
  WEBHOOK_RETRY_CAP_MS,
  displayWebhookUrl,
  webhookPayload,
  webhookMessageId,
  webhookIdsOfChange,
  webhookRetryDelayMs,
  type TxStatusChangedEvent,
} from '../src';

test('retry delays double from the base, stop at the cap, and jitter between half and all of the step', () => {
  expect(webhookRetryDelayMs(1, 0)).toBe(WEBHOOK_RETRY_BASE_MS / 2);
  expect(webhookRetryDelayMs(1, 0.999_999)).toBeCloseTo(WEBHOOK_RETRY_BASE_MS, -1);
  expect(webhookRetryDelayMs(2, 0)).toBe(WEBHOOK_RETRY_BASE_MS);
  expect(webhookRetryDelayMs(4, 0)).toBe(4 * WEBHOOK_RETRY_BASE_MS);
  for (const failures of [20, 100, 10_000]) {
    expect(webhookRetryDelayMs(failures, 0)).toBe(WEBHOOK_RETRY_CAP_MS / 2);
    expect(webhookRetryDelayMs(failures, 0.999_999)).toBeLessThanOrEqual(WEBHOOK_RETRY_CAP_MS);
  }
  // Never shorter than half the previous step: a failing endpoint is never hammered.
  for (let n = 1; n < 30; n++)
    expect(webhookRetryDelayMs(n + 1, 0)).toBeGreaterThanOrEqual(webhookRetryDelayMs(n, 0));
});

test('payloads carry the type, the event time in ISO 8601 and the SSE data as is', () => {
  const data: TxStatusChangedEvent = {
    tx_id: 't',
    state: 'landed',
    bundle_id: null,
    tx_signatures: ['s'],
    failure: null,
    ts: 0,
  };
  expect(webhookPayload('tx_status_changed', data, 1_700_000_000_000)).toEqual({
    type: 'tx_status_changed',
    timestamp: '2023-11-14T22:13:20.000Z',
    data,
  });
});

test('webhook ids are derived from the event: a transaction’s n-th status, a bundle’s settlement per transaction', () => {
  expect(webhookMessageId({ kind: 'status', txId: 'tx_1', index: 3 })).toBe('msg_tx_1_s3');
  expect(webhookMessageId({ kind: 'settled', txId: 'tx_1', bundleId: 'ab', stage: 'finalized' })).toBe(
    'msg_tx_1_ab_finalized',
  );
  // Two transactions of one packed bundle settle with the same bundle and stage: two events, two ids (receivers
  // dedupe on the id, so one shared id would drop the second transaction's settlement).
  expect(webhookMessageId({ kind: 'settled', txId: 'tx_2', bundleId: 'ab', stage: 'finalized' })).not.toBe(
    webhookMessageId({ kind: 'settled', txId: 'tx_1', bundleId: 'ab', stage: 'finalized' }),
  );
});

test('endpoint URLs are shown without credentials, query or long path secrets', () => {
  expect(displayWebhookUrl('https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX')).toBe(
    'https://hooks.slack.com/services/T0000/B0000/XXXX…',
  );
  expect(displayWebhookUrl('https://user:pass@hooks.example:8443/relay?token=abc')).toBe(
    'https://hooks.example:8443/relay',
  );
});

test('webhookIdsOfChange: status events take the last history entries, settlements their bundle and stage', () => {
  const settled = { bundle_id: 'b1', stage: 'finalized' };
  expect(
    webhookIdsOfChange('tx_1', 6, [
      { kind: 'tx_status_changed' },
      { kind: 'bundle_settled', data: settled },
      { kind: 'lifecycle' },
      { kind: 'tx_status_changed' },
    ]),
  ).toEqual(['msg_tx_1_s4', 'msg_tx_1_b1_finalized', null, 'msg_tx_1_s5']);
  expect(webhookIdsOfChange('tx_9', 2, [{ kind: 'bundle_settled', data: settled }])).toEqual([
    'msg_tx_9_b1_finalized',
  ]);
  expect(webhookIdsOfChange('tx_2', 1, [{ kind: 'tx_enqueued' }, { kind: 'tx_status_changed' }])).toEqual([
    null,
    'msg_tx_2_s0',
  ]);
});
