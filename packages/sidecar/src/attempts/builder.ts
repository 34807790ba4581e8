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
import type { RelayPorts } from '../context';
import { SIGNATURE_FEE_LAMPORTS } from '../engine/tip-tx';
import type { Operator } from '../operator/operator';
import { TipperPool, type TipReservation } from '../operator/tippers';
import type { FirstSends } from '../send/first-send';
import type { SendQueue } from '../send/queue';
import { inFlight, lastSettled } from '../store/queries';
import {
  repricedFrom,
  type AttemptDecision,
  type AttemptPricing,
  type StoredAttempt,
  type StoredTx,
} from '../store/records';
import { bundleFacts, wireComputeUnits } from '../chain/pricing';
import { ROLLING_HOUR_MS, spentInWindow } from '../store/spend';
import { SpendLimitReached } from '../store/store';

/** What the attempt builder asks before it builds and commits a new tip (see `OutageGate`). */
export interface TipGate {
  assertMayTip(): void;
}

/**
 * Attempts: the one `submit` entry every decider goes through (the agent over HTTP, bypass, the fallback reflex).
 * It checks the tip against policy and spend, builds the tip transaction on a fresh blockhash, journals the attempt
 * (write-ahead) and queues it for sending.
 */
export class AttemptBuilder {
  private tipAccounts: string[] = [];

  constructor(
    private readonly d: Pick<
      RelayPorts,
      | 'chain'
      | 'crashPoint'
      | 'engine'
      | 'enqueuedAt'
      | 'hub'
      | 'leaders'
      | 'locks'
      | 'log'
      | 'metrics'
      | 'now'
      | 'oracle'
      | 'policy'
      | 'rpc'
      | 'store'
    >,
    private readonly operator: Pick<Operator, 'decisionMode'>,
    private readonly tippers: Pick<TipperPool, 'reserve'>,
    private readonly queue: Pick<SendQueue, 'queueSend'>,
    /** Where an attempt built here is recorded as not sent yet (its first send may re-sign or pack it). */
    private readonly firstSends: Pick<FirstSends, 'built'>,
    /**
     * Whether a new tip may be built now (throws why not): after a database outage, not until in-flight work is
     * re-read and any tip relay sent that the database lost is proven landed or dead (recovery/outage.ts). Asked before a tip is built and again just before it is committed.
     */
    private readonly tipGate: TipGate = { assertMayTip: () => undefined },
  ) {}

