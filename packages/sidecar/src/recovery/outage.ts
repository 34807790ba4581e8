import { RelayError } from '@solrelay/core';
import { tipStillLive } from '../chain/tip-life';
import type { RelayPorts } from '../context';
import type { Packer } from '../send/packer';
import type { SendQueue } from '../send/queue';
import type { DatabaseAvailability } from '../store/pg-store';
import { DATABASE_RETRY_AFTER_S } from '../store/pg-store';
import { inFlight } from '../store/queries';
import type { StoredAttempt } from '../store/records';
import { tipKey, type TipRef } from '../store/store';

/** While new tips wait on the tips of before an outage, they are re-read this often. */
const RECHECK_MS = 500;

/** A tip waited on: what this process held of its attempt when the database came back. */
interface WaitingTip extends TipRef {
  held: StoredAttempt;
}

/** Stages in which an attempt's bundle (its tip with it) is on chain. */
const LANDED_STAGES: ReadonlySet<StoredAttempt['stage']> = new Set([
  'landed',
  'processed',
  'confirmed',
  'finalized',
]);

/**
 * After the database went away (DESIGN §10, "Operating PostgreSQL"): no new tip while it is away (the store could
 * not commit one anyway, and nothing is sent that is not committed). Once it is back, every tip this process holds
 * unsettled is looked up in the database itself: a restart or a failover may have lost what relay believed committed,
 * or committed what relay was told was unknown (those records are re-read first), and the database is the truth.
 *
 * - A tip the database holds on that attempt is known again: it is followed, settled and reported as before the
 *   outage, and a transaction's next tip goes out only in a bundle with its own user transaction, which can land
 *   once. Nothing waits on it.
 * - A tip this process sent that the database does not hold (an acknowledged commit the server lost) is one nothing
 *   else follows: no new tip is built, for any transaction, until it is proven landed or dead.
 *
 * Meanwhile what was committed is resent as it is (its bytes, never new ones) and tracked as usual.
 *
 * Where this departs from DESIGN §10 ("no new tips until every unsettled tip is proven dead or landed"): proving
 * every tip dead holds all new tips for up to a blockhash's life plus the late-landing margin (~73 s at 400 ms
 * slots), longer than a user transaction accepted meanwhile lives (150 blocks from its enqueue); a 2 s restart of
 * the database expired every transaction accepted around it. The hold is kept for the tips it exists for.
 *
 * A tip is *landed* when its attempt reached `landed` or later, or its tip was seen landing alone (`leaked`); *dead*
 * when its blockhash is past its last valid block height with the margin a late landing needs to be confirmed
 * (`tipStillLive`).
 */
