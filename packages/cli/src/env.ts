import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { usageError } from './errors';
import type { CliContext } from './output';

/**
 * The spec's defaults, the same as @solrelay/sidecar's `DEFAULTS` (a test holds them equal). Repeated here because
 * loading the sidecar package (gRPC, web3.js, express) would add half a second to every `relay status`.
 */
export const CLI_DEFAULTS = {
  apiPort: 7777,
  agentDir: '../agents',
  webDir: '../web',
  policyFile: './relay.policy.json',
} as const;

/**
 * The environment variables the CLI reads itself (the sidecar's own are read by `configFromEnv`). Read here
 * only, from the context the entry point built, never from `process.env` inside a command.
 */

function value(env: CliContext['env'], name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw ? raw : undefined;
}

/**
 * The sidecar the inspect commands query: `RELAY_URL` when set (the agent's variable too), else
 * `http://localhost:{API_PORT}` as the spec says.
 */
export function apiBaseUrl(env: CliContext['env']): string {
  const url = value(env, 'RELAY_URL');
  if (url) return url.replace(/\/+$/, '');
  const port = value(env, 'API_PORT') ?? String(CLI_DEFAULTS.apiPort);
  if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65_535) {
    throw usageError(
      `API_PORT must be a port number from 1 to 65535, got "${port}"`,
      'Unset it to use 7777.',
    );
  }
  return `http://localhost:${port}`;
}

export function apiToken(env: CliContext['env']): string | undefined {
  return value(env, 'RELAY_API_TOKEN');
}

/** `RELAY_POLICY_FILE` (default `./relay.policy.json`), resolved against the working directory. */
export function policyFilePath(ctx: Pick<CliContext, 'env' | 'cwd'>): string {
  return resolve(ctx.cwd, value(ctx.env, 'RELAY_POLICY_FILE') ?? CLI_DEFAULTS.policyFile);
}

/** The repository holding this CLI, found by walking up to `pnpm-workspace.yaml`; null when installed elsewhere. */
function workspaceRoot(start: string): string | null {
  let dir = start;
  for (;;) {
    if (existsSync(join(dir, 'pnpm-workspace.yaml'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

export interface ResolvedDir {
  dir: string | null;
  tried: string[];
}

/**
 * `AGENT_DIR` / `WEB_DIR`. When set, resolved against the working directory and used as is. When unset, the
 * spec's default (`../agents`, `../web`: right from `apps/sidecar`) is tried first, then `apps/<name>` of the
 * workspace around the working directory (right from the repository root, where `pnpm relay` runs), then of the
 * workspace this CLI was built in (right from anywhere in a checkout).
 */
export function resolveAppDir(
  ctx: Pick<CliContext, 'env' | 'cwd'>,
  variable: 'AGENT_DIR' | 'WEB_DIR',
): ResolvedDir {
  const set = value(ctx.env, variable);
  if (set) {
    const dir = resolve(ctx.cwd, set);
    return { dir: existsSync(join(dir, 'package.json')) ? dir : null, tried: [dir] };
  }
  const spec = variable === 'AGENT_DIR' ? CLI_DEFAULTS.agentDir : CLI_DEFAULTS.webDir;
  const name = variable === 'AGENT_DIR' ? 'agents' : 'web';
  const candidates = [resolve(ctx.cwd, spec)];
  for (const root of [workspaceRoot(ctx.cwd), workspaceRoot(__dirname)]) {
    if (root) candidates.push(join(root, 'apps', name));
  }
  const tried = [...new Set(candidates)];
  return { dir: tried.find((c) => existsSync(join(c, 'package.json'))) ?? null, tried };
}
