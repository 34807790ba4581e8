import { classifyGrpcBundleResult, isRetryableOutcome, lossGrace } from '@solrelay/core';
import { recheckEngineFailure } from '../operator/diagnose';
import type { RelayPorts } from '../context';
import type { Expiry } from '../settle/expiry';
import type { Settler } from '../settle/settle';
import { inFlight, signaturesOf } from '../store/queries';
import type { StoredTx } from '../store/records';
import type { BundleResultMessage } from '../upstream/block-engine';
import { MAX_SIGNATURES_PER_STATUS_CALL } from '../upstream/solana-rpc';
import type { Evaluator } from './evaluate';
import { attributeFault, type FaultApplier } from './fault';
import { TIP_LANDING_HORIZON_SLOTS, tipStillLive, type StatusMap } from './judge';
import { readStatusesInto } from './read-statuses';

/**
 * What starts a status pass: the once-a-slot tick; a hint that something landed (the stream saw a signature, the
 * engine reported a landing); under Alpenglow, the stream reporting a slot finalized (`final`: landings up to it are
 * read at once, not at the next slot's pass); a full re-read after a reconnect (confirmed transactions included, due
 * or not).
 */
export type TrackKind = 'slot' | 'hint' | 'final' | 'full';
/**
 * A node's status cache answers for the last ~300 rooted slots (Agave's MAX_CACHE_ENTRIES); older landings only a
 * history search finds. Past this many rooted slots relay searches, with room to spare.
 */
const STATUS_CACHE_SAFE_ROOTED_SLOTS = 250;
const TRACK_RANK: Record<TrackKind, number> = { hint: 0, final: 1, slot: 2, full: 3 };
/** Passes that read only what was named (hinted signatures, landings a finalized slot covers), not everything due. */
const isNarrow = (kind: TrackKind): boolean => kind === 'hint' || kind === 'final';
/** Transactions a status pass judges at once. */
const EVALUATE_CONCURRENCY = 64;
/** Hinted passes start at least this far apart. */
const MIN_HINTED_PASS_GAP_MS = 150;
/** Without finalized-slot reports from the stream, confirmed transactions are read every this many slots. */
const CONFIRMED_POLL_EVERY_SLOTS = 4;
/** Finalized-slot reports count as flowing while the last one came within this many slots. */
const FINALIZED_REPORT_FRESH_SLOTS = 64;

/**
 * The tracker: schedules status passes (each slot, on hints from the stream or the engine, a full one after a
 * reconnect), reads the statuses of what is worth reading, and has each transaction evaluated under its lock;
 * the slot's pass also checks expiry. Dead slots and gRPC bundle results come in here too.
 */
export class Tracker {
  private lastTrackedSlot = 0;
  private tracking = false;
  private trackAgain: TrackKind | null = null;
  /** Signatures the stream saw land since the last pass began (read at the next pass). */
  private hinted = new Set<string>();
  /** The expiry check under way, if any. */
  private expiryRunning: Promise<void> | null = null;
  /** Whether the stream is connected and delivering (so a landing of relay's tips shows on it). */
  private streamWatching: () => boolean = () => false;

