import { resolveAppDir } from '../env';
import { EXIT_CODES, ExitError } from '../errors';
import type { CliContext } from '../output';
import { spawnGroup, untilSignal } from './process-group';

/**
 * `npm run dev` in AGENT_DIR or WEB_DIR, in its own process group with the terminal's stdout and stderr. Ctrl-C
 * stops the group. Resolves with the script's exit code (0 after Ctrl-C).
 */
export async function runDevScript(
  ctx: CliContext,
  variable: 'AGENT_DIR' | 'WEB_DIR',
  what: string,
): Promise<number> {
  const resolved = resolveAppDir(ctx, variable);
  if (!resolved.dir) {
    throw new ExitError(
      EXIT_CODES.failure,
      `cannot start the ${what}: no package.json in ${resolved.tried.join(' or ')}`,
      {
        hint: `Set ${variable} to the ${what}'s directory (the one whose package.json has a "dev" script).`,
      },
    );
  }
  const signal = untilSignal((line) => ctx.io.stderr(`${line}\n`));
  try {
    let child;
    try {
      child = await spawnGroup('npm', ['run', 'dev'], { cwd: resolved.dir, env: { ...ctx.env } });
    } catch (error) {
      throw new ExitError(
        EXIT_CODES.failure,
        `cannot run npm in ${resolved.dir}: ${(error as Error).message}`,
      );
    }
    ctx.io.stderr(`relay: ${what}: npm run dev in ${resolved.dir} (pid ${child.pid})\n`);
    const ended = await Promise.race([signal.promise.then(() => null), child.exited]);
    if (ended === null) {
      await child.stop();
      return EXIT_CODES.ok;
    }
    return ended.code ?? EXIT_CODES.failure;
  } finally {
    signal.cancel();
  }
}
