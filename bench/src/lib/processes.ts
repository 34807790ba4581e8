/**
 * Child processes of a benchmark: the simnet (forked, IPC), the real sidecar (`apps/sidecar/dist/main.cjs`) and the
 * real agent (`apps/agents`, its built `dist/main.cjs`). Each runs in its own process group so stopping it stops everything it
 * started, and its CPU and RSS are read from /proc so they are never mixed with the load generator's.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Keypair } from '@solana/web3.js';
import type { SimnetChildOptions, SimnetRequest, SimnetStarted } from './simnet-process';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const SIDECAR_MAIN = join(REPO_ROOT, 'apps/sidecar/dist/main.cjs');
export const AGENT_DIR = join(REPO_ROOT, 'apps/agents');
export const CLI_BIN = join(REPO_ROOT, 'packages/cli/dist/bin.cjs');

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on every mainstream Linux build). */
const USER_HZ = 100;

/** utime + stime of a process in ms, from /proc (children not included). */
export function cpuTimeMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; fields after its closing parenthesis are space separated.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / USER_HZ;
}

/** Resident set size in bytes, from /proc/<pid>/status. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : 0;
}

export interface SimnetChild {
  pid: number;
  /** The environment that points a sidecar at this simnet. */
  env(): Record<string, string>;
  /** A fresh keypair the child's faucet credited (as the in-process simnet's `fundedKeypair`). */
  fundedKeypair(lamports: number): Promise<Keypair>;
  /** Endpoints, the tipper and capabilities the child reported at start. */
  started: SimnetStarted;
  request<T = unknown>(request: SimnetRequest): Promise<T>;
  stop(): Promise<void>;
}

export async function startSimnetChild(options: SimnetChildOptions): Promise<SimnetChild> {
  const child = fork(fileURLToPath(new URL('./simnet-process.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  child.on('message', (m: { id: number; ok: boolean; value?: unknown; error?: string }) => {
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.ok) w?.resolve(m.value);
    else w?.reject(new Error(m.error));
  });
  child.on('exit', () => {
    for (const w of waiting.values()) w.reject(new Error('simnet process exited'));
    waiting.clear();
  });
  const request = <T>(r: SimnetRequest): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, ...r });
    });
  const started = await request<SimnetStarted>({ op: 'start', options });
  return {
    started,
    pid: started.pid,
    env: () => started.env,
    async fundedKeypair(lamports) {
      const keypair = Keypair.generate();
      await request({ op: 'fund', addresses: [keypair.publicKey.toBase58()], lamports });
      return keypair;
    },
    request,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      await request({ op: 'stop' }).catch(() => undefined);
      await Promise.race([exited, sleep(3000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

export interface ProcessHandle {
  pid: number;
  child: ChildProcess;
  /** SIGTERM to the group, SIGKILL after a grace period. */
  stop(graceMs?: number): Promise<void>;
  exited: Promise<number | null>;
}

/** Spawn in its own group with stdout/stderr to a log file; `onLine` sees stdout lines. */
export function spawnGroup(
  command: string,
  args: string[],
  options: { cwd?: string; env: NodeJS.ProcessEnv; logPath: string; onLine?: (line: string) => void },
): ProcessHandle {
  const child = spawn(command, args, {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(options.logPath);
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    log.write(chunk);
    if (!options.onLine) return;
    buffered += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      options.onLine(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => log.write(chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const pid = child.pid ?? -1;
  return {
    pid,
    child,
    exited,
    async stop(graceMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        return;
      }
      const done = await Promise.race([exited.then(() => true), sleep(graceMs).then(() => false)]);
      if (!done) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
        await exited;
      }
      log.end();
    },
  };
}

export interface SidecarChild extends ProcessHandle {
  url: string;
  /** ms from spawn to the `relay: listening on` line. */
  startMs: number;
}

/** The real sidecar process; resolves once it prints `relay: listening on URL`. */
export async function startSidecarChild(
  env: Record<string, string>,
  logPath: string,
  nodeArgs: string[] = [],
): Promise<SidecarChild> {
  const t0 = performance.now();
  let resolveUrl!: (url: string) => void;
  const urlSeen = new Promise<string>((r) => (resolveUrl = r));
  const handle = spawnGroup(process.execPath, [...nodeArgs, SIDECAR_MAIN], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env },
    logPath,
    onLine: (line) => {
      const m = /^relay: listening on (\S+)/.exec(line);
      if (m?.[1]) resolveUrl(m[1]);
    },
  });
  const url = await Promise.race([
    urlSeen,
    handle.exited.then((code) => {
      throw new Error(`sidecar exited with ${code} before listening; see ${logPath}`);
    }),
    sleep(60_000).then(() => {
      throw new Error(`sidecar did not listen within 60 s; see ${logPath}`);
    }),
  ]);
  return { ...handle, url, startMs: performance.now() - t0 };
}

/**
 * The real agent process, run as production would run it: the built `apps/agents/dist/main.cjs` under node (not
 * `npm run dev`, which compiles TypeScript on the fly through tsx and adds npm's own process); resolves once the
 * sidecar reports it present.
 */
export async function startAgentChild(
  relayUrl: string,
  env: Record<string, string>,
  logPath: string,
): Promise<ProcessHandle> {
  // Extra node/V8 flags for the agent (e.g. "--cpu-prof --cpu-prof-dir=/tmp/agent-profile"), as for the sidecar.
  const nodeArgs = process.env.BENCH_AGENT_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
  const handle = spawnGroup(process.execPath, [...nodeArgs, join(AGENT_DIR, 'dist', 'main.cjs')], {
    cwd: AGENT_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, RELAY_URL: relayUrl, ...env },
    logPath,
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await fetch(`${relayUrl}/internal/agent/info`).catch(() => null);
    if (res?.status === 200) break;
    if (handle.child.exitCode !== null) throw new Error(`agent exited early; see ${logPath}`);
    if (Date.now() > deadline) throw new Error(`agent did not register within 60 s; see ${logPath}`);
    await sleep(100);
  }
  return handle;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** CPU ms of every live process in a process group (npm -> sh -> node: the group leader alone is only npm). */
export function groupCpuTimeMs(pgid: number): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid) total += ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
    } catch {
      // the process ended while we looked
    }
  }
  return total;
}
