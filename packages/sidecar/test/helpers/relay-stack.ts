import { get, startStack, type Stack, type StackOptions } from '@solrelay/testkit';
import pino from 'pino';
import { configFromEnv } from '../../src/config';
import { startSidecar, type Sidecar, type SidecarOptions } from '../../src/service';

export const quietLogger = pino({ level: process.env.RELAY_TEST_LOG ?? 'silent' });

/** Fast poll intervals: the simnet's slots are 60 ms in tests. */
export const testIntervals: SidecarOptions['intervals'] = {
  tipFloorMs: 300,
  balanceMs: 300,
  leadersMs: 1000,
  rpcSlotMs: 100,
  blockHeightMs: 200,
};

/** The shared stack with this package's own sidecar (from source). */
export function startRelayStack(
  options: Omit<StackOptions<Sidecar>, 'start'> & { sidecar?: SidecarOptions } = {},
): Promise<Stack<Sidecar>> {
  return startStack({
    ...options,
    start: (env, dir) =>
      startSidecar(configFromEnv(env, dir), {
        logger: quietLogger,
        intervals: testIntervals,
        ...options.sidecar,
      }),
  });
}

/** A counter's value from the sidecar's `/metrics` (0 when the series has not been written yet). */
export async function counterValue(sidecarUrl: string, name: string): Promise<number> {
  const text = (await get(sidecarUrl, '/metrics')).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}
