import type { Logger } from 'pino';
import type { UpstreamHealth } from '../health/upstream-health';
import type { Relay } from '../relay';
import type { Periodic } from '../runtime/periodic';
import { isDatabaseOutage } from '../store/store';
import { GeyserStream } from '../upstream/geyser-stream';
import type { SolanaRpc } from '../upstream/solana-rpc';

/**
 * Where the relay's slots come from: the Yellowstone stream (processed slots drive tracking passes, dead slots undo
 * landings, finalized slots settle confirmations, and the tippers' transactions hint at landings), with RPC polled
 * for slots while the stream is down or silent, so tracking and expiry never stop.
 */
export function startSlotFeed(deps: {
  endpoint: string;
  xToken: string | undefined;
  /** The tippers' addresses: every tip transaction relay sends shows on the stream when it lands. */
  tippers: string[];
  relay: Relay;
  rpc: SolanaRpc;
  health: UpstreamHealth;
  periodic: Periodic;
  rpcSlotMs: number;
  log: Logger;
}): GeyserStream {
  const { relay, rpc, health, log } = deps;
  const onNewSlot = (slot: number, fromStream: boolean) => {
    health.slotSeen(fromStream, slot > relay.slot);
    relay.onSlot(slot);
  };

  deps.periodic.every(deps.rpcSlotMs, async () => {
    if (health.stream().ok) return;
    const slot = await rpc.getSlot('processed');
    if (slot > relay.slot) {
      // The consensus detector follows the processed tip from here too while the stream is down, so a migration in
      // an outage still holds sends and expiry (its finalized notices come back with the stream, or from RPC's own
      // migration calls: consensus-poller.ts).
      relay.onConsensusSlot({ slot, status: 'processed' });
      onNewSlot(slot, false);
      void relay.track();
    }
  });

  const stream = new GeyserStream({
    endpoint: deps.endpoint,
    xToken: deps.xToken,
    staticAccounts: deps.tippers,
    onSlot: (update) => {
      relay.onConsensusSlot(update);
      if (update.status === 'processed') {
        onNewSlot(update.slot, true);
        void relay.track();
        if (update.slot % 8 === 0)
          void relay
            .streamAccounts()
            .then((accounts) => stream.setWatchedAccounts(accounts))
            .catch((error: unknown) => log.debug({ err: error }, 'watched accounts read failed'));
      } else if (update.status === 'dead') {
        void relay
          .onDeadSlot(update.slot)
          .catch((error: unknown) =>
            log[isDatabaseOutage(error) ? 'debug' : 'warn'](
              { err: error, slot: update.slot },
              'dead slot handling failed',
            ),
          );
      } else if (update.status === 'finalized') {
        relay.onFinalizedSlot(update.slot);
      }
    },
    onTransactionStatus: (status) => relay.onStreamTransaction(status.signature),
    onBlockMeta: (meta) => {
      if (meta.blockHeight !== null) relay.onBlock(meta.blockhash, meta.blockHeight);
    },
    onState: (state, detail) => {
      health.mark('stream', state !== 'disconnected', state === 'disconnected' ? detail : null);
      if (state === 'disconnected') log.warn({ detail }, 'stream disconnected; reconnecting');
      if (state === 'reconnected') {
        log.info('stream reconnected; reconciling in-flight signatures over RPC');
        void relay.track('full');
      }
    },
  });
  stream.start();
  relay.watchStreamWith(() => health.stream().ok);
  return stream;
}
