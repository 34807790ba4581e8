import { RelayError } from '@solrelay/core';
import { tipStillLive } from '../chain/tip-life';
import type { RelayPorts } from '../context';
import type { Packer } from '../send/packer';
import type { SendQueue } from '../send/queue';
import type { DatabaseAvailability } from '../store/pg-store';
import { DATABASE_RETRY_AFTER_S } from '../store/pg-store';
import { inFlight } from '../store/queries';
import type { StoredAttempt } from '../store/records';

/** While new tips wait on the tips of before an outage, they are re-read this often. */
const RECHECK_MS = 500;

/** Stages in which an attempt's bundle (its tip with it) is on chain. */
const LANDED_STAGES: ReadonlySet<StoredAttempt['stage']> = new Set([
  'landed',
  'processed',
  'confirmed',
  'finalized',
]);

/**
 * After the database went away (DESIGN §10, "Operating PostgreSQL"): no new tip while it is away (the store could
 * not commit one anyway, and nothing is sent that is not committed), and once it is back, none until every tip that
 * was unsettled then is re-read from the database and proven landed or dead. A restart or a failover may have lost
 * what relay believed committed, or committed what relay was told was unknown; the database is the truth, and a new
 * tip is built only against what it says once nothing older can still land. Meanwhile what was committed is resent
 * as it is (its bytes, never new ones) and tracked as usual, so the held tips settle and the gate opens.
 *
 * A tip is *landed* when its attempt reached `landed` or later, or its tip was seen landing alone (`leaked`); *dead*
 * when its attempt failed and its blockhash is past its last valid block height with the margin a late landing needs
 * to be confirmed (`tipStillLive`: the tracker watches such tips until then, and marks a landing leaked). A record
 * retention deleted is settled.
 */
export class OutageGate {
  private state: 'open' | 'down' | 'rereading' = 'open';
  private outage: { url: string; reason: string } | null = null;
  /** The unsettled tips of when the database came back that are not yet proven landed or dead. */
  private waiting: Array<{ txId: string; attempt: number }> = [];
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
    return `database: back after an outage; new tips held until ${this.waiting.length} unsettled tip(s) of before it are proven landed or dead`;
  }

  stop(): void {
    this.generation++;
    this.stopTimer();
  }

  /**
   * The database is back: resend what is committed and unsent (the same bytes), list the unsettled tips, and re-read
   * them until each is landed or dead. A failure (the database gone again) ends this re-read: the next `up` starts
   * another; any other failure tries again shortly.
   */
  private async reread(generation: number): Promise<void> {
    try {
      const live = await this.d.store.live();
      if (generation !== this.generation) return;
      const waiting: Array<{ txId: string; attempt: number }> = [];
      let resent = 0;
      for (const tx of live) {
        const flying = inFlight(tx);
        if (!flying) continue;
        if (flying.tip_signature !== null) waiting.push({ txId: tx.tx_id, attempt: flying.attempt });
        // Committed and maybe never sent (its send was cut off, or its commit's answer was lost): the same bytes.
        if (
          flying.stage === 'journaled' &&
          tx.wires &&
          !this.queue.has(tx.tx_id, flying.attempt) &&
          this.packer.carrierOf(tx.tx_id) === null
        ) {
          this.queue.queueSend(tx, flying.attempt);
          resent++;
        }
      }
      this.waiting = waiting;
      this.d.log.info(
        { unsettled_tips: waiting.length, resent },
        'database back: re-read in-flight work; new tips wait until the unsettled ones are proven landed or dead',
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

  /** Re-read the tips still waiting; open the gate once none is, else look again shortly. */
  private async recheck(generation: number): Promise<void> {
    if (generation !== this.generation || this.d.isClosed()) return;
    const still: Array<{ txId: string; attempt: number }> = [];
    try {
      for (const entry of this.waiting) {
        const tx = await this.d.store.get(entry.txId);
        const attempt = tx?.attempts.find((a) => a.attempt === entry.attempt);
        if (attempt && !this.settled(attempt)) still.push(entry);
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
    this.d.log.info('database: every tip of before the outage is landed or dead; new tips resume');
  }

  private settled(attempt: StoredAttempt): boolean {
    if (LANDED_STAGES.has(attempt.stage) || attempt.leaked) return true;
    return attempt.stage === 'failed' && !tipStillLive(attempt, this.d.chain);
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
