import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

/** The built binary: tests run exactly what `pnpm relay` runs. turbo builds it before `test`. */
export const RELAY_BIN = join(__dirname, '..', '..', 'dist', 'bin.cjs');

export interface RelayRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment every run starts from: no colour, no inherited relay variables. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'SystemRoot']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, NO_COLOR: '1', LOG_LEVEL: 'warn', ...extra };
}

/** Runs `relay <args>` to completion. */
export function runRelay(
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): Promise<RelayRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [RELAY_BIN, ...args], {
      env: options.env ?? baseEnv(),
      cwd: options.cwd ?? process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `relay ${args.join(' ')} did not finish in ${options.timeoutMs ?? 30_000} ms\n${stdout}\n${stderr}`,
        ),
      );
    }, options.timeoutMs ?? 30_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A long-running `relay` (up, start, sim) whose output is watched as it comes. */
export class RelayProcess {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly closed: Promise<number | null>;

  constructor(args: string[], options: { env: Record<string, string>; cwd?: string }) {
    this.child = spawn(process.execPath, [RELAY_BIN, ...args], {
      env: options.env,
      cwd: options.cwd ?? process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (chunk: Buffer) => (this.stdout += chunk.toString()));
    this.child.stderr?.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.closed = new Promise((resolve) => this.child.once('close', (code) => resolve(code)));
  }

  /** Waits until stdout matches `pattern`; fails with everything printed so far. */
  async waitForStdout(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = this.stdout.match(pattern);
      if (match) return match;
      if (this.child.exitCode !== null || Date.now() > deadline) {
        throw new Error(
          `no ${pattern} on stdout (exit ${this.child.exitCode})\n--- stdout\n${this.stdout}\n--- stderr\n${this.stderr}`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(signal: NodeJS.Signals = 'SIGINT'): Promise<number | null> {
    if (this.child.exitCode === null) this.child.kill(signal);
    return this.closed;
  }
}

export { freePort } from '@solrelay/testkit';

/** True while something accepts connections on the port. */
export function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(true));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(false)));
  });
}

/** True while a process with this pid exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
