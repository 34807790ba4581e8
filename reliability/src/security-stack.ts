import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { VersionedTransaction } from '@solana/web3.js';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import type { Simnet } from '@solrelay/simnet';
import {
  get,
  inProcessSidecar,
  spawnSidecar,
  startStack,
  waitUntil,
  type RunningSidecar,
  type Stack,
  type StackOptions,
} from '@solrelay/testkit';
import { base58 } from './crash-wire';

type SidecarOptions = NonNullable<Parameters<typeof startSidecar>[1]>;
type Logger = NonNullable<SidecarOptions['logger']>;

/**
 * Every line the in-process sidecar logs, kept as text so a test can grep it (at debug level, so nothing the
 * sidecar would say at any level escapes the check). pino comes from the sidecar's own dependencies: this suite
 * must log exactly as the sidecar does, without a second copy.
 */
export class CapturedLog {
  text = '';
  readonly logger: Logger;

  constructor(level = 'debug') {
    const sidecarRequire = createRequire(require.resolve('@solrelay/sidecar'));
    const pino = sidecarRequire('pino') as (options: object, stream: Writable) => Logger;
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        this.text += chunk.toString('utf8');
        done();
      },
    });
    this.logger = pino({ name: 'relay', level }, sink);
  }
}

export interface InProcessOptions extends Omit<StackOptions<Sidecar>, 'start'> {
  sidecar?: Partial<SidecarOptions>;
  log?: CapturedLog;
}

/** A real simnet plus the built sidecar package started in this process (its dist, as an app would use it). */
export function startInProcessStack(options: InProcessOptions = {}): Promise<Stack<Sidecar>> {
  const log = options.log ?? new CapturedLog('warn');
  return startStack<Sidecar>({
    ...options,
    start: inProcessSidecar({ configFromEnv, startSidecar }, { logger: log.logger, ...options.sidecar }),
  });
}

/** The built sidecar process (apps/sidecar/dist/main.cjs), as an operator runs it. */
export const SIDECAR_MAIN = require.resolve('@solrelay/app-sidecar/dist/main.cjs');
/** The built agent process (apps/agents/dist/main.cjs). */
export const AGENT_MAIN = require.resolve('@solrelay/app-agents/dist/main.cjs');

export interface ProcessSidecar extends RunningSidecar {
  close(): Promise<void>;
}

export interface ProcessStackOptions extends Omit<StackOptions<ProcessSidecar>, 'start'> {
  /** Runs before each spawn (e.g. to chmod the keypair file). */
  beforeStart?: (env: Record<string, string>) => Promise<void> | void;
  /** Every process this stack started, oldest first (restarts included), for their output. */
  started?: ProcessSidecar[];
  /** Flags for the sidecar's node (e.g. `--cpu-prof`). */
  nodeArgs?: readonly string[];
}

/** A real simnet plus the built sidecar process; `stack.sidecar.child.pid` is the process to measure. */
export function startProcessStack(options: ProcessStackOptions = {}): Promise<Stack<ProcessSidecar>> {
  return startStack<ProcessSidecar>({
    ...options,
    start: async (env) => {
      await options.beforeStart?.(env);
      const running = await spawnSidecar(SIDECAR_MAIN, env, 30_000, options.nodeArgs);
      const sidecar: ProcessSidecar = Object.assign(running, { close: () => running.stop() });
      options.started?.push(sidecar);
      return sidecar;
    },
  });
}

/** What reached the simnet's block engine: the ground truth of what relay actually sent. */
export interface ReceivedBundle {
  /** The engine's id when it accepted the bundle; null when it refused it. */
  bundleId: string | null;
  accepted: boolean;
  /** The engine's refusal message, when refused. */
  refusal: string | null;
  /** Lamports paid to the engine's tip accounts (decoded from the bytes when refused; -1 when undecodable). */
  tipLamports: number;
  /** The first signature of each transaction (those that decode). */
  signatures: string[];
}

const SYSTEM_PROGRAM = '11111111111111111111111111111111';

