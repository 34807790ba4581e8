import {
  deriveBundleId,
  feePayerDebit,
  planPack,
  isRelayError,
  isTerminalTxState,
  tipPerCu,
  type PackCandidate,
  type PackTip,
} from '@solrelay/core';
import type { RelayPorts } from '../context';
import { inFlight } from '../store/queries';
import { diagnoseUserTransactions } from '../operator/diagnose';
import { attemptKey, type StoredAttempt, type StoredTx } from '../store/records';
import { isWritableIndex, parseTransaction } from '../wire/transaction';
import { bundleFacts, wireComputeUnits } from '../chain/pricing';
import type { SendJob, SendQueue } from './queue';
import type { TipReservation } from '../operator/tippers';
import { SpendLimitReached } from '../store/store';
import { ROLLING_HOUR_MS } from '../store/spend';
import { RENT_EXEMPT_MINIMUM } from '../operator/tipper-funds';

/** Waiting bundles looked at (and simulated) for one pack: the most valuable ones, in the queue's order. */
const CANDIDATES_PER_PACK = 8;
/** A passenger whose transaction expires within this many slots rides with no one (its deadline is near). */
const PASSENGER_MIN_SLOTS_LEFT = 20;
/**
 * A passenger accepted more than this many slots ago rides with no one: its blockhash (from a block at or before
 * intake) may die inside the pack's window, and a dead member sinks the whole bundle (the lead then loses no retry,
 * but its landing waits).
 */
const PASSENGER_MAX_AGE_SLOTS = 60;
/** Passengers (and excluded transactions) remembered, most recent. */
const MEMORY = 10_000;
/** Time constant of the fading of the transactions-per-bundle average while nothing is sent. */
const PER_BUNDLE_FADE_MS = 10_000;
/** How often held passengers are checked against their carrier (a release the signals missed, a landing). */
const HOLD_CHECK_MS = 1_000;

interface Held {
  leadTxId: string;
  leadAttempt: number;
  jobs: SendJob[];
  /** When the carrier was first seen landed (the hold for its passengers' own settlement counts from then). */
  landedAt: number | null;
  /** The pack's journal write is under way: the check leaves it alone until it is answered. */
  journaling: boolean;
}

/** A carrier that landed keeps its passengers held this long at most, while their own attempts are settled. */
const LANDED_HOLD_MS = 30_000;
const LANDED_STAGES: ReadonlySet<string> = new Set(['landed', 'processed', 'confirmed', 'finalized']);

/**
 * Packing (`BUNDLE_PACK_MAX` > 1): as a bundle first goes out, waiting transactions of other callers ride in it, up
 * to four user transactions under the lead's one tip. A region takes one bundle a second, so under a backlog a pack
 * sends several transactions for one request of the budget.
 *
 * The passenger model keeps every money rule of a single bundle:
 * - only the lead's attempt changes: its bundle gains the passengers' transactions (journaled with their bytes
 *   before the send, so a resend after a crash sends the same pack). The tip is the lead's, or raised so that the
 *   pack's tip per CU ranks every member at its own bid (DESIGN §11): signed again by the same tipper on the same
 *   blockhash, within the lead's max-tip and the members' own tips together, its increase reserved on the tipper and
 *   against spend-limit as it is journaled. A passenger's own attempt stays journaled and unsent, its tip reserved.
 * - a passenger's own bundle is held (out of the queue) while the pack can land. If the pack lands, the passenger's
 *   transactions landed with it and its own attempt settles as "landed in another bundle" without paying a tip. If
 *   the pack fails, the passengers are released and go out alone. Either way at most one of the two bundles can land:
 *   a bundle is atomic, and the second one's copy of the transaction is already processed.
 * - a passenger is chosen only when it write-locks nothing the others write (but a fee payer they share, when that
 *   payer's balance covers every member's debit from it in bundle order: core `planPack`), has no address-table lookups (its locks
 *   would be unknown), its simulation and the lead's pass, its attempt was never sent, and it is not near expiry.
 *   One that sinks a pack (the engine names it, or it alone fails simulation after the window) never rides again.
 */
