import {
  RELAY_EVENT_NAMES,
  SPEC_EVENT_NAMES,
  formatSseEventId,
  isRelayEventName,
  parseSseEventId,
  txStatusChangedEvent,
  TX_STATES,
  type RelayEventMap,
  type RelayEventName,
} from '../src';

describe('event map', () => {
  it('lists the five spec events and the six extra ones', () => {
    expect([...SPEC_EVENT_NAMES]).toEqual([
      'tx_status_changed',
      'bundle_settled',
      'slot_update',
      'tx_enqueued',
      'submit_requested',
    ]);
    expect([...RELAY_EVENT_NAMES].slice(5)).toEqual([
      'mode_changed',
      'agent_presence',
      'policy_changed',
      'tip_update',
      'tx_adopted',
      'resync',
    ]);
    expect(new Set(RELAY_EVENT_NAMES).size).toBe(RELAY_EVENT_NAMES.length);
  });

  it('the runtime list and the type map name the same events', () => {
    // Compiles only while the object lists exactly the keys of RelayEventMap.
    const keys: Record<RelayEventName, true> = {
      tx_status_changed: true,
      bundle_settled: true,
      slot_update: true,
      tx_enqueued: true,
      submit_requested: true,
      mode_changed: true,
      agent_presence: true,
      policy_changed: true,
      tip_update: true,
      tx_adopted: true,
      resync: true,
    };
    expect([...RELAY_EVENT_NAMES].sort()).toEqual(Object.keys(keys).sort());
    expect(isRelayEventName('slot_update')).toBe(true);
    expect(isRelayEventName('ping')).toBe(false);
  });

  it('carries the spec fields plus the decided extras (checked by the compiler)', () => {
    const events: {
      [K in 'tx_status_changed' | 'bundle_settled' | 'tx_enqueued' | 'submit_requested']: RelayEventMap[K];
    } = {
      tx_status_changed: {
        tx_id: 't',
        state: 'failed',
        bundle_id: null,
        tx_signatures: [],
        failure: 'dropped',
        ts: 1,
      },
      bundle_settled: {
        bundle_id: 'b',
        stage: 'failed',
        failure_type: 'fee_too_low',
        tx_id: 't',
        tip_lamports: 1,
        retries: 0,
        ts: 1,
      },
      tx_enqueued: {
        tx_id: 't',
        slot: 1,
        priority: 'high',
        expires_at_slot: 151,
        max_tip: null,
        tip: 'auto',
        ts: 1,
      },
      submit_requested: { tx_id: 't', bundle_id: 'b', tip_lamports: 1, reason: 'r', leader: null, ts: 1 },
    };
    expect(Object.keys(events.bundle_settled).sort()).toEqual(
      ['bundle_id', 'failure_type', 'retries', 'stage', 'tip_lamports', 'ts', 'tx_id'].sort(),
    );
  });
});

describe('SSE ids', () => {
  it('round-trip boot id and sequence', () => {
    expect(formatSseEventId('k3x9', 42)).toBe('k3x9-42');
    expect(parseSseEventId('k3x9-42')).toEqual({ bootId: 'k3x9', seq: 42 });
  });

  it.each([['42'], ['-42'], ['a-b'], ['a-1-2'], ['']])('refuses %p', (id) => {
    expect(parseSseEventId(id)).toBeNull();
  });
});

describe('txStatusChangedEvent', () => {
  const source = {
    tx_id: 'tx_01',
    bundle_id: 'b'.repeat(64),
    tx_signatures: ['sigA', 'sigB'],
    failure: 'dropped' as const,
    ts: 1_700_000_000_000,
  };

  it('hides the signatures before landing and the failure unless failed, for every state', () => {
    for (const state of TX_STATES) {
      const event = txStatusChangedEvent({ ...source, state });
      const beforeLanding = state === 'pending' || state === 'submitted';
      expect([state, event.tx_signatures]).toEqual([state, beforeLanding ? [] : ['sigA', 'sigB']]);
      expect([state, event.failure]).toEqual([state, state === 'failed' ? 'dropped' : null]);
      expect(event).toMatchObject({ tx_id: 'tx_01', state, bundle_id: source.bundle_id, ts: source.ts });
    }
  });

  it('has exactly the fields of the event, in the order the SSE frames carry them', () => {
    const event = txStatusChangedEvent({ ...source, state: 'landed' });
    expect(Object.keys(event)).toEqual(['tx_id', 'state', 'bundle_id', 'tx_signatures', 'failure', 'ts']);
    expect(JSON.stringify(event)).toBe(
      `{"tx_id":"tx_01","state":"landed","bundle_id":"${source.bundle_id}","tx_signatures":["sigA","sigB"],"failure":null,"ts":1700000000000}`,
    );
  });

  it("copies the signatures: the event never shares the caller's array", () => {
    const signatures = ['sigA'];
    const event = txStatusChangedEvent({ ...source, tx_signatures: signatures, state: 'finalized' });
    signatures.push('sigZ');
    expect(event.tx_signatures).toEqual(['sigA']);
  });
});
