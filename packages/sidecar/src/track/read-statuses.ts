import type { SolanaRpc } from '../upstream/solana-rpc';
import type { StatusMap } from './judge';

/** Read the statuses of `signatures` in one call and add every known one to `into` (a null status adds nothing). */
export async function readStatusesInto(
  rpc: Pick<SolanaRpc, 'getSignatureStatuses'>,
  signatures: string[],
  into: StatusMap,
): Promise<void> {
  const values = await rpc.getSignatureStatuses(signatures);
  values.forEach((v, i) => {
    if (v)
      into.set(signatures[i] as string, {
        slot: v.slot,
        err: v.err,
        confirmationStatus: v.confirmationStatus,
      });
  });
}
