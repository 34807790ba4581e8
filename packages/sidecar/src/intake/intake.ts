import {
  ADMISSION_RESERVE_SLOTS,
  RelayError,
  admissionDecision,
  checkEnqueueAgainstPolicy,
  effectivePriority,
  expiresAtSlot,
  parseEnqueueRequest,
  policyViolationError,
  PRIORITIES,
  PRIORITY_RANK,
  targetPercentile,
  type EnqueueResponse,
  type Policy,
  type Priority,
} from '@solrelay/core';
import { BLOCKHASH_MAX_AGE_BLOCKS } from '../chain/blockhash';
import type { RelayPorts } from '../context';
import { SEND_PACING } from '../upstream/engine-regions';
import type { BypassDecider } from '../deciders/bypass';
import { statusEvent } from '../events/announce';
import type { StoredTx } from '../store/records';
import { announcedPricing, bundleToPrice } from '../chain/pricing';
import { newUlid } from '../util/ids';
import { SlidingWindow } from '../util/rate';
import {
  WireFormatError,
  decodeTransactionString,
  durableNonceAccount,
  firstInvalidSignature,
  parseTransaction,
} from '../wire/transaction';

/**
 * Intake: parse and verify an enqueue request, admit it (idempotency, `max-queue`, `rate-limit`, a live blockhash),
 * journal it as `pending`, announce it, and (in bypass) hand it straight to the bypass decider.
 */
/** A block height read within this many slots counts as current at intake (it is polled every second). */
const FRESH_BLOCK_HEIGHT_SLOTS = 5;

export class Intake {
  private readonly rateWindow = new SlidingWindow(60_000);
  private readonly inflightEnqueues = new Map<
    string,
    Promise<{ response: EnqueueResponse; created: boolean }>
  >();
  private acceptsInFlight = 0;

  constructor(
    private readonly d: Pick<
      RelayPorts,
      | 'blockhashes'
      | 'bundleEngineRps'
      | 'bypass'
      | 'chain'
      | 'contention'
      | 'crashPoint'
      | 'engine'
      | 'enqueuedAt'
      | 'metrics'
      | 'now'
      | 'policy'
      | 'store'
      | 'verifier'
    >,
    private readonly bypass: Pick<BypassDecider, 'submit'>,
    /** Regional engines taking bundles now (not cooling after a failure): the send capacity counts these. */
    private readonly regionsTakingBundles: () => number = () => d.engine.size,
    /** Relay transactions a bundle carries on average (packing; 1 without). */
    private readonly transactionsPerBundle: () => number = () => 1,
    /**
     * The recent share of bundles that landed (issue 30, point 5): a lost bundle's transaction spends another token on
     * its retry, so what relay can sell is what lands (core's `LandedShare`; 1 when not given).
     */
    private readonly landedShare: () => number = () => 1,
  ) {}

