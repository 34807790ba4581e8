import { spawn, type ChildProcess } from 'node:child_process';
export interface RunningSidecar {
  child: ChildProcess;
  url: string;
  output: () => string;
  /** Resolves with the signal (or exit code) the process ended with. */
  exited: Promise<NodeJS.Signals | number | null>;
  stop(): Promise<void>;
}

/**
 * Spawn a built sidecar entry (`main`, e.g. apps/sidecar/dist/main.cjs) and wait for its "listening" line (or its
 * death). The child gets only PATH, HOME and LOG_LEVEL=warn from this process, plus `env`.
 */
export function spawnSidecar(
  main: string,
  env: Record<string, string>,
  timeoutMs = 20_000,
  /** Flags for node itself (e.g. `--cpu-prof`, which NODE_OPTIONS refuses). */
  nodeArgs: readonly string[] = [],
  /**
   * A command that runs node for us and then is node (it execs it, so the child's pid is node's and signals reach
   * it), e.g. `ip netns exec <namespace>` for a host with an address of its own.
   */
  launcher: readonly string[] = [],
): Promise<RunningSidecar> {
  const argv = [...launcher, process.execPath, ...nodeArgs, main];
  const child = spawn(argv[0] as string, argv.slice(1), {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => {
    child.on('exit', (code, signal) => resolve(signal ?? code));
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      // Not left running behind the error (in a network namespace it would keep the namespace alive too).
      child.kill('SIGKILL');
      reject(new Error(`sidecar did not start:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /relay: listening on (\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({
          child,
          url: match[1] as string,
          output: () => output,
          exited,
          async stop() {
            if (child.exitCode !== null || child.signalCode !== null) return;
            child.kill('SIGTERM');
            // A sidecar that does not stop within 15 s is killed: a test's teardown must end.
            const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
            await exited;
            clearTimeout(kill);
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    // 'close', not 'exit': the process can exit before its stdout and stderr are read to the end, and the reason it
    // gave (on stderr) would be missing from the error.
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`sidecar exited (${String(signal ?? code)}) before listening:\n${output}`));
    });
  });
}