/** Best-effort reading of a bundle the engine refused: first signatures and SystemProgram transfers to tip accounts. */
function decodeBundle(
  transactions: ReadonlyArray<string | Uint8Array>,
  encoding: string | undefined,
  tipAccounts: ReadonlySet<string>,
): { tipLamports: number; signatures: string[] } {
  const signatures: string[] = [];
  let tip = 0;
  let undecodable = false;
  for (const item of transactions) {
    try {
      const bytes =
        typeof item === 'string'
          ? encoding === 'base64'
            ? Buffer.from(item, 'base64')
            : Buffer.from(bs58decode(item))
          : Buffer.from(item);
      const tx = VersionedTransaction.deserialize(bytes);
      const first = tx.signatures[0];
      if (first) signatures.push(base58(first));
      const keys = tx.message.staticAccountKeys.map((k) => k.toBase58());
      for (const ix of tx.message.compiledInstructions) {
        if (keys[ix.programIdIndex] !== SYSTEM_PROGRAM) continue;
        const data = Buffer.from(ix.data);
        if (data.length < 12 || data.readUInt32LE(0) !== 2) continue; // SystemInstruction::Transfer
        const to = keys[ix.accountKeyIndexes[1] ?? -1];
        if (to && tipAccounts.has(to)) tip += Number(data.readBigUInt64LE(4));
      }
    } catch {
      undecodable = true;
    }
  }
  return { tipLamports: undecodable ? -1 : tip, signatures };
}

function bs58decode(text: string): Uint8Array {
  const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let value = 0n;
  for (const ch of text) {
    const digit = alphabet.indexOf(ch);
    if (digit < 0) throw new Error('not base58');
    value = value * 58n + BigInt(digit);
  }
  const bytes: number[] = [];
  while (value > 0n) {
    bytes.unshift(Number(value % 256n));
    value /= 256n;
  }
  for (const ch of text) {
    if (ch !== '1') break;
    bytes.unshift(0);
  }
  return Uint8Array.from(bytes);
}

/**
 * Record every bundle that reaches the engine (both transports go through `submitBundle`), accepted or refused, and
 * count the requests its admission gate turned away before it looked at any bundle (5xx / 429 faults, the rate
 * limit): a bundle refused there is unseen, so a test that judges "what relay sent" must also see that count at 0.
 */
export function recordBundles(simnet: Simnet): {
  bundles: ReceivedBundle[];
  admissionRefusals: () => number;
  stop(): void;
} {
  const engine = simnet.engine;
  const original = engine.submitBundle;
  const originalAdmit = engine.admit;
  const tipAccounts = new Set(engine.tipAccounts);
  const bundles: ReceivedBundle[] = [];
  let admissionRefusals = 0;
  engine.submitBundle = function record(this: typeof engine, ...args: Parameters<typeof original>) {
    const result = original.apply(this, args);
    if (result.ok) {
      const tracked = engine.getBundle(result.bundleId);
      bundles.push({
        bundleId: result.bundleId,
        accepted: true,
        refusal: null,
        tipLamports: tracked?.tipLamports ?? -1,
        signatures: tracked ? [...tracked.signatures] : [],
      });
    } else {
      bundles.push({
        bundleId: null,
        accepted: false,
        refusal: result.error.message,
        ...decodeBundle(args[0], args[1], tipAccounts),
      });
    }
    return result;
  };
  engine.admit = function admit(this: typeof engine, ...args: Parameters<typeof originalAdmit>) {
    const decision = originalAdmit.apply(this, args);
    if (!decision.ok) admissionRefusals++;
    return decision;
  };
  return {
    bundles,
    admissionRefusals: () => admissionRefusals,
    stop: () => {
      engine.submitBundle = original;
      engine.admit = originalAdmit;
    },
  };
}

/** The built `relay` CLI (packages/cli/dist/bin.cjs). */
export const CLI_BIN = join(dirname(require.resolve('@solrelay/cli/package.json')), 'dist', 'bin.cjs');

/** What a finished process wrote, and how it ended. */
export interface ProcessRun {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** Run a node script to its end (killed after `timeoutMs`) with exactly this environment. */
export function runNode(
  script: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<ProcessRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A long-running node process (the agent), its output kept whole, stopped with SIGTERM. */
export interface RunningProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  stop(): Promise<ProcessRun>;
}

export function startNode(script: string, env: Record<string, string>): RunningProcess {
  const child = spawn(process.execPath, [script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const closed = new Promise<ProcessRun>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const run = await closed;
      clearTimeout(timer);
      return run;
    },
  };
}

/** Write the policy file and wait until the sidecar serves exactly these values. */
export async function applyPolicy(
  stack: Stack<{ url: string; close(): Promise<void> }>,
  policy: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<void> {
  await writeFile(stack.env.RELAY_POLICY_FILE as string, JSON.stringify(policy));
  await waitUntil(
    async () => {
      const { body } = await get(stack.sidecar.url, '/policy', headers);
      return Object.entries(policy).every(([key, value]) => body?.values?.[key] === value);
    },
    10_000,
    `policy ${JSON.stringify(policy)} in force`,
  );
}

/** Resident set size and its peak (kB → bytes) of a process, from /proc/<pid>/status. */
export async function processMemory(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) throw new Error(`no ${name} in /proc/${pid}/status`);
    return Number(match[1]) * 1024;
  };
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}
