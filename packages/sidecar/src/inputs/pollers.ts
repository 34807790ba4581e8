import { PublicKey } from '@solana/web3.js';
import type { LeaderBuffer } from '@solrelay/core';
import type { UpstreamHealth } from '../health/upstream-health';
import type { Relay, TipperReading } from '../relay';
import type { Periodic } from '../runtime/periodic';
import { leaderRegions, type EngineRegions } from '../upstream/engine-regions';
import type { SolanaRpc } from '../upstream/solana-rpc';

export interface ChainPollIntervals {
  /** Tipper balances are read this often, and every FAST_BALANCE_MS while submission waits on them. */
  balanceMs: number;
  blockHeightMs: number;
  leadersMs: number;
}

/** While submission waits on the tippers (paused, or a tipper held), their balances are read this often. */
const FAST_BALANCE_MS = 400;

/**
 * The chain inputs read by polling: tip accounts (until known), the tippers' balances (a tip is built only on a
 * tipper that can pay it besides its tips in flight; read every FAST_BALANCE_MS while that keeps one waiting), the
 * block height (tip blockhash expiry), a fresh tip blockhash ahead of need (a submit never waits on RPC for it), the
 * leader schedule (a rolling window from RPC, next epoch included) and which validators run the bundle engine in
 * every configured region, with the region each is connected to (from the engine).
 */
export function startChainPollers(deps: {
  periodic: Periodic;
  relay: Relay;
  rpc: SolanaRpc;
  engine: EngineRegions;
  leaders: LeaderBuffer;
  health: UpstreamHealth;
  intervals: ChainPollIntervals;
}): void {
  const { periodic, relay, rpc, leaders, health, intervals } = deps;
  periodic.every(1000, async () => {
    await relay.ensureTipAccounts();
  });
  // Ticks every FAST_BALANCE_MS (or balanceMs if shorter); reads every `everyTicks` ticks, or each tick while wanted.
  const tickMs = Math.min(intervals.balanceMs, FAST_BALANCE_MS);
  const everyTicks = Math.max(1, Math.round(intervals.balanceMs / tickMs));
  let tick = 0;
  let reading = false;
  periodic.every(tickMs, async () => {
    if ((tick++ % everyTicks !== 0 && !relay.tipperBalanceWanted) || reading) return;
    reading = true;
    try {
      // One tipper's failed read does not hold the others' back.
      const reads = await readTipperBalances(rpc, relay.tipperKeys);
      await relay.setTipperBalances(reads.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])));
      const failed = reads.find((r) => r.status === 'rejected');
      if (failed) health.mark('rpc', false, (failed.reason as Error).message);
      else health.mark('rpc', true, null);
    } finally {
      reading = false;
    }
  });
  periodic.every(intervals.blockHeightMs, async () => {
    relay.setBlockHeight(await rpc.getBlockHeight('processed'));
  });
  periodic.every(1000, async () => {
    await rpc.refreshBlockhash();
  });

  let scheduledUntil = 0;
  periodic.every(intervals.leadersMs / 5, async () => {
    const slot = relay.slot || (await rpc.getSlot());
    if (scheduledUntil - slot > 256) return;
    let limit = 1024;
    while (limit >= 16) {
      try {
        const ids = await rpc.getSlotLeaders(slot, limit);
        leaders.advance(slot);
        leaders.ingestSlotLeaders(slot, ids);
        scheduledUntil = slot + ids.length;
        return;
      } catch {
        limit = Math.floor(limit / 2); // the schedule may not reach that far yet
      }
    }
  });
  periodic.every(intervals.leadersMs, async () => {
    try {
      // Region names first (GetRegions, free): leader regions are matched against them to route bundles.
      if (!deps.engine.namesResolved) await deps.engine.resolveNames();
      const regions = leaderRegions(await deps.engine.connectedLeaders());
      leaders.setBundleEngineValidators(regions.keys(), regions);
      health.mark('block_engine', true, null);
    } catch (error) {
      // Unknown bundle-engine leaders: reflex submits without holding (DESIGN §8).
      leaders.setBundleEngineValidators(null);
      health.mark('block_engine', false, `leader data: ${(error as Error).message}`);
    }
  });
}

/**
 * Every tipper's balance at `confirmed`, with the slot each answer describes (a landing after that slot is not in
 * it yet). web3.js's own call: the public `SolanaRpc` wrapper returns the balance alone.
 */
function readTipperBalances(
  rpc: SolanaRpc,
  tippers: readonly string[],
): Promise<Array<PromiseSettledResult<TipperReading>>> {
  return Promise.allSettled(
    tippers.map(async (pubkey) => {
      const { context, value } = await rpc.connection.getBalanceAndContext(
        new PublicKey(pubkey),
        'confirmed',
      );
      return { pubkey, lamports: value, contextSlot: context.slot };
    }),
  );
}
