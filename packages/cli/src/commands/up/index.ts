import type { CliContext, CommandResult } from '../../output';
import type { SimFlags } from '../../runtime/simulated-cluster';

export interface UpOptions {
  sim: SimFlags | null;
  demo: boolean;
  /** `--hosts N`: a local fleet of N sidecars on one PostgreSQL; undefined for one sidecar in this process. */
  hosts?: number | undefined;
  /** With `hosts` and no RELAY_DATABASE_URL: fsync on the local PostgreSQL server (`--no-pg-fsync` turns it off). */
  pgFsync?: boolean;
}

/**
 * `relay up [--sim]`: the sidecar and the agent in one terminal; the agent's lines are prefixed `[ AGENT ]`. With
 * `--hosts N`, a fleet: N sidecar processes on one PostgreSQL, an agent beside each (`runFleet`).
 */
export async function up(ctx: CliContext, options: UpOptions): Promise<CommandResult> {
  if (options.hosts !== undefined) {
    const { runFleet } = await import('../../runtime/run-fleet');
    return {
      exitCode: await runFleet(ctx, {
        hosts: options.hosts,
        sim: options.sim,
        demo: options.demo,
        pgFsync: options.pgFsync ?? true,
      }),
    };
  }
  const { runSidecar } = await import('../../runtime/run-sidecar');
  const exitCode = await runSidecar(ctx, {
    withAgent: true,
    bypass: false,
    sim: options.sim,
    demo: options.demo,
  });
  return { exitCode };
}
