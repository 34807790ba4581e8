import { randomInt } from 'node:crypto';
import type { Keypair } from '@solana/web3.js';
import {
  RelayError,
  TX_PROGRESS_PATH,
  checkEnqueueAgainstPolicy,
  checkSubmitAgainstPolicy,
  classifyGrpcBundleResult,
  classifyTransactionError,
  decideReflex,
  deriveBundleId,
  effectivePriority,
  emptyTimeline,
  expiresAtSlot,
  isRetryableOutcome,
  isTerminalTxState,
  parseEnqueueRequest,
  parseSubmitRequest,
  policyViolationError,
  relayErrorJson,
  timelineDurations,
  txStatusChangedEvent,
  txTransitionPath,
  type AiDecisionTrace,
  type AttemptOutcome,
  type BundleStage,
  type DecisionMode,
  type EnqueueResponse,
  type LeaderBuffer,
  type LifecycleEntry,
  type Policy,
  type QueueResponse,
  type SubmitResponse,
  type TipFloor,
  type TipOracle,
  type TxHistoryEntry,
  type TxRecord,
  type TxState,
} from '@solrelay/core';
import { newUlid } from './util/ids';
import type { SignatureVerifier } from './wire/signature-verifier';
import type { Logger } from 'pino';
import type { EventHub } from './events/hub';
import type { Journal } from './journal/journal';
import type { LifecycleLog } from './lifecycle/log';
import type { Metrics } from './metrics';
import {
  type AttemptDecision,
  type StoreOp,
  type StoreState,
  type StoredAttempt,
  type StoredTx,
} from './store/records';
import { SIGNATURE_FEE_LAMPORTS, TipSigner } from './engine/tip-tx';
import type { BlockEngineTransport, BundleResultMessage, SendBundleResult } from './upstream/block-engine';
import type { SolanaRpc } from './upstream/solana-rpc';
import { creditedAttempt } from './track/credit';
import { KeyedLock } from './util/keyed-lock';
import { SlidingWindow, TokenBucket } from './util/rate';
import { MAX_SIGNATURES_PER_STATUS_CALL } from './upstream/solana-rpc';
import {
  WireFormatError,
  decodeTransactionString,
  durableNonceAccount,
  firstInvalidSignature,
  parseTransaction,
} from './wire/transaction';

/**
 * The sidecar's heart: accepts transactions, builds and sends attempts, follows them on chain, and tells everyone.
 *
 * Truth rules (DESIGN §2): a transaction is `landed` only when its own signatures are seen in a slot; commitment is
 * promoted only from the signatures' own status and never demoted by a `null`; `failed` and `expired` are declared
 * only when nothing can land any more. Every change is journaled (fsync) before it is acted on or announced.
 */

/**
 * An attempt is judged not to have landed only once its target window is this many slots behind and at least
 * WINDOW_GRACE_MS have passed since it was sent: statuses take a moment to show, and on a busy machine slots can
 * outrun the status poll.
 */
const WINDOW_GRACE_SLOTS = 4;
const WINDOW_GRACE_MS = 1200;
/** Rent-exempt minimum of a 0-byte system account: the tipper must keep it. */
const RENT_EXEMPT_MINIMUM = 890_880;
/** With no bundle-engine leader data, an attempt is judged after this many slots. */
const UNKNOWN_WINDOW_SLOTS = 8;
const ROLLING_HOUR_MS = 3_600_000;
/** Slots after which a tip transaction's blockhash is surely dead (150 blocks, with room for skipped slots). */
const TIP_LANDING_HORIZON_SLOTS = 300;
/**
 * What starts a status pass: the once-a-slot tick; a hint that something landed (the stream saw a signature, the
 * engine reported a landing); a full re-read after a reconnect (confirmed transactions included, due or not).
 */
export type TrackKind = 'slot' | 'hint' | 'full';
const TRACK_RANK: Record<TrackKind, number> = { hint: 0, slot: 1, full: 2 };
/** Transactions a status pass judges at once. */
const EVALUATE_CONCURRENCY = 64;
/** Hinted passes start at least this far apart. */
const MIN_HINTED_PASS_GAP_MS = 150;
/** Without finalized-slot reports from the stream, confirmed transactions are read every this many slots. */
const CONFIRMED_POLL_EVERY_SLOTS = 4;
/** Finalized-slot reports count as flowing while the last one came within this many slots. */
const FINALIZED_REPORT_FRESH_SLOTS = 64;
const PRIORITY_RANK = { high: 0, normal: 1, low: 2 } as const;
/** Bundles on the wire to the engine at once (the token bucket still sets the rate). */
const MAX_CONCURRENT_SENDS = 16;

export interface RelayOptions {
  journal: Journal<StoreState, StoreOp>;
  lifecycle: LifecycleLog<LifecycleEntry>;
  hub: EventHub;
  rpc: SolanaRpc;
  engine: BlockEngineTransport;
  tipper: Keypair;
  oracle: TipOracle;
  leaders: LeaderBuffer;
  policy: () => Policy;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
  bypass: { enabled: boolean; tipLamports: number };
  initialMode: DecisionMode;
  /** With no agent for this long (and not bypass), the sidecar decides with its own reflex. 0 disables. */
  agentGraceMs: number;
  bundleEngineRps: number;
  /** Crash-test hook: called at named points; inert unless a test sets it. */
  crashPoint?: (name: CrashPointName) => void;
  /** Signature checks off the event loop; inline checks when absent. */
  verifier?: SignatureVerifier;
}

export type CrashPointName = 'enqueue.journaled' | 'attempt.journaled' | 'attempt.sent';

interface SendJob {
  txId: string;
  attempt: number;
  priority: number;
  deadline: number;
  notBefore: number;
}

export interface AgentConnection {
  id: string;
  model: string;
  provider: string;
  since: number;
}

export class Relay {
  readonly tipSigner: TipSigner;
  private readonly now: () => number;
  private readonly locks = new KeyedLock();
  private readonly rateWindow = new SlidingWindow(60_000);
  private readonly inflightEnqueues = new Map<
    string,
    Promise<{ response: EnqueueResponse; created: boolean }>
  >();
  private readonly sendQueue: SendJob[] = [];
  private readonly bucket: TokenBucket;
  private sendTimer: NodeJS.Timeout | null = null;
  private sendsInFlight = 0;
  private acceptsInFlight = 0;
  private readonly deadSlots = new Set<number>();
  private lastSpendPrune = 0;
  private tipAccounts: string[] = [];
  private readonly blockhashValidity = new Map<string, { valid: boolean; checkedAt: number }>();
  private readonly enqueuedAt = new Map<string, number>();
  private mode: DecisionMode;
  private readonly agents = new Map<string, AgentConnection>();
  private agentAbsentSince: number;
  private currentSlot = 0;
  private blockHeight = 0;
  private tipperBalance: number | null = null;
  private pausedReason: string | null = null;
  private lastTrackedSlot = 0;
  private tracking = false;
  private trackAgain: TrackKind | null = null;
  /** Signatures the stream saw land since the last pass began (read at the next pass). */
  private hinted = new Set<string>();
  /** Whether the stream is connected and delivering (so a landing of relay's tips shows on it). */
  private streamWatching: () => boolean = () => false;
  /** Highest slot the stream reported finalized, and the processed slot we were at when it did. */
  private finalizedSlot = 0;
  private finalizedReportedAt = Number.NEGATIVE_INFINITY;
  private closed = false;
  readonly lastErrors = { engine: null as string | null };

  constructor(private readonly o: RelayOptions) {
    this.now = o.now ?? Date.now;
    this.tipSigner = new TipSigner(o.tipper);
    this.bucket = new TokenBucket(o.bundleEngineRps, Math.max(1, o.bundleEngineRps), this.now());
    this.mode = o.initialMode;
    this.agentAbsentSince = this.now();
  }

  // ---------------------------------------------------------------- views

  get state(): StoreState {
    return this.o.journal.state;
  }

  get slot(): number {
    return this.currentSlot;
  }

  get decisionMode(): DecisionMode {
    return this.mode;
  }

  get bypass(): boolean {
    return this.o.bypass.enabled;
  }

  get paused(): string | null {
    return this.pausedReason;
  }

  get balance(): number | null {
    return this.tipperBalance;
  }

  get agent(): AgentConnection | null {
    let latest: AgentConnection | null = null;
    for (const a of this.agents.values()) if (!latest || a.since > latest.since) latest = a;
    return latest;
  }

  /** Whether the sidecar is deciding by itself because no agent has been connected for the grace period. */
  get fallbackActive(): boolean {
    return (
      !this.o.bypass.enabled &&
      this.agents.size === 0 &&
      this.o.agentGraceMs > 0 &&
      this.now() - this.agentAbsentSince >= this.o.agentGraceMs
    );
  }

