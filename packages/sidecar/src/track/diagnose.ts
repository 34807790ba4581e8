import { classifyTransactionError, type AttemptOutcome } from '@solrelay/core';
import { SIGNATURE_FEE_LAMPORTS } from '../engine/tip-tx';
import type { StoredTx } from '../store/records';
import type { SolanaRpc } from '../upstream/solana-rpc';

/**
 * Why the user transactions cannot land, if they cannot: a fee payer that cannot pay the fee, or (for a single
 * transaction, which can be simulated on its own) an execution error. Null when they look fine or RPC cannot say.
 */
export async function diagnoseUserTransactions(
  rpc: SolanaRpc,
  tx: StoredTx,
): Promise<{ outcome: AttemptOutcome; detail: string } | null> {
  try {
    for (let i = 0; i < tx.fee_payers.length; i++) {
      const balance = await rpc.getBalance(tx.fee_payers[i] as string);
      if (balance < SIGNATURE_FEE_LAMPORTS) {
        return {
          outcome: 'insufficient_funds',
          detail: `fee payer ${tx.fee_payers[i]} of transaction #${i} holds ${balance} lamports`,
        };
      }
    }
    if (tx.wires && tx.wires.length === 1) {
      const err = await rpc.simulate(Buffer.from(tx.wires[0] as string, 'base64'));
      if (err !== null && !/BlockhashNotFound|AlreadyProcessed/.test(JSON.stringify(err))) {
        return {
          outcome: classifyTransactionError(err),
          detail: `the transaction fails when executed: ${JSON.stringify(err)}`,
        };
      }
    }
  } catch {
    /* RPC cannot say now: do not guess */
  }
  return null;
}
