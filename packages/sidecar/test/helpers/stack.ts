import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keypair, SystemProgram, Transaction, type Connection } from '@solana/web3.js';
import { startSimnet, type Simnet, type SimnetOptions } from '@solrelay/simnet';
import pino from 'pino';
import { configFromEnv } from '../../src/config';
import { startSidecar, type Sidecar, type SidecarOptions } from '../../src/service';

export interface Stack {
  simnet: Simnet;
  sidecar: Sidecar;
  dir: string;
  env: Record<string, string>;
  payer: Keypair;
  tipper: Keypair;
  /** A signed transfer from the funded payer, base64, on a fresh blockhash. */
  transfer(lamports?: number, payer?: Keypair): Promise<string>;
  connection(): Connection;
  /** Stop and start the sidecar on the same files (a restart). */
  restart(extraEnv?: Record<string, string>): Promise<Sidecar>;
  close(): Promise<void>;
}

export interface StackOptions {
  simnet?: SimnetOptions;
  env?: Record<string, string>;
  sidecar?: SidecarOptions;
  policy?: Record<string, unknown>;
}

const quiet = pino({ level: process.env.RELAY_TEST_LOG ?? 'silent' });

/** A real simnet plus a real sidecar over loopback, with files in a fresh temp directory. */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const simnet = await startSimnet({ slotMs: 60, rateLimit: false, ...options.simnet });
  const dir = await mkdtemp(join(tmpdir(), 'relay-e2e-'));
  const tipper = simnet.fundedKeypair(50_000_000_000);
  const payer = simnet.fundedKeypair(50_000_000_000);
  const keypairPath = join(dir, 'tipper.json');
  await writeFile(keypairPath, JSON.stringify([...tipper.secretKey]), { mode: 0o600 });
  if (options.policy) await writeFile(join(dir, 'relay.policy.json'), JSON.stringify(options.policy));
  const env: Record<string, string> = {
    ...simnet.env(),
    KEYPAIR_PATH: keypairPath,
    API_PORT: '0',
    RELAY_DATA_DIR: join(dir, 'data'),
    LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl'),
    RELAY_POLICY_FILE: join(dir, 'relay.policy.json'),
    BUNDLE_ENGINE_RPS: '100',
    AGENT_DECISION_MODE: 'reflex',
    ...options.env,
  };
  const sidecarOptions: SidecarOptions = {
    logger: quiet,
    intervals: { tipFloorMs: 300, balanceMs: 300, leadersMs: 1000, rpcSlotMs: 100, blockHeightMs: 200 },
    ...options.sidecar,
  };
  let sidecar = await startSidecar(configFromEnv(env, dir), sidecarOptions);
  const { Connection: Conn } = await import('@solana/web3.js');
  const stack: Stack = {
    simnet,
    get sidecar() {
      return sidecar;
    },
    dir,
    env,
    payer,
    tipper,
    async transfer(lamports = 1000, from = payer) {
      const { blockhash } = await simnet.cluster.latestBlockhash('confirmed');
      const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash });
      tx.add(SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 890_880 + lamports }));
      tx.sign(from);
      return tx.serialize().toString('base64');
    },
    connection() {
      return new Conn(simnet.endpoints.rpcUrl, 'confirmed');
    },
    async restart(extraEnv = {}) {
      await sidecar.close();
      sidecar = await startSidecar(configFromEnv({ ...env, ...extraEnv }, dir), sidecarOptions);
      return sidecar;
    },
    async close() {
      await sidecar.close().catch(() => undefined);
      await simnet.stop();
    },
  } as Stack;
  return stack;
}

/** POST JSON to the sidecar. */
export async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

export async function get(base: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(base + path, { headers });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

export async function waitUntil<T>(probe: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
