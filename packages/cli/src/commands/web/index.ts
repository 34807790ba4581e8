import type { CliContext, CommandResult } from '../../output';
import { runDevScript } from '../../runtime/dev-script';

/** `relay web`: the dashboard's dev server, `npm run dev` in WEB_DIR. */
export async function web(ctx: CliContext): Promise<CommandResult> {
  return { exitCode: await runDevScript(ctx, 'WEB_DIR', 'dashboard') };
}
