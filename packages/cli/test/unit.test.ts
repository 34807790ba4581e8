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
