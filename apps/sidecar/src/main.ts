/**
 * The sidecar process: the one place that reads the environment. It validates it into a config, starts the
 * service, and stops it cleanly on SIGINT / SIGTERM. A bad environment stops start-up with one clear line.
 */
import { isRelayError } from '@solrelay/core';
import { applyV8Flags, configFromEnv, memoryModeFlagsFromEnv, startSidecar } from '@solrelay/sidecar';
import pino from 'pino';

/**
 * Crash tests name points where the process kills itself (SIGKILL: no cleanup, like a power cut).
 * `RELAY_CRASH_AT=attempt.journaled` (comma-separated names), `RELAY_CRASH_AFTER=N` to crash at the N-th hit.
 * Inert unless set; when set, start-up warns loudly (a production process must never run with it). The hook says
 * which names are armed, so code that changes how it works around a crash point (the lifecycle log splits its
 * writes for `lifecycle.mid-write`) does so only when that point is the one armed.
 */
type CrashHook = ((name: string) => void) & {
  armed: (name: string) => boolean;
  names: string[];
  after: number;
};

function crashPointFromEnv(env: NodeJS.ProcessEnv): CrashHook | undefined {
  const names = (env.RELAY_CRASH_AT ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) return undefined;
  const after = Math.max(1, Number(env.RELAY_CRASH_AFTER ?? '1') || 1);
  let remaining = after;
  const hook = (name: string) => {
    if (!names.includes(name)) return;
    if (--remaining > 0) return;
    process.stderr.write(`relay: crash point ${name} reached; killing the process (RELAY_CRASH_AT)\n`);
    process.kill(process.pid, 'SIGKILL');
  };
  return Object.assign(hook, { armed: (name: string) => names.includes(name), names, after });
}

async function main(): Promise<void> {
  // RELAY_MEMORY_MODE (the sidecar's runtime/memory-mode.ts): part before the service allocates, part once started.
  const memory = memoryModeFlagsFromEnv(process.env, process.execArgv);
  applyV8Flags(memory.start);
  const logger = pino({ name: 'relay', level: process.env.LOG_LEVEL ?? 'info' });
  const config = configFromEnv(process.env);
  const crashPoint = crashPointFromEnv(process.env);
  if (crashPoint) {
    // Loud on purpose: this process will SIGKILL itself. Only crash tests set RELAY_CRASH_AT.
    const warning =
      `RELAY_CRASH_AT is set (${crashPoint.names.join(', ')}, hit ${crashPoint.after}): this process will kill ` +
      'itself with SIGKILL there. It is a crash-test switch; unset it for any real use.';
    process.stderr.write(`relay: WARNING: ${warning}\n`);
    logger.warn({ crash_at: crashPoint.names, crash_after: crashPoint.after }, warning);
  }
  const sidecar = await startSidecar(config, {
    logger,
    ...(crashPoint ? { crashPoint } : {}),
    ...(process.env.RELAY_WEB_DIST ? { webDist: process.env.RELAY_WEB_DIST } : {}),
  });
  applyV8Flags(memory.running);
  // One line a supervisor or test can wait for.
  process.stdout.write(`relay: listening on ${sidecar.url}\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    sidecar.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  const message = isRelayError(error)
    ? `${error.code}: ${error.message}`
    : ((error as Error).stack ?? String(error));
  process.stderr.write(`relay: cannot start: ${message}\n`);
  process.exit(1);
});
