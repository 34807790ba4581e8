import type { CliContext, CommandResult } from '../../output';
import { runSidecar } from '../../runtime/run-sidecar';
import type { SimFlags } from '../../runtime/simulated-cluster';

export interface UpOptions {
  sim: SimFlags | null;
  demo: boolean;
}

/** `relay up [--sim]`: the sidecar and the agent in one terminal; the agent's lines are prefixed `[ AGENT ]`. */
export async function up(ctx: CliContext, options: UpOptions): Promise<CommandResult> {
  const exitCode = await runSidecar(ctx, {
    withAgent: true,
    bypass: false,
    sim: options.sim,
    demo: options.demo,
  });
  return { exitCode };
}
