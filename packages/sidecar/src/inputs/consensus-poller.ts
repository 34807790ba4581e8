import type { Periodic } from '../runtime/periodic';
import type { SolanaRpc } from '../upstream/solana-rpc';

/**
 * The cluster's consensus facts, read where the node serves them (Agave 4.3; DESIGN §12):
 * - `getAlpenglowMigrationSlot` (anza-xyz/agave PR 12735, anza-xyz/kit PR 1703): the migration boundary slot, or
 *   null when none is planned.
 * - `getAgGenesisCert`: the certificate over the first Alpenglow block (`{ block: { slot, blockId } }`), or null while
 *   TowerBFT runs.
 *
 * Each answer is read as a number (a slot), null (the node says: none), or undefined (the node cannot say: -32601
 * "method not found" from a node older than 4.3, any other error, a malformed answer, no answer at all). undefined
 * is never "no migration": the detector keeps what it knew (`ConsensusDetector.observeMigrationSlot`).
 */
export type ConsensusAnswer = number | null | undefined;

/** The answer's `result`, or nothing when it is an error (-32601 or any other) or no JSON-RPC answer at all. */
function resultOf(response: unknown): { ok: true; result: unknown } | { ok: false } {
  if (typeof response !== 'object' || response === null) return { ok: false };
  const { error, result } = response as { error?: unknown; result?: unknown };
  if ((error !== undefined && error !== null) || !('result' in response)) return { ok: false };
  return { ok: true, result };
}

const isSlot = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** `getAlpenglowMigrationSlot`'s answer: the boundary slot, null (none planned), undefined (cannot say). */
export function migrationSlotOf(response: unknown): ConsensusAnswer {
  const read = resultOf(response);
  if (!read.ok) return undefined;
  if (read.result === null) return null;
  return isSlot(read.result) ? read.result : undefined;
}

/** `getAgGenesisCert`'s answer: the first Alpenglow block's slot, null (not migrated), undefined (cannot say). */
export function genesisSlotOf(response: unknown): ConsensusAnswer {
  const read = resultOf(response);
  if (!read.ok) return undefined;
  if (read.result === null) return null;
  const slot = (read.result as { block?: { slot?: unknown } } | null)?.block?.slot;
  return isSlot(slot) ? slot : undefined;
}

/** Read both facts once; a transport failure of one reads as undefined (cannot say) for it. */
export async function readConsensusInfo(
  rpc: Pick<SolanaRpc, 'rawRequest'>,
): Promise<{ migrationSlot: ConsensusAnswer; genesisSlot: ConsensusAnswer }> {
  const [migration, genesis] = await Promise.allSettled([
    rpc.rawRequest('getAlpenglowMigrationSlot'),
    rpc.rawRequest('getAgGenesisCert'),
  ]);
  return {
    migrationSlot: migrationSlotOf(migration.status === 'fulfilled' ? migration.value : undefined),
    genesisSlot: genesisSlotOf(genesis.status === 'fulfilled' ? genesis.value : undefined),
  };
}

/**
 * Poll the consensus facts every `everyMs` (a boundary is announced long ahead; the slot stream, not this poll, tells
 * when it passes and when Alpenglow finalizes past it) and hand them to relay. A node that answers -32601 is asked
 * again at the same pace (an upgrade adds the methods).
 */
export function startConsensusPoller(deps: {
  periodic: Periodic;
  rpc: Pick<SolanaRpc, 'rawRequest'>;
  relay: { onConsensusInfo(migrationSlot: ConsensusAnswer, genesisSlot: ConsensusAnswer): void };
  everyMs: number;
}): void {
  deps.periodic.every(deps.everyMs, async () => {
    const info = await readConsensusInfo(deps.rpc);
    deps.relay.onConsensusInfo(info.migrationSlot, info.genesisSlot);
  });
}