export class Packer {
  /** Passengers held out of the queue, by the lead attempt that carries them (`tx_id#n`). */
  private readonly held = new Map<string, Held>();
  /** Transactions that sank a pack: they go alone from now on. */
  private readonly excluded = new Set<string>();
  /** The packed bundle each recent passenger rode in (what its status events name when it lands). */
  private readonly carriers = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly d: Pick<
      RelayPorts,
      | 'blockhashes'
      | 'chain'
      | 'crashPoint'
      | 'isClosed'
      | 'log'
      | 'metrics'
      | 'now'
      | 'policy'
      | 'rpc'
      | 'store'
    >,
    private readonly queue: SendQueue,
    /** Most user transactions per bundle (1: no packing). */
    readonly maxTransactions: number,
    /** Whether an attempt's bytes have never gone to an engine (the attempt builder knows). */
    private readonly isUnsent: (txId: string, attempt: number) => boolean,
    /** The tipper pool: a pack's tip is raised on the lead's tipper (null: never raised). */
    private readonly tips: TipRaiser | null = null,
  ) {}

  get enabled(): boolean {
    return this.maxTransactions > 1;
  }

  /** Relay transactions per bundle the engine took recently (a moving average; 1 with packing off). */
  private perBundle = 1;
  private perBundleAt = 0;

  /** The engine took a bundle carrying `transactions` of relay's transactions. */
  observeSend(transactions: number): void {
    this.perBundle = this.transactionsPerBundle + (transactions - this.transactionsPerBundle) / 16;
    this.perBundleAt = this.d.now();
  }

  /**
   * What admission may count on per bundle: the recent average, fading back to 1 within seconds of idle (about
   * 10 s to lose two thirds of what it had). A burst from idle is admitted as if nothing packs; one right after a
   * packing backlog is admitted at what that backlog achieved, which a burst that cannot pack (one pool, one payer)
   * does not reach: a known limit.
   */
  get transactionsPerBundle(): number {
    if (!this.enabled) return 1;
    const idle = Math.max(0, this.d.now() - this.perBundleAt);
    return 1 + Math.max(0, this.perBundle - 1) * Math.exp(-idle / PER_BUNDLE_FADE_MS);
  }

  /** `txId` sank a pack: it never rides again. */
  exclude(txId: string): void {
    this.excluded.add(txId);
    if (this.excluded.size > MEMORY) this.excluded.delete(this.excluded.values().next().value as string);
  }

  /** The packed bundle `txId` last rode in, if it did (recent passengers only). */
  carrierOf(txId: string): string | null {
    return this.carriers.get(txId) ?? null;
  }

  private rode(txId: string, bundleId: string): void {
    this.carriers.delete(txId);
    this.carriers.set(txId, bundleId);
    if (this.carriers.size > MEMORY) this.carriers.delete(this.carriers.keys().next().value as string);
  }

  /**
   * Under the lead's lock, before its attempt's first send: choose passengers, journal the pack on the lead's
   * attempt, hold the passengers. Returns the attempt as it will be sent.
   */
  async pack(tx: StoredTx, attempt: StoredAttempt): Promise<StoredAttempt> {
    if (!this.enabled || tx.tip === 'included' || !attempt.tip_tx || !tx.wires) return attempt;
    if (this.excluded.has(tx.tx_id) || (attempt.passengers?.length ?? 0) > 0) return attempt;
    const lead = lockProfile(tx.wires);
    if (!lead || lead.lookups || lead.transactions >= this.maxTransactions) return attempt;
    // The pack's one tip over the pack's CU must rank every member at its own bid (DESIGN §11).
    const tipCu = safeComputeUnits(attempt.tip_tx);
    if (tipCu === null || lead.computeUnits === undefined) return attempt;
    lead.bidPerCu = ownBidPerCu(attempt, lead.computeUnits + tipCu);
    // The pack's tip may be raised (on the lead's tipper, within its max-tip) so that riders keep their rank.
    const maxLamports = this.raiseCeiling(tx, attempt);
    const packTip: PackTip = {
      tipLamports: attempt.tip_lamports,
      overheadCu: tipCu,
      ...(maxLamports !== null ? { maxLamports } : {}),
    };
    // A rider's own tip bounds nothing when the tip can be raised (its rank per CU is what joins it, below).
    const leadTip = maxLamports !== null ? Number.POSITIVE_INFINITY : attempt.tip_lamports;
    // The records of the jobs that might ride, read first; then the best of those that may are taken from the queue.
    const ready = this.queue.peekReady((job) => this.mayRideAtAll(job));
    const records = await this.recordsOf(ready);
    const jobs = this.queue.takeReady(
      (job) => this.mayRide(job, records.get(job.txId), leadTip),
      CANDIDATES_PER_PACK,
    );
    if (jobs.length === 0) return attempt;
    let chosen: SendJob[];
    let tipLamports = attempt.tip_lamports;
    let raise: TipReservation | null = null;
    let tip: { wire: string; signature: string } | null = null;
    try {
      const candidates: Array<PackCandidate<SendJob>> = [];
      for (const job of jobs) {
        const record = records.get(job.txId);
        const profile = record?.wires ? lockProfile(record.wires) : null;
        const own = record ? inFlight(record) : null;
        const ownTipCu = own ? safeComputeUnits(own.tip_tx) : null;
        if (profile && own && ownTipCu !== null && profile.computeUnits !== undefined)
          candidates.push({
            item: job,
            ...profile,
            bidPerCu: ownBidPerCu(own, profile.computeUnits + ownTipCu),
            tipLamports: own.tip_lamports,
          });
      }
      const [passing, payerFunds] = await Promise.all([
        this.simulateAll(tx, candidates, records),
        this.sharedPayerFunds(lead, candidates),
      ]);
      // The simulations took time: a candidate may have landed, expired or been retired meanwhile.
      const now = await this.recordsOf(passing?.map((c) => c.item) ?? []);
      for (const [id, record] of now) records.set(id, record);
      const still = passing?.filter((c) => this.mayRide(c.item, now.get(c.item.txId), leadTip)) ?? [];
      const plan = planPack(lead, still, this.maxTransactions, packTip, payerFunds);
      chosen = plan.passengers;
      if (plan.tipLamports > attempt.tip_lamports) {
        // The tipper must cover the raise beside what it has reserved; if not, only riders the lead's tip ranks.
        raise = this.tips?.raise(attempt.tipper as string, plan.tipLamports - attempt.tip_lamports) ?? null;
        if (raise) {
          // The same tipper signs the same transfer for more, on the same blockhash (the attempt is unsent, so the
          // old bytes never left relay; the compare-and-set below replaces them before anything goes out).
          tip = this.resign(attempt, raise, plan.tipLamports);
          tipLamports = plan.tipLamports;
        } else
          chosen = planPack(
            lead,
            still,
            this.maxTransactions,
            { ...packTip, maxLamports: undefined },
            payerFunds,
          ).passengers;
      }
    } catch (error) {
      this.d.log.debug({ err: error, tx_id: tx.tx_id }, 'packing skipped');
      chosen = [];
    }
    // Whatever does not ride goes back to the queue as it was (if it still waits).
    for (const job of jobs) if (!chosen.includes(job)) void this.requeueIfWaiting(job);
    if (chosen.length === 0) {
      raise?.cancel();
      return attempt;
    }
    const riders = chosen.map((job) => records.get(job.txId) as StoredTx);
    const passengers = riders.map((r) => ({ tx_id: r.tx_id, signatures: [...r.signatures] }));
    const passengerWires = riders.flatMap((r) => r.wires ?? []);
    const bundleSignatures = [
      ...tx.signatures,
      ...passengers.flatMap((p) => p.signatures),
      tip?.signature ?? (attempt.tip_signature as string),
    ];
    const bundleId = deriveBundleId(bundleSignatures);
    const packCu =
      (lead.computeUnits ?? 0) +
      (tip ? wireComputeUnits(tip.wire) : tipCu) +
      riders.reduce((sum, r) => sum + (bundleFacts(r.wires ?? [])?.computeUnits ?? 0), 0);
    const raised = tip ? `, its tip raised from ${attempt.tip_lamports} to ${tipLamports} lamports` : '';
    const decision = {
      ...attempt.decision,
      pricing: {
        compute_units: packCu,
        tip_per_cu: tipPerCu(tipLamports, packCu),
        bid_per_cu: lead.bidPerCu,
        contention: attempt.decision.pricing?.contention ?? null,
        signal: `${attempt.decision.pricing?.signal ?? 'a tip not priced per CU'}; packed with ${riders.length} rider(s)${raised}, the pack's tip per CU at least every member's bid`,
        // What a retry of the lead reprices from: its own tip and bundle, not the pack's.
        own: { tip_lamports: attempt.tip_lamports, compute_units: lead.computeUnits + tipCu },
      },
    };
    // Held before the journal write: nothing else may send a passenger from here on.
    this.held.set(attemptKey(tx.tx_id, attempt.attempt), {
      leadTxId: tx.tx_id,
      leadAttempt: attempt.attempt,
      jobs: chosen,
      landedAt: null,
      journaling: true,
    });
    this.arm();
    let packed: StoredTx;
    try {
      packed = await this.d.store.transition(
        tx.tx_id,
        { attempt: { n: attempt.attempt, stage: 'journaled', bundleId: attempt.bundle_id } },
        {
          attempts: [
            {
              n: attempt.attempt,
              set: {
                bundle_id: bundleId,
                bundle_signatures: bundleSignatures,
                passengers,
                passenger_wires: passengerWires,
                decision,
                ...(tip
                  ? {
                      tip_tx: tip.wire,
                      tip_signature: tip.signature,
                      tip_lamports: tipLamports,
                      reserved_lamports: attempt.reserved_lamports + (tipLamports - attempt.tip_lamports),
                    }
                  : {}),
              },
            },
          ],
          // The raise is reserved against spend-limit as it commits, with every other reservation.
          ...(tip
            ? { spendLimit: { limit: this.d.policy()['spend-limit'], since: this.d.now() - ROLLING_HOUR_MS } }
            : {}),
        },
      );
    } catch (error) {
      const group = this.held.get(attemptKey(tx.tx_id, attempt.attempt));
      if (group) group.journaling = false;
      // The pack may be committed after all (its answer lost): it then goes out after the re-read. Its raise stays
      // reserved (the tipper's next scan counts what the records say) and its riders stay held until the check sees
      // whether the carrier carries them.
      if (isRelayError(error, 'RELAY_E_DB_COMMIT_UNKNOWN')) {
        raise?.journaled();
        throw error;
      }
      this.release(tx.tx_id, attempt.attempt);
      raise?.cancel();
      // Over spend-limit with the raise: the lead goes as it was, alone; its riders went back to the queue.
      if (error instanceof SpendLimitReached) {
        this.d.log.debug(
          { tx_id: tx.tx_id, err: error },
          'pack not sent: its raised tip would pass spend-limit',
        );
        return attempt;
      }
      throw error;
    }
    const group = this.held.get(attemptKey(tx.tx_id, attempt.attempt));
    if (group) group.journaling = false;
    raise?.journaled();
    if (tip) this.d.metrics.packTipsRaised.inc();
    this.d.crashPoint?.('pack.journaled');
    for (const p of passengers) this.rode(p.tx_id, bundleId);
    this.d.metrics.packedBundles.inc();
    this.d.metrics.packedPassengers.inc(passengers.length);
    this.d.log.debug(
      { tx_id: tx.tx_id, bundle_id: bundleId, passengers: passengers.map((p) => p.tx_id) },
      'bundle packed',
    );
    return packed.attempts.find((a) => a.attempt === attempt.attempt) ?? attempt;
  }

  /**
   * The most a pack's tip may be raised to: the lead's `max-tip` (policy, and the caller's own), when its tip can be
   * signed again (a relay tip of a known tipper and tip account, on a blockhash read from its bytes); else null.
   */
  private raiseCeiling(tx: StoredTx, attempt: StoredAttempt): number | null {
    if (!this.tips || !attempt.tipper || !attempt.tip_account || !attempt.tip_tx) return null;
    if (!this.tips.signerOf(attempt.tipper)) return null;
    const policy = this.d.policy();
    const ceiling = tx.max_tip === null ? policy['max-tip'] : Math.min(policy['max-tip'], tx.max_tip);
    return ceiling > attempt.tip_lamports ? ceiling : null;
  }

  /** The lead's tip signed again for `lamports` by its tipper, to its tip account, on the blockhash and CU it had. */
  private resign(
    attempt: StoredAttempt,
    raise: TipReservation,
    lamports: number,
  ): { wire: string; signature: string } {
    const wire = Buffer.from(attempt.tip_tx as string, 'base64');
    const blockhash = parseTransaction(wire).recentBlockhash;
    // The same requested CU as the tip it replaces: the pack's CU, and so every member's rank, stay as planned (the
    // new amount keeps it apart from any other tip).
    const tip = raise.signer.build({
      tipAccount: attempt.tip_account as string,
      lamports,
      blockhash,
      computeUnits: wireComputeUnits(wire),
    });
    return { wire: Buffer.from(tip.wire).toString('base64'), signature: tip.signature };
  }

  /** The records of `jobs`' transactions, by id (those still stored). */
  private async recordsOf(jobs: readonly SendJob[]): Promise<Map<string, StoredTx>> {
    const records = new Map<string, StoredTx>();
    const found = await Promise.all(jobs.map((job) => this.d.store.get(job.txId)));
    for (const record of found) if (record) records.set(record.tx_id, record);
    return records;
  }

  /** What a job's own facts allow before its record is read: not excluded, a first send of this process. */
  private mayRideAtAll(job: SendJob): boolean {
    return !this.excluded.has(job.txId) && this.isUnsent(job.txId, job.attempt);
  }

  /**
   * A waiting job that may ride under a tip of `leadTip`: a first send of a relay-tipped transaction whose own tip is
   * no higher (it would bid less than it chose), no durable nonce (it can advance under it), accepted recently (its
   * blockhash is young) and not near its deadline.
   */
  private mayRide(job: SendJob, record: StoredTx | undefined, leadTip: number): boolean {
    if (!this.mayRideAtAll(job)) return false;
    if (!record || record.state !== 'pending' || record.tip === 'included' || !record.wires) return false;
    if (record.nonce_accounts.some((n) => n !== null)) return false;
    const flying = inFlight(record);
    if (!flying || flying.attempt !== job.attempt || flying.stage !== 'journaled') return false;
    if ((flying.passengers?.length ?? 0) > 0 || flying.tip_lamports > leadTip) return false;
    if (this.d.chain.slot - record.enqueued_slot > PASSENGER_MAX_AGE_SLOTS) return false;
    return this.d.chain.deadlineOf(record) - this.d.chain.slot >= PASSENGER_MIN_SLOTS_LEFT;
  }

  /**
   * A pack was refused or failed in a way no member is named for: none of its transactions rides again (each goes
   * alone and meets its own verdict).
   */
  excludeAll(txId: string, attempt: StoredAttempt): void {
    this.exclude(txId);
    for (const p of attempt.passengers ?? []) this.exclude(p.tx_id);
  }

  /**
   * Why a passenger of `attempt` (which did not land) is to blame, if one is: it is gone or no longer waiting, its
   * blockhash or nonce is dead, it was processed some other way, or it cannot execute. The lead then loses no retry.
   */
  async faultOf(attempt: StoredAttempt): Promise<{ txId: string; detail: string } | null> {
    for (const p of attempt.passengers ?? []) {
      const rider = await this.d.store.get(p.tx_id);
      if (!rider || !rider.wires || rider.state !== 'pending')
        return { txId: p.tx_id, detail: `it is ${rider ? rider.state : 'gone'}` };
      try {
        if (await this.d.blockhashes.anyUserBlockhashDead(rider))
          return { txId: p.tx_id, detail: 'its blockhash (or nonce) is dead' };
        const read = await this.d.rpc.getSignatureStatusesWithContext(rider.signatures, {
          searchTransactionHistory: false,
        });
        if (read.statuses.some((status) => status !== null))
          return { txId: p.tx_id, detail: 'it was processed outside the bundle' };
      } catch {
        /* RPC cannot say now: the simulation below may */
      }
      const fault = await diagnoseUserTransactions(this.d.rpc, rider, this.d.chain.slot).catch(() => null);
      if (fault) return { txId: p.tx_id, detail: fault.detail };
    }
    return null;
  }

  /**
   * Simulate the lead and the candidates at once; null when the lead fails or RPC cannot say (the lead then goes
   * alone: a pack must not be sunk by a lead that cannot execute). Candidates that fail stay out.
   */
  private async simulateAll(
    lead: StoredTx,
    candidates: Array<PackCandidate<SendJob>>,
    records: ReadonlyMap<string, StoredTx>,
  ): Promise<Array<PackCandidate<SendJob>> | null> {
    const wiresOf = (t: StoredTx) => (t.wires ?? []).map((w) => Buffer.from(w, 'base64'));
    const runs = async (wires: Buffer[]) => {
      for (const wire of wires) if ((await this.d.rpc.simulate(wire)) !== null) return false;
      return true;
    };
    const [leadOk, ...results] = await Promise.all([
      runs(wiresOf(lead)),
      ...candidates.map((c) => {
        const record = records.get(c.item.txId);
        return record ? runs(wiresOf(record)).catch(() => false) : Promise.resolve(false);
      }),
    ]);
    if (!leadOk) return null;
    return candidates.filter((_, i) => results[i] === true);
  }

  /**
   * What each fee payer that the lead and a candidate (or two candidates) both pay from can spend: its balance at
   * `processed` (the state the simulations ran on) less the rent-exempt minimum. Only the payers whose debits are all
   * known are read; a read that fails leaves that payer unshared.
   */
  private async sharedPayerFunds(
    lead: Pick<PackCandidate<SendJob>, 'payerDebits'>,
    candidates: ReadonlyArray<PackCandidate<SendJob>>,
  ): Promise<Map<string, number>> {
    const seen = new Map<string, number>();
    for (const member of [lead, ...candidates])
      for (const payer of Object.keys(member.payerDebits ?? {})) seen.set(payer, (seen.get(payer) ?? 0) + 1);
    const shared = [...seen].filter(([, n]) => n > 1).map(([payer]) => payer);
    const funds = new Map<string, number>();
    await Promise.all(
      shared.map(async (payer) => {
        try {
          funds.set(payer, (await this.d.rpc.getBalance(payer, 'processed')) - RENT_EXEMPT_MINIMUM);
        } catch {
          /* unread: not shared */
        }
      }),
    );
    return funds;
  }

  /** The lead's attempt ended (settled failed): its passengers go back to the queue at once. */
  release(leadTxId: string, leadAttempt: number): void {
    const group = this.held.get(attemptKey(leadTxId, leadAttempt));
    if (!group) return;
    this.held.delete(attemptKey(leadTxId, leadAttempt));
    for (const job of group.jobs) void this.requeueIfWaiting(job);
  }

  /**
   * After a restart: a journaled or submitted pack still carries its passengers. They are held again rather than
   * sent alone beside it. Returns the transactions held.
   */
  async adoptAfterRestart(only?: ReadonlySet<string>): Promise<Set<string>> {
    const heldIds = new Set<string>();
    for (const tx of await this.d.store.live()) {
      // Adopted from another host (`only`): its packs alone; the ones this host held already stay as they are.
      if (only && !only.has(tx.tx_id)) continue;
      const flying = inFlight(tx);
      if (!flying?.passengers?.length) continue;
      const jobs: SendJob[] = [];
      for (const p of flying.passengers) {
        const rider = await this.d.store.get(p.tx_id);
        const own = rider ? inFlight(rider) : null;
        if (!rider || !own) continue;
        const job = this.queue.jobFor(rider, own.attempt);
        if (!ownAttemptWaiting(rider, job)) continue;
        jobs.push(job);
        this.rode(rider.tx_id, flying.bundle_id);
        heldIds.add(rider.tx_id);
      }
      if (jobs.length)
        this.held.set(attemptKey(tx.tx_id, flying.attempt), {
          leadTxId: tx.tx_id,
          leadAttempt: flying.attempt,
          jobs,
          landedAt: null,
          journaling: false,
        });
    }
    if (this.held.size) this.arm();
    return heldIds;
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async requeueIfWaiting(job: SendJob): Promise<void> {
    let record: StoredTx | undefined;
    try {
      record = await this.d.store.get(job.txId);
    } catch {
      // The store could not say (the database away): back to the queue; its send re-reads the record first.
      this.queue.push({ ...job, notBefore: this.d.now() + 1_000 });
      return;
    }
    if (ownAttemptWaiting(record, job)) this.queue.push({ ...job, notBefore: this.d.now() });
  }

  /**
   * Each second: a group whose carrier failed or is gone lets its passengers go (the settle signal usually did it
   * first). One whose carrier landed waits until the passengers' own attempts are settled by their landing, so their
   * own bundles are not sent for nothing; a passenger still waiting after LANDED_HOLD_MS (a block broken up, its
   * transactions re-broadcast alone) goes back to the queue.
   */
  private arm(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.d.isClosed()) return this.close();
      if (this.checking) return;
      this.checking = true;
      void this.checkHeld()
        .catch((error: unknown) => this.d.log.debug({ err: error }, 'held passengers check failed'))
        .finally(() => {
          this.checking = false;
        });
    }, HOLD_CHECK_MS);
    this.timer.unref();
  }

  private checking = false;

  private async checkHeld(): Promise<void> {
    const now = this.d.now();
    for (const group of [...this.held.values()]) {
      if (group.journaling) continue;
      const lead = await this.d.store.get(group.leadTxId);
      const carrier = lead?.attempts.find((a) => a.attempt === group.leadAttempt);
      // Held only while the carrier's committed pack carries them (a pack whose commit went unanswered may not).
      const carries = group.jobs.every((job) => carrier?.passengers?.some((p) => p.tx_id === job.txId));
      if (carrier && carries && (carrier.stage === 'journaled' || carrier.stage === 'submitted')) continue;
      if (carrier && LANDED_STAGES.has(carrier.stage)) {
        group.landedAt ??= now;
        const riders = await Promise.all(group.jobs.map((job) => this.d.store.get(job.txId)));
        const waiting = group.jobs.some((job, i) => ownAttemptWaiting(riders[i], job));
        if (waiting && now - group.landedAt < LANDED_HOLD_MS) continue;
      }
      this.release(group.leadTxId, group.leadAttempt);
    }
    if (this.held.size === 0) this.close();
  }
}

