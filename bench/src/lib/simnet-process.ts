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
  /** Where to write a funded tipper keypair (Solana CLI JSON); none is made without it. */
  keypairPath?: string;
  /** The block engine's per-IP rate limit (1 req/s per region): off unless asked, as the older benchmarks ran. */
  rateLimit?: boolean;
  /** Regional block engines (default: the simnet's default, all eight). */
  regions?: number;
  /** The cluster's consensus (README "Consensus modes"): the simnet's default, towerbft, unless asked. */
  consensus?: 'towerbft' | 'alpenglow';
}

/** What a started simnet child reports back. */
export interface SimnetStarted {
  env: Record<string, string>;
  pid: number;
  /** The funded tipper written to keypairPath (base58); null without a keypairPath. */
  tipper: string | null;
  rpcUrl: string;
  adminUrl: string;
  tipFloorUrl: string;
  /** Each region's block engine base URL (JSON-RPC under /api/v1). */
  engineUrls: string[];
  /**
   * The block engine's hot (contended) accounts, or null when it models none. The auction-model branch adds
   * write-lock groups and hot accounts; until it lands, scenarios that need them are skipped, not faked.
   */
  hotAccounts: string[] | null;
}

/** `engineTally`: what the simnet's block engine counted (see the op). */
export interface EngineTally {
  /** Requests the engine answered 429 / -32097 since the simnet started (every region; one client per child). */
  rateLimited: number;
  /** Sum of the tip accounts' on-chain balances. */
  tipAccountLamports: number;
  /**
   * Engine requests by the client's address (the per-IP limiter's key), and how many of them it refused: a fleet's
   * hosts each meant to have their own budget show up here as as many addresses.
   */
  byAddress: Record<string, { requests: number; refused: number }>;
}

/** A tip transaction on chain (`tipsOnChain`) and the transactions right before it in its block: its bundle's. */
export interface TipOnChain {
  signature: string;
  slot: number;
  /** The bundle's user transactions (up to four, in order); empty when the tip landed on its own. */
  users: string[];
}

export type SimnetRequest =
  | { op: 'start'; options: SimnetChildOptions }
  | { op: 'fund'; addresses: string[]; lamports: number }
  | { op: 'blockhash' }
  | { op: 'slot' }
  | { op: 'auction'; regime: 'calm' | 'busy' | 'spike' | null; fixedClearingTip: number | null }
  | { op: 'llmLatency'; ms: number }
  | { op: 'balances'; addresses: string[] }
  | { op: 'slotTimes' }
  | { op: 'engineTally' }
  /** From now on, keep every successful transaction these tippers paid for (see `tipsOnChain`). */
  | { op: 'watchTips'; tippers: string[] }
  | { op: 'tipsOnChain' }
  | { op: 'stop' };

let simnet: Simnet | null = null;
/** Wall-clock ms (this machine's Date.now()) at which each slot was first produced (processed). */
const slotSeenAt = new Map<number, number>();
/** The engine's requests by client address (`engineTally`). */
const byAddress: EngineTally['byAddress'] = {};
/** `watchTips`: the watched tippers, and every successful transaction of each slot since, by index. */
const tippers = new Set<string>();
const blocks = new Map<number, Map<number, { signature: string; tip: boolean }>>();

