/**
 * When each transaction this host accepted was accepted (`performance.now()`), until its first attempt is journaled
 * or it ends (decision latency: `relay_decision_latency_seconds`). It also answers, at no cost per call, how many of
 * the transactions accepted in the last `windowMs` still wait for their first decision: the send queue waits briefly
 * for those to fill a pack (`SendQueue`, `FILL_WAIT_MS`). Counting only recent ones keeps a transaction that is not
 * about to be decided (stopped, refused a tip, adopted by another host, left to a slow model) from making every
 * bundle wait.
 */
export class EnqueueTimes extends Map<string, number> {
  /** Ids accepted in the last `windowMs`, in the order they were set, with their times (from `head` on). */
  private readonly order: Array<[string, number]> = [];
  private head = 0;
  /** Ids in `order` from `head` on that are still undecided. */
  private readonly recent = new Set<string>();

  constructor(private readonly windowMs = 2_000) {
    super();
  }

  override set(txId: string, acceptedAt: number): this {
    super.set(txId, acceptedAt);
    this.order.push([txId, acceptedAt]);
    this.recent.add(txId);
    this.forgetBefore(acceptedAt - this.windowMs);
    return this;
  }

  override delete(txId: string): boolean {
    this.recent.delete(txId);
    return super.delete(txId);
  }

  override clear(): void {
    this.recent.clear();
    this.order.length = 0;
    this.head = 0;
    super.clear();
  }

  /** Transactions accepted within the window before `now` (`performance.now()` ms) that are still undecided. */
  undecided(now: number): number {
    this.forgetBefore(now - this.windowMs);
    return this.recent.size;
  }

  private forgetBefore(cutoff: number): void {
    while (this.head < this.order.length && (this.order[this.head] as [string, number])[1] < cutoff) {
      this.recent.delete((this.order[this.head] as [string, number])[0]);
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order.splice(0, this.head);
      this.head = 0;
    }
  }
}
