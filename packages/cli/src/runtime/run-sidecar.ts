import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isRelayError } from '@solrelay/core';
import {
  applyV8Flags,
  configFromEnv,
  memoryModeFlagsFromEnv,
  startSidecar,
  type Sidecar,
  type SidecarConfig,
} from '@solrelay/sidecar';
import pino from 'pino';
import { resolveAppDir } from '../env';
import { EXIT_CODES, ExitError } from '../errors';
import type { CliContext } from '../output';
import { agentDirOrFail, startAgent } from './agent';
import { startDemoTraffic } from './demo-traffic';
import { untilSignal, type ChildGroup, type GroupExit } from './process-group';
import { startSimulatedCluster, type SimFlags, type SimulatedCluster } from './simulated-cluster';
import { Teardown } from './teardown';

export const AGENT_PREFIX = '[ AGENT ]';

export interface RunSidecarOptions {
  /** `relay up`: also run the agent (`npm run dev` in AGENT_DIR) with its lines prefixed. */
  withAgent: boolean;
  bypass: boolean;
  /** Bypass tip in lamports; only with `bypass`. */
  tip?: number | undefined;
  /** Run the simulated cluster in this process (`--sim`); null for real upstreams from the environment. */
  sim: SimFlags | null;
  /** Demo traffic (only with `sim`). */
  demo: boolean;
}

/**
 * `relay up` and `relay start`: the sidecar runs in this process (from @solrelay/sidecar, as apps/sidecar runs it),
 * so Ctrl-C stops it directly and its logs share the terminal. Resolves with the exit code once everything it
 * started has stopped: on SIGINT / SIGTERM (0), or when the agent exits on its own (1).
 */
export async function runSidecar(ctx: CliContext, options: RunSidecarOptions): Promise<number> {
  const out = (line: string) => ctx.io.stdout(`${line}\n`);
  const err = (line: string) => ctx.io.stderr(`${line}\n`);

  // Fail before starting anything when the agent cannot be started.
  const agentDir = options.withAgent ? agentDirOrFail(ctx) : null;

  const teardown = new Teardown(err);

  const signal = untilSignal(err);
  try {
    let cluster: SimulatedCluster | null = null;
    let env: Record<string, string | undefined> = { ...ctx.env };
    if (options.sim) {
      cluster = teardown.add(await startSimulatedCluster(options.sim));
      // The cluster is new each run, so its journal and lifecycle log are too (unless set explicitly); the
      // policy file stays where it always is, so `relay policy` keeps working on it.
      env = {
        ...env,
        ...cluster.env,
        RELAY_DATA_DIR: ctx.env.RELAY_DATA_DIR ?? join(cluster.dir, 'data'),
        LIFECYCLE_PATH: ctx.env.LIFECYCLE_PATH ?? join(cluster.dir, 'lifecycle.jsonl'),
      };
    }

    let config: SidecarConfig;
    // The sidecar runs in this process: its memory mode is this process's (RELAY_MEMORY_MODE, as for apps/sidecar).
    let memory: ReturnType<typeof memoryModeFlagsFromEnv>;
    try {
      config = configFromEnv(env, ctx.cwd);
      memory = memoryModeFlagsFromEnv(env, process.execArgv);
    } catch (error) {
      throw startError(error, options.sim === null);
    }
    if (options.bypass) {
      config = { ...config, bypass: true, bypassTipLamports: options.tip ?? config.bypassTipLamports };
    }

    const webDir = resolveAppDir(ctx, 'WEB_DIR').dir;
    const webDist =
      env.RELAY_WEB_DIST ?? (webDir && existsSync(join(webDir, 'dist')) ? join(webDir, 'dist') : undefined);
    const logger = pino(
      { name: 'relay', level: env.LOG_LEVEL ?? 'info' },
      pino.destination({ dest: 2, sync: true }),
    );
    applyV8Flags(memory.start);
    let sidecar: Sidecar;
    try {
      sidecar = await startSidecar(config, { logger, ...(webDist ? { webDist } : {}) });
    } catch (error) {
      throw listenError(error, config.apiPort) ?? startError(error, false);
    }
    applyV8Flags(memory.running);
    teardown.push(() => sidecar.close());

    const local = sidecar.url.replace('://127.0.0.1:', '://localhost:');
    out(
      `relay: sidecar listening on ${sidecar.url}${config.bypass ? ` (bypass, tip ${config.bypassTipLamports} lamports)` : ''}`,
    );
    out(
      `relay: dashboard ${local}/${webDist ? '' : ' (no built dashboard found; `relay web` runs the dev server)'}`,
    );
    out(`relay: api       ${local}  (try \`API_PORT=${sidecar.port} relay status\`)`);
    if (cluster) for (const line of cluster.lines()) out(line);

    let agent: ChildGroup | null = null;
    if (agentDir) {
      agent = teardown.add(
        await startAgent({ agentDir, env, url: sidecar.url, prefix: AGENT_PREFIX, out, err }),
      );
      out(`relay: agent started in ${agentDir} (npm run dev, pid ${agent.pid})`);
    }

    if (cluster && options.demo) {
      teardown.add(
        startDemoTraffic({
          targets: [{ name: 'relay', baseUrl: sidecar.url }],
          token: config.apiToken,
          cluster,
          print: out,
          log: err,
        }),
      );
      out('relay: demo traffic on: a self-transfer every 2 s (--no-demo turns it off)');
    }

    const agentExit: Promise<GroupExit | null> = agent ? agent.exited : new Promise(() => undefined);
    const ended = await Promise.race([
      signal.promise.then((name) => ({ kind: 'signal' as const, name })),
      agentExit.then((exit) => ({ kind: 'agent' as const, exit })),
    ]);
    if (ended.kind === 'signal') return await teardown.end(`${ended.name}: stopping`, EXIT_CODES.ok);
    return await teardown.end(
      `the agent exited (${ended.exit?.signal ?? `code ${ended.exit?.code}`}); stopping the sidecar`,
      EXIT_CODES.failure,
    );
  } catch (error) {
    await teardown.stopAll();
    throw error;
  } finally {
    signal.cancel();
  }
}

