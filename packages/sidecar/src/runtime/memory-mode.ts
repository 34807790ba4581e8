import { setFlagsFromString } from 'node:v8';
import { RelayError } from '@solrelay/core';

/**
 * How the sidecar's process trades speed for resident memory (`RELAY_MEMORY_MODE`).
 *
 * - `default`: V8 lets the heap grow {@link HEAP_GROWING_PERCENT} % past what survived the last full collection
 *   before the next one (its `--heap-growing-percent`, which replaces the factor V8 would pick, 1.1 to 4).
 *   Left alone, V8 on a machine with memory to spare lets the old generation grow to several times its live size
 *   before it collects (its heap limit is a share of the machine's memory: 4 GB here), so a sidecar whose live heap
 *   is ~150 MB sat at 1.3-1.5 GB of RSS after 100,000 transactions. A growth factor, unlike a heap cap
 *   (`--max-old-space-size`), adds no out-of-memory risk beyond V8's own limit: the next collection simply comes
 *   sooner. It costs throughput (217-238 against 265 transactions a second through in the benchmark).
 * - `small`: the same, plus V8's `--optimize-for-size` (leaner code and heap heuristics; set at start, before the
 *   service allocates): smaller still, at about 30 % fewer enqueues per second (BENCHMARKS.md).
 * - `unbounded`: V8's own heuristics untouched (the fastest, the largest).
 *
 * Growth factor and the flags are V8's (`node --v8-options`: `--heap-growing-percent` "specifies heap growing factor
 * as (1 + heap_growing_percent/100)"). V8 reads it at every full collection, so setting it while the process runs
 * takes effect from the next one, unlike the heap limit, which is fixed when the isolate is created. Node calls
 * flags set after start-up unpredictable in general; this one was checked by its effect: in the memory benchmark
 * the running sidecar's RSS stayed flat instead of growing to 1.3 GB.
 */
export type MemoryMode = 'default' | 'small' | 'unbounded';

export const MEMORY_MODES: readonly MemoryMode[] = ['default', 'small', 'unbounded'];

/**
 * The growth factor of `default` and `small`, chosen with the memory-scale benchmark (BENCHMARKS.md §4). Streaming
 * ~250 transactions a second through, V8's own growth reached 1.3 GB of RSS and kept rising; 20 % held RSS flat at
 * 340-430 MB over 100,000 (217-238/s); 10 % saved little more (348 MB after 92,000) at a lower rate still (201/s): the
 * full collections came too often once ~150 MB was live.
 */
export const HEAP_GROWING_PERCENT = 20;

/** `RELAY_MEMORY_MODE`'s value (unset or empty: `default`); anything else is a coded configuration error. */
export function parseMemoryMode(raw: string | undefined): MemoryMode {
  const value = raw?.trim() || 'default';
  if ((MEMORY_MODES as readonly string[]).includes(value)) return value as MemoryMode;
  throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
    name: 'RELAY_MEMORY_MODE',
    reason: `"${value}" is not one of ${MEMORY_MODES.join(', ')}`,
  });
}

/**
 * The V8 flags of `mode`: `start` before the service allocates anything, `running` once it has started. The growth
 * bound waits for the end of start-up: replaying a journal builds the whole live heap at once, and a heap allowed to
 * grow only a tenth (or a fifth) between full collections collects over and over while it does (start-up on a
 * 92,000-transaction journal took 4.8 s instead of 2.1 s). `nodeFlags` are the flags the process was started with
 * (`process.execArgv` and `NODE_OPTIONS`): a growth factor the operator chose there wins over the mode's.
 */
export function memoryModeFlags(
  mode: MemoryMode,
  nodeFlags: readonly string[] = [],
): { start: string[]; running: string[] } {
  if (mode === 'unbounded') return { start: [], running: [] };
  const own = nodeFlags.some((f) => /^--heap[-_]growing[-_]percent(=|$)/.test(f));
  return {
    start: mode === 'small' ? ['--optimize-for-size'] : [],
    running: own ? [] : [`--heap-growing-percent=${HEAP_GROWING_PERCENT}`],
  };
}

/**
 * {@link memoryModeFlags} of a process from its environment (`RELAY_MEMORY_MODE`, `NODE_OPTIONS`) and `execArgv`: what
 * each entry that runs the sidecar (apps/sidecar, the CLI's `relay start` / `relay up`) applies.
 */
export function memoryModeFlagsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  execArgv: readonly string[],
): { start: string[]; running: string[] } {
  return memoryModeFlags(parseMemoryMode(env.RELAY_MEMORY_MODE), [
    ...execArgv,
    ...(env.NODE_OPTIONS ?? '').split(/\s+/),
  ]);
}

/** Set `flags` on this process's V8 (see {@link memoryModeFlags}). */
export function applyV8Flags(flags: readonly string[]): void {
  for (const flag of flags) setFlagsFromString(flag);
}
