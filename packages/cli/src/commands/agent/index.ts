import type { CliContext, CommandResult } from '../../output';
import { runDevScript } from '../../runtime/dev-script';

/** `relay agent`: the agent as its own process, `npm run dev` in AGENT_DIR. */
export async function agent(ctx: CliContext): Promise<CommandResult> {
  return { exitCode: await runDevScript(ctx, 'AGENT_DIR', 'agent') };
}
