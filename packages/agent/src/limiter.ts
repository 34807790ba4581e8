/**
 * A counting semaphore: at most `limit` tasks run at once, the rest wait in arrival order. Model calls go through
 * it so a burst of transactions cannot open an unbounded number of requests, while decisions that need no model
 * never wait behind it.
 */
export class ConcurrencyLimiter {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`concurrency limit must be >= 1 (got ${limit})`);
  }

  /** Tasks running now. */
  get active(): number {
    return this.running;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running += 1;
    try {
      return await task();
    } finally {
      this.running -= 1;
      this.waiting.shift()?.();
    }
  }
}
