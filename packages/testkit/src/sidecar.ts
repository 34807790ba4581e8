import pino from 'pino';
import { startStack, type SidecarLike, type Stack, type StackOptions, type StartSidecar } from './stack';

/**
 * Exactly what `inProcessSidecar` uses of `@solrelay/sidecar`. The caller passes the two functions (the built
 * package's, or the sidecar's own `src` in its tests), so testkit does not depend on the sidecar: the sidecar's
 * tests depend on testkit, and a dependency back would be a cycle.
 */
export interface SidecarModule<Config, Options, S extends SidecarLike> {
  configFromEnv(env: Record<string, string>, dir: string): Config;
  startSidecar(config: Config, options?: Options): Promise<S>;
}

/** Poll intervals for the simnet's 60 ms test slots (the sidecar's defaults are for 400 ms slots). */
export const TEST_INTERVALS = {
  tipFloorMs: 300,
  balanceMs: 300,
  leadersMs: 1000,
  rpcSlotMs: 100,
  blockHeightMs: 200,
};

/** A pino logger at `RELAY_TEST_LOG` (silent unless set). */
export const quietLogger = pino({ level: process.env.RELAY_TEST_LOG ?? 'silent' });

/**
 * Starts the sidecar in this process on the stack's environment: `configFromEnv(env, dir)`, then `startSidecar`
 * with the quiet logger and `TEST_INTERVALS`, overridden by `options` (a test's own logger, intervals, clock, ...).
 */
export function inProcessSidecar<Config, Options extends object, S extends SidecarLike>(
  sidecar: SidecarModule<Config, Options, S>,
  options: Options = {} as Options,
): StartSidecar<S> {
  return (env, dir) =>
    sidecar.startSidecar(sidecar.configFromEnv(env, dir), {
      logger: quietLogger,
      intervals: TEST_INTERVALS,
      ...options,
    } as Options);
}

export type InProcessStackOptions<Options> = Omit<StackOptions<SidecarLike>, 'start'> & {
  /** `startSidecar`'s options, over the quiet logger and `TEST_INTERVALS`. */
  sidecar?: Options;
};

/** `startStack` with the sidecar `sidecar` in this process (`inProcessSidecar`). */
export function startInProcessStack<Config, Options extends object, S extends SidecarLike>(
  sidecar: SidecarModule<Config, Options, S>,
  options: InProcessStackOptions<Options> = {},
): Promise<Stack<S>> {
  const { sidecar: sidecarOptions, ...stackOptions } = options;
  return startStack<S>({ ...stackOptions, start: inProcessSidecar(sidecar, sidecarOptions) });
}
