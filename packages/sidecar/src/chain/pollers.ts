import type { Keypair } from '@solana/web3.js';
import type { LeaderBuffer } from '@solrelay/core';
import type { UpstreamHealth } from '../health/upstream-health';
import type { Relay } from '../relay';
import type { Periodic } from '../runtime/periodic';
import { leaderRegions, type EngineRegions } from '../upstream/engine-regions';
import type { SolanaRpc } from '../upstream/solana-rpc';

export interface ChainPollIntervals {
  balanceMs: number;
  blockHeightMs: number;
  leadersMs: number;
}

/**
 * The chain inputs read by polling: tip accounts (until known), the tipper's balance (submission pauses when it is
 * underfunded), the block height (tip blockhash expiry), a fresh tip blockhash ahead of need (a submit never waits
 * on RPC for it), the leader schedule (a rolling window from RPC, next epoch included) and which validators run
 * the bundle engine in every configured region, with the region each is connected to (from the engine).
 */
export function startChainPollers(deps: {
  periodic: Periodic;
  relay: Relay;
  rpc: SolanaRpc;
  engine: EngineRegions;
  leaders: LeaderBuffer;
  tipper: Keypair;
  health: UpstreamHealth;
  intervals: ChainPollIntervals;
}): void {
  const { periodic, relay, rpc, leaders, health, intervals } = deps;
  periodic.every(1000, async () => {
    await relay.ensureTipAccounts();
  });
  periodic.every(intervals.balanceMs, async () => {
    try {
      relay.setTipperBalance(await rpc.getBalance(deps.tipper.publicKey.toBase58()));
      health.mark('rpc', true, null);
    } catch (error) {
      health.mark('rpc', false, (error as Error).message);
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
      await deps.engine.resolveNames();
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
