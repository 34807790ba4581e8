export interface RateLimitOptions {
  /** Requests per second per IP without a UUID (Jito's default since 2025-02: 1). */
  rps?: number;
  /** Requests per second per IP + UUID (`x-jito-auth` / `?uuid=`). */
  uuidRps?: number;
  /** false turns limiting off. */
  enabled?: boolean;
  /**
   * Back-off penalty (ms): a request over the budget starts a penalty of this long during which every request of
   * that IP (+ UUID) and region is refused, whatever tokens it has; 0 turns it off (a 429 then costs only the rest of
   * a token). Default {@link DEFAULT_RATE_LIMIT_PENALTY_MS}.
   */
  penaltyMs?: number;
  now?: () => number;
}

/**
 * Mainnet answers a sender over its budget with "Back-off triggered: Retry after 1606ms" (a text users logged,
 * jito.md §1.7; Jito's docs say only "429 or rate limit error indicating what you hit"): longer than the rest of a
 * 1 req/s token, so a penalty, not just the refill. The simnet's default penalty is that observed figure; its exact
 * rule (fixed length, not extended by requests made during it, per IP + UUID and region) is an assumption.
 */
export const DEFAULT_RATE_LIMIT_PENALTY_MS = 1_606;

export type RateDecision = { allowed: true } | { allowed: false; retryAfterMs: number; limit: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
  /** End of the back-off penalty in force (0: none). */
  penaltyUntilMs: number;
}

/**
 * Per-IP token buckets shared by every block-engine method, as mainnet's limiter is reported to be, one set per
 * regional engine (the budget is per IP per region, jito.md §1.7). Capacity equals the rate, so the default allows
 * one request, then one more each second. A request over the budget starts the back-off penalty (`penaltyMs`):
 * every request until it ends is refused with the time left, and spends nothing.
 */
export class RateLimiter {
  rps: number;
  uuidRps: number;
  enabled: boolean;
  penaltyMs: number;
  /** Requests this limiter refused since it was made (every region and IP): the 429s the engine answered. */
  refused = 0;
  private readonly now: () => number;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: RateLimitOptions = {}) {
    this.rps = options.rps ?? 1;
    this.uuidRps = options.uuidRps ?? 10;
    this.enabled = options.enabled ?? true;
    this.penaltyMs = options.penaltyMs ?? DEFAULT_RATE_LIMIT_PENALTY_MS;
    if (!Number.isFinite(this.penaltyMs) || this.penaltyMs < 0)
      throw new Error('penaltyMs must be a non-negative number of milliseconds');
    this.now = options.now ?? Date.now;
  }

  take(ip: string, uuid: string | undefined, region = ''): RateDecision {
    if (!this.enabled) return { allowed: true };
    const limit = uuid ? this.uuidRps : this.rps;
    const key = `${region}|${ip}|${uuid ?? ''}`;
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: limit, updatedMs: now, penaltyUntilMs: 0 };
    bucket.tokens = Math.min(limit, bucket.tokens + ((now - bucket.updatedMs) / 1000) * limit);
    bucket.updatedMs = now;
    this.buckets.set(key, bucket);
    if (now < bucket.penaltyUntilMs) {
      this.refused++;
      return { allowed: false, retryAfterMs: Math.ceil(bucket.penaltyUntilMs - now), limit };
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    this.refused++;
    if (this.buckets.size > 10_000) {
      this.buckets.clear();
      this.buckets.set(key, bucket);
    }
    if (this.penaltyMs > 0) {
      bucket.penaltyUntilMs = now + this.penaltyMs;
      return { allowed: false, retryAfterMs: Math.ceil(this.penaltyMs), limit };
    }
    return { allowed: false, retryAfterMs: Math.ceil(((1 - bucket.tokens) / limit) * 1000), limit };
  }

  reset(): void {
    this.buckets.clear();
  }
}

/** The two -32097 texts users have logged from the block engine (jito.md §1.7). */
export const RATE_LIMIT_MESSAGES = {
  global: 'Network congested. Endpoint is globally rate limited.',
  perIp: (limit: number, retryAfterMs: number) =>
    `Rate limit exceeded. Limit: ${limit} per second for txn requests. Back-off triggered: Retry after ${retryAfterMs}ms`,
};
