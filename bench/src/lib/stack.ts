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
export type BenchStack = RelayStack<SimnetChild, BenchSidecar, BenchAgent> & {
  store: StoreProbe;
  /** Every sidecar of the stack: the one `sidecar`, or a fleet's hosts in order (`sidecar` is the first). */
  readonly hosts: BenchSidecar[];
};

/** A fleet (README "Running a fleet"): several sidecars on the stack's one PostgreSQL database. */
export interface BenchFleetOptions {
  hosts: number;
  /** Each host's own environment besides the fleet's (e.g. its engine source address), by index from 0. */
  hostEnv?: (index: number) => Record<string, string>;
}

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
  /**
   * Start a fleet instead of one sidecar: each host `RELAY_FLEET=1` with its own `RELAY_HOST_ID` (`host-1`, ...), API
   * port, data directory, lifecycle file and log (`sidecar-1.log`, ...), started together on the store's database
   * (PostgreSQL only); the tipper and policy are shared. No agent (the hosts decide for themselves, e.g. bypass).
   */
  fleet?: BenchFleetOptions;
}

/** The fleet's part of host `index`'s environment (as the reliability suite's fleet trial runs its hosts). */
function fleetHostEnv(index: number, dir: string): Record<string, string> {
  const n = index + 1;
  return {
    RELAY_FLEET: '1',
    RELAY_HOST_ID: `host-${n}`,
    RELAY_DATA_DIR: join(dir, `data-${n}`),
    LIFECYCLE_PATH: join(dir, `lifecycle-${n}.jsonl`),
  };
}

/** A simnet process, the real sidecar process and (when asked) the real agent process over loopback. */
export async function startRelayStack(options: BenchStackOptions): Promise<BenchStack> {
  const { agent, fleet } = options;
  if (fleet && (agent || options.store?.kind !== 'postgres'))
    throw new Error('a fleet runs on the postgres store, without an agent');
  const store = await (options.store ?? journalStore()).attach();
  let hosts: BenchSidecar[] = [];
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
      if (!fleet) {
        const sidecar = await startSidecarChild(env, join(dir, 'sidecar.log'), nodeArgs);
        hosts = [Object.assign(sidecar, { close: () => sidecar.stop() })];
        return hosts[0] as BenchSidecar;
      }
      const started = await Promise.allSettled(
        Array.from({ length: fleet.hosts }, (_, i) =>
          startSidecarChild(
            { ...env, ...fleetHostEnv(i, dir), ...fleet.hostEnv?.(i) },
            join(dir, `sidecar-${i + 1}.log`),
            nodeArgs,
          ),
        ),
      );
      const up = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
      const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) {
        await Promise.all(up.map((h) => h.stop()));
        throw failed.reason;
      }
      hosts = up.map((h) => Object.assign(h, { close: () => h.stop() }));
      // The stack's `sidecar` is the first host; closing it closes them all.
      return {
        ...(hosts[0] as BenchSidecar),
        close: () => Promise.all(hosts.map((h) => h.stop())).then(() => undefined),
      };
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
  const withStore = Object.assign(stack, { store: store.probe(() => hosts.map((h) => h.pid)) });
  // A getter (a restart replaces the sidecar).
  return Object.defineProperty(withStore, 'hosts', { get: () => hosts }) as BenchStack;
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
