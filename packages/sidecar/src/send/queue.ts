import { PRIORITY_RANK, chooseRegion, effectivePriority, type Policy } from '@solrelay/core';
import type { StoredTx } from '../store/records';
import { TokenBucket } from '../util/rate';

export interface SendJob {
  txId: string;
  attempt: number;
  priority: number;
  deadline: number;
  notBefore: number;
  /** Unexpected failures of this job's sends in a row (the sender backs off on them). */
  failures?: number;
}

/** The send order: priority, then the nearest deadline, then the earliest ready. */
function byValue(x: SendJob, y: SendJob): number {
  return x.priority - y.priority || x.deadline - y.deadline || x.notBefore - y.notBefore;
}
/** Bundles on the wire to the engine at once (the token bucket still sets the rate). */
export const MAX_CONCURRENT_SENDS = 16;

/** Longest a region cools, whatever it asked. */
export const MAX_COOL_MS = 30_000;
/** Longest a region's own backoff (no Retry-After) grows. */
const MAX_BACKOFF_MS = 5_000;
/** While sending is held (a consensus migration window), the hold is looked at again this often. */
export const HOLD_RECHECK_MS = 100;
/**
 * Longest a ready bundle waits for decisions still to come to fill its pack ({@link SendQueue.pump}): a burst's
 * decisions come a few milliseconds apart, and a request of the per-IP budget spent on one transaction when three more
 * were about to be decided is a quarter of what it could carry.
 */
export const FILL_WAIT_MS = 100;
/** A cool-down this short (a 429 asking for a second) still counts the region in the capacity. */
const BRIEF_COOL_MS = 2_000;

export interface SendQueueDeps {
  now: () => number;
  policy: () => Policy;
  /** Send budget per second of each region (a token bucket per region, burst of at least one). */
  ratePerSecond: number;
  /** Share of each region's budget to spend (default 1; relay uses SEND_PACING of upstream/engine-regions). */
  pacing?: number;
  /** Regional engines to spend budgets of (default 1). */
  regions?: number;
  /** The region of the leader the next bundle targets, when known: its budget is spent first. */
  preferredRegion?: () => number | null;
  /**
   * Sends one job to a region (the sender); a rejection is logged, never thrown. The sender needs the queue too (it
   * requeues and cools regions), so the composition may `attach` it after both exist instead.
   */
  send?: (job: SendJob, turn: RegionTurn) => Promise<void>;
  log: { error: (fields: object, message: string) => void };
  /**
   * Whether no bundle may go out now (a TowerBFT -> Alpenglow migration window is open: its blocks carry no user
   * transactions, SIMD-0371). Jobs wait in the queue, untouched (no token spent, no backoff, nothing settled), and go
   * out, best first, once it returns false.
   */
  hold?: () => boolean;
  /**
   * Packing: how many user transactions a bundle may carry, how many transactions this host accepted in the last
   * moments still wait for their first decision (once decided they may ride), and whether a job can carry riders at
   * all (an unsent first send with relay's tip). Absent, or a bundle of one: a ready job never waits to fill a pack.
   */
  fill?: {
    perBundle: number;
    undecided: () => number;
    canCarry: (job: SendJob) => boolean;
  };
  /** A job found waiting on the hold, once per job per hold. */
  onHeld?: (job: SendJob) => void;
  /** Once closed, nothing more is sent and no timer is armed. */
  isClosed: () => boolean;
  maxConcurrent?: number;
}

/**
 * A job's turn on a region's wire, handed to the sender with the job. `ready` resolves when the request may go on the
 * wire (see {@link SendQueue}); `end` says the engine answered (`sent`: whatever came back, an error included) or
 * that nothing was sent after all. Ended once; the queue ends a turn the sender left open when its send returns.
 */
export interface RegionTurn {
  readonly region: number;
  ready(): Promise<void>;
  end(sent: boolean): void;
}

