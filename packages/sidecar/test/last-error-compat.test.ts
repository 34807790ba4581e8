import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRelayErrorCode, relayErrorFromBody, relayErrorJson } from '@solrelay/core';
import { Journal } from '../src/journal/journal';
import { toTxRecord } from '../src/relay';
import { storeCodec, type StoredTx } from '../src/store/records';
import { JournalTxStore } from '../src/store/store';

/**
 * A lost attempt is journaled as `last_error` with RELAY_E_ATTEMPT_LOST; journals written before that code carry
 * RELAY_E_UPSTREAM_INVALID_RESPONSE with the same details. Both must replay and be served as they were written.
 */

const BUNDLE_OLD = 'a1'.repeat(32);
const BUNDLE_NEW = 'b2'.repeat(32);

function pendingTx(id: string, signature: string): StoredTx {
  return {
    tx_id: id,
    state: 'pending',
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_at: 1,
    enqueued_slot: 10,
    expires_at_slot: 160,
    wires: ['AA=='],
    signatures: [signature],
    blockhashes: ['hash'],
    nonce_accounts: [null],
    fee_payers: ['payer'],
    history: [{ state: 'pending', slot: 10, ts: 1 }],
    attempts: [],
    retries: 0,
    last_error: null,
    failure: null,
    landed_slot: null,
    stopped: false,
  };
}

test('a journal with the old and the new lost-attempt code replays both, served unchanged', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'relay-last-error-'));
  const legacy = {
    code: 'RELAY_E_UPSTREAM_INVALID_RESPONSE' as const,
    message: 'the leader window passed without landing',
    details: { outcome: 'fee_too_low', bundle_id: BUNDLE_OLD },
  };
  const current = relayErrorJson('RELAY_E_ATTEMPT_LOST', {
    outcome: 'dropped',
    bundle_id: BUNDLE_NEW,
    reason: 'the engine dropped the bundle',
  });
  const { journal } = await Journal.open(dir, storeCodec(100));
  await journal.commit({ k: 'put', tx: pendingTx('tx_old', 'sigOld') });
  await journal.commit({ k: 'patch', id: 'tx_old', set: { retries: 1, last_error: legacy } });
  await journal.commit({ k: 'put', tx: pendingTx('tx_new', 'sigNew') });
  await journal.commit({ k: 'patch', id: 'tx_new', set: { retries: 1, last_error: current } });
  await journal.close();

  const { journal: reopened, recovery } = await Journal.open(dir, storeCodec(100));
  try {
    expect(recovery.warnings).toEqual([]);
    const store = new JournalTxStore(reopened);
    const old = toTxRecord((await store.get('tx_old')) as StoredTx);
    const fresh = toTxRecord((await store.get('tx_new')) as StoredTx);
    expect(old.last_error).toEqual(legacy);
    expect(fresh.last_error).toEqual({
      code: 'RELAY_E_ATTEMPT_LOST',
      message: `Bundle ${BUNDLE_NEW} did not land (dropped): the engine dropped the bundle`,
      details: { outcome: 'dropped', bundle_id: BUNDLE_NEW, reason: 'the engine dropped the bundle' },
    });
    // A client reading either record gets a RelayError with the code that was written, not a fallback.
    for (const record of [old, fresh]) {
      expect(isRelayErrorCode(record.last_error?.code)).toBe(true);
      const rebuilt = relayErrorFromBody({ error: record.last_error });
      expect([rebuilt.code, rebuilt.message]).toEqual([record.last_error?.code, record.last_error?.message]);
    }
  } finally {
    await reopened.close();
  }
});
