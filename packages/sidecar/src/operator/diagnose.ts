import { classifyTransactionError, type AttemptOutcome } from '@solrelay/core';
import { SIGNATURE_FEE_LAMPORTS } from '../engine/tip-tx';
import { RENT_EXEMPT_MINIMUM, tipCost, tipperOf } from './tipper-funds';
import type { StoredAttempt, StoredTx } from '../store/records';
import type { SolanaRpc } from '../upstream/solana-rpc';

/** Relay's own tip transaction of `attempt` could not execute: an operator fault (its tipper is held). */
export type TipFailedHandler = (attempt: StoredAttempt, detail: string) => void;

/**
 * Whether relay's own tip transaction is why an attempt did not land, over JSON-RPC (which has no result stream to
 * name the transaction that failed): its tipper's balance, read now, cannot pay this tip, its fee and the
 * rent-exempt minimum, so the bundle cannot have passed the engine's simulation and cannot now. An inference,
 * said as one: a balance that was short when the bundle was simulated and funded since is not seen, and the attempt
 * then counts as lost like any other. Null when the tipper can pay it or RPC cannot say.
 */
export async function diagnoseTipTransaction(
  rpc: SolanaRpc,
  attempt: StoredAttempt,
): Promise<{ tipper: string; detail: string } | null> {
  const tipper = tipperOf(attempt);
  if (!attempt.tip_signature || tipper === null) return null;
  const needs = tipCost(attempt.tip_lamports) + RENT_EXEMPT_MINIMUM;
  try {
    const balance = await rpc.getBalance(tipper);
    if (balance >= needs) return null;
    return {
      tipper,
      detail:
        `tipper ${tipper} holds ${balance} lamports, below the tip and fee ` +
        `(${tipCost(attempt.tip_lamports)}) plus the rent-exempt minimum (${RENT_EXEMPT_MINIMUM})`,
    };
  } catch {
    return null; // RPC cannot say now: do not guess
  }
}

/**
 * Why the user transactions cannot land, if they cannot: a fee payer that cannot pay the fee, or (for a single
 * transaction, which can be simulated on its own) an execution error. Null when they look fine or RPC cannot say.
 * Both are read from a node at least at `minContextSlot` (the slot relay judges at): an answer from an older bank
 * could miss a payer funded just before, and "cannot land" is terminal. A node behind refuses; that is "cannot say".
 */
export async function diagnoseUserTransactions(
  rpc: SolanaRpc,
  tx: StoredTx,
  minContextSlot: number,
): Promise<{ outcome: AttemptOutcome; detail: string } | null> {
  try {
    for (let i = 0; i < tx.fee_payers.length; i++) {
      // The newest bank (processed), as the simulation below: a payer funded a slot or two ago is not yet in the
      // confirmed one, and "cannot pay" has to hold on the freshest view relay has before it fails anything.
      const balance = await rpc.getBalance(tx.fee_payers[i] as string, 'processed', minContextSlot);
      if (balance < SIGNATURE_FEE_LAMPORTS) {
        return {
          outcome: 'insufficient_funds',
          detail: `fee payer ${tx.fee_payers[i]} of transaction #${i} holds ${balance} lamports`,
        };
      }
    }
    if (tx.wires && tx.wires.length === 1) {
      const err = await simulateAtLeast(rpc, Buffer.from(tx.wires[0] as string, 'base64'), minContextSlot);
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

/** What relay's own RPC says of an engine's fatal verdict (see `FaultEvidence.engineRecheck`). */
export type EngineRecheck =
  | { kind: 'reproduced'; outcome: AttemptOutcome; detail: string }
  | { kind: 'cleared'; detail: string }
  | { kind: 'unavailable'; detail: string }
  | { kind: 'unverifiable' };

/**
 * Re-check an engine's fatal verdict on the user's transaction `failedSignature` (null: the engine named none, so
 * the first) against relay's own RPC, at a context slot at least `minContextSlot` (a node behind it refuses rather
 * than answer from an older bank). Only a transaction that can run on its own is simulated: the first of the
 * bundle (a later one may depend on what the ones before it did), so a verdict on a later one is `unavailable`, as
 * is a clean first transaction when the engine named none of several. A dead blockhash proves nothing about
 * execution (expiry judges that), so it reads as unavailable. `unverifiable`: the record no longer holds the bytes.
 */
export async function recheckEngineFailure(
  rpc: Pick<SolanaRpc, 'simulate'>,
  tx: Pick<StoredTx, 'signatures' | 'wires'>,
  failedSignature: string | null,
  minContextSlot: number,
): Promise<EngineRecheck> {
  const index = failedSignature === null ? 0 : tx.signatures.indexOf(failedSignature);
  const wire = tx.wires?.[index];
  if (wire === undefined) return { kind: 'unverifiable' };
  // A later member depends on what the ones before it did: relay cannot run it alone, so it has no proof either
  // way (not fatal, a retry counted; past max-retries the blockhash decides).
  if (index !== 0)
    return {
      kind: 'unavailable',
      detail: `transaction #${index} of the bundle cannot be simulated on its own`,
    };
  try {
    const err = await simulateAtLeast(rpc, Buffer.from(wire, 'base64'), minContextSlot);
    // The engine named no transaction and the bundle has more than the first: the first running clean clears
    // nothing (a later one may be the failing one), so a retry is counted.
    if (err === null && failedSignature === null && (tx.wires?.length ?? 0) > 1)
      return {
        kind: 'unavailable',
        detail: `the first transaction executes at slot >= ${minContextSlot}; the engine named none, and the others cannot be simulated on their own`,
      };
    if (err === null) return { kind: 'cleared', detail: `it executes at slot >= ${minContextSlot}` };
    const text = JSON.stringify(err);
    if (/BlockhashNotFound|AlreadyProcessed/.test(text))
      return { kind: 'unavailable', detail: `simulation answered ${text}` };
    return {
      kind: 'reproduced',
      outcome: classifyTransactionError(err),
      detail: `it fails at slot >= ${minContextSlot}: ${text}`,
    };
  } catch (error) {
    return { kind: 'unavailable', detail: (error as Error).message };
  }
}

/** Tries of a simulation refused by a node not yet at `minContextSlot`, and the wait between them (about a slot). */
const BEHIND_TRIES = 4;
const BEHIND_WAIT_MS = 250;

/**
 * `simulate` at a context slot at least `minContextSlot` (`simulateTransaction`'s config carries it: Agave
 * rpc-client-api `RpcSimulateTransactionConfig.min_context_slot`). A node a slot or two behind relay's stream refuses
 * (JSON-RPC -32016, "Minimum context slot has not been reached"): it is asked again after about a slot, a few
 * times, before the caller is told it could not answer.
 */
async function simulateAtLeast(
  rpc: Pick<SolanaRpc, 'simulate'>,
  wire: Uint8Array,
  minContextSlot: number,
): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await rpc.simulate(wire, minContextSlot);
    } catch (error) {
      const behind = /-32016|minimum context slot/i.test((error as Error).message);
      if (!behind || attempt >= BEHIND_TRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, BEHIND_WAIT_MS));
    }
  }
}
