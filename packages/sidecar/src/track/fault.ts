import { isRetryableOutcome, type AttemptOutcome } from '@solrelay/core';
import type { EngineRecheck } from '../operator/diagnose';
import type { StoredAttempt, StoredTx } from '../store/records';

/**
 * Whose fault is it that an attempt did not land: the user's transactions, a transaction riding in the pack, relay's
 * own tip transaction, or the auction? Answered once, here, for every source of a verdict (the engine's answer to a
 * send, a gRPC bundle result, a target window that passed on JSON-RPC), as a pure function of what was observed. The
 * answer decides the outcome, whether the user's transaction pays a retry, who rides no more, and whether the
 * tipper is held. `FaultApplier` applies it.
 */

/** What made relay judge an attempt lost. */
export type FaultCause =
  /** A gRPC bundle result: the engine's outcome, and the transaction it names as failing (if any). */
  | { source: 'engine-result'; outcome: AttemptOutcome; detail: string; failedSignature: string | null }
  /** The engine refused the send (JSON-RPC or gRPC answer to sendBundle). */
  | {
      source: 'engine-refusal';
      rejection: 'blockhash_expired' | 'invalid_bundle' | 'dropped';
      message: string;
    }
  /** The target window passed without a landing (JSON-RPC: no push channel). */
  | { source: 'window'; detail: string; belowFloor: boolean };

/** What relay found out when it looked (each null when not looked at, or nothing found). */
export interface FaultEvidence {
  /** A user transaction's blockhash (or nonce) is dead: nothing of it can land any more. */
  userBlockhashDead?: boolean;
  /** The user's own transactions cannot execute (simulated now). */
  userFault?: { outcome: AttemptOutcome; detail: string } | null;
  /** A rider of the pack is why it did not land (gone, dead blockhash, processed apart, cannot execute). */
  riderFault?: { txId: string; detail: string } | null;
  /** Relay's own tip transaction cannot execute (its tipper cannot pay). */
  tipFault?: { detail: string } | null;
  /**
   * An engine's fatal verdict on the user's transactions, re-checked against relay's own RPC at a context slot at
   * least the verdict's (an engine's bank can lag: a payer funded a slot before the send is `AccountNotFound` there,
   * and lands when sent again). `reproduced`: the failure shows on relay's view too (proof enough to fail);
   * `cleared`: relay's view executes it (the engine's view lagged); `unavailable`: the RPC could not answer (no
   * proof either way; also a later member of a bundle, which cannot be simulated on its own); `unverifiable`: the
   * record no longer holds the transaction's bytes, so the engine's word stands, as before the re-check existed.
   */
  engineRecheck?: EngineRecheck | null;
}

export interface FaultVerdict {
  /** Who is to blame (`engine`: its view lagged relay's, nobody's fault, sent again). */
  blame: 'tip' | 'rider' | 'pack' | 'user' | 'auction' | 'engine';
  outcome: AttemptOutcome;
  /** Whether the user's transaction pays a retry for it. */
  countRetry: boolean;
  /** No further attempt (the user's blockhash is dead): the transaction waits for proof of expiry. */
  stop: boolean;
  /** Who rides in no pack again: one rider, or every member of the pack. */
  exclude: { txId: string } | 'pack' | null;
  /** Relay's own tip transaction failed: an operator fault; its tipper is held for this reason. */
  tipperHeld: string | null;
  /** The tip's cached blockhash was refused: the next attempt must not reuse it. */
  forgetBlockhash: boolean;
  detail: string;
}

function verdict(
  v: Partial<FaultVerdict> & Pick<FaultVerdict, 'blame' | 'outcome' | 'detail'>,
): FaultVerdict {
  return { countRetry: false, stop: false, exclude: null, tipperHeld: null, forgetBlockhash: false, ...v };
}

/** Blame a rider: the carrier loses nothing, not even a retry; the rider rides no more and meets its own verdict. */
function riderVerdict(txId: string, detail: string): FaultVerdict {
  return verdict({ blame: 'rider', outcome: 'dropped', exclude: { txId }, detail });
}