export class OutageGate {
  private state: 'open' | 'down' | 'rereading' = 'open';
  private outage: { url: string; reason: string } | null = null;
  /** Tips this process sent that the database did not hold when it came back, not yet proven landed or dead. */
  private waiting: WaitingTip[] = [];
  /** Whether `waiting` is listed for the latest return of the database. */
  private listed = false;
  /** Bumped at each change: a re-read begun before the latest change stops. */
  private generation = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly d: Pick<RelayPorts, 'chain' | 'isClosed' | 'log' | 'store'>,
    private readonly queue: Pick<SendQueue, 'has' | 'queueSend'>,
    private readonly packer: Pick<Packer, 'carrierOf'>,
  ) {}

  /** The store's news: the database went away, or came back. */
  onAvailability(change: DatabaseAvailability): void {
    this.generation++;
    this.stopTimer();
    this.listed = false;
    if (change.kind === 'down') {
      this.state = 'down';
      this.outage = { url: change.url, reason: change.reason };
      this.waiting = [];
      return;
    }
    this.state = 'rereading';
    void this.reread(this.generation);
  }

  /**
   * Whether a new tip may be built now; throws why not: the database unavailable (`RELAY_E_DB_UNAVAILABLE`, with
   * `Retry-After`), or tips of before the outage not yet proven landed or dead (`RELAY_E_NOT_READY`). The attempt
   * builder asks before it builds a tip and again just before it commits one.
   */
  assertMayTip(): void {
    if (this.state === 'down') {
      const outage = this.outage as { url: string; reason: string };
      throw new RelayError('RELAY_E_DB_UNAVAILABLE', {
        url: outage.url,
        reason: outage.reason,
        retry_after_s: DATABASE_RETRY_AFTER_S,
      });
    }
    if (this.state === 'rereading')
      throw new RelayError('RELAY_E_NOT_READY', { reason: this.held as string });
  }

  /** Why new tips are held (readiness says so), or null. */
  get held(): string | null {
    if (this.state === 'open') return null;
    if (this.state === 'down') return 'database: new tips held until the database is back';
    if (!this.listed) return 'database: back after an outage; new tips held until in-flight work is re-read';
    return `database: back after an outage; new tips held until ${this.waiting.length} tip(s) relay sent that the database does not hold are proven landed or dead`;
  }

  stop(): void {
    this.generation++;
    this.stopTimer();
  }

  /**
   * The database is back: resend what is committed and unsent (the same bytes), list the unsettled tips, ask the
   * database which it holds, and wait on the others until each is landed or dead. A failure (the database gone again) ends this re-read: the next `up` starts
   * another; any other failure tries again shortly.
   */
  private async reread(generation: number): Promise<void> {
    try {
      const live = await this.d.store.live();
      if (generation !== this.generation) return;
      const unsettled: WaitingTip[] = [];
      const resends: Array<{ tx: (typeof live)[number]; attempt: number; tip: WaitingTip | null }> = [];
      for (const tx of live) {
        const flying = inFlight(tx);
        if (!flying) continue;
        const tip: WaitingTip | null =
          flying.tip_signature === null
            ? null
            : { txId: tx.tx_id, attempt: flying.attempt, tipSignature: flying.tip_signature, held: flying };
        if (tip) unsettled.push(tip);
        // Committed and maybe never sent (its send was cut off, or its commit's answer was lost): the same bytes.
        if (
          flying.stage === 'journaled' &&
          tx.wires &&
          !this.queue.has(tx.tx_id, flying.attempt) &&
          this.packer.carrierOf(tx.tx_id) === null
        )
          resends.push({ tx, attempt: flying.attempt, tip });
      }
      // Which of them the database itself holds (read from it now, not from what this process holds).
      const known = await this.d.store.heldTips(unsettled);
      if (generation !== this.generation) return;
      this.waiting = unsettled.filter((tip) => !known.has(tipKey(tip)));
      // Resent only if the database holds its tip: bytes it does not hold are never sent (DESIGN §10, rule 1).
      let resent = 0;
      for (const r of resends) {
        if (r.tip && !known.has(tipKey(r.tip))) continue;
        this.queue.queueSend(r.tx, r.attempt);
        resent++;
      }
      this.listed = true;
      this.d.log[this.waiting.length > 0 ? 'warn' : 'info'](
        { unsettled_tips: unsettled.length, not_in_database: this.waiting.length, resent },
        this.waiting.length > 0
          ? 'database back without tips relay sent: new tips wait until those are proven landed or dead'
          : 'database back: re-read in-flight work; every unsettled tip is in the database',
      );
      await this.recheck(generation);
    } catch {
      if (generation !== this.generation || this.d.isClosed()) return;
      // The store reports a new outage itself (which starts a new generation); anything else: try again.
      this.timer = setTimeout(() => {
        this.timer = null;
        if (generation === this.generation) void this.reread(generation);
      }, RECHECK_MS);
      this.timer.unref();
    }
  }

  /** Look again at the tips still waiting; open the gate once none is, else look again shortly. */
  private async recheck(generation: number): Promise<void> {
    if (generation !== this.generation || this.d.isClosed()) return;
    const still: WaitingTip[] = [];
    try {
      for (const entry of this.waiting) {
        // What the store holds of it now (the database may have it by now, settled), else what this process sent.
        const stored = (await this.d.store.get(entry.txId))?.attempts.find(
          (a) => a.attempt === entry.attempt && a.tip_signature === entry.tipSignature,
        );
        if (!this.settled(stored ?? entry.held)) still.push(entry);
      }
    } catch {
      if (generation !== this.generation) return;
      this.later(generation);
      return;
    }
    if (generation !== this.generation) return;
    this.waiting = still;
    if (still.length > 0) {
      this.later(generation);
      return;
    }
    this.state = 'open';
    this.outage = null;
    this.d.log.info('database: new tips resume');
  }

  /** Landed, or its blockhash dead (with the late-landing margin) whatever relay last judged of its bundle. */
  private settled(attempt: StoredAttempt): boolean {
    if (LANDED_STAGES.has(attempt.stage) || attempt.leaked) return true;
    return !tipStillLive(attempt, this.d.chain);
  }

  private later(generation: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.recheck(generation);
    }, RECHECK_MS);
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