/** A sidecar that cannot start is a failure (1) naming the cause; a missing variable gets the `--sim` hint. */
function startError(error: unknown, suggestSim: boolean): unknown {
  if (!isRelayError(error)) return error;
  const missing = error.code === 'RELAY_E_CONFIG_MISSING_ENV';
  return new ExitError(EXIT_CODES.failure, `cannot start the sidecar: ${error.code}: ${error.message}`, {
    ...(missing && suggestSim
      ? { hint: 'Set it (see the env table in the README), or add --sim to run on a simulated cluster.' }
      : {}),
    cause: error,
  });
}

/** The errno code (EADDRINUSE, ...) of an error or of any error in its cause chain. */
function errnoOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * The API port cannot be listened on: an expected failure (most often a second relay on the same port), so exit 1
 * with a line naming the port and a hint, not the "unexpected error" report with a stack. Recognises the raw errno
 * from `listen` and the sidecar's `RELAY_E_CONFIG_INVALID_ENV` for API_PORT that wraps it. Null for anything else.
 */
function listenError(error: unknown, port: number): ExitError | null {
  const errno = errnoOf(error);
  const apiPortReason =
    isRelayError(error, 'RELAY_E_CONFIG_INVALID_ENV') && error.details.name === 'API_PORT'
      ? String(error.details.reason)
      : '';
  if (errno === 'EADDRINUSE' || /in use/i.test(apiPortReason)) {
    return new ExitError(EXIT_CODES.failure, `API port ${port} is already in use (another relay?)`, {
      hint: `Stop the other relay (\`API_PORT=${port} relay status\` shows it), or set API_PORT to a free port.`,
      cause: error,
    });
  }
  if (errno === 'EACCES' || /not allowed/i.test(apiPortReason)) {
    return new ExitError(EXIT_CODES.failure, `not allowed to listen on API port ${port}`, {
      hint: 'Set API_PORT to a port above 1023 (ports below need privileges).',
      cause: error,
    });
  }
  return null;
}