/**
 * The engine says the user's transactions cannot execute (a fatal outcome). `failed` has to mean the transaction
 * provably cannot land, and an engine's bank may lag relay's (DESIGN §11, last point), so the verdict becomes fatal
 * only when relay's own view reproduces it (or when it cannot be checked alone, as before). Cleared by relay's view:
 * sent again without a retry counted, as for a rider's fault: the engine's lag is nobody's doing, a lag of a few
 * slots would otherwise burn max-retries in as many slots, and the user's blockhash bounds the loop (past it the
 * transaction expires, provably). The RPC unable to answer: no proof either way, so no fatal verdict, but a retry
 * counted (nothing shows the engine was wrong).
 */
function userVerdictOnEngineFailure(
  outcome: AttemptOutcome,
  detail: string,
  recheck: EngineRecheck | null,
): FaultVerdict {
  if (recheck?.kind === 'cleared')
    return verdict({
      blame: 'engine',
      outcome: 'dropped',
      countRetry: false,
      detail: `engine: ${detail}; not reproduced on relay's RPC (${recheck.detail}): the engine's view lagged, sent again`,
    });
  if (recheck?.kind === 'unavailable')
    return verdict({
      blame: 'engine',
      outcome: 'dropped',
      countRetry: true,
      detail: `engine: ${detail}; relay's RPC could not re-check it (${recheck.detail}), so it is not taken as final`,
    });
  if (recheck?.kind === 'reproduced')
    return verdict({
      blame: 'user',
      outcome: recheck.outcome,
      countRetry: true,
      detail: `engine: ${detail}; reproduced on relay's RPC: ${recheck.detail}`,
    });
  return verdict({ blame: 'user', outcome, countRetry: true, detail: `engine: ${detail}` });
}

