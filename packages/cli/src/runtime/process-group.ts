import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * Child processes (`relay up`'s agent, `relay agent`, `relay web`) run in their own process group, and are stopped
 * as a group: `npm run dev` starts a shell that starts node that may start watchers, and killing only the first
 * pid would leave the rest holding ports. Whatever way this process ends, no group is left behind.
 */

export interface GroupExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ChildGroup {
  pid: number;
  /** Resolves when the group's leader exits. */
  exited: Promise<GroupExit>;
  /** SIGTERM the whole group, then SIGKILL it if its leader is still there after `graceMs`. */
  stop(graceMs?: number): Promise<GroupExit>;
}

export interface SpawnGroupOptions {
  cwd: string;
  /** The child's environment; `npm_config_*` variables are dropped (see {@link childEnv}). */
  env: Record<string, string | undefined>;
  /** Each stdout line (without its newline); stdout is inherited when absent. */
  onStdoutLine?: (line: string) => void;
  /** Each stderr line; stderr is inherited when absent. */
  onStderrLine?: (line: string) => void;
}

const running = new Set<number>();
let exitHookInstalled = false;

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    /* the group is already gone */
  }
}

/** Last resort: on any exit of this process (an error, process.exit), SIGKILL every group still running. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of running) killGroup(pid, 'SIGKILL');
  });
}

/**
 * The environment a child gets: `env` without npm's per-invocation settings (`npm_config_*`, any case). Under
 * `pnpm relay` those carry pnpm's own keys (`nodedir`, ...), and the child's `npm run dev` would print an
 * "Unknown env config" warning for each; npm sets what it needs itself. Everything else (PATH, HOME, ...) passes.
 */
export function childEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const kept: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(env)) {
    if (!/^npm_config_/i.test(name)) kept[name] = value;
  }
  return kept;
}

export function spawnGroup(command: string, args: string[], options: SpawnGroupOptions): Promise<ChildGroup> {
  installExitHook();
  const child: ChildProcess = spawn(command, args, {
    cwd: options.cwd,
    env: childEnv(options.env),
    detached: true, // its own process group, led by the child
    stdio: ['ignore', options.onStdoutLine ? 'pipe' : 'inherit', options.onStderrLine ? 'pipe' : 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('spawn', () => {
      const pid = child.pid as number;
      running.add(pid);
      if (options.onStdoutLine && child.stdout) {
        createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', options.onStdoutLine);
      }
      if (options.onStderrLine && child.stderr) {
        createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', options.onStderrLine);
      }
      const exited = new Promise<GroupExit>((done) => {
        child.once('exit', (code, signal) => {
          // The leader is gone; members it left in the group (a watcher, a server) go with it.
          killGroup(pid, 'SIGKILL');
          running.delete(pid);
          done({ code, signal });
        });
      });
      const stop = async (graceMs = 5000): Promise<GroupExit> => {
        killGroup(pid, 'SIGTERM');
        const timer = setTimeout(() => killGroup(pid, 'SIGKILL'), graceMs);
        try {
          return await exited;
        } finally {
          clearTimeout(timer);
        }
      };
      resolve({ pid, exited, stop });
    });
  });
}

/** Resolves on the first SIGINT or SIGTERM (Ctrl-C in a terminal), removing its listeners. */
export function untilSignal(): { promise: Promise<NodeJS.Signals>; cancel(): void } {
  let cancel = () => undefined as void;
  const promise = new Promise<NodeJS.Signals>((resolve) => {
    const onInt = () => finish('SIGINT');
    const onTerm = () => finish('SIGTERM');
    const finish = (signal: NodeJS.Signals) => {
      cancel();
      resolve(signal);
    };
    cancel = () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    };
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
  });
  return { promise, cancel };
}