  constructor(
    private readonly d: Pick<
      RelayPorts,
      'chain' | 'isClosed' | 'locks' | 'log' | 'metrics' | 'now' | 'rpc' | 'store'
    >,
    private readonly settle: Settler,
    private readonly evaluator: Evaluator,
    private readonly expiry: Expiry,
    /** Applies the verdict on whose fault a lost attempt was. */
    private readonly faults: Pick<FaultApplier, 'apply'>,
  ) {}

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
    for (const signature of signaturesOf(tx)) if (hinted.has(signature)) return true;
    if (kind === 'hint') return false;
    if (kind === 'final')
      return (
        (tx.state === 'landed' || tx.state === 'processed' || tx.state === 'confirmed') &&
        tx.landed_slot !== null &&
        tx.landed_slot <= this.d.chain.finalizedSlot
      );
    // An included-tip transaction's payer joins the stream's filter only every few slots: read it as before.
    const watching = tx.tip !== 'included' && this.streamWatching();
    switch (tx.state) {
      case 'landed':
      case 'processed':
        return true;
      case 'confirmed':
        return this.confirmedDue(tx);
      default: {
        const flying = inFlight(tx);
        // Its user transactions may still land on their own (not through relay), which the stream need not show.
        if (!flying) return this.d.chain.slot % CONFIRMED_POLL_EVERY_SLOTS === 0;
        if (!watching || flying.stage !== 'submitted' || flying.window_end_slot === null) return true;
        return (
          this.d.chain.slot > flying.window_end_slot + lossGrace(this.d.chain.consensus.snapshot().kind).slots
        );
      }
    }
  }

  /**
   * The stream reports a slot finalized (rooted): confirmed transactions up to it are worth a status read. Under
   * Alpenglow one certificate confirms and finalizes a slot ~100–150 ms after it is processed (agave PR 10063), well
   * inside a slot, so the landings it covers are read now rather than at the next slot's pass (which cost up to a
   * slot of `landed -> finalized`). Under TowerBFT the slot's pass reads them (a rooted slot is ~32 slots old; a
   * few hundred ms more is noise, and an extra pass per slot is not).
   */
  onFinalizedSlot(slot: number): void {
    const advanced = slot > this.d.chain.finalizedSlot;
    this.d.chain.finalized(slot);
    if (advanced && this.d.chain.consensus.snapshot().kind === 'alpenglow') void this.track('final');
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
    if (this.d.chain.slot - this.d.chain.finalizedReportedAt <= FINALIZED_REPORT_FRESH_SLOTS)
      return this.d.chain.finalizedSlot >= tx.landed_slot;
    return this.d.chain.slot % CONFIRMED_POLL_EVERY_SLOTS === 0;
  }

  /** A slot was abandoned: whatever landed in it is back to pending. */
  async onDeadSlot(slot: number): Promise<void> {
    // Status reads taken before this moment may still show the slot's signatures: ignore them from now on.
    if (this.d.chain.markDead(slot)) this.d.metrics.deadSlots.inc();
    for (const tx of await this.d.store.landedIn(slot)) {
      if (tx.state !== 'landed' && tx.state !== 'processed') continue;
      await this.d.locks.run(tx.tx_id, () => this.settle.unland(tx.tx_id, slot));
    }
  }

  /** A transaction status seen on the stream (tip transactions, and payers of tip-included transactions). */
  onStreamTransaction(signature: string): void {
    // A status on the stream is a hint to read that transaction's statuses now rather than at a later pass.
    this.hinted.add(signature);
    void this.track('hint');
  }

  /** The gRPC transport's push results: auction losses, simulation failures and drops settle an attempt at once. */
  async onBundleResult(result: BundleResultMessage): Promise<void> {
    const owner = await this.d.store.byBundle(result.bundleId);
    if (!owner) return;
    const txId = owner.tx_id;
    const report = classifyGrpcBundleResult(result);
    if (report.kind === 'landed') {
      for (const signature of signaturesOf(owner)) this.hinted.add(signature);
      void this.track('hint');
      return;
    }
    if (report.kind !== 'outcome') return;
    await this.d.locks.run(txId, async () => {
      const tx = await this.d.store.get(txId);
      const attempt = tx?.attempts.find((a) => a.bundle_id === result.bundleId);
      if (!tx || !attempt || attempt.stage !== 'submitted') return;
      // Which transaction failed decides whose fault it is: relay's tip, a rider, the pack, the user or the auction.
      const cause = {
        source: 'engine-result' as const,
        outcome: report.outcome,
        detail: report.detail,
        failedSignature: result.rejected?.simulationFailure?.txSignature ?? null,
      };
      let verdict = attributeFault(tx, attempt, cause);
      if (verdict.blame === 'user' && !isRetryableOutcome(verdict.outcome)) {
        // A fatal verdict from the engine's bank, which may lag: re-checked on relay's own view first.
        const engineRecheck = await recheckEngineFailure(
          this.d.rpc,
          tx,
          cause.failedSignature,
          this.d.chain.slot,
        );
        this.d.metrics.engineVerdictRechecks.inc({ result: engineRecheck.kind });
        verdict = attributeFault(tx, attempt, cause, { engineRecheck });
      }
      await this.faults.apply(tx, attempt, verdict);
    });
  }

  /**
   * Read the statuses of every signature relay is following and move transactions accordingly. Runs each slot or
   * two, and at once when the stream hints that something landed.
   */
  /**
   * The tips of a terminal transaction's lost attempts that can still land on their own. An uncled block's
   * transactions are re-broadcast one at a time, so such a tip can land (and be paid) after the user transactions
   * finalized another way; the fault matrix met one under load that no one reported. They are read until their
   * blockhash is dead and a landing would have been confirmed; a hinted pass reads only the hinted ones.
   */
  private lateTipsOf(tx: StoredTx, kind: TrackKind, hinted: ReadonlySet<string>): string[] {
    const tips: string[] = [];
    for (const a of tx.attempts) {
      if (!a.tip_signature || a.leaked || a.stage !== 'failed') continue;
      if (!tipStillLive(a, this.d.chain)) continue;
      if (isNarrow(kind) && !hinted.has(a.tip_signature)) continue;
      tips.push(a.tip_signature);
    }
    return tips;
  }

  /**
   * The user signatures of a failed or expired transaction, watched while its blockhash could still be live (a
   * landing then would break the terminal state's proof: `Evaluator.checkLandedAfterTerminal`). Durable-nonce
   * transactions have no blockhash life to bound the watch and are left out.
   */
  private afterTerminal(tx: StoredTx, kind: TrackKind, hinted: ReadonlySet<string>): string[] {
    if (tx.state !== 'failed' && tx.state !== 'expired') return [];
    if (tx.nonce_accounts.some((n) => n !== null)) return [];
    if (this.d.chain.slot - tx.enqueued_slot > 2 * TIP_LANDING_HORIZON_SLOTS) return [];
    if (isNarrow(kind) && !tx.signatures.some((s) => hinted.has(s))) return [];
    return [...tx.signatures];
  }

  /** The earliest slot a transaction's user transactions could have landed in (the caller may have sent them too). */
  private earliestLanding(tx: StoredTx): number {
    return tx.landed_slot ?? tx.enqueued_slot;
  }

  async track(kind: TrackKind = 'slot'): Promise<void> {
    if (this.d.isClosed()) return;
    if (kind === 'slot' && this.d.chain.slot - this.lastTrackedSlot < 1) return;
    if (this.tracking) {
      // Asked for during a pass: one more pass after it (the running one may have read before the news), the
      // widest of what was asked.
      if (this.trackAgain === null || TRACK_RANK[kind] > TRACK_RANK[this.trackAgain]) this.trackAgain = kind;
      return;
    }
    this.tracking = true;
    // A narrow pass reads only what it was told of: the slot's pass over everything is still due.
    if (!isNarrow(kind)) this.lastTrackedSlot = this.d.chain.slot;
    const startedAt = this.d.now();
    const hinted = this.hinted;
    this.hinted = new Set();
    try {
      const followed: StoredTx[] = [];
      // Terminal transactions whose lost attempts' tips can still land on their own (see `lateTipsOf`).
      const lateWatched: StoredTx[] = [];
      // One group per transaction (its user signatures, then the tip signatures of attempts that could still land),
      // packed into calls without splitting a group: a tip and its bundle are then always read at the same moment,
      // so a landed bundle is never mistaken for a tip that landed alone.
      // Transactions that could have landed before the node's status cache begins (~300 rooted slots: one relay
      // was down for minutes, or one pending that long) are read from the history instead, in chunks of their own.
      const chunks: string[][] = [[]];
      const historic: string[][] = [[]];
      const pack = (group: string[], into: string[][] = chunks) => {
        let current = into[into.length - 1] as string[];
        if (current.length + group.length > MAX_SIGNATURES_PER_STATUS_CALL) {
          current = [];
          into.push(current);
        }
        current.push(...group);
      };
      const cacheBegins = this.d.chain.finalizedSlot - STATUS_CACHE_SAFE_ROOTED_SLOTS;
      // Ended transactions whose lost tips may still land: attempts built within three horizons (a tip's life is
      // counted in blocks and skipped slots make a block span more than one slot; a tip re-signed at its first send
      // lives from then, up to a blockhash's life after the attempt was built); `lateTipsOf` decides exactly.
      const { live, ended } = await this.d.store.followed(this.d.chain.slot - 3 * TIP_LANDING_HORIZON_SLOTS);
      for (const tx of ended) {
        const late = [...this.afterTerminal(tx, kind, hinted), ...this.lateTipsOf(tx, kind, hinted)];
        if (late.length > 0) {
          lateWatched.push(tx);
          pack(late);
        }
      }
      for (const tx of live) {
        if (tx.attempts.length === 0 && tx.state === 'pending') continue;
        if (!this.worthReading(tx, kind, hinted)) continue;
        followed.push(tx);
        const group = [...tx.signatures];
        for (const a of tx.attempts) {
          // A tip transaction is only good for ~150 blocks; older ones cannot land any more.
          if (
            a.tip_signature &&
            !a.leaked &&
            this.d.chain.slot - a.created_slot <= TIP_LANDING_HORIZON_SLOTS
          ) {
            group.push(a.tip_signature);
          }
        }
        pack(group, this.earliestLanding(tx) < cacheBegins ? historic : chunks);
      }
      const statuses: StatusMap = new Map();
      // The statuses show the chain as of (at least) this slot and time. A pass over many transactions can take
      // longer than a slot, so "not landed" is judged against these, never against the slot reached meanwhile.
      const readAt: { slot: number; ts: number; contextSlot?: number } = {
        slot: this.d.chain.slot,
        ts: this.d.now(),
      };
      let contextSlot = Number.POSITIVE_INFINITY;
      for (const [list, searchTransactionHistory] of [
        [chunks, false],
        [historic, true],
      ] as const) {
        for (const chunk of list) {
          if (chunk.length === 0) continue;
          const read = await readStatusesInto(this.d.rpc, chunk, statuses, { searchTransactionHistory });
          if (read > 0) contextSlot = Math.min(contextSlot, read); // 0: the answer had no context
        }
      }
      if (Number.isFinite(contextSlot)) readAt.contextSlot = contextSlot;
      // Transactions are independent (each under its own lock), so they are judged many at a time: one after
      // another, every state change waited for its own journal fsync, and a pass over a few thousand landings took
      // tens of seconds under load; together, their writes share group commits.
      for (let i = 0; i < followed.length; i += EVALUATE_CONCURRENCY) {
        const judged = await Promise.allSettled(
          followed
            .slice(i, i + EVALUATE_CONCURRENCY)
            .map((tx) =>
              this.d.locks.run(tx.tx_id, () => this.evaluator.evaluate(tx.tx_id, statuses, readAt)),
            ),
        );
        for (const result of judged)
          if (result.status === 'rejected')
            this.d.log.debug({ err: result.reason }, 'status evaluation failed');
      }
      for (const tx of lateWatched)
        await this.d.locks
          .run(tx.tx_id, () => this.evaluator.watchLateTips(tx.tx_id, statuses))
          .catch((error: unknown) => this.d.log.debug({ err: error }, 'late tip check failed'));
      // Expiry moves with slots: the slot's pass starts it, not every hinted one. It runs beside the passes (one
      // at a time): its RPC reads must not hold the next status pass up.
      if (!isNarrow(kind) && !this.expiryRunning)
        this.expiryRunning = this.expiry
          .checkExpiry()
          .catch((error: unknown) => this.d.log.debug({ err: error }, 'expiry check failed'))
          .finally(() => {
            this.expiryRunning = null;
          });
    } catch (error) {
      this.d.log.debug({ err: error }, 'status poll failed');
    } finally {
      this.tracking = false;
      const again = this.trackAgain;
      this.trackAgain = null;
      if (again && !this.d.isClosed()) {
        // Under load the stream hints at a landing every few ms: spacing the passes keeps tracking from taking
        // the whole event loop, and costs a hinted landing at most this long.
        const wait = isNarrow(again) ? Math.max(0, startedAt + MIN_HINTED_PASS_GAP_MS - this.d.now()) : 0;
        const timer = setTimeout(() => void this.track(again), wait);
        timer.unref();
      }
    }
  }
}
