import { randomInt } from 'node:crypto';
import {
  RelayError,
  checkSubmitAgainstPolicy,
  isRelayError,
  deriveBundleId,
  emptyTimeline,
  parseSubmitRequest,
  policyViolationError,
  type AiDecisionTrace,
  type DecisionMode,
  type SubmitRequest,
  type SubmitResponse,
  type TipFloor,
} from '@solrelay/core';
import type { RelayContext } from '../context';
import { BLOCKHASH_MAX_AGE_BLOCKS } from '../chain/blockhash';
import { SIGNATURE_FEE_LAMPORTS } from '../engine/tip-tx';
import type { Operator } from '../operator/operator';
import { TipperPool, type TipReservation } from '../operator/tippers';
import type { SendQueue } from '../send/queue';
import { inFlight, lastSettled } from '../store/queries';
import { attemptKey, type AttemptDecision, type StoredAttempt, type StoredTx } from '../store/records';
import { spentInWindow } from './spend';

/**
 * A tip transaction whose blockhash is this many blocks old when its bundle first goes out is signed again on a
 * fresh one (about 8 s at 400 ms): admission lets a bundle queue for most of a blockhash's life.
 */
export const TIP_REFRESH_AGE_BLOCKS = 20;

/**
 * Attempts: the one `submit` entry every decider goes through (the agent over HTTP, bypass, the fallback reflex).
 * It checks the tip against policy and spend, builds the tip transaction on a fresh blockhash, journals the attempt
 * (write-ahead) and queues it for sending.
 */
export class AttemptBuilder {
  private tipAccounts: string[] = [];
  /**
   * Attempts built by this process whose bytes have not gone to any engine yet (`tx_id#n`). Only these may have their
   * tip signed again: bytes that may have been sent (by this process, or before a restart) could still land.
   */
  private readonly unsent = new Set<string>();

  constructor(
    private readonly ctx: RelayContext,
    private readonly operator: Operator,
    private readonly tippers: TipperPool,
    private readonly queue: SendQueue,
  ) {}

