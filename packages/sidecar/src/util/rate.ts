/**
 * A sliding-window counter: how many events happened in the last `windowMs`. Used for the policy's `rate-limit`
 * (accepted enqueues per 60 s across all callers). Memory is one timestamp per event in the window.
 */
export class SlidingWindow {
  private times: number[] = [];
  private head = 0;

  constructor(private readonly windowMs: number) {}

  count(now: number): number {
    this.evict(now);
    return this.times.length - this.head;
  }

  add(now: number): void {
    this.times.push(now);
  }

  /** Remove the most recent event (an accepted slot that was not used after all). */
  removeLast(): void {
    if (this.times.length > this.head) this.times.pop();
  }

  /** Milliseconds until the window has room for one more event under `limit`. */
  retryAfterMs(now: number, limit: number): number {
    this.evict(now);
    const inWindow = this.times.length - this.head;
    if (inWindow < limit) return 0;
    const releasing = this.times[this.head + (inWindow - limit)] as number;
    return Math.max(1, releasing + this.windowMs - now);
  }

  private evict(now: number): void {
    const cutoff = now - this.windowMs;
    while (this.head < this.times.length && (this.times[this.head] as number) <= cutoff) this.head++;
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
  }
}

/**
 * A token bucket: `rate` tokens per second, holding at most `burst`. The block engine allows about one request
 * per second per IP without a UUID; the sender spends that budget on `sendBundle` only.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private rate: number,
    private readonly burst: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  setRate(rate: number): void {
    this.rate = rate;
  }

  /** Take one token if available. */
  take(now: number): boolean {
    this.refill(now);
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    return false;
  }

  /** Whole tokens available now. */
  available(now: number): number {
    this.refill(now);
    return Math.floor(this.tokens);
  }

  /** Milliseconds until a token is available. */
  waitMs(now: number): number {
    this.refill(now);
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.rate) * 1000);
  }

  private refill(now: number): void {
    const elapsed = Math.max(0, now - this.last) / 1000;
    this.tokens = Math.min(this.burst, this.tokens + elapsed * this.rate);
    this.last = now;
  }
}
