/**
 * The sidecar process: the one place that reads the environment. It validates it into a config, starts the
 * service, and stops it cleanly on SIGINT / SIGTERM. A bad environment stops start-up with one clear line.
 */
import { isRelayError } from '@solrelay/core';
import { configFromEnv, startSidecar } from '@solrelay/sidecar';
import { setFlagsFromString } from 'node:v8';
import pino from 'pino';

/**
 * `RELAY_MEMORY_MODE=small` trades speed for a smaller, flatter resident size: V8's `--optimize-for-size` (smaller
 * young generation, slower heap growth, leaner code). Measured in BENCHMARKS.md: RSS after 10,000 transactions
 * through ~150 MB instead of ~230–400 MB, at ~30% fewer enqueues per second. Set before anything is allocated.
 */
function applyMemoryMode(env: NodeJS.ProcessEnv): void {
  const mode = env.RELAY_MEMORY_MODE?.trim() || 'default';
  if (mode === 'small') setFlagsFromString('--optimize-for-size');
  else if (mode !== 'default') {
    process.stderr.write(`relay: RELAY_MEMORY_MODE must be "default" or "small", got "${mode}"\n`);
    process.exit(1);
  }
}

/**
 * Crash tests name points where the process kills itself (SIGKILL: no cleanup, like a power cut).
 * `RELAY_CRASH_AT=attempt.journaled` (comma-separated names), `RELAY_CRASH_AFTER=N` to crash at the N-th hit.
 * Inert unless set.
 */
function crashPointFromEnv(env: NodeJS.ProcessEnv): ((name: string) => void) | undefined {
  const names = (env.RELAY_CRASH_AT ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) return undefined;
  let remaining = Math.max(1, Number(env.RELAY_CRASH_AFTER ?? '1') || 1);
  return (name: string) => {
    if (!names.includes(name)) return;
    if (--remaining > 0) return;
    process.stderr.write(`relay: crash point ${name} reached; killing the process (RELAY_CRASH_AT)\n`);
    process.kill(process.pid, 'SIGKILL');
  };
}

async function main(): Promise<void> {
  applyMemoryMode(process.env);
  const logger = pino({ name: 'relay', level: process.env.LOG_LEVEL ?? 'info' });
  const config = configFromEnv(process.env);
  const crashPoint = crashPointFromEnv(process.env);
  const sidecar = await startSidecar(config, {
    logger,
    ...(crashPoint ? { crashPoint } : {}),
    ...(process.env.RELAY_WEB_DIST ? { webDist: process.env.RELAY_WEB_DIST } : {}),
  });
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