/**
 * Added to the engine's interval after an answer: its clock and ours count whole milliseconds, and a timer may fire a
 * millisecond early.
 */
const ANSWER_MARGIN_MS = 25;

/** A region every one of whose requests is out (waiting for answers) is looked at again this often at most. */
const BUSY_RECHECK_MS = 1_000;
/** A request waiting for an answer to one of its region's others (a budget above one a second) looks this often. */
const UNANSWERED_RECHECK_MS = 25;

/**
 * The budgeted send queue: each token of a region's budget goes to the most valuable bundle ready now (priority,
 * then deadline, then the earliest `notBefore`); a job waits for its `notBefore` (a backoff) and for a token of some
 * region, the target leader's region first (`chooseRegion`). A region a 429 or an outage cooled takes nothing until
 * its cool-down ends; the others go on.
 *
 * Each region has at most `floor(rps)` requests out at once (one at the default budget): a job is given a region only
 * while fewer are out there, and its request leaves (`RegionTurn.ready`) no sooner than
 * - a paced token after the region's previous request really left (not after it was due: a timer that fired late,
 *   the event loop busy in a burst, let the next follow it by less than the engine's second; session 16), and
 * - the engine's interval (1 s) after the answer to the request `floor(rps)` before it came back. Whenever the
 *   engine meters a request, it does so before it answers, so this leaves at most `floor(rps)` requests in any second
 *   at the engine however late each reached it. Counted from departures alone, a first request held up on its way (or
 *   in a busy engine's queue) and a second that was not arrived less than a second apart (session 21: 4-8 of relay's
 *   own 429s in a burst beside other busy processes, each with mainnet's back-off penalty).
 * A token is spent when a job is given its region, but its bytes go out only after its first send is prepared (a tip
 * signed again, a pack simulated: up to ~9 RPC calls): the preparation overlaps the wait.
 */
export class SendQueue {
  private readonly jobs: SendJob[] = [];
  private readonly buckets: TokenBucket[];
  private readonly cooledUntil: number[];
  /** Transport failures in a row of each region (its backoff doubles with them; an answer resets it). */
  private readonly failures: number[];
  private timer: NodeJS.Timeout | null = null;
  /** When the armed timer fires. */
  private timerAt = 0;
  private inFlight = 0;
  private readonly maxConcurrent: number;
  /** Jobs already counted as held in the current hold (`txId:attempt`). */
  private readonly heldJobs = new Set<string>();
  /** When each region's next request may leave, by departures and cool-downs (see {@link RegionTurn.ready}). */
  private readonly nextSendAt: number[];
  /** Requests each region has out: given a job, not yet answered. */
  private readonly out: number[];
  /** Each region's latest answers (when they came back), the newest last, at most {@link perRegion}. */
  private readonly answers: number[][];
  /** Requests each region has on the wire: left, not answered yet. */
  private readonly unanswered: number[];
  /** Requests one region may have out at once: its whole-second budget, at least one. */
  private readonly perRegion: number;
  /** The least time between two requests to one region: one token of its paced budget. */
  private readonly sendGapMs: number;
  /**
   * The least time between the answer to a region's request and the request {@link perRegion} after it: the engine's
   * one-second window (no pacing margin for the way there is needed: the answer came after the engine metered the
   * request), and {@link ANSWER_MARGIN_MS}.
   */
  private readonly answerGapMs: number;

  constructor(private readonly d: SendQueueDeps) {
    const regions = Math.max(1, d.regions ?? 1);
    this.buckets = Array.from(
      { length: regions },
      () => new TokenBucket(d.ratePerSecond * (d.pacing ?? 1), Math.max(1, d.ratePerSecond), d.now()),
    );
    this.cooledUntil = new Array<number>(regions).fill(0);
    this.failures = new Array<number>(regions).fill(0);
    this.maxConcurrent = d.maxConcurrent ?? MAX_CONCURRENT_SENDS;
    this.nextSendAt = new Array<number>(regions).fill(0);
    this.out = new Array<number>(regions).fill(0);
    this.answers = Array.from({ length: regions }, () => []);
    this.unanswered = new Array<number>(regions).fill(0);
    this.perRegion = Math.max(1, Math.floor(d.ratePerSecond));
    this.sendGapMs = 1_000 / (d.ratePerSecond * (d.pacing ?? 1));
    this.answerGapMs = 1_000 + ANSWER_MARGIN_MS;
  }

