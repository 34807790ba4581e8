import { deriveBundleId } from '@solrelay/core';
import { BLOCKHASH_MAX_AGE_BLOCKS } from '../chain/blockhash';
import type { RelayPorts } from '../context';
import type { TipSigner } from '../engine/tip-tx';
import { attemptKey, type StoredAttempt, type StoredTx } from '../store/records';

/**
 * A tip transaction whose blockhash is this many blocks old when its bundle first goes out is signed again on a
 * fresh one (about 8 s at 400 ms): admission lets a bundle queue for most of a blockhash's life.
 */
export const TIP_REFRESH_AGE_BLOCKS = 20;

/**
 * An attempt's first send: which attempts were built by this process and have not gone to any engine yet (only
 * those may have their tip signed again, or carry riders: bytes that may have been sent, by this process or before a
 * restart, could still land), and the re-signing of a tip that aged in the queue.
 */
export class FirstSends {
  /** Attempts built by this process whose bytes have not gone to any engine yet (`tx_id#n`). */
  private readonly unsent = new Set<string>();

  constructor(
    private readonly d: Pick<RelayPorts, 'chain' | 'log' | 'metrics' | 'rpc' | 'store'>,
    /** The tipper that signed an attempt's tip, to sign it again (null: the pool no longer has it). */
    private readonly signerOf: (tipper: string | null) => TipSigner | null,
  ) {}

  /** Attempt `n` of `txId` was just built (journaled) here, with a relay tip. */
  built(txId: string, n: number): void {
    this.unsent.add(attemptKey(txId, n));
  }

  /** Whether attempt `n` of `txId` was built by this process and its bytes have not gone to any engine yet. */
  isUnsent(txId: string, n: number): boolean {
    return this.unsent.has(attemptKey(txId, n));
  }

  /**
   * Called under the transaction's lock as an attempt's bytes go to the engine: true the first time (the attempt
   * counts as sent from now on), false for a resend or an attempt built before a restart (its bytes may be out).
   */
  take(txId: string, n: number): boolean {
    return this.unsent.delete(attemptKey(txId, n));
  }

  /**
   * An attempt that settles before its first send (its transaction landed another way, or expired) will never be
   * sent: forget it.
   */
  forget(txId: string, n: number): void {
    this.unsent.delete(attemptKey(txId, n));
  }

  /**
   * Before an attempt's first send (`take`): if the tip transaction's blockhash has aged {@link TIP_REFRESH_AGE_BLOCKS}
   * or more while the bundle queued for the engines' budget, the same tipper signs the same tip again on the newest
   * blockhash and the attempt is journaled with it (new tip signature, new bundle id) before anything is sent: the
   * old bytes never left relay, so only one of the two can ever be on the wire. A resend (after a transport error)
   * sends the journaled bytes as they are. A failure to refresh keeps the old bytes. Resolves with the attempt to
   * send: the re-signed one, or `attempt` as it was.
   */
  async freshenTip(tx: StoredTx, attempt: StoredAttempt): Promise<StoredAttempt> {
    if (attempt.tip_last_valid_block_height === null || attempt.tip_account === null) return attempt;
    const tipBlockHeight = attempt.tip_last_valid_block_height - BLOCKHASH_MAX_AGE_BLOCKS;
    if (this.d.chain.blockHeight - tipBlockHeight < TIP_REFRESH_AGE_BLOCKS) return attempt;
    const signer = this.signerOf(attempt.tipper ?? null);
    if (!signer) return attempt;
    let blockhash: { blockhash: string; lastValidBlockHeight: number };
    try {
      blockhash = await this.d.rpc.recentBlockhash();
    } catch {
      return attempt;
    }
    if (blockhash.lastValidBlockHeight <= attempt.tip_last_valid_block_height) return attempt;
    const tip = signer.build({
      tipAccount: attempt.tip_account,
      lamports: attempt.tip_lamports,
      blockhash: blockhash.blockhash,
    });
    const bundleSignatures = [...tx.signatures, tip.signature];
    const bundleId = deriveBundleId(bundleSignatures);
    this.d.log.info(
      { tx_id: tx.tx_id, attempt: attempt.attempt, was: attempt.bundle_id, bundle_id: bundleId },
      'tip signed again on a fresh blockhash before its first send',
    );
    // A compare-and-set on the old bundle id while the attempt is still unsent (DESIGN §10, rule 4).
    const next = await this.d.store.transition(
      tx.tx_id,
      { attempt: { n: attempt.attempt, stage: 'journaled', bundleId: attempt.bundle_id } },
      {
        attempts: [
          {
            n: attempt.attempt,
            set: {
              tip_tx: Buffer.from(tip.wire).toString('base64'),
              tip_signature: tip.signature,
              bundle_id: bundleId,
              bundle_signatures: bundleSignatures,
              tip_last_valid_block_height: blockhash.lastValidBlockHeight,
            },
          },
        ],
      },
    );
    this.d.metrics.tipsRefreshed.inc();
    return next.attempts.find((a) => a.attempt === attempt.attempt) as StoredAttempt;
  }
}
