export interface RateLimitOptions {
  /** Requests per second per IP without a UUID (Jito's default since 2025-02: 1). */
  rps?: number;
  /** Requests per second per IP + UUID (`x-jito-auth` / `?uuid=`). */
  uuidRps?: number;
  /** false turns limiting off. */
  enabled?: boolean;
  now?: () => number;
}

export type RateDecision = { allowed: true } | { allowed: false; retryAfterMs: number; limit: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/**
 * Per-IP token buckets shared by every block-engine method, as mainnet's limiter is reported to be, one set per
 * regional engine (the budget is per IP per region, jito.md §1.7). Capacity equals the rate, so the default allows
 * one request, then one more each second.
 */
export class RateLimiter {
  rps: number;
  uuidRps: number;
  enabled: boolean;
  private readonly now: () => number;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: RateLimitOptions = {}) {
    this.rps = options.rps ?? 1;
    this.uuidRps = options.uuidRps ?? 10;
    this.enabled = options.enabled ?? true;
    this.now = options.now ?? Date.now;
  }

  take(ip: string, uuid: string | undefined, region = ''): RateDecision {
    if (!this.enabled) return { allowed: true };
    const limit = uuid ? this.uuidRps : this.rps;
    const key = `${region}|${ip}|${uuid ?? ''}`;
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: limit, updatedMs: now };
    bucket.tokens = Math.min(limit, bucket.tokens + ((now - bucket.updatedMs) / 1000) * limit);
    bucket.updatedMs = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    if (this.buckets.size > 10_000) this.buckets.clear();
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