  /** A turn on `region`'s wire for one job (see the class comment); counted out until it ends. */
  private turn(region: number): RegionTurn {
    this.out[region] = (this.out[region] as number) + 1;
    let open = true;
    let departed = false;
    return {
      region,
      ready: async () => {
        await this.untilMayLeave(region);
        departed = true;
        this.unanswered[region] = (this.unanswered[region] as number) + 1;
      },
      end: (sent: boolean) => {
        if (!open) return;
        open = false;
        this.out[region] = (this.out[region] as number) - 1;
        if (departed) this.unanswered[region] = (this.unanswered[region] as number) - 1;
        if (departed && sent) {
          const answers = this.answers[region] as number[];
          answers.push(this.d.now());
          if (answers.length > this.perRegion) answers.shift();
        }
        this.pump();
      },
    };
  }

  /**
   * When `region`'s next request may leave (Infinity: once a request still out is answered): a paced token after its
   * last departure, past any cool-down, and with fewer than {@link perRegion} requests the engine may have metered in
   * the last second: those out and unanswered (the engine may meter them any moment), and those answered less than
   * {@link answerGapMs} ago.
   */
  private mayLeaveAt(region: number, now: number): number {
    const answers = this.answers[region] as number[];
    const recent = answers.filter((at) => at + this.answerGapMs > now);
    const over = recent.length + (this.unanswered[region] as number) - this.perRegion + 1;
    const byAnswers =
      over <= 0
        ? Number.NEGATIVE_INFINITY
        : over > recent.length
          ? Number.POSITIVE_INFINITY
          : (recent[over - 1] as number) + this.answerGapMs;
    return Math.max(this.nextSendAt[region] as number, byAnswers);
  }

  private async untilMayLeave(region: number): Promise<void> {
    for (;;) {
      const now = this.d.now();
      const wait = this.mayLeaveAt(region, now) - now;
      if (wait <= 0) break;
      // Waiting on an answer: looked at again shortly (only with a budget above one a second, several requests out).
      const ms = Number.isFinite(wait) ? Math.ceil(wait) : UNANSWERED_RECHECK_MS;
      await new Promise((resolve) => setTimeout(resolve, ms).unref());
    }
    this.nextSendAt[region] = this.d.now() + this.sendGapMs;
  }

  get regionCount(): number {
    return this.buckets.length;
  }

