import { createRequire } from 'node:module';
import { configFromEnv, startSidecar, type Sidecar, type SidecarOptions } from '@solrelay/sidecar';
import { inProcessSidecar, startStack, type Stack, type StackOptions } from '@solrelay/testkit';

/**
 * The bad-input suite's stack: the real simnet and the real sidecar (in-process `startSidecar`, as the sidecar's
 * own e2e tests run it), with a silent logger so ten thousand refused requests do not flood the test output.
 * pino is the sidecar's own dependency; it is loaded from there rather than added to this package.
 */
const pino = createRequire(require.resolve('@solrelay/sidecar'))('pino') as (options: {
  level: string;
}) => NonNullable<SidecarOptions['logger']>;

const fuzzLogger: NonNullable<SidecarOptions['logger']> = pino({
  level: process.env.RELAY_TEST_LOG ?? 'silent',
});

export function startFuzzStack(
  options: Omit<StackOptions<Sidecar>, 'start'> & { sidecar?: SidecarOptions } = {},
): Promise<Stack<Sidecar>> {
  return startStack({
    ...options,
    start: inProcessSidecar({ configFromEnv, startSidecar }, { logger: fuzzLogger, ...options.sidecar }),
  });
}
