// Shared set-up for the engine tests: a real SimCluster on a manual clock, the block engine attached to it, and its
// HTTP face (JSON-RPC, tip floor, LLM and admin routes) on a free loopback port.
import { SimCluster, TestKeypair, createTransferTx, fundedKeypair } from '../src/chain';
import { Faults } from '../src/faults';
import { Rng } from '../src/rng';
import { BlockEngine, type BlockEngineOptions } from '../src/engine/engine';
import { engineJsonRpcRoutes } from '../src/engine/json-rpc';
import { SimLlm } from '../src/llm/llm';
import { adminRoutes } from '../src/admin';
import { startHttpServer, type StartedHttpServer } from '../src/http';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';

export interface Harness {
  cluster: SimCluster;
  faults: Faults;
  engine: BlockEngine;
  llm: SimLlm;
  http: StartedHttpServer;
  payer: TestKeypair;
  close(): Promise<void>;
}

export async function startHarness(
  options: { seed?: number; engine?: Partial<BlockEngineOptions>; bundleEngineShare?: number } = {},
): Promise<Harness> {
  const rng = new Rng(options.seed ?? 42);
  const faults = new Faults();
  const cluster = new SimCluster({
    rng: rng.fork('chain'),
    faults,
    ...(options.bundleEngineShare !== undefined ? { bundleEngineShare: options.bundleEngineShare } : {}),
  });
  const engine = new BlockEngine({
    cluster,
    faults,
    rng,
    rateLimit: { enabled: false },
    // A manual clock has no milliseconds to forward in (as startSimnet's manual clock).
    crossRegionDelayMs: 0,
    ...options.engine,
  }).attach();
  const llm = new SimLlm();
  const http = await startHttpServer([
    engineJsonRpcRoutes(engine),
    llm.routes(),
    adminRoutes({ cluster, faults, engine, llm }),
  ]);
  const payer = fundedKeypair(cluster, 100_000_000_000);
  cluster.advance(1);
  return {
    cluster,
    faults,
    engine,
    llm,
    http,
    payer,
    close: async () => {
      engine.detach();
      cluster.close();
      llm.releaseHanging();
      await http.close();
    },
  };
}

let memo = 0;
/** A signed transfer that tips `tip` lamports to a tip account (each call unique through a varying payment). */
export function tipTx(
  h: Harness,
  tip: number,
  options: { blockhash?: string; from?: TestKeypair } = {},
): Uint8Array {
  memo += 1;
  return createTransferTx({
    from: options.from ?? h.payer,
    transfers: [
      { to: MAINNET_TIP_ACCOUNTS[memo % 8] as string, lamports: tip },
      { to: TestKeypair.generate().publicKey, lamports: 1_000_000 + memo },
    ],
    recentBlockhash: options.blockhash ?? h.cluster.latestBlockhash().blockhash,
  });
}

/** A transfer that does not touch any tip account. */
export function plainTx(h: Harness): Uint8Array {
  memo += 1;
  return createTransferTx({
    from: h.payer,
    transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 + memo }],
    recentBlockhash: h.cluster.latestBlockhash().blockhash,
  });
}

/** Advance the manual clock until the slot after `slot` is the first of a bundle-engine leader's window. */
export function advanceToBeforeBundleEngineWindow(h: Harness): void {
  for (let i = 0; i < 400; i++) {
    const next = h.cluster.leaderAt(h.cluster.slot + 1);
    const current = h.cluster.leaderAt(h.cluster.slot);
    if (next?.bundleEngine && next.identity !== current?.identity) return;
    h.cluster.advance(1);
  }
  throw new Error('no bundle-engine leader window found');
}

/** Advance until the next `lookahead` slots all belong to non-bundle-engine leaders. */
export function advanceToNoBundleEngineAhead(h: Harness, lookahead: number): void {
  for (let i = 0; i < 2000; i++) {
    let none = true;
    for (let s = h.cluster.slot + 1; s <= h.cluster.slot + lookahead; s++) {
      if (h.cluster.leaderAt(s)?.bundleEngine) none = false;
    }
    if (none) return;
    h.cluster.advance(1);
  }
  throw new Error('no stretch without bundle-engine leaders found');
}

export async function rpc(
  url: string,
  method: string,
  params: unknown[],
  init: { path?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{
  status: number;
  body: { result?: unknown; error?: { code: number; message: string }; id?: unknown };
  headers: Headers;
}> {
  const response = await fetch(`${url}${init.path ?? '/api/v1/bundles'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...init.headers },
    body: init.body ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: response.status, body: (await response.json()) as never, headers: response.headers };
}

export const b64 = (wire: Uint8Array): string => Buffer.from(wire).toString('base64');
