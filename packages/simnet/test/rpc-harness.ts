import { Connection, LAMPORTS_PER_SOL } from '@solana/web3.js';
import { SimCluster } from '../src/chain/cluster';
import { TestKeypair } from '../src/chain/testing';
import { Faults } from '../src/faults';
import { startRpcServer, type RpcServerHandle } from '../src/rpc/server';

export interface RpcHarness {
  faults: Faults;
  cluster: SimCluster;
  /** Holds 100 SOL from genesis. */
  payer: TestKeypair;
  /** Set in beforeAll. */
  server: RpcServerHandle;
  /** An unmodified web3.js Connection at `confirmed`. Set in beforeAll. */
  connection: Connection;
}

/**
 * A cluster on a 50 ms clock (the floor for tests: web3.js polls and subscribes on its own timers; started only by
 * the tests that want it) with 40 slots of finalized history, its JSON-RPC + WebSocket server and a web3.js
 * Connection, set up and torn down with the enclosing `describe`. Faults are reset and the clock stopped after each test.
 */
export function useRpcHarness(seed: number): RpcHarness {
  const faults = new Faults();
  const cluster = new SimCluster({ seed, slotMs: 50, slotsPerEpoch: 64, faults });
  const harness = { faults, cluster, payer: TestKeypair.generate() } as RpcHarness;

  beforeAll(async () => {
    cluster.airdrop(harness.payer.publicKey, 100 * LAMPORTS_PER_SOL);
    cluster.advance(40); // some finalized history
    harness.server = await startRpcServer({ cluster, faults });
    harness.connection = new Connection(harness.server.url, 'confirmed');
  });

  afterAll(async () => {
    cluster.close();
    // web3.js closes its idle WebSocket after 500 ms; closing the server first would make it reconnect forever.
    await new Promise((resolve) => setTimeout(resolve, 700));
    await harness.server.close();
  });

  afterEach(() => {
    faults.reset();
    cluster.stop();
  });

  return harness;
}

/** One JSON-RPC call over fetch, for what a client library hides (exact error objects, raw shapes). */
export async function rawRpc(
  url: string,
  method: string,
  params: unknown[],
): Promise<{ result?: unknown; error?: { code: number; message: string } }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await response.json()) as { result?: unknown; error?: { code: number; message: string } };
}
