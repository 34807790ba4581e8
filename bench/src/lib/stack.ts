import { join } from 'node:path';
import { startRelayStack as startStack, type RelayStack } from '@solrelay/testkit';
import {
  startAgentChild,
  startSidecarChild,
  startSimnetChild,
  type ProcessHandle,
  type SidecarChild,
  type SimnetChild,
} from './processes';
import type { SimnetChildOptions } from './simnet-process';
import { journalStore, type BenchStore, type StoreProbe } from './store';

/** The real sidecar process, stopped by the stack's `close` (SIGTERM to its group). */
export type BenchSidecar = SidecarChild & { close(): Promise<void> };
/** The real agent process (apps/agents), when the benchmark asked for one. */
export type BenchAgent = ProcessHandle & { close(): Promise<void> };

/**
 * testkit's relay stack, every part a process of its own (so its CPU and memory are read apart), and a probe of its
 * store (the sidecar's CPU, and on PostgreSQL the server's commits and CPU).
 */
export type BenchStack = RelayStack<SimnetChild, BenchSidecar, BenchAgent> & { store: StoreProbe };

export interface BenchStackOptions {
  simnet: Omit<SimnetChildOptions, 'keypairPath'>;
  /** Written to relay.policy.json before the sidecar starts (DESIGN §5: benchmarks set these explicitly). */
  policy: Record<string, unknown>;
  env?: Record<string, string>;
  /** Run the sidecar under `node --cpu-prof`, writing the profile into the stack's directory on exit. */
  cpuProfile?: boolean;
  dir?: string;
  /** Called once the simnet is up, before the sidecar starts (e.g. to pin the auction's regime). */
  onSimnet?: (simnet: SimnetChild) => Promise<void>;
  /**
   * Start the real agent process once the sidecar listens (log: agent.log in the stack's directory), with the
   * environment this returns from the sidecar's (RELAY_URL is added).
   */
  agent?: (sidecarEnv: Record<string, string>) => Record<string, string>;
  /** Where the sidecar keeps its records (default: the local journal). */
  store?: BenchStore;
}

/** A simnet process, the real sidecar process and (when asked) the real agent process over loopback. */
export async function startRelayStack(options: BenchStackOptions): Promise<BenchStack> {
  const { agent } = options;
  const store = await (options.store ?? journalStore()).attach();
  const stack = await startStack<SimnetChild, BenchSidecar, BenchAgent>({
    dir: options.dir,
    policy: options.policy,
    env: { BUNDLE_ENGINE_RPS: '1000', ...options.env, ...store.env },
    // The tipper (and the payer the stack funds besides) hold 1,000 SOL: no benchmark runs out.
    lamports: 1_000_000_000_000,
    cluster: async () => {
      const simnet = await startSimnetChild(options.simnet);
      try {
        await options.onSimnet?.(simnet);
      } catch (error) {
        await simnet.stop();
        throw error;
      }
      return simnet;
    },
    start: async (env, dir) => {
      const nodeArgs = options.cpuProfile ? ['--cpu-prof', '--cpu-prof-dir', join(dir, 'profile')] : [];
      // Extra node/V8 flags for the sidecar (exploring memory/speed trade-offs), e.g. "--max-semi-space-size=8".
      if (process.env.BENCH_SIDECAR_NODE_FLAGS)
        nodeArgs.push(...process.env.BENCH_SIDECAR_NODE_FLAGS.split(' '));
      const sidecar = await startSidecarChild(env, join(dir, 'sidecar.log'), nodeArgs);
      return Object.assign(sidecar, { close: () => sidecar.stop() });
    },
    ...(agent
      ? {
          agent: async (stack) => {
            const handle = await startAgentChild(
              stack.sidecar.url,
              agent(stack.env),
              join(stack.dir, 'agent.log'),
            );
            return Object.assign(handle, { close: () => handle.stop() });
          },
        }
      : {}),
  });
  return Object.assign(stack, { store: store.probe(() => stack.sidecar.pid) });
}

/** A policy that lets a benchmark, not the defaults, decide the load (DESIGN §5). */
export function benchPolicy(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    'rate-limit': 1_000_000,
    'max-queue': 1_000_000,
    'spend-limit': 0,
    ...overrides,
  };
}
