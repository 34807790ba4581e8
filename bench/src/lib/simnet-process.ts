/**
 * A simnet in its own process, driven over the fork IPC channel, so that its CPU and memory never count as the
 * sidecar's or the load generator's. Messages in: `{ id, op, ... }`; out: `{ id, ok, value | error }`.
 */
import { writeFileSync } from 'node:fs';
import { startSimnet, type Simnet } from '@solrelay/simnet';

export interface SimnetChildOptions {
  seed: number;
  slotMs: number;
  bundleEngineShare?: number;
  /** Pinned clearing tip (lamports), or null for the seeded calm / busy / spike auction. */
  fixedClearingTip: number | null;
  regime?: 'calm' | 'busy' | 'spike' | null;
  /** Where to write the funded tipper keypair (Solana CLI JSON). */
  keypairPath: string;
}

export type SimnetRequest =
  | { op: 'start'; options: SimnetChildOptions }
  | { op: 'fund'; addresses: string[]; lamports: number }
  | { op: 'blockhash' }
  | { op: 'slot' }
  | { op: 'auction'; regime: 'calm' | 'busy' | 'spike' | null; fixedClearingTip: number | null }
  | { op: 'llmLatency'; ms: number }
  | { op: 'stop' };

let simnet: Simnet | null = null;

async function handle(request: SimnetRequest): Promise<unknown> {
  switch (request.op) {
    case 'start': {
      const o = request.options;
      simnet = await startSimnet({
        seed: o.seed,
        slotMs: o.slotMs,
        rateLimit: false,
        ...(o.bundleEngineShare !== undefined ? { bundleEngineShare: o.bundleEngineShare } : {}),
      });
      simnet.engine.auction.setFixedClearingTip(o.fixedClearingTip);
      if (o.regime) simnet.engine.auction.setRegime(o.regime);
      const tipper = simnet.fundedKeypair(1_000_000_000_000);
      writeFileSync(o.keypairPath, JSON.stringify([...tipper.secretKey]), { mode: 0o600 });
      return { env: simnet.env(), pid: process.pid };
    }
    case 'fund':
      for (const address of request.addresses) need().cluster.airdrop(address, request.lamports);
      return null;
    case 'blockhash':
      return need().cluster.latestBlockhash('confirmed').blockhash;
    case 'slot':
      return need().cluster.slot;
    case 'auction':
      need().engine.auction.setRegime(request.regime);
      need().engine.auction.setFixedClearingTip(request.fixedClearingTip);
      return null;
    case 'llmLatency':
      need().llm.setLatency(request.ms);
      return null;
    case 'stop':
      await simnet?.stop();
      setImmediate(() => process.exit(0));
      return null;
  }
}

function need(): Simnet {
  if (!simnet) throw new Error('simnet not started');
  return simnet;
}

process.on('message', (message: { id: number } & SimnetRequest) => {
  handle(message).then(
    (value) => process.send?.({ id: message.id, ok: true, value }),
    (error: unknown) => process.send?.({ id: message.id, ok: false, error: String(error) }),
  );
});
// The parent going away (a crashed run) must not leave a cluster holding ports.
process.on('disconnect', () => process.exit(0));
