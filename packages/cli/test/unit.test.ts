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
