import { DEFAULTS } from '@solrelay/sidecar';
import { CLI_DEFAULTS } from '../src/env';

test('the CLI’s copy of the spec defaults matches the sidecar’s', () => {
  expect(CLI_DEFAULTS).toEqual({
    apiPort: DEFAULTS.apiPort,
    agentDir: DEFAULTS.agentDir,
    webDir: DEFAULTS.webDir,
    policyFile: DEFAULTS.policyFile,
  });
});

test('colour: on a terminal unless NO_COLOR is set (to anything non-empty); never on a pipe', async () => {
  const { colorEnabled } = await import('../src/output');
  expect(colorEnabled({}, true)).toBe(true);
  expect(colorEnabled({ NO_COLOR: '1' }, true)).toBe(false);
  expect(colorEnabled({ NO_COLOR: '' }, true)).toBe(true);
  expect(colorEnabled({}, false)).toBe(false);
});

test('queue text: a state column, so a confirmed transaction is not shown waiting beside a pending one', async () => {
  const { renderQueue } = await import('../src/commands/queue');
  const text = renderQueue({
    pending: 2,
    by_state: { pending: 1, submitted: 0, landed: 0, processed: 0, confirmed: 1 },
    evicted_total: 4,
    entries: [
      { tx_id: 'tx_01A', state: 'confirmed', age_slots: 12, priority: 'high', retries: 0 },
      { tx_id: 'tx_01B', state: 'pending', age_slots: 1, priority: 'normal', retries: 1 },
    ],
  });
  expect(text.split('\n')).toEqual([
    'queue 2  pending 1  submitted 0  landed 0  processed 0  confirmed 1  evicted_total 4',
    'tx_id        age  priority  state',
    'tx_01A  12 slots  high      confirmed',
    'tx_01B    1 slot  normal    pending',
  ]);
});

test('queue text from an older sidecar (no by_state, no entry state): the count line and a dash for the state', async () => {
  const { renderQueue } = await import('../src/commands/queue');
  const old = {
    pending: 1,
    evicted_total: 0,
    entries: [{ tx_id: 'tx_01A', age_slots: 3, priority: 'normal', retries: 0 }],
  } as unknown as Parameters<typeof renderQueue>[0];
  expect(renderQueue(old).split('\n')).toEqual([
    'pending 1  evicted_total 0',
    'tx_id       age  priority  state',
    'tx_01A  3 slots  normal    -',
  ]);
});

test('status text: on PostgreSQL this host and every session of its database; nothing of it on the journal', async () => {
  const { renderStatus } = await import('../src/commands/status');
  const base = {
    slot: 100,
    leader: null,
    bundle_engine_leader: null,
    next_bundle_engine_leader_slot: null,
    tip: { p50: 1000, p75: 2000 },
    stale: false,
    decision_mode: 'reflex' as const,
    bypass: false,
    queue: 3,
    agent: { connected: false, model: null, provider: null },
    upstream: {
      stream: { ok: true, detail: null, last_ok_at: null },
      rpc: { ok: true, detail: null, last_ok_at: null },
      block_engine: { ok: true, detail: null, last_ok_at: null },
      tip_floor: { ok: true, detail: null, last_ok_at: null },
    },
    tipper: { pubkey: 'Tipper111', balance_lamports: 5_000_000 },
    spend: { window_lamports: 0, limit_lamports: 0 },
    paused_reason: null,
    block_engine_regions: [],
    capacity: { send_rate_per_s: 8, slot_ms: 400, waiting: 0, expected_wait_s: 0, refused_total: 0 },
    webhooks: [],
  };
  expect(renderStatus({ ...base, fleet: null }, false)).not.toMatch(/session|epoch/);
  const text = renderStatus(
    {
      ...base,
      fleet: {
        host_id: 'relay-a:7777',
        epoch: 12,
        lease_ms: 5000,
        live: true,
        hosts: [
          {
            host_id: 'relay-a:7777',
            epoch: 11,
            started_at: '2026-11-27T10:00:00.000Z',
            heartbeat_age_ms: 60_000,
            lease_remaining_ms: -55_000,
            live: false,
            ended_at: '2026-11-27T10:01:00.000Z',
            owned: 0,
          },
          {
            host_id: 'relay-a:7777',
            epoch: 12,
            started_at: '2026-11-27T10:01:00.000Z',
            heartbeat_age_ms: 800,
            lease_remaining_ms: 4200,
            live: true,
            ended_at: null,
            owned: 3,
          },
        ],
      },
    },
    false,
  );
  expect(text).toMatch(/host\s+│ relay-a:7777, epoch 12; lease 5000 ms/);
  expect(text).toMatch(/session relay-a:7777 #11\s+│ ended 2026-11-27T10:01:00.000Z; owns 0 live/);
  expect(text).toMatch(/session relay-a:7777 #12\s+│ live, heartbeat 0.8 s ago; owns 3 live/);

  // Landing and cost per region and per contention class (issue 30).
  const stat = {
    submitted: 5,
    landed: 3,
    lost: 1,
    tips_paid_lamports: 4_500,
    landed_share: 0.75,
    lamports_per_landed: 1_500,
  };
  const landing = renderStatus(
    {
      ...base,
      fleet: null,
      block_engine_regions: [
        { region: 'ny', url: 'http://ny', cooling_ms: 0, accepted: 5, rejected: 0, transport_errors: 0 },
        {
          region: 'tokyo',
          url: 'http://tokyo',
          cooling_ms: 0,
          accepted: 0,
          rejected: 0,
          transport_errors: 0,
        },
      ],
      landing: {
        by_region: [
          { region: 'ny', ...stat },
          {
            region: 'tokyo',
            ...stat,
            submitted: 0,
            landed: 0,
            lost: 0,
            tips_paid_lamports: 0,
            landed_share: null,
            lamports_per_landed: null,
          },
        ],
        by_contention: [{ contention: 'contended', ...stat }],
      },
    },
    false,
  );
  expect(landing).toMatch(
    /engine ny\s+│ 5 taken, 0 refused, 0 transport errors; 3 landed of 4 \(75 %\), 1,500 lamports per landed/,
  );
  expect(landing).toMatch(/engine tokyo\s+│ 0 taken, 0 refused, 0 transport errors\s/);
  expect(landing).not.toContain('landing;');
  expect(
    renderStatus({ ...base, fleet: null, capacity: { ...base.capacity, landed_share: 0.5 } }, false),
  ).toMatch(/send capacity\s+│ 8 bundles\/s, 50 % landing; 0 waiting/);
  expect(landing).toMatch(/contended bundles\s+│ 3 landed of 4 \(75 %\), 1,500 lamports per landed/);
});
