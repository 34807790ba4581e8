/** What `runBefore` reports: the task's value, or that no slot freed up before the caller gave up. */
export type LimitedRun<T> = { ran: true; value: T } | { ran: false };

interface Waiter {
  /** Hands a freed slot to this waiter (the slot count is not lowered in between, so nobody can jump the queue). */
  grant(): void;
}

/**
 * A counting semaphore: at most `limit` tasks run at once, the rest wait in arrival order. Model calls go through
 * it so a burst of transactions cannot open an unbounded number of requests, while decisions that need no model
 * never wait behind it.
 */
export class ConcurrencyLimiter {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`concurrency limit must be >= 1 (got ${limit})`);
  }

  /** Tasks running now. */
  get active(): number {
    return this.running;
  }

  /** Callers waiting for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    const result = await this.runBefore(new Promise<void>(() => undefined), task);
    // A give-up promise that never settles cannot make runBefore skip the task.
    if (!result.ran) throw new Error('unreachable: the task was skipped without a give-up');
    return result.value;
  }

  /**
   * Run `task` once a slot is free, unless `giveUp` settles first while still waiting: then the caller leaves the
   * queue and the task is not run. A task that has started always runs to its end.
   */
  async runBefore<T>(giveUp: Promise<unknown>, task: () => Promise<T>): Promise<LimitedRun<T>> {
    if (this.running < this.limit) {
      this.running += 1;
    } else {
      let granted = false;
      const waiter: Waiter = { grant: () => undefined };
      const slot = new Promise<void>((resolve) => {
        waiter.grant = () => {
          granted = true;
          resolve();
        };
      });
      this.waiting.push(waiter);
      await Promise.race([slot, giveUp.then(() => undefined)]);
      if (!granted) {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        return { ran: false };
      }
    }
    try {
      return { ran: true, value: await task() };
    } finally {
      this.release();
    }
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.running -= 1;
  }
}
