import { spawnSync } from 'node:child_process';
import { isRelayError } from '@solrelay/core';
import {
  HEAP_GROWING_PERCENT,
  memoryModeFlags,
  memoryModeFlagsFromEnv,
  parseMemoryMode,
} from '../src/runtime/memory-mode';

test('RELAY_MEMORY_MODE: unset or empty is default; the three modes parse', () => {
  expect(parseMemoryMode(undefined)).toBe('default');
  expect(parseMemoryMode('  ')).toBe('default');
  expect(parseMemoryMode('small')).toBe('small');
  expect(parseMemoryMode(' unbounded ')).toBe('unbounded');
});

test('RELAY_MEMORY_MODE: anything else is a coded configuration error naming the variable and the modes', () => {
  let caught: unknown;
  try {
    parseMemoryMode('tiny');
  } catch (error) {
    caught = error;
  }
  expect(isRelayError(caught)).toBe(true);
  const error = caught as { code: string; message: string };
  expect(error.code).toBe('RELAY_E_CONFIG_INVALID_ENV');
  expect(error.message).toContain('RELAY_MEMORY_MODE');
  expect(error.message).toContain('default, small, unbounded');
});

test('default bounds heap growth, small adds optimize-for-size, unbounded leaves V8 alone', () => {
  const growth = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
  expect(memoryModeFlags('default')).toEqual({ start: [], running: [growth] });
  expect(memoryModeFlags('small')).toEqual({ start: ['--optimize-for-size'], running: [growth] });
  expect(memoryModeFlags('unbounded')).toEqual({ start: [], running: [] });
});

test('a growth factor the operator gave node (argv or NODE_OPTIONS) is kept: the mode does not override it', () => {
  expect(memoryModeFlags('default', ['--heap-growing-percent=50'])).toEqual({ start: [], running: [] });
  expect(memoryModeFlags('small', ['--enable-source-maps', '--heap_growing_percent=5'])).toEqual({
    start: ['--optimize-for-size'],
    running: [],
  });
  // A heap cap is another knob: the growth factor still applies under it.
  expect(memoryModeFlags('default', ['--max-old-space-size=640']).running).toEqual([
    `--heap-growing-percent=${HEAP_GROWING_PERCENT}`,
  ]);
});

test("the growth factor is a flag this node's V8 knows (setFlagsFromString ignores an unknown one silently)", () => {
  const run = spawnSync(process.execPath, ['--v8-options'], { encoding: 'utf8' });
  expect(run.status).toBe(0);
  expect(run.stdout).toMatch(/--heap-growing-percent \(specifies heap growing factor/);
  expect(run.stdout).toMatch(/--optimize-for-size/);
});

test('from the environment: RELAY_MEMORY_MODE picks the mode, NODE_OPTIONS and execArgv are the node flags', () => {
  const growth = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
  expect(memoryModeFlagsFromEnv({}, [])).toEqual({ start: [], running: [growth] });
  expect(memoryModeFlagsFromEnv({ RELAY_MEMORY_MODE: 'small' }, [])).toEqual({
    start: ['--optimize-for-size'],
    running: [growth],
  });
  expect(
    memoryModeFlagsFromEnv({ NODE_OPTIONS: '--enable-source-maps  --heap-growing-percent=50' }, []),
  ).toEqual({ start: [], running: [] });
  expect(memoryModeFlagsFromEnv({}, ['--heap-growing-percent=5'])).toEqual({ start: [], running: [] });
  expect(() => memoryModeFlagsFromEnv({ RELAY_MEMORY_MODE: 'tiny' }, [])).toThrow('RELAY_MEMORY_MODE');
});
