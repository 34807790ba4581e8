import { Connection, SystemProgram, Transaction, type Keypair } from '@solana/web3.js';
import { RelayClient, isRelayError, isTxFailedError } from '@solrelay/client';

export interface DemoTrafficOptions {
  baseUrl: string;
  token: string | undefined;
  rpcUrl: string;
  /** The payer of every demo transaction (funded on the simulated cluster). */
  payer: Keypair;
  intervalMs?: number;
  /** One human line per transaction as it reaches a terminal state. */
  print: (line: string) => void;
  log: (line: string) => void;
}

export interface DemoTraffic {
  stop(): Promise<void>;
}

export const DEMO_PREFIX = '[ DEMO ]';

/**
 * `--sim`'s demo traffic: every ~2 s a self-transfer from a funded keypair is enqueued through the client SDK, and
 * one line is printed when it reaches finalized (or fails). It drives the dashboard and the agent with real work.
 */
export function startDemoTraffic(options: DemoTrafficOptions): DemoTraffic {
  const client = new RelayClient({
    baseUrl: options.baseUrl,
    ...(options.token ? { token: options.token } : {}),
  });
  const connection = new Connection(options.rpcUrl, 'confirmed');
  const waits = new Set<Promise<void>>();
  let counter = 0;
  let stopped = false;

  const sendOne = async () => {
    const { blockhash } = await connection.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: options.payer.publicKey, recentBlockhash: blockhash });
    // The amount changes every time, so two transfers on one blockhash never share a signature.
    counter += 1;
    tx.add(
      SystemProgram.transfer({
        fromPubkey: options.payer.publicKey,
        toPubkey: options.payer.publicKey,
        lamports: counter,
      }),
    );
    tx.sign(options.payer);
    const started = Date.now();
    const handle = await client.enqueue(tx);
    const wait = handle
      .waitFor('finalized', { timeoutMs: 180_000 })
      .then(
        (status) =>
          options.print(
            `${DEMO_PREFIX} ${handle.tx_id} finalized in ${((Date.now() - started) / 1000).toFixed(1)} s (${status.tx_signatures[0] ?? ''})`,
          ),
        (error: unknown) => {
          if (stopped) return;
          if (isTxFailedError(error))
            options.print(`${DEMO_PREFIX} ${handle.tx_id} ${error.state} (${error.failure ?? 'no class'})`);
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
    async stop() {
      stopped = true;
      clearInterval(timer);
      client.close(); // rejects pending waits with ClientClosedError, which are ignored once stopped
      await Promise.allSettled([...waits]);
    },
  };
}
