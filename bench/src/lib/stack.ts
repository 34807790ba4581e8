import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSidecarChild, startSimnetChild, type SidecarChild, type SimnetChild } from './processes';
import type { SimnetChildOptions } from './simnet-process';

export interface RelayStack {
  dir: string;
  simnet: SimnetChild;
  sidecar: SidecarChild;
  env: Record<string, string>;
  stop(): Promise<void>;
}

export interface RelayStackOptions {
  simnet: Omit<SimnetChildOptions, 'keypairPath'>;
  /** Written to relay.policy.json before the sidecar starts (DESIGN §5: benchmarks set these explicitly). */
  policy: Record<string, unknown>;
  env?: Record<string, string>;
  /** Run the sidecar under `node --cpu-prof`, writing the profile into the stack's directory on exit. */
  cpuProfile?: boolean;
  dir?: string;
  /** Called once the simnet is up, before the sidecar starts (e.g. to pin the auction's regime). */
  onSimnet?: (simnet: SimnetChild) => Promise<void>;
}

/** A simnet process plus the real sidecar process over loopback, every file in a fresh temp directory. */
export async function startRelayStack(options: RelayStackOptions): Promise<RelayStack> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'relay-bench-'));
  const keypairPath = join(dir, 'tipper.json');
  const simnet = await startSimnetChild({ ...options.simnet, keypairPath });
  try {
    await options.onSimnet?.(simnet);
  } catch (error) {
    await simnet.stop();
    throw error;
  }
  writeFileSync(join(dir, 'relay.policy.json'), JSON.stringify(options.policy));
  const env: Record<string, string> = {
    ...simnet.env,
    KEYPAIR_PATH: keypairPath,
    API_PORT: '0',
    RELAY_DATA_DIR: join(dir, 'data'),
    LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl'),
    RELAY_POLICY_FILE: join(dir, 'relay.policy.json'),
    BUNDLE_ENGINE_RPS: '1000',
    AGENT_DECISION_MODE: 'reflex',
    ...options.env,
  };
  let sidecar: SidecarChild;
  try {
    const nodeArgs = options.cpuProfile ? ['--cpu-prof', '--cpu-prof-dir', join(dir, 'profile')] : [];
    // Extra node/V8 flags for the sidecar (exploring memory/speed trade-offs), e.g. "--max-semi-space-size=8".
    if (process.env.BENCH_SIDECAR_NODE_FLAGS)
      nodeArgs.push(...process.env.BENCH_SIDECAR_NODE_FLAGS.split(' '));
    sidecar = await startSidecarChild(env, join(dir, 'sidecar.log'), nodeArgs);
  } catch (error) {
    await simnet.stop();
    throw error;
  }
  return {
    dir,
    simnet,
    sidecar,
    env,
    async stop() {
      await sidecar.stop();
      await simnet.stop();
    },
  };
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
