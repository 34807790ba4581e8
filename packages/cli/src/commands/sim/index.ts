import type { CliContext, CommandResult } from '../../output';
import { untilSignal } from '../../runtime/process-group';
import { startSimulatedCluster, type SimFlags } from '../../runtime/simulated-cluster';

/**
 * `relay sim`: the simulated cluster alone, until Ctrl-C. Prints the endpoints as `#` comments and the env lines a
 * sidecar needs (with `KEYPAIR_PATH` to a funded keypair), eval-friendly; under `--json`, one document instead.
 */
export async function sim(
  ctx: CliContext,
  options: { flags: SimFlags; json: boolean },
): Promise<CommandResult> {
  const signal = untilSignal((line) => ctx.io.stderr(`# ${line}\n`));
  try {
    const cluster = await startSimulatedCluster(options.flags);
    try {
      if (options.json) {
        const document = {
          endpoints: cluster.simnet.endpoints,
          env: cluster.env,
          pubkey: cluster.keypair.publicKey.toBase58(),
        };
        ctx.io.stdout(`${JSON.stringify(document, null, 2)}\n`);
      } else {
        ctx.io.stdout(`${cluster.lines().join('\n')}\n`);
      }
      const name = await signal.promise;
      ctx.io.stderr(`# ${name}: stopping\n`);
    } finally {
      await cluster.stop();
    }
    return {};
  } finally {
    signal.cancel();
  }
}
