import { DEFAULT_POLICY, type Policy } from '@solrelay/core';
import type { RelayOptions } from '../../src/context';
import { Metrics } from '../../src/metrics';

/**
 * The options a unit test builds relay's ports from (`createPorts`), where it cares only about `given` (its store,
 * hub, upstream stubs): a fresh metrics registry, a silent log, a fixed clock, bypass on, reflex mode, no agent
 * grace, one bundle a second.
 */
export function unitPortOptions(
  given: Record<string, unknown> & { now: () => number; policy?: Partial<Policy> },
): RelayOptions {
  const { policy, ...rest } = given;
  return {
    metrics: new Metrics(),
    log: { error: jest.fn(), warn: jest.fn(), info: jest.fn(), debug: jest.fn() },
    bypass: { enabled: true, tipLamports: 5000 },
    initialMode: 'reflex',
    agentGraceMs: 0,
    bundleEngineRps: 1,
    ...rest,
    policy: () => ({ ...DEFAULT_POLICY, ...policy }) as Policy,
  } as unknown as RelayOptions;
}