  /** An attempt at a tip, asked by the agent (or a manual call, bypass, or the sidecar's own reflex). */
  async submit(body: unknown, source: AttemptDecision['source'] = 'agent'): Promise<SubmitResponse> {
    const request = parseSubmitRequest(body);
    return this.ctx.locks.run(request.tx_id, async () => {
      const tx = await this.ctx.store.get(request.tx_id);
      if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: request.tx_id });
      if (tx.state !== 'pending' || tx.stopped || inFlight(tx)) {
        throw new RelayError('RELAY_E_TX_WRONG_STATE', {
          tx_id: tx.tx_id,
          state: tx.stopped && tx.state === 'pending' ? 'pending (attempts stopped)' : tx.state,
          expected: 'pending with no attempt in flight',
        });
      }
      const policy = this.ctx.o.policy();
      const previous = lastSettled(tx);
      const now = this.ctx.now();
      const included = tx.tip === 'included';
      const fee = included ? 0 : SIGNATURE_FEE_LAMPORTS;
      const violation = checkSubmitAgainstPolicy(
        {
          tip_lamports: request.tip_lamports,
          tip_mode: tx.tip,
          caller_max_tip: tx.max_tip,
          previous_tip_lamports: previous?.tip_lamports ?? null,
          retries: tx.retries,
          slot: this.ctx.chain.slot,
          expires_at_slot: tx.expires_at_slot,
          spent_in_window_lamports: await spentInWindow(this.ctx.store, now),
          fee_lamports: fee,
        },
        policy,
      );
      if (violation) throw policyViolationError(violation, tx.tx_id);
      // The tip is reserved on a tipper that can pay it besides its tips in flight, or the transaction waits.
      const reservation = included ? null : await this.reserveTip(tx, request.tip_lamports);
      try {
        return await this.build(tx, request, source, reservation);
      } catch (error) {
        reservation?.cancel();
        throw error;
      }
    });
  }

  /**
   * A tipper for this tip, or RELAY_E_TIPPER_UNDERFUNDED (the transaction stays pending, its `last_error` naming the
   * tipper and the shortfall: journaled when it starts waiting on a tipper, not at every refused submit).
   */
  private async reserveTip(tx: StoredTx, tipLamports: number): Promise<TipReservation> {
    try {
      return this.tippers.reserve(tipLamports);
    } catch (error) {
      if (!isRelayError(error, 'RELAY_E_TIPPER_UNDERFUNDED')) throw error;
      const named = (tx.last_error?.code === error.code ? tx.last_error.details : null) as {
        tipper?: unknown;
      } | null;
      if (named?.tipper !== error.details.tipper)
        await this.ctx.store.transition(
          tx.tx_id,
          { state: tx.state },
          { set: { last_error: TipperPool.lastError(error) } },
        );
      throw error;
    }
  }

  /** Build the attempt (its tip transaction on `reservation`'s tipper), journal it, queue it for sending. */
  private async build(
    tx: StoredTx,
    request: SubmitRequest,
    source: AttemptDecision['source'],
    reservation: TipReservation | null,
  ): Promise<SubmitResponse> {
    const now = this.ctx.now();
    const included = reservation === null;
    const fee = included ? 0 : SIGNATURE_FEE_LAMPORTS;
    const n = tx.attempts.length + 1;
    const userSignatures = tx.signatures;
    let tip: { wire: Uint8Array; signature: string } | null = null;
    let tipAccount: string | null = null;
    let tipLastValid: number | null = null;
    if (reservation) {
      const [blockhash, accounts] = await Promise.all([
        this.ctx.o.rpc.recentBlockhash().catch((error: unknown) => {
          throw new RelayError('RELAY_E_UPSTREAM_UNREACHABLE', {
            upstream: 'rpc',
            reason: `getLatestBlockhash: ${(error as Error).message}`,
          });
        }),
        this.ensureTipAccounts(),
      ]);
      tipAccount = accounts[randomInt(accounts.length)] as string;
      tip = reservation.signer.build({
        tipAccount,
        lamports: request.tip_lamports,
        blockhash: blockhash.blockhash,
      });
      tipLastValid = blockhash.lastValidBlockHeight;
    }
    const bundleSignatures = tip ? [...userSignatures, tip.signature] : [...userSignatures];
    const bundleId = deriveBundleId(bundleSignatures);
    const floor = this.floorNow();
    // The tier that actually decided: bypass and the sidecar's own fallback are reflex; an agent says which tier
    // produced its answer (a cortex agent that fell back to reflex says reflex); otherwise the current mode.
    const mode: DecisionMode =
      source === 'bypass' || source === 'fallback'
        ? 'reflex'
        : (request.decision_mode ?? this.operator.decisionMode);
    const leader = this.ctx.o.leaders.leaderAt(this.ctx.chain.slot);
    const attempt: StoredAttempt = {
      attempt: n,
      bundle_id: bundleId,
      tip_lamports: request.tip_lamports,
      tip_tx: tip ? Buffer.from(tip.wire).toString('base64') : null,
      tip_signature: tip?.signature ?? null,
      tip_account: tipAccount,
      tipper: reservation?.pubkey ?? null,
      tip_last_valid_block_height: tipLastValid,
      bundle_signatures: bundleSignatures,
      created_at: now,
      created_slot: this.ctx.chain.slot,
      slot_submitted: null,
      target_slot: null,
      window_end_slot: null,
      leader,
      stage: 'journaled',
      outcome: null,
      slot_landed: null,
      floor_at_submit: floor,
      decision: {
        mode,
        bypass: source === 'bypass',
        escalated: request.escalated ?? false,
        reason: request.reason,
        trace: (request.trace as AiDecisionTrace | null | undefined) ?? null,
        source,
      },
      reserved_lamports: request.tip_lamports + fee,
      released: false,
      leaked: false,
      timeline: emptyTimeline(),
      send_errors: 0,
    };
    // Write-ahead: the signed tip transaction and the bundle id are on disk before anything is sent, so a crash
    // anywhere after this resends these exact bytes and never builds a second tip for this attempt.
    const built = await this.ctx.store.addAttempt(tx.tx_id, attempt, {
      expect: { state: 'pending', stopped: false },
      set: { last_error: null },
    });
    reservation?.journaled();
    this.ctx.o.crashPoint?.('attempt.journaled');
    this.ctx.o.metrics.attempts.inc({ source });
    if (n === 1) {
      const enqueuedAt = this.ctx.enqueuedAt.get(tx.tx_id);
      if (enqueuedAt !== undefined) {
        this.ctx.o.metrics.decisionLatency.observe((performance.now() - enqueuedAt) / 1000);
        this.ctx.enqueuedAt.delete(tx.tx_id);
      }
    }
    this.ctx.o.hub.publish('submit_requested', {
      tx_id: tx.tx_id,
      bundle_id: bundleId,
      tip_lamports: request.tip_lamports,
      reason: request.reason,
      leader,
      ts: this.ctx.now(), // emitted now: after the tip was built and the attempt journaled
    });
    if (tip) this.unsent.add(attemptKey(tx.tx_id, n));
    this.queue.queueSend(built, n);
    return { tx_id: tx.tx_id, bundle_id: bundleId, tip_lamports: request.tip_lamports };
  }

  /** Whether attempt `n` of `txId` was built by this process and its bytes have not gone to any engine yet. */
  isUnsent(txId: string, n: number): boolean {
    return this.unsent.has(attemptKey(txId, n));
  }

  /**
   * Called under the transaction's lock as an attempt's bytes go to the engine: true the first time (the attempt
   * counts as sent from now on), false for a resend or an attempt built before a restart (its bytes may be out).
   */
  takeFirstSend(txId: string, n: number): boolean {
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
   * Before an attempt's first send (`takeFirstSend`): if the tip transaction's blockhash has aged
   * {@link TIP_REFRESH_AGE_BLOCKS} or more while the bundle queued for the engines' budget, the same tipper signs the
   * same tip again on the newest blockhash and the attempt is journaled with it (new tip signature, new bundle id)
   * before anything is sent: the old bytes never left relay, so only one of the two can ever be on the wire. A resend
   * (after a transport error) sends the journaled bytes as they are. A failure to refresh keeps the old bytes.
   * Resolves with the attempt to send: the re-signed one, or `attempt` as it was.
   */
  async freshenTipBeforeFirstSend(tx: StoredTx, attempt: StoredAttempt): Promise<StoredAttempt> {
    if (attempt.tip_last_valid_block_height === null || attempt.tip_account === null) return attempt;
    const tipBlockHeight = attempt.tip_last_valid_block_height - BLOCKHASH_MAX_AGE_BLOCKS;
    if (this.ctx.chain.blockHeight - tipBlockHeight < TIP_REFRESH_AGE_BLOCKS) return attempt;
    const signer = this.tippers.signerOf(attempt.tipper ?? null);
    if (!signer) return attempt;
    let blockhash: { blockhash: string; lastValidBlockHeight: number };
    try {
      blockhash = await this.ctx.o.rpc.recentBlockhash();
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
    this.ctx.o.log.info(
      { tx_id: tx.tx_id, attempt: attempt.attempt, was: attempt.bundle_id, bundle_id: bundleId },
      'tip signed again on a fresh blockhash before its first send',
    );
    // A compare-and-set on the old bundle id while the attempt is still unsent (DESIGN §10, rule 4).
    const next = await this.ctx.store.transition(
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
    this.ctx.o.metrics.tipsRefreshed.inc();
    return next.attempts.find((a) => a.attempt === attempt.attempt) as StoredAttempt;
  }

  /** Tip accounts, cached: they change only with a network, and the engine's request budget is for bundles. */
  async ensureTipAccounts(): Promise<string[]> {
    if (this.tipAccounts.length > 0) return this.tipAccounts;
    let accounts: string[];
    try {
      accounts = await this.ctx.o.engine.getTipAccounts();
    } catch (error) {
      throw new RelayError('RELAY_E_UPSTREAM_UNREACHABLE', {
        upstream: 'block engine',
        reason: `getTipAccounts: ${(error as Error).message}`,
      });
    }
    if (accounts.length === 0) {
      throw new RelayError('RELAY_E_UPSTREAM_INVALID_RESPONSE', {
        upstream: 'block engine',
        reason: 'getTipAccounts returned no accounts',
      });
    }
    this.tipAccounts = accounts;
    return accounts;
  }

  floorNow(): TipFloor {
    const view = this.ctx.o.oracle.view(this.ctx.now());
    return {
      p25: view.p25,
      p50: view.p50,
      p75: view.p75,
      p95: view.p95,
      p99: view.p99,
      ema: view.ema,
      stale: view.stale,
    };
  }
}
