import { spawn, type ChildProcess } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { createInterface } from 'node:readline';
import type { Writable } from 'node:stream';

/**
 * Child processes (`relay up`'s agent, `relay agent`, `relay web`) run in their own process group, and are stopped
 * as a group: `npm run dev` starts a shell that starts node that may start watchers, and killing only the first
 * pid would leave the rest holding ports. Whatever way this process ends, no group is left behind, nor anything
 * registered with {@link atExit} (a local PostgreSQL server, temp directories):
 *
 * - a clean end stops each (the command's own teardown);
 * - any exit of this process (`process.exit`, an uncaught error) runs an `exit` hook: every group SIGKILLed, then
 *   every `atExit` cleanup;
 * - a second SIGINT / SIGTERM / SIGHUP while stopping ({@link untilSignal}) exits at once through that hook;
 * - a death the hook cannot see (SIGKILL, the OOM killer) is seen by a watchdog: a small node process of its own
 *   (own session, so a terminal's Ctrl-C or hangup never reaches it), told of each registration over a pipe from
 *   this one; when the pipe closes with registrations left, it SIGKILLs the groups and does the rest. The `exit`
 *   hook, having undone everything itself, SIGKILLs the watchdog.
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

/** What the watchdog does for one registration once this process is gone without undoing it. */
export type WatchdogTask =
  /** SIGKILL this process group. */
  | { kind: 'group'; pid: number }
  /** Remove this directory (recursively). */
  | { kind: 'dir'; path: string }
  /** `require(module)[fn](arg)`: `module` an absolute path, `arg` plain data (no secret: it passes through a pipe). */
  | { kind: 'call'; module: string; fn: string; arg: unknown };

interface Registration {
  /** Undoes it at once, synchronously (the `exit` hook). */
  undo: () => void;
  group: boolean;
}

/** What is registered now, by id, in the order registered. */
const registered = new Map<number, Registration>();
let nextId = 1;
let exitHookInstalled = false;

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    /* the group is already gone */
  }
}

/** On any exit of this process (an error, process.exit): every group SIGKILLed, then the rest, last first. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', undoEverything);
}

function undoEverything(): void {
  const all = [...registered.values()];
  registered.clear();
  for (const entry of all.filter((e) => e.group)) entry.undo();
  for (const entry of all.filter((e) => !e.group).reverse()) {
    try {
      entry.undo();
    } catch {
      /* the rest still runs */
    }
  }
  // Everything it knew of is undone: it has nothing left to do.
  watchdog?.kill('SIGKILL');
}

/**
 * Registers what must not outlive this process: `undo` runs (synchronously) if the process exits while it is
 * registered, and the watchdog does `task` if it dies unseen. Returns the function that unregisters it, for the
 * command's own teardown to call once it has undone it the ordinary way.
 */
export function atExit(undo: () => void, task: WatchdogTask): () => void {
  installExitHook();
  const id = nextId++;
  registered.set(id, { undo, group: task.kind === 'group' });
  tellWatchdog(`+${id} ${JSON.stringify(task)}`);
  return () => {
    if (registered.delete(id)) tellWatchdog(`-${id}`);
  };
}

/**
 * The watchdog (see the top of this file): reads `+<id> <task JSON>` and `-<id>` lines; at end of input (this
 * process gone) SIGKILLs the groups it holds, then does the other tasks, last registered first, and exits.
 */
const WATCHDOG = `
const tasks = new Map();
let buffered = '';
const undo = () => {
  const all = [...tasks.values()];
  tasks.clear();
  for (const t of all) if (t.kind === 'group') try { process.kill(-t.pid, 'SIGKILL'); } catch {}
  for (const t of all.reverse()) {
    try {
      if (t.kind === 'dir') require('node:fs').rmSync(t.path, { recursive: true, force: true, maxRetries: 5 });
      else if (t.kind === 'call') require(t.module)[t.fn](t.arg);
    } catch {}
  }
  process.exit(0);
};
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  for (let end; (end = buffered.indexOf('\\n')) >= 0; ) {
    const line = buffered.slice(0, end);
    buffered = buffered.slice(end + 1);
    const space = line.indexOf(' ');
    if (line[0] === '+') tasks.set(line.slice(1, space), JSON.parse(line.slice(space + 1)));
    else tasks.delete(line.slice(1));
  }
});
process.stdin.on('end', undo);
process.stdin.on('error', undo);
`;

let watchdog: ChildProcess | null = null;

function tellWatchdog(line: string): void {
  if (!watchdog) {
    watchdog = spawn(process.execPath, ['-e', WATCHDOG], {
      detached: true, // its own session: the terminal's signals (Ctrl-C, hangup) are this process's to handle
      stdio: ['pipe', 'ignore', 'ignore'],
      cwd: '/',
    });
    watchdog.on('error', () => undefined);
    watchdog.stdin?.on('error', () => undefined);
    // Neither it nor its pipe keeps this process running.
    watchdog.unref();
    (watchdog.stdin as Writable & { unref?: () => void }).unref?.();
  }
  watchdog.stdin?.write(`${line}\n`);
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
      const forget = atExit(() => killGroup(pid, 'SIGKILL'), { kind: 'group', pid });
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
          forget();
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

/** The signals that stop a long-running command: Ctrl-C, `kill`, the terminal closed. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Resolves on the first SIGINT, SIGTERM or SIGHUP (Ctrl-C, `kill`, the terminal closed), and keeps listening until
 * `cancel()`: while the command stops what it started, another one ends it at once. `say` prints that line; then
 * every child group is SIGKILLed and every {@link atExit} cleanup runs (the local PostgreSQL server stopped, temp
 * directories removed), and the process exits with 128 + the signal's number.
 */
export function untilSignal(say: (line: string) => void = () => undefined): {
  promise: Promise<NodeJS.Signals>;
  cancel(): void;
} {
  let first: NodeJS.Signals | null = null;
  let resolve: (signal: NodeJS.Signals) => void = () => undefined;
  const promise = new Promise<NodeJS.Signals>((done) => (resolve = done));
  const on = (signal: NodeJS.Signals) => {
    if (first === null) {
      first = signal;
      resolve(signal);
      return;
    }
    say(`relay: ${signal} while stopping: killing everything now`);
    installExitHook();
    process.exit(128 + (osConstants.signals[signal] ?? 0));
  };
  const listeners = STOP_SIGNALS.map((signal) => [signal, () => on(signal)] as const);
  for (const [signal, listener] of listeners) process.on(signal, listener);
  return {
    promise,
    cancel() {
      for (const [signal, listener] of listeners) process.off(signal, listener);
    },
  };
}
