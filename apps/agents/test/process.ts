import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const MAIN = join(__dirname, '..', 'dist', 'main.cjs');

export interface RunningAgent {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<NodeJS.Signals | number | null>;
  /** Resolves once stdout has a line matching `pattern`. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
}

/** Spawn the built agent process with exactly `env` (plus PATH and HOME), collecting its output. */
export function spawnAgent(env: Record<string, string>): RunningAgent {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    child.on('exit', (code, signal) => resolve(signal ?? code)),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    async waitForLine(pattern, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = stdout.split('\n').find((l) => pattern.test(l));
        if (line) return line;
        if (Date.now() > deadline) {
          throw new Error(
            `no line matching ${pattern} within ${timeoutMs} ms:\n${stdout}\n--- stderr\n${stderr}`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