  /**
   * `region` failed in transport (a 429, a 5xx, no answer): it takes nothing for the time it asked (`Retry-After`,
   * at most 30 s, so a region that asks for an hour is tried again), else for a backoff of its own that doubles with
   * each failed probe (250 ms to 5 s, as a resend's backoff always was). Failures of requests sent before the region
   * started cooling do not double it again: a burst of them is one failure. The other regions go on.
   */
  cool(region: number, retryAfterMs: number | null): void {
    if (region < 0 || region >= this.cooledUntil.length) return;
    const now = this.d.now();
    const cooling = (this.cooledUntil[region] as number) > now;
    const failures = (this.failures[region] as number) + (cooling ? 0 : 1);
    this.failures[region] = failures;
    const ms =
      retryAfterMs !== null
        ? Math.min(MAX_COOL_MS, retryAfterMs)
        : Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.max(0, failures - 1));
    this.cooledUntil[region] = Math.max(this.cooledUntil[region] as number, now + ms);
    // Requests given this region already wait out the cool-down too (see `RegionTurn.ready`).
    this.nextSendAt[region] = Math.max(this.nextSendAt[region] as number, this.cooledUntil[region] as number);
    this.pump();
  }

  /** `region` answered (an id or a verdict): its backoff starts over. */
  answered(region: number): void {
    if (region >= 0 && region < this.failures.length) this.failures[region] = 0;
  }

  /** Whether `region` is cooling now (a 429 or a failure since a send was paced onto it). */
  isCooling(region: number): boolean {
    return (this.cooledUntil[region] ?? 0) > this.d.now();
  }

  /** Regions taking bundles: not cooling, or only briefly (a 429's second), at least one. */
  regionsTakingBundles(): number {
    const now = this.d.now();
    return Math.max(1, this.cooledUntil.filter((until) => until - now <= BRIEF_COOL_MS).length);
  }

  /** Milliseconds each region still cools after a 429 or a failure (0: it takes bundles). */
  coolingMs(now: number): number[] {
    return this.cooledUntil.map((until) => Math.max(0, until - now));
  }

  /**
   * How long the ready jobs should still wait for a fuller pack (0: send now). They wait, {@link FILL_WAIT_MS} at most
   * from the moment the oldest of them became ready, only while all of this holds: packs carry more than one
   * transaction and fewer than a pack's worth are ready; the best of them can carry riders (an unsent first send with
   * relay's tip: a resend's bytes are fixed); transactions accepted here in the last moments still wait for their
   * first decision; and the requests the regions can take now are fewer than the transactions ready and to come, so a
   * request sent half empty would be one a later transaction has to wait for. With requests to spare nothing waits.
   */
  private fillingFor(best: SendJob, ready: readonly SendJob[], now: number): number {
    const fill = this.d.fill;
    if (!fill || fill.perBundle <= 1 || ready.length >= fill.perBundle || !fill.canCarry(best)) return 0;
    const undecided = fill.undecided();
    if (undecided === 0) return 0;
    const cooling = this.coolingMs(now);
    const requests = this.buckets.reduce(
      (sum, bucket, i) =>
        sum +
        ((cooling[i] as number) > 0
          ? 0
          : Math.min(bucket.available(now), this.perRegion - (this.out[i] as number))),
      0,
    );
    if (requests >= ready.length + undecided) return 0;
    const oldest = Math.min(...ready.map((j) => j.notBefore));
    return Math.max(0, oldest + FILL_WAIT_MS - now);
  }

  /**
   * Milliseconds until each region can be given a job: its token and cool-down; a region with all its requests out
   * waits for an answer (which looks again at once), at most {@link BUSY_RECHECK_MS} here.
   */
  private regionWaits(now: number): number[] {
    const cooling = this.coolingMs(now);
    return this.buckets.map((bucket, i) =>
      (this.out[i] as number) >= this.perRegion
        ? BUSY_RECHECK_MS
        : Math.max(bucket.waitMs(now), cooling[i] as number),
    );
  }

  /** Jobs waiting (not yet on the wire). */
  get length(): number {
    return this.jobs.length;
  }

  /** Whether attempt `attempt` of `txId` waits in the queue. */
  has(txId: string, attempt: number): boolean {
    return this.jobs.some((j) => j.txId === txId && j.attempt === attempt);
  }

  private send: ((job: SendJob, turn: RegionTurn) => Promise<void>) | null = null;

  /** The sender of this queue's jobs (set once by the composition; nothing is sent before). */
  attach(send: (job: SendJob, turn: RegionTurn) => Promise<void>): void {
    this.send = send;
    this.pump();
  }

  /** Queue an attempt of `tx` to be sent after `delayMs`, ranked by its priority and expiry slot. */
  queueSend(
    tx: Pick<StoredTx, 'tx_id' | 'priority' | 'expires_at_slot'>,
    attempt: number,
    delayMs = 0,
  ): void {
    this.push(this.jobFor(tx, attempt, delayMs));
  }

  /** The job that sends an attempt of `tx` after `delayMs`. */
  jobFor(
    tx: Pick<StoredTx, 'tx_id' | 'priority' | 'expires_at_slot'>,
    attempt: number,
    delayMs = 0,
  ): SendJob {
    return {
      txId: tx.tx_id,
      attempt,
      priority: PRIORITY_RANK[effectivePriority(this.d.policy(), tx.priority)],
      deadline: tx.expires_at_slot,
      notBefore: this.d.now() + delayMs,
    };
  }

  /**
   * Take out up to `max` jobs ready now that `accept` takes, most valuable first (the order tokens go in): the
   * packer's candidates. The caller pushes back what it does not use.
   */
  /** The jobs ready now that `accept` takes, best first, left in the queue. */
  peekReady(accept: (job: SendJob) => boolean): SendJob[] {
    const now = this.d.now();
    return this.jobs.filter((j) => j.notBefore <= now && accept(j));
  }

  takeReady(accept: (job: SendJob) => boolean, max: number): SendJob[] {
    const now = this.d.now();
    const taken = this.jobs
      .filter((j) => j.notBefore <= now && accept(j))
      .sort(byValue)
      .slice(0, max);
    for (const job of taken) this.jobs.splice(this.jobs.indexOf(job), 1);
    return taken;
  }

  push(job: SendJob): void {
    this.jobs.push(job);
    this.pump();
  }

  /**
   * Send queued bundles as the token bucket allows, highest priority first, then the nearest deadline. Several
   * sends may be on the wire at once (a slow engine answer must not hold up the rest), and no transaction lock is
   * held while waiting for the engine.
   */
  pump(): void {
    if (this.d.isClosed()) return;
    const send = this.send ?? this.d.send;
    if (!send) return;
    if (this.d.hold?.()) {
      for (const job of this.jobs) {
        const key = `${job.txId}:${job.attempt}`;
        if (this.heldJobs.has(key)) continue;
        this.heldJobs.add(key);
        this.d.onHeld?.(job);
      }
      this.arm(HOLD_RECHECK_MS);
      return;
    }
    this.heldJobs.clear();
    while (this.inFlight < this.maxConcurrent) {
      const now = this.d.now();
      const ready = this.jobs.filter((j) => j.notBefore <= now);
      if (ready.length === 0) {
        this.arm();
        return;
      }
      const choice = chooseRegion(this.regionWaits(now), this.d.preferredRegion?.() ?? null);
      if (choice.waitMs > 0) {
        this.arm(choice.waitMs);
        return;
      }
      ready.sort(byValue);
      const job = ready[0] as SendJob;
      const filling = this.fillingFor(job, ready, now);
      if (filling > 0) {
        this.arm(filling);
        return;
      }
      this.jobs.splice(this.jobs.indexOf(job), 1);
      (this.buckets[choice.region] as TokenBucket).take(now);
      this.inFlight++;
      const turn = this.turn(choice.region);
      void send(job, turn)
        .catch((error: unknown) =>
          this.d.log.error({ err: error, tx_id: job.txId }, 'send failed unexpectedly'),
        )
        .finally(() => {
          this.inFlight--;
          // A send that returned without saying (it found nothing to send): nothing went out on this turn.
          turn.end(false);
          this.pump();
        });
    }
  }

  /** Look again in `ms` (default: when the next job is due); an earlier look already armed stands, a later one moves. */
  private arm(ms?: number): void {
    if (this.d.isClosed() || this.jobs.length === 0) return;
    const now = this.d.now();
    const next = ms ?? Math.max(1, Math.min(...this.jobs.map((j) => j.notBefore)) - now);
    if (this.timer) {
      if (this.timerAt <= now + next) return;
      clearTimeout(this.timer);
    }
    this.timerAt = now + next;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pump();
    }, next);
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}
