import { rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Keypair } from '@solana/web3.js';
import { endpointLines, formatEnvLines, startSimnet, type Simnet } from '@solrelay/simnet';
import { atExit } from './process-group';

/** Options shared by every `--sim` command. */
export interface SimFlags {
  seed?: number | undefined;
  slotMs?: number | undefined;
  rateLimit?: boolean | undefined;
}

export interface SimulatedCluster {
  simnet: Simnet;
  /** A keypair funded on the cluster (the tipper), written where `KEYPAIR_PATH` points. */
  keypair: Keypair;
  keypairPath: string;
  /** A scratch directory for this run's files (keypair, journal, lifecycle log); removed on stop. */
  dir: string;
  /** The simnet's env lines plus `KEYPAIR_PATH`: what a sidecar (and agent) needs to use this cluster. */
  env: Record<string, string>;
  /** The endpoints as `#` comments, then `NAME=value` env lines (eval-friendly, like `solrelay-simnet`). */
  lines(): string[];
  stop(): Promise<void>;
}

const TIPPER_LAMPORTS = 100_000_000_000;

/** The simulated cluster in this process, with an ephemeral funded keypair: `--sim` needs no env at all. */
export async function startSimulatedCluster(flags: SimFlags): Promise<SimulatedCluster> {
  const simnet = await startSimnet({
    ...(flags.seed !== undefined ? { seed: flags.seed } : {}),
    ...(flags.slotMs !== undefined ? { slotMs: flags.slotMs } : {}),
    ...(flags.rateLimit === false ? { rateLimit: false } : {}),
  });
  let dir: string | null = null;
  try {
    dir = await mkdtemp(join(tmpdir(), 'relay-sim-'));
    const keypair = simnet.fundedKeypair(TIPPER_LAMPORTS);
    const keypairPath = join(dir, 'keypair.json');
    await writeFile(keypairPath, JSON.stringify([...keypair.secretKey]), { mode: 0o600 });
    const env = { ...simnet.env(), KEYPAIR_PATH: keypairPath };
    const scratch = dir;
    // Removed however this process ends (a second Ctrl-C while stopping, a crash).
    const forget = atExit(() => rmSync(scratch, { recursive: true, force: true }), {
      kind: 'dir',
      path: scratch,
    });
    return {
      simnet,
      keypair,
      keypairPath,
      dir: scratch,
      env,
      lines() {
        return [
          `# simulated cluster (seed ${flags.seed ?? 1}, ${flags.slotMs ?? 400} ms slots)`,
          ...endpointLines(simnet.endpoints),
          `# funded keypair     ${keypair.publicKey.toBase58()}`,
          ...formatEnvLines(env),
        ];
      },
      async stop() {
        await simnet.stop();
        await rm(scratch, { recursive: true, force: true });
        forget();
      },
    };
  } catch (error) {
    await simnet.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
