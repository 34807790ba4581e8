import { resolveAppDir } from '../env';
import { EXIT_CODES, ExitError } from '../errors';
import type { CliContext } from '../output';
import { spawnGroup, type ChildGroup } from './process-group';

/**
 * The agent beside a sidecar: `npm run dev` in `agentDir`, its own process group, following the sidecar at `url`
 * (`RELAY_URL`, and `API_PORT` for an agent that reads only that), every line prefixed.
 */
export async function startAgent(options: {
  agentDir: string;
  env: Record<string, string | undefined>;
  url: string;
  prefix: string;
  out: (line: string) => void;
  err: (line: string) => void;
}): Promise<ChildGroup> {
  const { agentDir, prefix, out, err } = options;
  try {
    return await spawnGroup('npm', ['run', 'dev'], {
      cwd: agentDir,
      env: { ...options.env, RELAY_URL: options.url, API_PORT: new URL(options.url).port },
      onStdoutLine: (line) => out(`${prefix} ${line}`),
      onStderrLine: (line) => err(`${prefix} ${line}`),
    });
  } catch (error) {
    throw new ExitError(
      EXIT_CODES.failure,
      `cannot start the agent in ${agentDir}: ${(error as Error).message}`,
    );
  }
}

/** AGENT_DIR (see `resolveAppDir`), or a failure naming the directories tried. */
export function agentDirOrFail(ctx: CliContext): string {
  const resolved = resolveAppDir(ctx, 'AGENT_DIR');
  if (!resolved.dir) {
    throw new ExitError(EXIT_CODES.failure, 'cannot start the agent: no agent package found', {
      details: resolved.tried.map((dir) => `tried ${dir}`),
      hint: 'Set AGENT_DIR to the agent app (the directory whose package.json has a "dev" script), or run `relay start` for the sidecar alone.',
    });
  }
  return resolved.dir;
}
