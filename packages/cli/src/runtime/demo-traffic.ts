import { Connection, SystemProgram, Transaction } from '@solana/web3.js';
import { RelayClient, isRelayError, isTxFailedError } from '@solrelay/client';
import type { SimulatedCluster } from './simulated-cluster';

/** A sidecar the demo sends to: `relay up`'s one, or each host of `relay up --hosts N`. */
export interface DemoTarget {
  /** Named in each line when there are several (`host-2`). */
  name: string;
  baseUrl: string;
}

export interface DemoTrafficOptions {
  /** Enqueues go round-robin over the targets still up. */
  targets: DemoTarget[];
  token: string | undefined;
  /** The simulated cluster: its RPC for blockhashes, and a payer funded on it for every demo transaction. */
  cluster: SimulatedCluster;
  intervalMs?: number;
  /** One human line per transaction as it reaches a terminal state. */
  print: (line: string) => void;
  log: (line: string) => void;
}

export interface DemoTraffic {
  /**
   * A target died: no more enqueues go to it, and the transactions followed through it are followed through another
   * target (a fleet's hosts answer for each other's transactions).
   */
  targetDown(name: string): void;
  stop(): Promise<void>;
}

export const DEMO_PREFIX = '[ DEMO ]';

/**
 * `--sim`'s demo traffic: every ~2 s a self-transfer from a funded keypair is enqueued through the client SDK (on
 * the next target, round-robin), and one line is printed when it reaches finalized (or fails). It drives the
 * dashboard and the agents with real work.
 */
export function startDemoTraffic(options: DemoTrafficOptions): DemoTraffic {
  const clients = new Map(
    options.targets.map((target) => [
      target.name,
      new RelayClient({ baseUrl: target.baseUrl, ...(options.token ? { token: options.token } : {}) }),
    ]),
  );
  const up = options.targets.map((target) => target.name);
  /** The waits following a transaction through each target, aborted when it goes down. */
  const following = new Map<string, Set<AbortController>>(up.map((name) => [name, new Set()]));
  const suffix = (name: string) => (options.targets.length > 1 ? ` via ${name}` : '');
  const connection = new Connection(options.cluster.simnet.endpoints.rpcUrl, 'confirmed');
  const payer = options.cluster.simnet.fundedKeypair(10_000_000_000);
  const waits = new Set<Promise<void>>();
  let counter = 0;
  let turn = 0;
  let stopped = false;

  /** Waits for finalized through `name`, then through another target each time the one followed goes down. */
  const follow = async (txId: string, name: string, deadline: number) => {
    for (let through = name; ;) {
      if (!up.includes(through) && up[0] !== undefined) through = up[0];
      const controller = new AbortController();
      const mine = following.get(through) as Set<AbortController>;
      mine.add(controller);
      try {
        const handle = (clients.get(through) as RelayClient).handle(txId);
        return await handle.waitFor('finalized', {
          timeoutMs: Math.max(1, deadline - Date.now()),
          signal: controller.signal,
        });
      } catch (error) {
        if (!controller.signal.aborted || stopped || up.length === 0) throw error;
      } finally {
        mine.delete(controller);
      }
    }
  };

  const sendOne = async () => {
    const name = up[turn++ % up.length];
    if (name === undefined) return;
    const { blockhash } = await connection.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
    // The amount changes every time, so two transfers on one blockhash never share a signature.
    counter += 1;
    tx.add(
      SystemProgram.transfer({
        fromPubkey: payer.publicKey,
        toPubkey: payer.publicKey,
        lamports: counter,
      }),
    );
    tx.sign(payer);
    const started = Date.now();
    const handle = await (clients.get(name) as RelayClient).enqueue(tx);
    const wait = follow(handle.tx_id, name, started + 180_000)
      .then(
        (status) =>
          options.print(
            `${DEMO_PREFIX} ${handle.tx_id} finalized in ${((Date.now() - started) / 1000).toFixed(1)} s (${status.tx_signatures[0] ?? ''})${suffix(name)}`,
          ),
        (error: unknown) => {
          if (stopped) return;
          if (isTxFailedError(error))
            options.print(
              `${DEMO_PREFIX} ${handle.tx_id} ${error.state} (${error.failure ?? 'no class'})${suffix(name)}`,
            );
          else options.log(`${DEMO_PREFIX} ${handle.tx_id}: ${(error as Error).message}`);
        },
      )
      .finally(() => waits.delete(wait));
    waits.add(wait);
  };

  const timer = setInterval(() => {
    sendOne().catch((error: unknown) => {
      if (stopped) return;
      // Not ready yet (no tip data, no decider) or a full queue: the next tick tries again.
      const why = isRelayError(error) ? `${error.code}: ${error.message}` : (error as Error).message;
      options.log(`${DEMO_PREFIX} enqueue failed: ${why}`);
    });
  }, options.intervalMs ?? 2000);

  return {
    targetDown(name) {
      const at = up.indexOf(name);
      if (at >= 0) up.splice(at, 1);
      for (const controller of following.get(name) ?? []) controller.abort();
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      // Rejects pending waits with ClientClosedError, which are ignored once stopped.
      for (const client of clients.values()) client.close();
      await Promise.allSettled([...waits]);
    },
  };
}