export function attributeFault(
  tx: Pick<StoredTx, 'signatures'>,
  attempt: Pick<StoredAttempt, 'tip_signature' | 'passengers'>,
  cause: FaultCause,
  evidence: FaultEvidence = {},
): FaultVerdict {
  const packed = (attempt.passengers?.length ?? 0) > 0;
  switch (cause.source) {
    case 'engine-result': {
      const failed = cause.failedSignature;
      // Relay's own tip transaction failing (the tipper cannot pay) pauses submission and costs the user's
      // transaction nothing, not even a retry.
      if (failed && failed === attempt.tip_signature)
        return verdict({
          blame: 'tip',
          outcome: 'dropped',
          tipperHeld: cause.detail,
          detail: `engine: relay's tip transaction failed in simulation: ${cause.detail}`,
        });
      const named = failed ? attempt.passengers?.find((p) => p.signatures.includes(failed)) : undefined;
      if (named)
        return riderVerdict(
          named.tx_id,
          `engine: transaction ${named.tx_id} riding in this bundle failed in simulation: ${cause.detail}`,
        );
      // A failing pack that names no member of its own: nobody rides again, and the carrier goes on without a
      // fatal verdict that may not be its own.
      const carrierNamed = !!failed && tx.signatures.includes(failed);
      if (packed && !carrierNamed && cause.outcome === 'simulation_failed')
        return verdict({
          blame: 'pack',
          outcome: 'dropped',
          exclude: 'pack',
          detail: `engine: the packed bundle failed with no member named: ${cause.detail}`,
        });
      if (isRetryableOutcome(cause.outcome))
        return verdict({
          blame: 'auction',
          outcome: cause.outcome,
          countRetry: true,
          detail: `engine: ${cause.detail}`,
        });
      return userVerdictOnEngineFailure(cause.outcome, cause.detail, evidence.engineRecheck ?? null);
    }
    case 'engine-refusal': {
      // The user's own blockhash is dead: nothing more can be sent, whoever rode along.
      if (cause.rejection === 'blockhash_expired' && evidence.userBlockhashDead)
        return verdict({ blame: 'user', outcome: 'dropped', stop: true, detail: cause.message });
      const rider = evidence.riderFault;
      if (rider)
        return riderVerdict(
          rider.txId,
          `transaction ${rider.txId} riding in this bundle: ${rider.detail}: ${cause.message}`,
        );
      if (cause.rejection === 'blockhash_expired') {
        // Neither the user's blockhash nor a rider's: the tip's was the one refused.
        return verdict({
          blame: 'tip',
          outcome: 'dropped',
          forgetBlockhash: true,
          detail: `tip transaction refused: ${cause.message}`,
        });
      }
      if (cause.rejection === 'invalid_bundle' && !packed)
        return verdict({ blame: 'user', outcome: 'invalid_bundle', detail: cause.message });
      // A packed bundle refused for its form, or for a reason relay does not recognise, with no rider found at fault:
      // it may be a rider's (its form, a marker, a rule relay does not know), so nobody rides again and the carrier
      // goes on alone, with no retry counted, rather than fail for what may not be its own.
      if (packed)
        return verdict({
          blame: 'pack',
          outcome: 'dropped',
          exclude: 'pack',
          detail: `packed bundle refused (its transactions go alone from now): ${cause.message}`,
        });
      // A refusal that says nothing about the bundle's form: an attempt that did not land, worth a retry.
      return verdict({
        blame: 'auction',
        outcome: 'dropped',
        countRetry: true,
        detail: `engine: ${cause.message}`,
      });
    }
    case 'window': {
      // Before blaming the tip: whether the user transactions themselves can execute (an unfunded fee payer or a
      // failing program never lands, whatever the tip).
      if (evidence.userFault)
        return verdict({
          blame: 'user',
          outcome: evidence.userFault.outcome,
          countRetry: true,
          detail: evidence.userFault.detail,
        });
      const rider = evidence.riderFault;
      if (rider)
        return riderVerdict(
          rider.txId,
          `transaction ${rider.txId} riding in this bundle sank it: ${rider.detail}`,
        );
      if (evidence.tipFault)
        return verdict({
          blame: 'tip',
          outcome: 'dropped',
          tipperHeld: evidence.tipFault.detail,
          detail: `relay's tip transaction cannot execute: ${evidence.tipFault.detail}`,
        });
      return verdict({
        blame: 'auction',
        outcome: cause.belowFloor ? 'fee_too_low' : 'dropped',
        countRetry: true,
        detail: cause.detail,
      });
    }
  }
}

/** Applies a fault verdict: who rides no more, the tipper held, then the attempt settled (one transition). */
export class FaultApplier {
  constructor(
    private readonly d: {
      settleFailed: (
        tx: StoredTx,
        attempt: StoredAttempt,
        outcome: AttemptOutcome,
        options: { countRetry: boolean; detail: string; stop?: boolean },
      ) => Promise<boolean>;
      packing: {
        exclude(txId: string): void;
        excludeAll(txId: string, attempt: StoredAttempt): void;
      };
      onTipFailed: (attempt: StoredAttempt, detail: string) => void;
      forgetBlockhash: () => void;
    },
  ) {}

  /**
   * The attempt is settled first; who rides no more and the tipper's hold follow only if this verdict settled it (a
   * verdict on an attempt that had already ended, by another path, changes nothing). The cached blockhash is
   * forgotten either way: the engine refused it.
   */
  async apply(tx: StoredTx, attempt: StoredAttempt, v: FaultVerdict): Promise<void> {
    if (v.forgetBlockhash) this.d.forgetBlockhash();
    const settled = await this.d.settleFailed(tx, attempt, v.outcome, {
      countRetry: v.countRetry,
      detail: v.detail,
      ...(v.stop ? { stop: true } : {}),
    });
    if (!settled) return;
    if (v.exclude === 'pack') this.d.packing.excludeAll(tx.tx_id, attempt);
    else if (v.exclude) this.d.packing.exclude(v.exclude.txId);
    if (v.tipperHeld !== null) this.d.onTipFailed(attempt, v.tipperHeld);
  }
}