  txRecord(txId: string): TxRecord {
    const tx = this.state.records.get(txId);
    if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: txId });
    return toTxRecord(tx);
  }

  stored(txId: string): StoredTx | undefined {
    return this.state.records.get(txId);
  }

  queueView(): QueueResponse {
    const entries: QueueResponse['entries'] = [];
    for (const tx of this.state.records.values()) {
      if (isTerminalTxState(tx.state)) continue;
      entries.push({
        tx_id: tx.tx_id,
        age_slots: Math.max(0, this.currentSlot - tx.enqueued_slot),
        priority: effectivePriority(this.o.policy(), tx.priority),
        retries: tx.retries,
      });
    }
    entries.sort((a, b) => (a.tx_id < b.tx_id ? -1 : 1));
    const evicted_total = Object.values(this.state.evicted).reduce((a, b) => a + b, 0);
    return { pending: entries.length, evicted_total, entries };
  }

  // ---------------------------------------------------------------- enqueue

  /** Accept a transaction (1 to 4 signed transactions that land together). */
  async enqueue(body: unknown): Promise<{ response: EnqueueResponse; created: boolean }> {
    const started = performance.now();
    const request = parseEnqueueRequest(body);
    const policy = this.o.policy();
    const violation = checkEnqueueAgainstPolicy(
      { max_tip: request.max_tip ?? null, tip: request.tip },
      policy,
    );
    if (violation) throw policyViolationError(violation);

    const parsed = request.transactions.map((encoded, index) => {
      let wire: Uint8Array;
      try {
        wire = decodeTransactionString(encoded, request.encoding);
      } catch {
        throw new RelayError('RELAY_E_TX_BAD_ENCODING', { index, encoding: request.encoding });
      }
      try {
        return parseTransaction(wire);
      } catch (error) {
        const reason = error instanceof WireFormatError ? error.message : 'unreadable';
        throw new RelayError('RELAY_E_TX_UNDECODABLE', { index, reason });
      }
    });
    const verifier = this.o.verifier;
    const problems = await Promise.all(
      parsed.map((tx) => (verifier ? verifier.verify(tx) : firstInvalidSignature(tx))),
    );
    // Reported in index order: the first transaction with a repeated or a bad signature names the error.
    const seen = new Set<string>();
    parsed.forEach((tx, index) => {
      const sig = tx.signatures[0] as string;
      if (seen.has(sig)) throw new RelayError('RELAY_E_TX_DUPLICATE_TRANSACTION', { index, signature: sig });
      seen.add(sig);
      const bad = problems[index];
      if (bad?.reason === 'missing')
        throw new RelayError('RELAY_E_TX_UNSIGNED', { index, signer: bad.index });
      if (bad) throw new RelayError('RELAY_E_TX_BAD_SIGNATURE', { index, signer: bad.index });
    });
    const signatures = parsed.map((tx) => tx.signatures[0] as string);
    const key = signatures[0] as string;

    // Idempotent: the same first signature returns the transaction already accepted.
    const existing = this.existingFor(signatures);
    if (existing) return existing;
    const running = this.inflightEnqueues.get(key);
    if (running) {
      const result = await running;
      return { response: result.response, created: false };
    }
    const work = this.acceptNew(request, parsed, signatures, policy, started);
    this.inflightEnqueues.set(key, work);
    try {
      return await work;
    } finally {
      this.inflightEnqueues.delete(key);
    }
  }

  private existingFor(signatures: string[]): { response: EnqueueResponse; created: boolean } | null {
    const id = this.state.bySignature.get(signatures[0] as string);
    if (!id) {
      for (const sig of signatures.slice(1)) {
        const owner = this.state.bySignature.get(sig);
        if (owner !== undefined) {
          throw new RelayError('RELAY_E_TX_SIGNATURE_CONFLICT', { signature: sig, tx_id: owner });
        }
      }
      return null;
    }
    const tx = this.state.records.get(id);
    if (!tx) return null;
    if (tx.signatures.length !== signatures.length || tx.signatures.some((s, i) => s !== signatures[i])) {
      throw new RelayError('RELAY_E_TX_SIGNATURE_CONFLICT', {
        signature: signatures[0] as string,
        tx_id: id,
      });
    }
    this.o.metrics.enqueues.inc({ result: 'repeat' });
    return {
      response: { tx_id: tx.tx_id, state: tx.state, slot: tx.enqueued_slot, signatures: [...tx.signatures] },
      created: false,
    };
  }

  private async acceptNew(
    request: ReturnType<typeof parseEnqueueRequest>,
    parsed: ReturnType<typeof parseTransaction>[],
    signatures: string[],
    policy: Policy,
    started: number,
  ): Promise<{ response: EnqueueResponse; created: boolean }> {
    const now = this.now();
    // Count enqueues still being validated and journaled too, or concurrent requests could all pass the check.
    if (this.state.active + this.acceptsInFlight >= policy['max-queue']) {
      throw new RelayError('RELAY_E_QUEUE_FULL', { limit: policy['max-queue'], retry_after_s: 1 });
    }
    if (this.rateWindow.count(now) >= policy['rate-limit']) {
      const retryAfterMs = this.rateWindow.retryAfterMs(now, policy['rate-limit']);
      throw new RelayError('RELAY_E_RATE_LIMITED', {
        limit: policy['rate-limit'],
        retry_after_s: Math.max(1, Math.ceil(retryAfterMs / 1000)),
      });
    }
    this.rateWindow.add(now); // reserve the slot; released if the enqueue fails below
    this.acceptsInFlight++;
    try {
      const nonces = parsed.map((tx) => durableNonceAccount(tx));
      for (let i = 0; i < parsed.length; i++) {
        if (nonces[i]) continue;
        const valid = await this.blockhashStillValid(
          (parsed[i] as { recentBlockhash: string }).recentBlockhash,
        );
        if (valid === false) {
          throw new RelayError('RELAY_E_TX_BLOCKHASH_EXPIRED', {
            index: i,
            blockhash: (parsed[i] as { recentBlockhash: string }).recentBlockhash,
          });
        }
      }
      const slot = this.currentSlot;
      const txId = `tx_${newUlid(now)}`;
      const tx: StoredTx = {
        tx_id: txId,
        state: 'pending',
        priority: request.priority,
        tip: request.tip,
        max_tip: request.max_tip ?? null,
        enqueued_at: now,
        enqueued_slot: slot,
        expires_at_slot: expiresAtSlot(slot, policy, request.expiry_slots ?? null),
        wires: parsed.map((p) => Buffer.from(p.wire).toString('base64')),
        signatures,
        blockhashes: parsed.map((p) => p.recentBlockhash),
        nonce_accounts: nonces,
        fee_payers: parsed.map((p) => p.accountKeys[0] as string),
        history: [{ state: 'pending', slot, ts: now }],
        attempts: [],
        retries: 0,
        last_error: null,
        failure: null,
        landed_slot: null,
        stopped: false,
      };
      await this.o.journal.commit({ k: 'put', tx });
      this.o.crashPoint?.('enqueue.journaled');
      this.enqueuedAt.set(txId, performance.now());
      this.o.metrics.enqueues.inc({ result: 'accepted' });
      this.o.metrics.enqueueLatency.observe((performance.now() - started) / 1000);
      this.o.metrics.transitions.inc({ state: 'pending' });
      this.o.hub.publish('tx_enqueued', {
        tx_id: txId,
        slot,
        priority: effectivePriority(policy, tx.priority),
        expires_at_slot: tx.expires_at_slot,
        max_tip: tx.max_tip,
        tip: tx.tip,
        ts: this.now(), // emitted now, after the journal's fsync (enqueued_at is when the request arrived)
      });
      this.publishStatus(tx);
      if (this.o.bypass.enabled) void this.bypassSubmit(txId);
      return {
        response: { tx_id: txId, state: 'pending', slot, signatures: [...signatures] },
        created: true,
      };
    } catch (error) {
      this.rateWindow.removeLast();
      throw error;
    } finally {
      this.acceptsInFlight--;
    }
  }

  /** true / false from RPC (cached briefly per blockhash), or null when RPC cannot say right now. */
  private async blockhashStillValid(blockhash: string): Promise<boolean | null> {
    const cached = this.blockhashValidity.get(blockhash);
    const now = this.now();
    if (cached && (!cached.valid || now - cached.checkedAt < 1000)) return cached.valid;
    try {
      const valid = await this.o.rpc.isBlockhashValid(blockhash);
      this.blockhashValidity.set(blockhash, { valid, checkedAt: now });
      if (this.blockhashValidity.size > 10_000) {
        const oldest = this.blockhashValidity.keys().next().value as string;
        this.blockhashValidity.delete(oldest);
      }
      return valid;
    } catch {
      return null; // RPC down: accept now, the expiry check decides later
    }
  }

  // ---------------------------------------------------------------- submit

  /** An attempt at a tip, asked by the agent (or a manual call, bypass, or the sidecar's own reflex). */
  async submit(body: unknown, source: AttemptDecision['source'] = 'agent'): Promise<SubmitResponse> {
    const request = parseSubmitRequest(body);
    return this.locks.run(request.tx_id, async () => {
      const tx = this.state.records.get(request.tx_id);
      if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: request.tx_id });
      if (tx.state !== 'pending' || tx.stopped || this.inFlight(tx)) {
        throw new RelayError('RELAY_E_TX_WRONG_STATE', {
          tx_id: tx.tx_id,
          state: tx.stopped && tx.state === 'pending' ? 'pending (attempts stopped)' : tx.state,
          expected: 'pending with no attempt in flight',
        });
      }
      const policy = this.o.policy();
      const previous = lastSettled(tx);
      const now = this.now();
      const included = tx.tip === 'included';
      const fee = included ? 0 : SIGNATURE_FEE_LAMPORTS;
      const violation = checkSubmitAgainstPolicy(
        {
          tip_lamports: request.tip_lamports,
          tip_mode: tx.tip,
          caller_max_tip: tx.max_tip,
          previous_tip_lamports: previous?.tip_lamports ?? null,
          retries: tx.retries,
          slot: this.currentSlot,
          expires_at_slot: tx.expires_at_slot,
          spent_in_window_lamports: this.spentInWindow(now),
          fee_lamports: fee,
        },
        policy,
      );
      if (violation) throw policyViolationError(violation, tx.tx_id);
      if (!included && this.pausedReason)
        throw new RelayError('RELAY_E_NOT_READY', { reason: this.pausedReason });

      const n = tx.attempts.length + 1;
      const userSignatures = tx.signatures;
      let tip: { wire: Uint8Array; signature: string } | null = null;
      let tipAccount: string | null = null;
      let tipLastValid: number | null = null;
      if (!included) {
        const [blockhash, accounts] = await Promise.all([
          this.o.rpc.recentBlockhash().catch((error: unknown) => {
            throw new RelayError('RELAY_E_UPSTREAM_UNREACHABLE', {
              upstream: 'rpc',
              reason: `getLatestBlockhash: ${(error as Error).message}`,
            });
          }),
          this.ensureTipAccounts(),
        ]);
        tipAccount = accounts[randomInt(accounts.length)] as string;
        tip = this.tipSigner.build({
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
        source === 'bypass' || source === 'fallback' ? 'reflex' : (request.decision_mode ?? this.mode);
      const leader = this.o.leaders.leaderAt(this.currentSlot);
      const attempt: StoredAttempt = {
        attempt: n,
        bundle_id: bundleId,
        tip_lamports: request.tip_lamports,
        tip_tx: tip ? Buffer.from(tip.wire).toString('base64') : null,
        tip_signature: tip?.signature ?? null,
        tip_account: tipAccount,
        tip_last_valid_block_height: tipLastValid,
        bundle_signatures: bundleSignatures,
        created_at: now,
        created_slot: this.currentSlot,
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
      await this.o.journal.commit({ k: 'patch', id: tx.tx_id, attempt, set: { last_error: null } });
      this.o.crashPoint?.('attempt.journaled');
      this.o.metrics.attempts.inc({ source });
      if (n === 1) {
        const enqueuedAt = this.enqueuedAt.get(tx.tx_id);
        if (enqueuedAt !== undefined) {
          this.o.metrics.decisionLatency.observe((performance.now() - enqueuedAt) / 1000);
          this.enqueuedAt.delete(tx.tx_id);
        }
      }
      this.o.hub.publish('submit_requested', {
        tx_id: tx.tx_id,
        bundle_id: bundleId,
        tip_lamports: request.tip_lamports,
        reason: request.reason,
        leader,
        ts: this.now(), // emitted now: after the tip was built and the attempt journaled
      });
      this.queueSend(tx, n);
      return { tx_id: tx.tx_id, bundle_id: bundleId, tip_lamports: request.tip_lamports };
    });
  }

  /** An attempt is in flight when it was built and has neither landed nor settled. */
  private inFlight(tx: StoredTx): StoredAttempt | null {
    const last = tx.attempts[tx.attempts.length - 1];
    if (!last) return null;
    return last.stage === 'journaled' || last.stage === 'submitted' ? last : null;
  }

  /** Lamports reserved or paid in the rolling hour (what `spend-limit` is checked against). */
  get spentThisHour(): number {
    return this.spentInWindow(this.now());
  }

  private spentInWindow(now: number): number {
    return this.state.spend.spentSince(now - ROLLING_HOUR_MS);
  }

  /** Tip accounts, cached: they change only with a network, and the engine's request budget is for bundles. */
  async ensureTipAccounts(): Promise<string[]> {
    if (this.tipAccounts.length > 0) return this.tipAccounts;
    let accounts: string[];
    try {
      accounts = await this.o.engine.getTipAccounts();
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

  private floorNow(): TipFloor {
    const view = this.o.oracle.view(this.now());
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

  // ---------------------------------------------------------------- sending

  private queueSend(tx: StoredTx, attempt: number, delayMs = 0): void {
    this.sendQueue.push({
      txId: tx.tx_id,
      attempt,
      priority: PRIORITY_RANK[effectivePriority(this.o.policy(), tx.priority)],
      deadline: tx.expires_at_slot,
      notBefore: this.now() + delayMs,
    });
    this.pumpSends();
  }

  /**
   * Send queued bundles as the token bucket allows, highest priority first, then the nearest deadline. Several
   * sends may be on the wire at once (a slow engine answer must not hold up the rest), and no transaction lock is
   * held while waiting for the engine.
   */
  private pumpSends(): void {
    if (this.closed) return;
    while (this.sendsInFlight < MAX_CONCURRENT_SENDS) {
      const now = this.now();
      const ready = this.sendQueue.filter((j) => j.notBefore <= now);
      if (ready.length === 0) {
        this.armSendTimer();
        return;
      }
      const wait = this.bucket.waitMs(now);
      if (wait > 0) {
        this.armSendTimer(wait);
        return;
      }
      ready.sort((x, y) => x.priority - y.priority || x.deadline - y.deadline || x.notBefore - y.notBefore);
      const job = ready[0] as SendJob;
      this.sendQueue.splice(this.sendQueue.indexOf(job), 1);
      this.bucket.take(now);
      this.sendsInFlight++;
      void this.sendOne(job)
        .catch((error: unknown) =>
          this.o.log.error({ err: error, tx_id: job.txId }, 'send failed unexpectedly'),
        )
        .finally(() => {
          this.sendsInFlight--;
          this.pumpSends();
        });
    }
  }

  private armSendTimer(ms?: number): void {
    if (this.sendTimer || this.closed || this.sendQueue.length === 0) return;
    const now = this.now();
    const next = ms ?? Math.max(1, Math.min(...this.sendQueue.map((j) => j.notBefore)) - now);
    this.sendTimer = setTimeout(() => {
      this.sendTimer = null;
      this.pumpSends();
    }, next);
    this.sendTimer.unref();
  }

  private async sendOne(job: SendJob): Promise<void> {
    // Under the lock: is this attempt still to be sent, and with which bytes?
    const wires = await this.locks.run(job.txId, async () => {
      const tx = this.state.records.get(job.txId);
      const attempt = tx?.attempts.find((a) => a.attempt === job.attempt);
      if (!tx || !attempt || attempt.stage !== 'journaled' || isTerminalTxState(tx.state)) return null;
      // The tip transaction's blockhash died before the engine took the bundle: these bytes can never land.
      if (
        attempt.tip_last_valid_block_height !== null &&
        this.blockHeight > attempt.tip_last_valid_block_height
      ) {
        await this.settleFailed(tx, attempt, 'dropped', {
          countRetry: false,
          detail: 'tip blockhash expired before the engine took the bundle',
        });
        return null;
      }
      return [
        ...(tx.wires ?? []).map((w) => Buffer.from(w, 'base64')),
        ...(attempt.tip_tx ? [Buffer.from(attempt.tip_tx, 'base64')] : []),
      ];
    });
    if (!wires) return;
    const result = await this.o.engine.sendBundle(wires);
    this.o.crashPoint?.('attempt.sent');
    await this.locks.run(job.txId, () => this.recordSendResult(job, result));
  }

  private async recordSendResult(job: SendJob, result: SendBundleResult): Promise<void> {
    const tx = this.state.records.get(job.txId);
    const attempt = tx?.attempts.find((a) => a.attempt === job.attempt);
    if (!tx || !attempt || attempt.stage !== 'journaled' || isTerminalTxState(tx.state)) return;
    if (!result.ok && result.kind === 'transport') {
      // Not an attempt: resend the identical bytes after a backoff.
      this.lastErrors.engine = result.message;
      this.o.metrics.transportErrors.inc({ status: String(result.status ?? 'unknown') });
      const sendErrors = attempt.send_errors + 1;
      await this.o.journal.commit({
        k: 'patch',
        id: tx.tx_id,
        set: {
          last_error: relayErrorJson('RELAY_E_UPSTREAM_UNREACHABLE', {
            upstream: 'block engine',
            reason: result.message,
            status: result.status,
          }),
        },
        attempts: [{ n: attempt.attempt, set: { send_errors: sendErrors } }],
      });
      const backoff = result.retryAfterMs ?? Math.min(5000, 250 * 2 ** Math.min(sendErrors - 1, 5));
      this.queueSend(tx, attempt.attempt, backoff);
      return;
    }
    // The engine answered (with an id or a verdict): it is reachable.
    this.lastErrors.engine = null;
    if (result.ok) {
      if (result.bundleId !== attempt.bundle_id) {
        this.o.log.warn(
          { tx_id: tx.tx_id, ours: attempt.bundle_id, engine: result.bundleId },
          'engine returned a different bundle id',
        );
      }
      await this.markSubmitted(tx, attempt);
      return;
    }
    switch (result.rejection) {
      case 'already_processed':
        // Something of this bundle already executed: follow the signatures to find out what.
        await this.markSubmitted(tx, attempt);
        return;
      case 'blockhash_expired': {
        const userDead = await this.anyUserBlockhashDead(tx);
        // Then the tip's blockhash was the one refused: the next attempt must not reuse the cached one.
        if (!userDead) this.o.rpc.forgetBlockhash();
        await this.settleFailed(tx, attempt, 'dropped', {
          countRetry: false,
          ...(userDead ? { stop: true } : {}),
          detail: userDead ? result.message : `tip transaction refused: ${result.message}`,
        });
        return;
      }
      case 'invalid_bundle':
        await this.settleFailed(tx, attempt, 'invalid_bundle', { countRetry: false, detail: result.message });
        return;
      case 'dropped':
        // A refusal that says nothing about the bundle's form: an attempt that did not land, worth a retry.
        await this.settleFailed(tx, attempt, 'dropped', {
          countRetry: true,
          detail: `engine: ${result.message}`,
        });
        return;
    }
  }

  private async markSubmitted(tx: StoredTx, attempt: StoredAttempt): Promise<void> {
    const now = this.now();
    const slot = this.currentSlot;
    const target = this.targetWindow(slot);
    const timeline = { ...attempt.timeline, submitted: { slot, ts: now } };
    const moves = tx.state === 'pending' ? this.path(tx.state, 'submitted', slot, now) : [];
    await this.o.journal.commit({
      k: 'patch',
      id: tx.tx_id,
      ...(moves.length ? { set: { state: 'submitted' as TxState }, history: moves } : {}),
      attempts: [
        {
          n: attempt.attempt,
          set: {
            stage: 'submitted',
            slot_submitted: slot,
            target_slot: target.slot,
            window_end_slot: target.end,
            timeline,
          },
        },
      ],
    });
    this.appendLifecycle(tx, attempt);
    for (const _ of moves) this.o.metrics.transitions.inc({ state: 'submitted' });
    if (moves.length) this.publishStatus(tx, attempt.bundle_id);
  }

  /** The bundle-engine window an attempt sent now can land in: its first slot and the last slot of that leader. */
  private targetWindow(slot: number): { slot: number | null; end: number } {
    const next = this.o.leaders.nextBundleEngineSlot(slot, 64);
    if (next === null) return { slot: null, end: slot + UNKNOWN_WINDOW_SLOTS };
    const leader = this.o.leaders.leaderAt(next);
    let end = next;
    while (end - next < 16 && this.o.leaders.leaderAt(end + 1) === leader && leader !== null) end++;
    return { slot: next, end };
  }

  // ---------------------------------------------------------------- tracking

  /** A new highest processed slot (from the stream, or RPC while the stream is down). */
  onSlot(slot: number, blockHeight?: number): void {
    if (slot <= this.currentSlot) return;
    this.currentSlot = slot;
    if (blockHeight !== undefined) this.blockHeight = blockHeight;
    this.o.leaders.advance(slot);
    this.o.metrics.slot.set(slot);
    const view = this.o.leaders.leaderView(slot);
    const next = this.o.leaders.nextBundleEngineSlot(slot, 64);
    this.o.hub.publish('slot_update', {
      slot,
      leader: view.leader,
      bundle_engine_leader: view.bundle_engine[0] ?? null,
      next_bundle_engine_slot: next,
      ts: this.now(),
    });
    if (this.fallbackActive) void this.runFallback();
    // Bypass decides at enqueue, but a refusal then (tipper paused, RPC down, spend limit) must not strand the
    // transaction: every slot, retry the ones still waiting for an attempt.
    if (this.o.bypass.enabled) this.sweepBypass();
    const now = this.now();
    if (now - this.lastSpendPrune > 60_000) {
      this.lastSpendPrune = now;
      void this.pruneSpend(now);
    }
  }

  private sweepBypass(): void {
    for (const tx of this.state.records.values()) {
      if (tx.state === 'pending' && !tx.stopped && !this.inFlight(tx) && !this.locks.isBusy(tx.tx_id)) {
        void this.bypassSubmit(tx.tx_id);
      }
    }
  }

  /** Spend older than the rolling hour no longer counts against `spend-limit`: drop it from the journal state. */
  private async pruneSpend(now: number): Promise<void> {
    const before = now - ROLLING_HOUR_MS;
    if (this.state.spend.hasOlderThan(before))
      await this.o.journal.commit({ k: 'prune-spend', before }).catch(() => undefined);
  }

  /**
   * Fee payers of live `"tip":"included"` transactions: they carry no relay tip transaction, so the stream must
   * watch their payers to see them land (DESIGN §8).
   */
  includedPayers(): string[] {
    const payers = new Set<string>();
    for (const tx of this.state.records.values()) {
      if (tx.tip === 'included' && !isTerminalTxState(tx.state))
        for (const payer of tx.fee_payers) payers.add(payer);
    }
    return [...payers];
  }

  setBlockHeight(height: number): void {
    if (height > this.blockHeight) this.blockHeight = height;
  }

  /**
   * How the tracker learns whether the stream is watching: while it is, every tip transaction relay sends shows on
   * it when it lands (the tipper is a subscribed account), so a bundle still inside its window needs no status
   * read until the stream says something of it landed. Without it, every bundle out is read every slot.
   */
  watchStreamWith(watching: () => boolean): void {
    this.streamWatching = watching;
  }

  /**
   * Whether a pass reads this transaction's statuses. Every pass reads what the stream hinted at; a hinted pass
   * reads only that. The slot's pass reads the rest by state, as little as the truth allows: a bundle out only once
   * its window has passed (to judge it lost) unless the stream is not watching; landed and processed ones every
   * slot (confirmation is a slot or two away); confirmed ones when their slot is final; pending ones with an old
   * attempt every few slots.
   */
  private worthReading(tx: StoredTx, kind: TrackKind, hinted: ReadonlySet<string>): boolean {
    if (kind === 'full') return true;
    for (const signature of this.signaturesOf(tx)) if (hinted.has(signature)) return true;
    if (kind === 'hint') return false;
    // An included-tip transaction's payer joins the stream's filter only every few slots: read it as before.
    const watching = tx.tip !== 'included' && this.streamWatching();
    switch (tx.state) {
      case 'landed':
      case 'processed':
        return true;
      case 'confirmed':
        return this.confirmedDue(tx);
      default: {
        const flying = this.inFlight(tx);
        // Its user transactions may still land on their own (not through relay), which the stream need not show.
        if (!flying) return this.currentSlot % CONFIRMED_POLL_EVERY_SLOTS === 0;
        if (!watching || flying.stage !== 'submitted' || flying.window_end_slot === null) return true;
        return this.currentSlot > flying.window_end_slot + WINDOW_GRACE_SLOTS;
      }
    }
  }

  /** The stream reports a slot finalized (rooted): confirmed transactions up to it are worth a status read. */
  onFinalizedSlot(slot: number): void {
    if (slot > this.finalizedSlot) this.finalizedSlot = slot;
    this.finalizedReportedAt = this.currentSlot;
  }

  /**
   * Whether a confirmed transaction's status is worth reading this pass. Confirmed ones wait ~32 slots for
   * finality and are most of what is in flight under load; reading each one every slot was most of the tracker's
   * RPC traffic (and web3.js's response validation its largest CPU cost). With the stream reporting finalized slots
   * they are read once their slot is final; without (stream down, or a stream that does not send them) every
   * CONFIRMED_POLL_EVERY_SLOTS slots.
   */
  private confirmedDue(tx: StoredTx): boolean {
    if (tx.landed_slot === null) return true;
    if (this.currentSlot - this.finalizedReportedAt <= FINALIZED_REPORT_FRESH_SLOTS)
      return this.finalizedSlot >= tx.landed_slot;
    return this.currentSlot % CONFIRMED_POLL_EVERY_SLOTS === 0;
  }

  /** A slot was abandoned: whatever landed in it is back to pending. */
  async onDeadSlot(slot: number): Promise<void> {
    // Status reads taken before this moment may still show the slot's signatures: ignore them from now on.
    if (!this.deadSlots.has(slot)) this.o.metrics.deadSlots.inc();
    this.deadSlots.add(slot);
    if (this.deadSlots.size > 1024) this.deadSlots.delete(this.deadSlots.values().next().value as number);
    for (const tx of [...this.state.records.values()]) {
      if (tx.landed_slot !== slot || (tx.state !== 'landed' && tx.state !== 'processed')) continue;
      await this.locks.run(tx.tx_id, () => this.unland(tx.tx_id, slot));
    }
  }

  /** Under the transaction's lock: its landing slot died, so it is pending again and the landed attempt dropped. */
  private async unland(txId: string, slot: number): Promise<void> {
    const current = this.state.records.get(txId);
    if (!current || current.landed_slot !== slot) return;
    if (current.state !== 'landed' && current.state !== 'processed') return;
    const landed = current.attempts.find((a) => a.slot_landed === slot && !a.leaked);
    const now = this.now();
    await this.o.journal.commit({
      k: 'patch',
      id: current.tx_id,
      set: { state: 'pending', landed_slot: null },
      history: [{ state: 'pending', slot: this.currentSlot, ts: now }],
    });
    this.o.metrics.transitions.inc({ state: 'pending' });
    this.publishStatus(current);
    if (landed)
      await this.settleFailed(current, landed, 'dropped', {
        countRetry: false,
        detail: `slot ${slot} died`,
      });
  }

  /** A transaction status seen on the stream (tip transactions, and payers of tip-included transactions). */
  onStreamTransaction(signature: string): void {
    // A status on the stream is a hint to read that transaction's statuses now rather than at a later pass.
    this.hinted.add(signature);
    void this.track('hint');
  }

  /** The gRPC transport's push results: auction losses, simulation failures and drops settle an attempt at once. */
  async onBundleResult(result: BundleResultMessage): Promise<void> {
    const txId = this.state.byBundle.get(result.bundleId);
    if (!txId) return;
    const report = classifyGrpcBundleResult(result);
    if (report.kind === 'landed') {
      const tx = this.state.records.get(txId);
      if (tx) for (const signature of this.signaturesOf(tx)) this.hinted.add(signature);
      void this.track('hint');
      return;
    }
    if (report.kind !== 'outcome') return;
    await this.locks.run(txId, async () => {
      const tx = this.state.records.get(txId);
      const attempt = tx?.attempts.find((a) => a.bundle_id === result.bundleId);
      if (!tx || !attempt || attempt.stage !== 'submitted') return;
      await this.settleFailed(tx, attempt, report.outcome, {
        countRetry: true,
        detail: `engine: ${report.detail}`,
      });
    });
  }

  /**
   * Read the statuses of every signature relay is following and move transactions accordingly. Runs each slot or
   * two, and at once when the stream hints that something landed.
   */
  async track(kind: TrackKind = 'slot'): Promise<void> {
    if (this.closed) return;
    if (kind === 'slot' && this.currentSlot - this.lastTrackedSlot < 1) return;
    if (this.tracking) {
      // Asked for during a pass: one more pass after it (the running one may have read before the news), the
      // widest of what was asked.
      if (this.trackAgain === null || TRACK_RANK[kind] > TRACK_RANK[this.trackAgain]) this.trackAgain = kind;
      return;
    }
    this.tracking = true;
    // A hinted pass reads only what has a bundle out: the slot's pass over everything is still due.
    if (kind !== 'hint') this.lastTrackedSlot = this.currentSlot;
    const startedAt = this.now();
    const hinted = this.hinted;
    this.hinted = new Set();
    try {
      const followed: StoredTx[] = [];
      // One group per transaction (its user signatures, then the tip signatures of attempts that could still land),
      // packed into calls without splitting a group: a tip and its bundle are then always read at the same moment,
      // so a landed bundle is never mistaken for a tip that landed alone.
      const chunks: string[][] = [[]];
      for (const tx of this.state.records.values()) {
        if (isTerminalTxState(tx.state)) continue;
        if (tx.attempts.length === 0 && tx.state === 'pending') continue;
        if (!this.worthReading(tx, kind, hinted)) continue;
        followed.push(tx);
        const group = [...tx.signatures];
        for (const a of tx.attempts) {
          // A tip transaction is only good for ~150 blocks; older ones cannot land any more.
          if (
            a.tip_signature &&
            !a.leaked &&
            this.currentSlot - a.created_slot <= TIP_LANDING_HORIZON_SLOTS
          ) {
            group.push(a.tip_signature);
          }
        }
        let current = chunks[chunks.length - 1] as string[];
        if (current.length + group.length > MAX_SIGNATURES_PER_STATUS_CALL) {
          current = [];
          chunks.push(current);
        }
        current.push(...group);
      }
      const statuses = new Map<
        string,
        { slot: number; err: unknown; confirmationStatus?: string | undefined }
      >();
      // The statuses show the chain as of (at least) this slot and time. A pass over many transactions can take
      // longer than a slot, so "not landed" is judged against these, never against the slot reached meanwhile.
      const readAt = { slot: this.currentSlot, ts: this.now() };
      for (const chunk of chunks) {
        if (chunk.length === 0) continue;
        const values = await this.o.rpc.getSignatureStatuses(chunk);
        values.forEach((v, i) => {
          if (v)
            statuses.set(chunk[i] as string, {
              slot: v.slot,
              err: v.err,
              confirmationStatus: v.confirmationStatus,
            });
        });
      }
      // Transactions are independent (each under its own lock), so they are judged many at a time: one after
      // another, every state change waited for its own journal fsync, and a pass over a few thousand landings took
      // tens of seconds under load; together, their writes share group commits.
      for (let i = 0; i < followed.length; i += EVALUATE_CONCURRENCY) {
        const judged = await Promise.allSettled(
          followed
            .slice(i, i + EVALUATE_CONCURRENCY)
            .map((tx) => this.locks.run(tx.tx_id, () => this.evaluate(tx.tx_id, statuses, readAt))),
        );
        for (const result of judged)
          if (result.status === 'rejected')
            this.o.log.debug({ err: result.reason }, 'status evaluation failed');
      }
      // Expiry moves with slots: the slot's pass looks at it, not every hinted one.
      if (kind !== 'hint') await this.checkExpiry();
    } catch (error) {
      this.o.log.debug({ err: error }, 'status poll failed');
    } finally {
      this.tracking = false;
      const again = this.trackAgain;
      this.trackAgain = null;
      if (again && !this.closed) {
        // Under load the stream hints at a landing every few ms: spacing the passes keeps tracking from taking
        // the whole event loop, and costs a hinted landing at most this long.
        const wait = again === 'hint' ? Math.max(0, startedAt + MIN_HINTED_PASS_GAP_MS - this.now()) : 0;
        const timer = setTimeout(() => void this.track(again), wait);
        timer.unref();
      }
    }
  }

  /** A transaction's user signatures and its attempts' tip signatures. */
  private *signaturesOf(tx: StoredTx): Iterable<string> {
    yield* tx.signatures;
    for (const a of tx.attempts) if (a.tip_signature) yield a.tip_signature;
  }

  private async evaluate(
    txId: string,
    statuses: Map<string, { slot: number; err: unknown; confirmationStatus?: string | undefined }>,
    readAt: { slot: number; ts: number },
  ): Promise<void> {
    const tx = this.state.records.get(txId);
    if (!tx || isTerminalTxState(tx.state)) return;
    // Moved to a slot that died while the move was being written (the dead-slot notice came in between): undo it.
    const early = tx.state === 'landed' || tx.state === 'processed';
    if (early && tx.landed_slot !== null && this.deadSlots.has(tx.landed_slot)) {
      await this.unland(tx.tx_id, tx.landed_slot);
      return;
    }
    // Statuses read before a slot was declared dead describe a fork that is gone. Only this transaction's
    // signatures are looked at here (the map holds every followed one: scanning it whole per transaction was
    // quadratic in the in-flight count, the largest cost of a busy tracker).
    for (const signature of this.signaturesOf(tx)) {
      const status = statuses.get(signature);
      if (status && this.deadSlots.has(status.slot)) statuses.delete(signature);
    }
    const userStatuses = tx.signatures.map((s) => statuses.get(s));
    const landedAll = userStatuses.every((s) => s !== undefined);
    const failedStatus = userStatuses.find((s) => s && s.err);
    const now = this.now();

    // Tips that landed without their bundle (an uncled block broke it up and its transactions were re-broadcast one
    // by one): leaked. That is every tip on chain but the one of the bundle that landed with the user transactions,
    // counted once confirmed (a processed tip can still be rolled back with its block, and then was never paid).
    if (landedAll) await this.readTipsPastHorizon(tx, statuses);
    const credited = landedAll ? this.landedAttempt(tx, statuses) : null;
    for (const a of tx.attempts) {
      if (!a.tip_signature || a.leaked || a === credited) continue;
      const tipStatus = statuses.get(a.tip_signature);
      if (tipStatus && commitmentRank(tipStatus.confirmationStatus) >= 1) {
        this.o.metrics.tipsLeaked.inc(a.tip_lamports);
        this.o.log.warn(
          { tx_id: tx.tx_id, bundle_id: a.bundle_id, lamports: a.tip_lamports },
          'tip landed without its bundle (leaked)',
        );
        // The tip was paid: it stays counted against spend-limit even if the attempt was settled before.
        await this.o.journal.commit({
          k: 'patch',
          id: tx.tx_id,
          attempts: [{ n: a.attempt, set: { leaked: true, slot_landed: tipStatus.slot, released: false } }],
        });
        if (!a.outcome) {
          await this.settleFailed(tx, a, 'dropped', {
            countRetry: false,
            detail: 'tip leaked: the tip transaction landed without the bundle',
            // The user transactions are on chain (another way): no new attempt, the tracker moves them on below.
            ...(landedAll ? { final: false } : {}),
          });
        } else {
          this.appendLifecycle(tx, a);
        }
      }
    }

    if (failedStatus) {
      // A user transaction executed and failed: it is on chain for good, nothing else can land.
      const landedAttempt = this.landedAttempt(tx, statuses);
      for (const a of tx.attempts)
        if (!a.outcome && a.stage !== 'failed')
          await this.settleFailed(tx, a, 'simulation_failed', {
            countRetry: false,
            detail: 'a user transaction failed on chain',
            final: false,
          });
      await this.moveTo(tx, 'failed', failedStatus.slot, now, {
        failure: 'simulation_failed',
        bundleId: landedAttempt?.bundle_id ?? null,
      });
      return;
    }
    if (!landedAll) {
      const flying = this.inFlight(tx);
      if (
        flying &&
        flying.stage === 'submitted' &&
        flying.window_end_slot !== null &&
        readAt.slot > flying.window_end_slot + WINDOW_GRACE_SLOTS &&
        readAt.ts - (flying.timeline.submitted?.ts ?? flying.created_at) >= WINDOW_GRACE_MS
      ) {
        // JSON-RPC has no push channel: before blaming the tip, check whether the user transactions themselves
        // can execute (an unfunded fee payer or a failing program never lands, whatever the tip).
        const userFault = await this.diagnoseUserTransactions(tx);
        if (userFault) {
          await this.settleFailed(tx, flying, userFault.outcome, {
            countRetry: true,
            detail: userFault.detail,
          });
          return;
        }
        const belowFloor = flying.tip_lamports < this.o.oracle.view(now).p50;
        await this.settleFailed(tx, flying, belowFloor ? 'fee_too_low' : 'dropped', {
          countRetry: true,
          detail: `target window ${flying.target_slot ?? '?'}..${flying.window_end_slot} passed without landing`,
        });
      }
      return;
    }

    const defined = userStatuses as Array<{ slot: number; confirmationStatus?: string | undefined }>;
    const slot = Math.max(...defined.map((s) => s.slot));
    const rank = Math.min(...defined.map((s) => commitmentRank(s.confirmationStatus)));
    const target: TxState = rank >= 2 ? 'finalized' : rank === 1 ? 'confirmed' : 'processed';
    const landedAttempt = this.landedAttempt(tx, statuses);
    if (TX_PROGRESS_PATH.indexOf(target) <= TX_PROGRESS_PATH.indexOf(tx.state)) return; // a null or lower never demotes
    await this.moveTo(tx, target, slot, now, {
      bundleId: landedAttempt?.bundle_id ?? null,
      landedSlot: slot,
      attempt: landedAttempt,
    });
  }

  /**
   * The tips of attempts older than the landing horizon are not read each pass (they cannot land any more), but one
   * may have landed already: the bundle judged lost on a read that came too late, or credited long ago and still
   * finalizing. Once the user transactions are on chain, read those tips too, so the bundle that landed is credited
   * (and its tip counted as paid) however long ago it was built.
   */
  private async readTipsPastHorizon(
    tx: StoredTx,
    statuses: Map<string, { slot: number; err: unknown; confirmationStatus?: string | undefined }>,
  ): Promise<void> {
    const old = tx.attempts
      .filter(
        (a) =>
          a.tip_signature !== null &&
          !a.leaked &&
          !statuses.has(a.tip_signature) &&
          this.currentSlot - a.created_slot > TIP_LANDING_HORIZON_SLOTS,
      )
      .map((a) => a.tip_signature as string);
    if (old.length === 0) return;
    try {
      const values = await this.o.rpc.getSignatureStatuses(old);
      values.forEach((v, i) => {
        if (v)
          statuses.set(old[i] as string, {
            slot: v.slot,
            err: v.err,
            confirmationStatus: v.confirmationStatus,
          });
      });
    } catch {
      /* RPC cannot say now: the next pass reads them again */
    }
  }

  /**
   * Why the user transactions cannot land, if they cannot: a fee payer that cannot pay the fee, or (for a single
   * transaction, which can be simulated on its own) an execution error. Null when they look fine or RPC cannot say.
   */
  private async diagnoseUserTransactions(
    tx: StoredTx,
  ): Promise<{ outcome: AttemptOutcome; detail: string } | null> {
    try {
      for (let i = 0; i < tx.fee_payers.length; i++) {
        const balance = await this.o.rpc.getBalance(tx.fee_payers[i] as string);
        if (balance < SIGNATURE_FEE_LAMPORTS) {
          return {
            outcome: 'insufficient_funds',
            detail: `fee payer ${tx.fee_payers[i]} of transaction #${i} holds ${balance} lamports`,
          };
        }
      }
      if (tx.wires && tx.wires.length === 1) {
        const err = await this.o.rpc.simulate(Buffer.from(tx.wires[0] as string, 'base64'));
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

  /**
   * The attempt whose bundle landed. A bundle is atomic, so its tip transaction is in the very slot of the user
   * transactions; of several tips there (an earlier attempt's tip re-broadcast after an uncled block next to a later
   * bundle), the latest attempt's. A tip-included transaction has no tip transaction, so its latest sent attempt.
   * Null when the user transactions landed some other way (sent elsewhere, or re-broadcast one by one after an
   * uncled block, their tip in another slot): then no bundle of relay's is credited with it.
   */
  private landedAttempt(tx: StoredTx, statuses: Map<string, { slot: number }>): StoredAttempt | null {
    return creditedAttempt(tx, statuses);
  }

  private path(from: TxState, to: TxState, slot: number, ts: number): TxHistoryEntry[] {
    return txTransitionPath(from, to).map((state) => ({ state, slot, ts }));
  }

  /** Move a transaction forward (emitting every skipped state in order) and its landed attempt's bundle stage. */
  private async moveTo(
    tx: StoredTx,
    to: TxState,
    slot: number,
    now: number,
    extra: {
      failure?: AttemptOutcome;
      bundleId?: string | null;
      landedSlot?: number;
      attempt?: StoredAttempt | null;
    },
  ): Promise<void> {
    const moves = this.path(tx.state, to, slot, now);
    const attempt = extra.attempt ?? null;
    const attemptChanges: Array<{ n: number; set: Partial<StoredAttempt> }> = [];
    const stageChanges: BundleStage[] = [];
    if (attempt && !attempt.leaked) {
      const target = to as BundleStage;
      const order: BundleStage[] = ['submitted', 'landed', 'processed', 'confirmed', 'finalized'];
      // An attempt judged lost (window passed) whose tip is on chain after all landed: the chain wins over the
      // inference, so it continues from `submitted`.
      const resurrected = attempt.stage === 'failed';
      const from = attempt.stage === 'journaled' ? -1 : resurrected ? 0 : order.indexOf(attempt.stage);
      const timeline = { ...attempt.timeline };
      for (let i = from + 1; i <= order.indexOf(target); i++) {
        const stage = order[i] as BundleStage;
        stageChanges.push(stage);
        if (!timeline[stage])
          timeline[stage] = {
            slot: stage === 'submitted' ? (attempt.slot_submitted ?? attempt.created_slot) : slot,
            ts: now,
          };
      }
      if (stageChanges.length > 0) {
        attemptChanges.push({
          n: attempt.attempt,
          set: {
            stage: target,
            timeline,
            ...(extra.landedSlot !== undefined ? { slot_landed: extra.landedSlot } : {}),
            ...(resurrected
              ? { outcome: null, released: false, timeline: { ...timeline, failed: null } }
              : {}),
          },
        });
      }
    }
    if (moves.length === 0 && attemptChanges.length === 0) return;
    const terminal = isTerminalTxState(to);
    await this.o.journal.commit({
      k: 'patch',
      id: tx.tx_id,
      set: {
        state: to,
        ...(extra.failure ? { failure: extra.failure } : {}),
        ...(extra.landedSlot !== undefined ? { landed_slot: extra.landedSlot } : {}),
        ...(to === 'finalized' || to === 'failed' || to === 'expired' ? { stopped: true } : {}),
      },
      history: moves,
      ...(attemptChanges.length ? { attempts: attemptChanges } : {}),
      ...(terminal && to !== 'finalized' ? { evicted: to } : {}),
    });
    for (const m of moves) {
      this.o.metrics.transitions.inc({ state: m.state });
      this.publishStatus({ ...tx, state: m.state }, extra.bundleId ?? null);
    }
    if (terminal && to !== 'finalized') this.o.metrics.evicted.inc({ reason: to });
    if (attempt && stageChanges.length > 0) {
      const fresh =
        this.state.records.get(tx.tx_id)?.attempts.find((a) => a.attempt === attempt.attempt) ?? attempt;
      this.appendLifecycle(tx, fresh);
      if (stageChanges.includes('landed')) {
        this.o.metrics.tipsPaid.inc(fresh.tip_lamports);
        if (fresh.tip_lamports > 0) this.o.oracle.ingestLandedTip(fresh.tip_lamports, now);
      }
      if (fresh.stage === 'finalized') {
        this.o.hub.publish('bundle_settled', {
          bundle_id: fresh.bundle_id,
          stage: 'finalized',
          failure_type: null,
          tx_id: tx.tx_id,
          tip_lamports: fresh.tip_lamports,
          retries: tx.retries,
          ts: now,
        });
      }
    }
    // Once the user transactions landed, no other attempt of this transaction can: settle the rest.
    if (extra.landedSlot !== undefined) {
      for (const other of tx.attempts) {
        if (other === attempt || other.outcome || other.stage === 'failed') continue;
        if (other.stage === 'journaled' || other.stage === 'submitted') {
          await this.settleFailed(tx, other, 'dropped', {
            countRetry: false,
            detail: 'another attempt of this transaction landed',
            final: false,
          });
        }
      }
    }
  }

  /**
   * An attempt ended without landing. Releases its spend reservation, records the bundle's failed stage, tells the
   * agent (`bundle_settled`), then either re-pends the transaction for another attempt or, for a non-retryable
   * outcome, fails it.
   */
  private async settleFailed(
    tx: StoredTx,
    attempt: StoredAttempt,
    outcome: AttemptOutcome,
    options: { countRetry: boolean; detail: string; stop?: boolean; final?: boolean },
  ): Promise<void> {
    const now = this.now();
    const slot = this.currentSlot;
    const policy = this.o.policy();
    const timeline = { ...attempt.timeline, failed: { slot, ts: now } };
    const retries = tx.retries + (options.countRetry ? 1 : 0);
    const retryable = isRetryableOutcome(outcome);
    const fails = !retryable && options.final !== false;
    const exhausted = retries > policy['max-retries'] || slot > tx.expires_at_slot;
    const backToPending =
      !fails && (tx.state === 'submitted' || tx.state === 'pending') && options.final !== false;
    const moves = fails
      ? this.path(tx.state, 'failed', slot, now)
      : backToPending && tx.state !== 'pending'
        ? this.path(tx.state, 'pending', slot, now)
        : [];
    await this.o.journal.commit({
      k: 'patch',
      id: tx.tx_id,
      set: {
        retries,
        // Journals written before RELAY_E_ATTEMPT_LOST carry RELAY_E_UPSTREAM_INVALID_RESPONSE here (same details).
        last_error: relayErrorJson('RELAY_E_ATTEMPT_LOST', {
          outcome,
          bundle_id: attempt.bundle_id,
          reason: options.detail,
        }),
        ...(fails ? { state: 'failed' as TxState, failure: outcome, stopped: true } : {}),
        ...(!fails && backToPending && tx.state !== 'pending' ? { state: 'pending' as TxState } : {}),
        ...(options.stop || (backToPending && exhausted) ? { stopped: true } : {}),
      },
      history: moves,
      attempts: [
        { n: attempt.attempt, set: { stage: 'failed', outcome, released: !attempt.leaked, timeline } },
      ],
      ...(fails ? { evicted: 'failed' } : {}),
    });
    this.o.metrics.attemptOutcomes.inc({ outcome });
    if (fails) this.o.metrics.evicted.inc({ reason: 'failed' });
    for (const m of moves) {
      this.o.metrics.transitions.inc({ state: m.state });
      this.publishStatus({ ...tx, state: m.state, failure: fails ? outcome : tx.failure }, attempt.bundle_id);
    }
    const fresh =
      this.state.records.get(tx.tx_id)?.attempts.find((a) => a.attempt === attempt.attempt) ?? attempt;
    this.appendLifecycle(tx, fresh);
    this.o.hub.publish('bundle_settled', {
      bundle_id: attempt.bundle_id,
      stage: 'failed',
      failure_type: outcome,
      tx_id: tx.tx_id,
      tip_lamports: attempt.tip_lamports,
      retries,
      ts: now,
    });
    if (backToPending && !fails && this.o.bypass.enabled) void this.bypassSubmit(tx.tx_id);
  }

  /**
   * `expired` only with proof that nothing can land: attempts have stopped (or the expiry slot passed) and a user
   * transaction's blockhash is dead (or its durable nonce advanced without it).
   */
  private async checkExpiry(): Promise<void> {
    for (const tx of [...this.state.records.values()]) {
      if (tx.state !== 'pending' && tx.state !== 'submitted') continue;
      const pastExpiry = this.currentSlot > tx.expires_at_slot;
      if (!tx.stopped && !pastExpiry) continue;
      if (this.locks.isBusy(tx.tx_id)) continue; // busy now: look again next slot
      const dead = await this.anyUserBlockhashDead(tx, 'finalized');
      await this.locks.run(tx.tx_id, async () => {
        const current = this.state.records.get(tx.tx_id);
        if (!current || (current.state !== 'pending' && current.state !== 'submitted')) return;
        if (!dead) {
          // No further attempt after the expiry slot; the transaction waits for proof one way or the other.
          if (!current.stopped && this.currentSlot > current.expires_at_slot && !this.inFlight(current)) {
            await this.o.journal.commit({ k: 'patch', id: current.tx_id, set: { stopped: true } });
          }
          return;
        }
        // The proof, read under the lock: no user signature is anywhere in the chain's history. (A durable-nonce
        // transaction's own landing advances its nonce, so the nonce alone proves nothing.)
        const onChain = await this.o.rpc.getSignatureStatuses(current.signatures, {
          searchTransactionHistory: true,
        });
        if (onChain.some((status) => status !== null)) return; // it landed: the tracker moves it forward
        for (const a of current.attempts) {
          if (!a.outcome && a.stage !== 'failed') {
            await this.settleFailed(current, a, 'dropped', {
              countRetry: false,
              detail: 'the blockhash expired',
              final: false,
            });
          }
        }
        const latest = this.state.records.get(tx.tx_id) as StoredTx;
        await this.moveTo(latest, 'expired', this.currentSlot, this.now(), {});
      });
    }
  }

  /**
   * Whether a user transaction can no longer be processed: its blockhash is invalid (at `commitment`; `finalized`
   * is the proof that no fork can still take it) or its durable nonce has moved on.
   */
  private async anyUserBlockhashDead(
    tx: StoredTx,
    commitment: 'processed' | 'finalized' = 'processed',
  ): Promise<boolean> {
    for (let i = 0; i < tx.signatures.length; i++) {
      const nonce = tx.nonce_accounts[i];
      if (nonce) {
        try {
          const value = await this.o.rpc.getNonceValue(nonce);
          if (value !== null && value !== tx.blockhashes[i]) return true;
        } catch {
          /* unknown: not proof */
        }
        continue;
      }
      const blockhash = tx.blockhashes[i] as string;
      if (commitment === 'finalized') {
        try {
          if (!(await this.o.rpc.isBlockhashValid(blockhash, 'finalized'))) return true;
        } catch {
          /* unknown: not proof */
        }
        continue;
      }
      if ((await this.blockhashStillValid(blockhash)) === false) return true;
    }
    return false;
  }

  // ---------------------------------------------------------------- deciders

  private async bypassSubmit(txId: string): Promise<void> {
    const tx = this.state.records.get(txId);
    if (!tx || tx.state !== 'pending' || tx.stopped || this.inFlight(tx)) return;
    try {
      await this.submit(
        {
          tx_id: txId,
          tip_lamports: tx.tip === 'included' ? 0 : this.o.bypass.tipLamports,
          reason: 'bypass: fixed tip',
        },
        'bypass',
      );
    } catch (error) {
      this.o.log.warn({ tx_id: txId, err: error }, 'bypass submit refused');
    }
  }

  private fallbackRunning = false;

  /** With no agent for the grace period, decide with the core reflex, recording why. */
  private async runFallback(): Promise<void> {
    if (this.fallbackRunning) return;
    this.fallbackRunning = true;
    try {
      const policy = this.o.policy();
      const floor = this.floorNow();
      const leaders = this.o.leaders.leaderView(this.currentSlot);
      for (const tx of [...this.state.records.values()]) {
        if (tx.state !== 'pending' || tx.stopped || this.inFlight(tx) || this.locks.isBusy(tx.tx_id))
          continue;
        const previous = lastSettled(tx);
        const decision = decideReflex({
          tx: {
            priority: effectivePriority(policy, tx.priority),
            max_tip: tx.max_tip,
            tip: tx.tip,
            enqueue_slot: tx.enqueued_slot,
            expires_at_slot: tx.expires_at_slot,
            retries: tx.retries,
          },
          floor,
          leaders,
          policy,
          previous: previous?.outcome
            ? { tip_lamports: previous.tip_lamports, outcome: previous.outcome }
            : null,
          slot: this.currentSlot,
        });
        if (decision.action === 'stop') {
          await this.locks.run(tx.tx_id, async () => {
            const current = this.state.records.get(tx.tx_id);
            if (current && current.state === 'pending' && !current.stopped && !this.inFlight(current)) {
              await this.o.journal.commit({ k: 'patch', id: tx.tx_id, set: { stopped: true } });
            }
          });
          continue;
        }
        if (decision.action !== 'submit') continue;
        try {
          await this.submit(
            {
              tx_id: tx.tx_id,
              tip_lamports: decision.tip_lamports,
              reason: decision.reason,
              trace: {
                fallback_reason: 'agent_absent',
                rationale: decision.reason,
                inputs: { floor, slot: this.currentSlot },
              },
            },
            'fallback',
          );
        } catch (error) {
          this.o.log.debug({ tx_id: tx.tx_id, err: error }, 'fallback submit refused');
        }
      }
    } finally {
      this.fallbackRunning = false;
    }
  }

  // ---------------------------------------------------------------- mode, agents, operator state

  setMode(mode: DecisionMode): DecisionMode {
    const previous = this.mode;
    if (mode !== previous) {
      this.mode = mode;
      this.o.hub.publish('mode_changed', { decision_mode: mode, previous, ts: this.now() });
    }
    return this.mode;
  }

  agentConnected(model: string, provider: string): AgentConnection {
    const connection: AgentConnection = { id: newUlid(), model, provider, since: this.now() };
    this.agents.set(connection.id, connection);
    this.o.hub.publish('agent_presence', { connected: true, model, provider, ts: connection.since });
    return connection;
  }

  agentDisconnected(id: string): void {
    const connection = this.agents.get(id);
    if (!connection) return;
    this.agents.delete(id);
    if (this.agents.size === 0) this.agentAbsentSince = this.now();
    this.o.hub.publish('agent_presence', {
      connected: false,
      model: connection.model,
      provider: connection.provider,
      ts: this.now(),
    });
  }

  /** Tipper balance from RPC. Below what one more minimal tip needs, submission pauses (never failing a user tx). */
  setTipperBalance(lamports: number): void {
    this.tipperBalance = lamports;
    const needed = RENT_EXEMPT_MINIMUM + this.o.policy()['min-tip'] + SIGNATURE_FEE_LAMPORTS;
    const reason =
      lamports < needed
        ? `tipper balance ${lamports} lamports is below ${needed} (rent-exempt minimum + min-tip + fee)`
        : null;
    if (reason !== this.pausedReason) {
      this.pausedReason = reason;
      if (reason) this.o.log.warn({ balance: lamports }, 'submission paused: tipper underfunded');
      else this.o.log.info({ balance: lamports }, 'submission resumed: tipper funded');
    }
  }

  /**
   * Resend what was journaled but not acknowledged before a restart (the same bytes), resume tracking, and write
   * again the lifecycle entries the crash lost.
   */
  resumeAfterRestart(): { resent: number; tracked: number; relogged: number } {
    const relogged = this.relogLostLifecycleEntries();
    let resent = 0;
    let tracked = 0;
    for (const tx of this.state.records.values()) {
      if (isTerminalTxState(tx.state)) continue;
      const flying = this.inFlight(tx);
      if (flying?.stage === 'journaled' && tx.wires) {
        this.queueSend(tx, flying.attempt);
        resent++;
      } else if (tx.attempts.length > 0) {
        tracked++;
      }
      // Bypass decides at enqueue; a transaction accepted just before a crash has had no decision yet.
      if (!flying && tx.state === 'pending' && !tx.stopped && this.o.bypass.enabled)
        void this.bypassSubmit(tx.tx_id);
    }
    return { resent, tracked, relogged };
  }

  /**
   * A bundle's lifecycle entry is written after the journal records its stage change, so a crash in between (or in
   * the middle of the write: start-up cuts a torn last line) leaves the log a stage behind the journal, or without
   * the bundle. The journal is the truth: append the entry of every attempt whose latest logged entry does not match
   * it. A bundle missing from a partial index is only re-logged when it is newer than the oldest indexed one (older
   * ones were evicted, not lost).
   */
  private relogLostLifecycleEntries(): number {
    const log = this.o.lifecycle;
    const oldest = log.indexesWholeFile ? undefined : log.oldest();
    let relogged = 0;
    for (const tx of this.state.records.values()) {
      for (const attempt of tx.attempts) {
        if (attempt.stage === 'journaled') continue; // not submitted yet: no entry is due
        const logged = log.get(attempt.bundle_id);
        if (logged) {
          if (logged.stage === attempt.stage && logged.slot_landed === attempt.slot_landed) continue;
        } else if (!log.indexesWholeFile) {
          if (!oldest || (attempt.slot_submitted ?? attempt.created_slot) < oldest.slot_submitted) continue;
        }
        this.appendLifecycle(tx, attempt);
        relogged++;
      }
    }
    return relogged;
  }

  close(): void {
    this.closed = true;
    if (this.sendTimer) clearTimeout(this.sendTimer);
  }

  // ---------------------------------------------------------------- events and lifecycle

  private publishStatus(
    tx: Pick<StoredTx, 'tx_id' | 'state' | 'signatures' | 'failure' | 'attempts'>,
    bundleId?: string | null,
  ): void {
    if (isTerminalTxState(tx.state)) this.enqueuedAt.delete(tx.tx_id);
    const last = tx.attempts[tx.attempts.length - 1];
    this.o.hub.publish(
      'tx_status_changed',
      txStatusChangedEvent({
        tx_id: tx.tx_id,
        state: tx.state,
        bundle_id: bundleId !== undefined ? bundleId : (last?.bundle_id ?? null),
        tx_signatures: tx.signatures,
        failure: tx.failure,
        ts: this.now(),
      }),
    );
  }

  /** Write the attempt's entry to the audit log. A write failure is logged, never thrown into the caller's flow. */
  private appendLifecycle(tx: StoredTx, attempt: StoredAttempt): void {
    this.o.lifecycle.append(this.lifecycleEntry(tx, attempt)).catch((error: unknown) => {
      this.o.log.error({ err: error, bundle_id: attempt.bundle_id }, 'lifecycle log write failed');
    });
  }

  lifecycleEntry(tx: StoredTx, attempt: StoredAttempt): LifecycleEntry {
    const stage: BundleStage = attempt.stage === 'journaled' ? 'submitted' : attempt.stage;
    const durations = timelineDurations(attempt.timeline);
    return {
      v: 1,
      bundle_id: attempt.bundle_id,
      tx_id: tx.tx_id,
      attempt: attempt.attempt,
      stage,
      failure: stage === 'failed' ? (attempt.outcome ?? 'dropped') : null,
      slot_submitted: attempt.slot_submitted ?? attempt.created_slot,
      slot_landed: attempt.slot_landed,
      tip_lamports: attempt.tip_lamports,
      tip_floor_at_submit: attempt.floor_at_submit,
      leader: attempt.leader,
      decision_mode: attempt.decision.mode,
      bypass: attempt.decision.bypass,
      escalated: attempt.decision.escalated,
      ...durations,
      timeline: attempt.timeline,
      transactions: attempt.bundle_signatures,
      ai_decision_trace: attempt.decision.trace,
    };
  }
}

function commitmentRank(status: string | undefined): number {
  return status === 'finalized' ? 2 : status === 'confirmed' ? 1 : 0;
}

/** The last attempt that ended (for escalation and same-tip retries). */
function lastSettled(tx: StoredTx): StoredAttempt | null {
  for (let i = tx.attempts.length - 1; i >= 0; i--) {
    const a = tx.attempts[i] as StoredAttempt;
    if (a.outcome) return a;
  }
  return null;
}

export function toTxRecord(tx: StoredTx): TxRecord {
  return {
    tx_id: tx.tx_id,
    state: tx.state,
    priority: tx.priority,
    tip: tx.tip,
    max_tip: tx.max_tip,
    enqueued_slot: tx.enqueued_slot,
    expires_at_slot: tx.expires_at_slot,
    tx_signatures: [...tx.signatures],
    bundle_id: tx.attempts[tx.attempts.length - 1]?.bundle_id ?? null,
    history: tx.history.map((h) => ({ ...h })),
    attempts: tx.attempts.map((a) => ({
      attempt: a.attempt,
      bundle_id: a.bundle_id,
      tip_lamports: a.tip_lamports,
      slot_submitted: a.slot_submitted ?? a.created_slot,
      stage: a.stage === 'journaled' ? 'submitted' : a.stage,
      outcome: a.outcome,
    })),
    retries: tx.retries,
    last_error: tx.last_error,
    failure: tx.failure,
  };
}
