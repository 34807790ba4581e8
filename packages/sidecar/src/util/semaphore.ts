/**
 * A counting semaphore: at most `capacity` holders at once, the rest wait in arrival order. `acquire` resolves with
 * the release function (call it once; later calls do nothing).
 */
export class Semaphore {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity must be >= 1, got ${capacity}`);
  }

  /** Holders now. */
  get inUse(): number {
    return this.held;
  }

  /** Callers waiting now. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Wait for a place; with `timeoutMs` (> 0), give up after that long with {@link SemaphoreTimeout}, leaving the
   * queue as if never asked.
   */
  async acquire(timeoutMs = 0): Promise<() => void> {
    if (this.held < this.capacity) this.held++;
    else
      await new Promise<void>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const enter = () => {
          if (timer) clearTimeout(timer);
          resolve();
        };
        this.waiting.push(enter);
        if (timeoutMs > 0)
          timer = setTimeout(() => {
            const at = this.waiting.indexOf(enter);
            if (at >= 0) this.waiting.splice(at, 1);
            reject(new SemaphoreTimeout(timeoutMs));
          }, timeoutMs);
      });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // Handed straight to the next waiter: the count stays, so no newcomer can slip in between.
      if (next) next();
      else this.held--;
    };
  }

  /** Run `work` holding one place (waiting at most `timeoutMs` for it, if > 0). */
  async run<T>(work: () => Promise<T>, timeoutMs = 0): Promise<T> {
    const release = await this.acquire(timeoutMs);
    try {
      return await work();
    } finally {
      release();
    }
  }
}

/** No place became free within the time asked. */
export class SemaphoreTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no place free within ${timeoutMs} ms`);
    this.name = 'SemaphoreTimeout';
  }
}
