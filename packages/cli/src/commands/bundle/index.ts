import type { CliContext, CommandResult } from '../../output';
import { withSidecar } from '../../sidecar-api';

/**
 * `relay bundle <id>`: the full lifecycle entry (decision trace, commitment timeline, tip floor at submit time,
 * every signature). It is a JSON document either way, so text and `--json` print the same.
 */
export async function bundle(ctx: CliContext, options: { id: string }): Promise<CommandResult> {
  const data = await withSidecar(ctx, (client) => client.bundle(options.id));
  return { data, text: JSON.stringify(data, null, 2) };
}