  /** An attempt at a tip, asked by the agent (or a manual call, bypass, or the sidecar's own reflex). */
  async submit(body: unknown, source: AttemptDecision['source'] = 'agent'): Promise<SubmitResponse> {
    const request = parseSubmitRequest(body);
    return this.d.locks.run(request.tx_id, async () => {
      const tx = await this.d.store.get(request.tx_id);
      if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: request.tx_id });
      // Asked before the state: while the database is away (or its tips unproven) the answer is "not now" (503,
      // Retry-After) whatever the held record says, as when every read went to the database.
      if (tx.tip !== 'included') this.tipGate.assertMayTip();
      if (tx.state !== 'pending' || tx.stopped || inFlight(tx)) {
        throw new RelayError('RELAY_E_TX_WRONG_STATE', {
          tx_id: tx.tx_id,
          state: tx.stopped && tx.state === 'pending' ? 'pending (attempts stopped)' : tx.state,
          expected: 'pending with no attempt in flight',
        });
      }
      const policy = this.d.policy();
      const previous = lastSettled(tx);
      const now = this.d.now();
      const included = tx.tip === 'included';
      const fee = included ? 0 : SIGNATURE_FEE_LAMPORTS;
      const violation = checkSubmitAgainstPolicy(
        {
          tip_lamports: request.tip_lamports,
          tip_mode: tx.tip,
          caller_max_tip: tx.max_tip,
          previous_tip_lamports: previous ? repricedFrom(previous).tip_lamports : null,
          retries: tx.retries,
          slot: this.d.chain.slot,
          expires_at_slot: this.d.chain.deadlineOf(tx),
          spent_in_window_lamports: await spentInWindow(this.d.store, now),
          fee_lamports: fee,
        },
        policy,
      );
      if (violation) {
        const error = policyViolationError(violation, tx.tx_id);
        if (violation.key === 'spend-limit') await this.noteWaiting(tx, error);
        throw error;
      }
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
        await this.d.store.transition(
          tx.tx_id,
          { state: tx.state },
          { set: { last_error: TipperPool.lastError(error) } },
        );
      throw error;
    }
  }

  /**
   * A transaction refused a tip by the operator's spend limit waits (the rolling hour may free room before its expiry
   * slot) and its record says why: `last_error` written when it starts waiting, not at every refused retry, and
   * cleared by its next attempt. Without it a transaction that then expires shows no reason at all. A failed write
   * does not hide the refusal itself.
   */
  private async noteWaiting(tx: StoredTx, error: RelayError): Promise<void> {
    if (tx.last_error?.code === error.code) return;
    await this.d.store
      .transition(tx.tx_id, { state: tx.state }, { set: { last_error: error.toJSON() } })
      .catch((failure: unknown) =>
        this.d.log.debug({ tx_id: tx.tx_id, err: failure }, 'could not record the spend-limit wait'),
      );
  }

  /** Build the attempt (its tip transaction on `reservation`'s tipper), journal it, queue it for sending. */
  private async build(
    tx: StoredTx,
    request: SubmitRequest,
    source: AttemptDecision['source'],
    reservation: TipReservation | null,
  ): Promise<SubmitResponse> {
    const now = this.d.now();
    const included = reservation === null;
    const fee = included ? 0 : SIGNATURE_FEE_LAMPORTS;
    const n = tx.attempts.length + 1;
    const userSignatures = tx.signatures;
    let tip: { wire: Uint8Array; signature: string } | null = null;
    let tipAccount: string | null = null;
    let tipLastValid: number | null = null;
    if (reservation) {
      const [blockhash, accounts] = await Promise.all([
        this.d.rpc.recentBlockhash().catch((error: unknown) => {
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
    const leader = this.d.leaders.leaderAt(this.d.chain.slot);
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
      created_slot: this.d.chain.slot,
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
        ...pricingOf(tx, tip?.wire ?? null, request, source),
      },
      reserved_lamports: request.tip_lamports + fee,
      released: false,
      leaked: false,
      timeline: emptyTimeline(),
      send_errors: 0,
    };
    // Write-ahead: the signed tip transaction and the bundle id are on disk before anything is sent, so a crash
    // anywhere after this resends these exact bytes and never builds a second tip for this attempt.
    // `spend-limit` is checked again by the store as it reserves, with every reservation being made at the same
    // time (the check above was before the tip was built; another submit may have reserved since). The outage gate is
    // asked again at the last moment: an outage detected while the tip was built holds it back.
    if (tip) this.tipGate.assertMayTip();
    const built = await this.d.store
      .addAttempt(tx.tx_id, attempt, {
        expect: { state: 'pending', stopped: false },
        set: { last_error: null },
        spendLimit: { limit: this.d.policy()['spend-limit'], since: now - ROLLING_HOUR_MS },
      })
      .catch(async (error: unknown) => {
        if (!(error instanceof SpendLimitReached)) throw error;
        const refused = policyViolationError(
          {
            key: 'spend-limit',
            code: 'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED',
            limit: error.limit,
            actual: error.actual,
          },
          tx.tx_id,
        );
        await this.noteWaiting(tx, refused);
        throw refused;
      });
    reservation?.journaled();
    this.d.crashPoint?.('attempt.journaled');
    this.d.metrics.attempts.inc({ source });
    if (n === 1) {
      const enqueuedAt = this.d.enqueuedAt.get(tx.tx_id);
      if (enqueuedAt !== undefined) {
        this.d.metrics.decisionLatency.observe((performance.now() - enqueuedAt) / 1000);
        this.d.enqueuedAt.delete(tx.tx_id);
      }
    }
    this.d.hub.publish('submit_requested', {
      tx_id: tx.tx_id,
      bundle_id: bundleId,
      tip_lamports: request.tip_lamports,
      reason: request.reason,
      leader,
      ts: this.d.now(), // emitted now: after the tip was built and the attempt journaled
    });
    // Built here and not sent anywhere yet: the first send may sign its tip again, or pack riders into it.
    if (tip) this.firstSends.built(tx.tx_id, n);
    this.queue.queueSend(built, n);
    return { tx_id: tx.tx_id, bundle_id: bundleId, tip_lamports: request.tip_lamports };
  }

  /** Tip accounts, cached: they change only with a network, and the engine's request budget is for bundles. */
  async ensureTipAccounts(): Promise<string[]> {
    if (this.tipAccounts.length > 0) return this.tipAccounts;
    let accounts: string[];
    try {
      accounts = await this.d.engine.getTipAccounts();
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
    const view = this.d.oracle.view(this.d.now());
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

/**
 * The attempt's pricing as built (DESIGN §11): the bundle's requested CU counted here from its bytes (user
 * transactions and the tip transaction), its tip per CU, and the decider's per-CU bid and signal when it priced per
 * CU; otherwise its own tip per CU is its bid and the signal says who chose the tip. Nothing when the bytes do not
 * parse (the attempt goes out without pricing, as before).
 */
function pricingOf(
  tx: StoredTx,
  tipWire: Uint8Array | null,
  request: SubmitRequest,
  source: AttemptDecision['source'],
): { pricing?: AttemptPricing } {
  const facts = tx.wires ? bundleFacts(tx.wires) : null;
  if (!facts) return {};
  let computeUnits = facts.computeUnits;
  try {
    if (tipWire) computeUnits += wireComputeUnits(tipWire);
  } catch {
    return {};
  }
  const perCu = request.tip_lamports / Math.max(1, computeUnits);
  return {
    pricing: {
      compute_units: computeUnits,
      tip_per_cu: perCu,
      bid_per_cu: request.pricing?.bid_per_cu ?? perCu,
      contention: request.pricing?.contention ?? null,
      signal:
        request.pricing?.signal ??
        (source === 'bypass' ? 'bypass: the fixed tip' : `${source}: a tip not priced per CU`),
    },
  };
}