  /** Accept a transaction (1 to 4 signed transactions that land together). */
  async enqueue(body: unknown): Promise<{ response: EnqueueResponse; created: boolean }> {
    const started = performance.now();
    const request = parseEnqueueRequest(body);
    const policy = this.d.policy();
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
    const verifier = this.d.verifier;
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
    const existing = await this.existingFor(signatures);
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

  private async existingFor(
    signatures: string[],
  ): Promise<{ response: EnqueueResponse; created: boolean } | null> {
    const tx = await this.d.store.byFirstSignature(signatures[0] as string);
    if (!tx) {
      for (const sig of signatures.slice(1)) {
        const owner = await this.d.store.byFirstSignature(sig);
        if (owner !== undefined) {
          throw new RelayError('RELAY_E_TX_SIGNATURE_CONFLICT', { signature: sig, tx_id: owner.tx_id });
        }
      }
      return null;
    }
    return this.repeat(tx, signatures);
  }

  /** The answer to an enqueue of a transaction already accepted (the same first signature). */
  private repeat(tx: StoredTx, signatures: string[]): { response: EnqueueResponse; created: boolean } {
    if (tx.signatures.length !== signatures.length || tx.signatures.some((s, i) => s !== signatures[i])) {
      throw new RelayError('RELAY_E_TX_SIGNATURE_CONFLICT', {
        signature: signatures[0] as string,
        tx_id: tx.tx_id,
      });
    }
    this.d.metrics.enqueues.inc({ result: 'repeat' });
    return {
      response: { tx_id: tx.tx_id, state: tx.state, slot: tx.enqueued_slot, signatures: [...tx.signatures] },
      created: false,
    };
  }

  /** Enqueues refused because relay could not have sent them in time. */
  refusedForCapacity = 0;

  /**
   * What relay can send now (bundles a second across the regions taking bundles), what waits to go out (of every
   * priority, or of those at `priority`'s rank and above), and how long all of it takes to go out.
   */
  async capacity(
    priority?: Priority,
    /** Accepts under way that are the caller's own (admission compares a transaction with what is ahead of it). */
    own = 0,
  ): Promise<{
    sendRatePerSecond: number;
    /**
     * Transactions a second that land: the bundles, times what a bundle carries on average (packing), times the
     * recent share of bundles that landed.
     */
    txRatePerSecond: number;
    /** The recent share of bundles that landed, as admission counts it. */
    landedShare: number;
    waiting: number;
    ahead: number;
    expectedWaitMs: number;
  }> {
    // Accepts under way are counted as of the same moment as the store's counts (the local stores answer at
    // the call), so a concurrent accept is counted once: in one or the other.
    const accepting = this.acceptsInFlight - own;
    // This host's own backlog against its own budget: in a fleet each host sends what it owns (a fleet-wide count
    // against one host's budget refused N times too early with N hosts: `pnpm bench fleet`'s burst).
    const byPriority = (await this.d.store.counts()).ownWaiting;
    const sendRatePerSecond = this.regionsTakingBundles() * this.d.bundleEngineRps * SEND_PACING;
    const landedShare = this.landedShare();
    const txRatePerSecond = sendRatePerSecond * this.transactionsPerBundle() * landedShare;
    const policy = this.d.policy();
    const rank = (p: Priority) => PRIORITY_RANK[effectivePriority(policy, p)];
    let waiting = accepting;
    let ahead = accepting;
    for (const p of PRIORITIES) {
      waiting += byPriority[p];
      if (priority === undefined || rank(p) <= rank(priority)) ahead += byPriority[p];
    }
    return {
      sendRatePerSecond,
      txRatePerSecond,
      landedShare,
      waiting,
      ahead,
      expectedWaitMs: Math.round((waiting / txRatePerSecond) * 1000),
    };
  }

  /**
   * Refuse (429, `RELAY_E_CAPACITY_EXCEEDED`, `Retry-After`) a transaction relay could not send before its attempts
   * must stop, behind everything that goes out before it at the engines' budget: accepting it would only expire it
   * later. Deadlines are at most a blockhash's life (150 blocks): no attempt lands after the user's blockhash dies.
   */
  private async admitAgainstCapacity(
    policy: Policy,
    priority: Priority,
    expirySlots: number | null,
    /** Blocks the transaction's youngest-dying blockhash has left, when the stream showed its block (null: not known). */
    blockhashBlocksLeft: number | null,
  ): Promise<void> {
    const { txRatePerSecond, ahead, waiting } = await this.capacity(priority, 1);
    const slotMs = this.d.chain.slotMs;
    const slot = this.d.chain.slot;
    // The deadline: `expiry-slots` from now, at most a blockhash's life, and at most what the caller's own blockhash
    // has left (a `finalized` one, web3.js's default, is about 32 blocks old already; issue 30, point 5). Blocks
    // count as slots: slots can be skipped, blocks cannot, so a block takes at least a slot's time. A blockhash at or
    // past its end is left to the expiry check that follows.
    const ownDeadline = Math.min(expiresAtSlot(slot, policy, expirySlots) - slot, BLOCKHASH_MAX_AGE_BLOCKS);
    const agedBy =
      blockhashBlocksLeft !== null && blockhashBlocksLeft > 0 && blockhashBlocksLeft < ownDeadline;
    const slotsLeft = agedBy ? (blockhashBlocksLeft as number) : ownDeadline;
    const decision = admissionDecision({
      ahead,
      waiting,
      sendRatePerSecond: txRatePerSecond,
      slotMs,
      slotsLeft,
      backlogSlots: Math.min(policy['expiry-slots'], BLOCKHASH_MAX_AGE_BLOCKS),
      reserveSlots: ADMISSION_RESERVE_SLOTS,
    });
    if (decision.ok) return;
    this.refusedForCapacity++;
    this.d.metrics.enqueues.inc({ result: 'refused_capacity' });
    throw new RelayError('RELAY_E_CAPACITY_EXCEEDED', {
      ahead,
      send_rate_per_s: Math.round(txRatePerSecond * 100) / 100,
      expected_wait_s: Math.ceil(decision.expectedWaitMs / 1000),
      deadline_s: Math.floor((slotsLeft * slotMs) / 1000),
      retry_after_s: Math.ceil(decision.retryAfterMs / 1000),
      ...(agedBy ? { blockhash_blocks_left: blockhashBlocksLeft as number } : {}),
    });
  }

  private async acceptNew(
    request: ReturnType<typeof parseEnqueueRequest>,
    parsed: ReturnType<typeof parseTransaction>[],
    signatures: string[],
    policy: Policy,
    started: number,
  ): Promise<{ response: EnqueueResponse; created: boolean }> {
    const now = this.d.now();
    // Count enqueues still being validated and journaled too, or concurrent requests could all pass the check. The
    // place is taken before anything is awaited, and given back if the enqueue is refused.
    const accepting = this.acceptsInFlight;
    this.acceptsInFlight++;
    let rateReserved = false;
    const wires = parsed.map((p) => Buffer.from(p.wire).toString('base64'));
    const bundle = bundleToPrice({ tip: request.tip, wires });
    try {
      const { active } = await this.d.store.counts();
      if (active + accepting >= policy['max-queue']) {
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
      rateReserved = true;
      // What the agent will price (DESIGN §11): the write set's contention is read in the background, never awaited
      // here (an RPC call); `tx_enqueued` carries it only when a reading is cached by the time it is built.
      if (bundle && !this.d.bypass.enabled) this.d.contention.warm(bundle.writeSet);
      const nonces = parsed.map((tx) => durableNonceAccount(tx));
      // The blockhash that dies first among the user transactions (a durable nonce does not age).
      let blocksLeft: number | null = null;
      for (let i = 0; i < parsed.length; i++) {
        if (nonces[i]) continue;
        const left = this.d.blockhashes.blocksLeft(
          (parsed[i] as { recentBlockhash: string }).recentBlockhash,
        );
        if (left !== null && (blocksLeft === null || left < blocksLeft)) blocksLeft = left;
      }
      await this.admitAgainstCapacity(policy, request.priority, request.expiry_slots ?? null, blocksLeft);
      for (let i = 0; i < parsed.length; i++) {
        if (nonces[i]) continue;
        const expired = await this.d.blockhashes.expiredAtIntake(
          (parsed[i] as { recentBlockhash: string }).recentBlockhash,
        );
        if (expired) {
          throw new RelayError('RELAY_E_TX_BLOCKHASH_EXPIRED', {
            index: i,
            blockhash: (parsed[i] as { recentBlockhash: string }).recentBlockhash,
          });
        }
      }
      const slot = this.d.chain.slot;
      const txId = `tx_${newUlid(now)}`;
      const tx: StoredTx = {
        tx_id: txId,
        state: 'pending',
        priority: request.priority,
        tip: request.tip,
        max_tip: request.max_tip ?? null,
        enqueued_at: now,
        enqueued_slot: slot,
        // Only a fresh reading bounds the blockhash's life (a stale one would prove expiry too early): else none.
        ...(this.d.chain.slot - this.d.chain.blockHeightReadAtSlot <= FRESH_BLOCK_HEIGHT_SLOTS &&
        this.d.chain.blockHeight > 0
          ? { enqueued_block_height: this.d.chain.blockHeight }
          : {}),
        expires_at_slot: expiresAtSlot(slot, policy, request.expiry_slots ?? null),
        wires,
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
      // Announced once durable (the announcer stamps `ts` then; enqueued_at is when the request arrived).
      const accepted = await this.d.store.accept(
        tx,
        [
          {
            kind: 'tx_enqueued',
            data: {
              tx_id: txId,
              slot,
              priority: effectivePriority(policy, tx.priority),
              expires_at_slot: tx.expires_at_slot,
              max_tip: tx.max_tip,
              tip: tx.tip,
              ...announcedPricing(
                bundle,
                targetPercentile(policy['tip-percentile'], effectivePriority(policy, tx.priority)),
                this.d.contention,
              ),
              ts: now,
            },
          },
          statusEvent(tx, undefined, now),
        ],
        // Checked above in this process; a store shared by several hosts checks them again, fleet-wide.
        { maxQueue: policy['max-queue'], rateLimit: policy['rate-limit'] },
      );
      // Another sidecar of the fleet accepted the same transaction first: that one is the answer.
      if (!accepted.created) return this.repeat(accepted.tx, signatures);
      this.d.crashPoint?.('enqueue.journaled');
      this.d.enqueuedAt.set(txId, performance.now());
      this.d.metrics.enqueues.inc({ result: 'accepted' });
      this.d.metrics.enqueueLatency.observe((performance.now() - started) / 1000);
      this.d.metrics.transitions.inc({ state: 'pending' });
      if (this.d.bypass.enabled) void this.bypass.submit(txId);
      return {
        response: { tx_id: txId, state: 'pending', slot, signatures: [...signatures] },
        created: true,
      };
    } catch (error) {
      if (rateReserved) this.rateWindow.removeLast();
      throw error;
    } finally {
      this.acceptsInFlight--;
    }
  }
}