/** Whether a held passenger's own attempt is still journaled, unsent (its transaction still waiting on it). */
function ownAttemptWaiting(record: StoredTx | undefined, job: SendJob): boolean {
  const own = record ? inFlight(record) : null;
  return (
    !!record && !isTerminalTxState(record.state) && own?.attempt === job.attempt && own.stage === 'journaled'
  );
}

/** Requested CU of a base64 wire, or null when there is none or it does not parse. */
function safeComputeUnits(wire: string | null): number | null {
  if (!wire) return null;
  try {
    return wireComputeUnits(wire);
  } catch {
    return null;
  }
}

/**
 * The rank an attempt's transaction needs, lamports per requested CU: the bid its decider priced per CU, else its own
 * tip over its own bundle's CU (`ownCu`: its user transactions and its tip transaction).
 */
function ownBidPerCu(attempt: StoredAttempt, ownCu: number): number {
  return attempt.decision.pricing?.bid_per_cu ?? tipPerCu(attempt.tip_lamports, ownCu);
}

/** What a transaction list locks (static keys), its requested CU and marker, for packing; null when a wire does not parse. */
function lockProfile(wires: readonly string[]): Omit<PackCandidate<never>, 'item'> | null {
  const facts = bundleFacts(wires);
  if (!facts) return null;
  try {
    const writeLocks: string[] = [];
    const readLocks: string[] = [];
    let lookups = false;
    // What each transaction takes from its fee payer, when its bytes say it all (same-payer packs, DESIGN §11).
    let payerDebits: Record<string, number> | undefined = {};
    for (const wire of wires) {
      const parsed = parseTransaction(Buffer.from(wire, 'base64'));
      if (parsed.addressTableLookups > 0) lookups = true;
      parsed.accountKeys.forEach((account, index) => {
        (isWritableIndex(parsed, index) ? writeLocks : readLocks).push(account);
      });
      const payer = parsed.accountKeys[0] as string;
      const debit = feePayerDebit(
        payer,
        parsed.signatures.length,
        parsed.instructions.map((ix) => ({
          program: parsed.accountKeys[ix.programIdIndex] ?? '',
          data: ix.data,
          accounts: ix.accountIndexes.map((i) => parsed.accountKeys[i] ?? ''),
        })),
      );
      if (payerDebits && debit !== null) payerDebits[payer] = (payerDebits[payer] ?? 0) + debit;
      else payerDebits = undefined;
    }
    return {
      transactions: wires.length,
      writeLocks,
      readLocks,
      lookups,
      computeUnits: facts.computeUnits,
      dontFront: facts.dontFront,
      ...(payerDebits ? { payerDebits } : {}),
    };
  } catch {
    return null;
  }
}

/** What packing asks of the tipper pool: a raise of a tip on its tipper, and that tipper's signer. */
export interface TipRaiser {
  raise(pubkey: string, extraLamports: number): TipReservation | null;
  signerOf(pubkey: string | null): { build: TipReservation['signer']['build'] } | null;
}