async function handle(request: SimnetRequest): Promise<unknown> {
  switch (request.op) {
    case 'start': {
      const o = request.options;
      simnet = await startSimnet({
        seed: o.seed,
        slotMs: o.slotMs,
        rateLimit: o.rateLimit ?? false,
        ...(o.regions !== undefined ? { regions: o.regions } : {}),
        ...(o.bundleEngineShare !== undefined ? { bundleEngineShare: o.bundleEngineShare } : {}),
        ...(o.consensus !== undefined ? { consensus: o.consensus } : {}),
      });
      simnet.engine.auction.setFixedClearingTip(o.fixedClearingTip);
      if (o.regime) simnet.engine.auction.setRegime(o.regime);
      const tipper = o.keypairPath ? simnet.fundedKeypair(1_000_000_000_000) : null;
      if (o.keypairPath && tipper)
        writeFileSync(o.keypairPath, JSON.stringify([...tipper.secretKey]), { mode: 0o600 });
      // Observed, not changed: every request still goes through the engine's own admission.
      const engine = simnet.engine;
      const admit = engine.admit.bind(engine);
      engine.admit = (ip, ...rest) => {
        const decision = admit(ip, ...rest);
        const tally = (byAddress[ip] ??= { requests: 0, refused: 0 });
        tally.requests++;
        if (!decision.ok) tally.refused++;
        return decision;
      };
      simnet.cluster.on('transaction', (event) => {
        if (tippers.size === 0 || event.err !== null) return;
        let block = blocks.get(event.slot);
        if (!block) blocks.set(event.slot, (block = new Map()));
        block.set(event.index, { signature: event.signature, tip: tippers.has(event.feePayer) });
      });
      // A rolled-back slot's transactions are no longer on chain.
      simnet.cluster.on('rollback', (event) => blocks.delete(event.slot));
      simnet.cluster.on('slot', (event) => {
        if (event.status === 'processed' && !slotSeenAt.has(event.slot))
          slotSeenAt.set(event.slot, Date.now());
      });
      const endpoints = simnet.endpoints;
      const started: SimnetStarted = {
        env: simnet.env(),
        pid: process.pid,
        tipper: tipper?.publicKey.toBase58() ?? null,
        rpcUrl: endpoints.rpcUrl,
        adminUrl: endpoints.adminUrl,
        tipFloorUrl: endpoints.tipFloorUrl,
        engineUrls: endpoints.regions.map((r) => r.engineUrl),
        hotAccounts: hotAccountsOf(simnet),
      };
      return started;
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
    case 'balances':
      return request.addresses.map((address) => need().cluster.getBalance(address));
    case 'engineTally': {
      // What the engine itself saw: its 429s (the per-IP limiter's refusals and any injected storm), and the
      // lamports the tip accounts hold on chain (the background market is modelled, not executed, so a change in
      // them is the tips of the transactions sent to this simnet).
      const s = need();
      const tally: EngineTally = {
        rateLimited: s.engine.rateLimiter.refused + s.faults.injected.engineRateLimited,
        tipAccountLamports: s.engine.tipAccounts.reduce((sum, a) => sum + s.cluster.getBalance(a), 0),
        byAddress,
      };
      return tally;
    }
    case 'watchTips':
      for (const tipper of request.tippers) tippers.add(tipper);
      return null;
    case 'tipsOnChain': {
      // A bundle's transactions execute one after another, the tip last: the ones right before a tip (back to the
      // previous tip or a gap, at most four) are its bundle's.
      const tips: TipOnChain[] = [];
      for (const [slot, block] of blocks)
        for (const [index, tx] of block) {
          if (!tx.tip) continue;
          const users: string[] = [];
          for (let i = index - 1; users.length < 4; i--) {
            const before = block.get(i);
            if (!before || before.tip) break;
            users.unshift(before.signature);
          }
          tips.push({ signature: tx.signature, slot, users });
        }
      return tips;
    }
    case 'slotTimes':
      return [...slotSeenAt.entries()];
    case 'stop':
      await simnet?.stop();
      setImmediate(() => process.exit(0));
      return null;
  }
}

/**
 * `simnet.engine.hotAccounts` as addresses, whichever shape it takes (an array, a Set or Map of addresses, or a
 * function returning one); null when the engine has none.
 */
function hotAccountsOf(sim: Simnet): string[] | null {
  let value: unknown = (sim.engine as unknown as { hotAccounts?: unknown }).hotAccounts;
  if (typeof value === 'function') value = (value as () => unknown).call(sim.engine);
  if (value instanceof Map) value = [...value.keys()];
  if (value instanceof Set) value = [...value];
  if (!Array.isArray(value)) return null;
  const addresses = value.map((v) =>
    typeof v === 'string' ? v : String((v as { address?: unknown }).address ?? v),
  );
  return addresses.length ? addresses : null;
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
