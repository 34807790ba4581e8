import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import type { Simnet } from '@solrelay/simnet';
import {
  get,
  spawnSidecar,
  startStack,
  waitUntil,
  type RunningSidecar,
  type Stack,
  type StackOptions,
} from '@solrelay/testkit';

type SidecarOptions = NonNullable<Parameters<typeof startSidecar>[1]>;
type Logger = NonNullable<SidecarOptions['logger']>;

/** Poll intervals matched to the simnet's 60 ms test slots. */
export const FAST_INTERVALS: SidecarOptions['intervals'] = {
  tipFloorMs: 300,
  balanceMs: 300,
  leadersMs: 1000,
  rpcSlotMs: 100,
  blockHeightMs: 200,
};

/**
 * Every line the in-process sidecar logs, kept as text so a test can grep it (at debug level, so nothing the
 * sidecar would say at any level escapes the check). pino comes from the sidecar's own dependencies: this suite
 * must log exactly as the sidecar does, without a second copy.
 */
export class CapturedLog {
  text = '';
  readonly logger: Logger;

  constructor(level = 'debug') {
    const sidecarRequire = createRequire(require.resolve('@solrelay/sidecar'));
    const pino = sidecarRequire('pino') as (options: object, stream: Writable) => Logger;
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        this.text += chunk.toString('utf8');
        done();
      },
    });
    this.logger = pino({ name: 'relay', level }, sink);
  }
}

export interface InProcessOptions extends Omit<StackOptions<Sidecar>, 'start'> {
  sidecar?: Partial<SidecarOptions>;
  log?: CapturedLog;
}

/** A real simnet plus the built sidecar package started in this process (its dist, as an app would use it). */
export function startInProcessStack(options: InProcessOptions = {}): Promise<Stack<Sidecar>> {
  const log = options.log ?? new CapturedLog('warn');
  return startStack<Sidecar>({
    ...options,
    start: (env, dir) =>
      startSidecar(configFromEnv(env, dir), {
        logger: log.logger,
        intervals: FAST_INTERVALS,
        ...options.sidecar,
      }),
  });
}

/** The built sidecar process (apps/sidecar/dist/main.cjs), as an operator runs it. */
export const SIDECAR_MAIN = require.resolve('@solrelay/app-sidecar/dist/main.cjs');
/** The built agent process (apps/agents/dist/main.cjs). */
export const AGENT_MAIN = require.resolve('@solrelay/app-agents/dist/main.cjs');

export interface ProcessSidecar extends RunningSidecar {
  close(): Promise<void>;
}

export interface ProcessStackOptions extends Omit<StackOptions<ProcessSidecar>, 'start'> {
  /** Runs before each spawn (e.g. to chmod the keypair file). */
  beforeStart?: (env: Record<string, string>) => Promise<void> | void;
  /** Every process this stack started, oldest first (restarts included), for their output. */
  started?: ProcessSidecar[];
}

/** A real simnet plus the built sidecar process; `stack.sidecar.child.pid` is the process to measure. */
export function startProcessStack(options: ProcessStackOptions = {}): Promise<Stack<ProcessSidecar>> {
  return startStack<ProcessSidecar>({
    ...options,
    start: async (env) => {
      await options.beforeStart?.(env);
      const running = await spawnSidecar(SIDECAR_MAIN, env, 30_000);
      const sidecar: ProcessSidecar = Object.assign(running, { close: () => running.stop() });
      options.started?.push(sidecar);
      return sidecar;
    },
  });
}

/** What the simnet's block engine accepted: the ground truth of what relay actually sent. */
export interface ReceivedBundle {
  bundleId: string;
  tipLamports: number;
  signatures: string[];
}

/** Record every bundle the engine accepts (both transports go through `submitBundle`). */
export function recordBundles(simnet: Simnet): { bundles: ReceivedBundle[]; stop(): void } {
  const engine = simnet.engine;
  const original = engine.submitBundle;
  const bundles: ReceivedBundle[] = [];
  engine.submitBundle = function record(this: typeof engine, ...args: Parameters<typeof original>) {
    const result = original.apply(this, args);
    if (result.ok) {
      const tracked = engine.getBundle(result.bundleId);
      bundles.push({
        bundleId: result.bundleId,
        tipLamports: tracked?.tipLamports ?? -1,
        signatures: tracked ? [...tracked.signatures] : [],
      });
    }
    return result;
  };
  return {
    bundles,
    stop: () => {
      engine.submitBundle = original;
    },
  };
}

/** Write the policy file and wait until the sidecar serves exactly these values. */
export async function applyPolicy(
  stack: Stack<{ url: string; close(): Promise<void> }>,
  policy: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<void> {
  await writeFile(stack.env.RELAY_POLICY_FILE as string, JSON.stringify(policy));
  await waitUntil(
    async () => {
      const { body } = await get(stack.sidecar.url, '/policy', headers);
      return Object.entries(policy).every(([key, value]) => body?.values?.[key] === value);
    },
    10_000,
    `policy ${JSON.stringify(policy)} in force`,
  );
}

/** Resident set size and its peak (kB → bytes) of a process, from /proc/<pid>/status. */
export async function processMemory(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) throw new Error(`no ${name} in /proc/${pid}/status`);
    return Number(match[1]) * 1024;
  };
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}
