import type { SolanaRpc } from '../upstream/solana-rpc';
import type { StatusMap } from './judge';

/**
 * Read the statuses of `signatures` in one call and add every known one to `into` (a null status adds nothing).
 * Without `searchTransactionHistory` only the node's status cache answers: the last ~300 rooted slots.
 * Returns the slot the answer describes (`context.slot`, the lowest of the calls).
 */
export async function readStatusesInto(
  rpc: Pick<SolanaRpc, 'getSignatureStatusesWithContext'>,
  signatures: string[],
  into: StatusMap,
  options: { searchTransactionHistory?: boolean } = {},
): Promise<number> {
  const { contextSlot, statuses } = await rpc.getSignatureStatusesWithContext(signatures, options);
  statuses.forEach((v, i) => {
    if (v)
      into.set(signatures[i] as string, {
        slot: v.slot,
        err: v.err,
        confirmationStatus: v.confirmationStatus,
      });
  });
  return contextSlot;
}
