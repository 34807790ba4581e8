import type { CliContext, CommandResult } from '../../output';
import { runSidecar } from '../../runtime/run-sidecar';
import type { SimFlags } from '../../runtime/simulated-cluster';

export interface StartOptions {
  bypass: boolean;
  /** Bypass tip in lamports (default 10,000 from BYPASS_TIP_LAMPORTS); only with `bypass`. */
  tip?: number | undefined;
  sim: SimFlags | null;
  demo: boolean;
}

/** `relay start [--bypass [--tip N]] [--sim]`: the sidecar alone; the agent runs separately (`relay agent`). */
export async function start(ctx: CliContext, options: StartOptions): Promise<CommandResult> {
  const exitCode = await runSidecar(ctx, {
    withAgent: false,
    bypass: options.bypass,
    tip: options.tip,
    sim: options.sim,
    demo: options.demo,
  });
  return { exitCode };
}
