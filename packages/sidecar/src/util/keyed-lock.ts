/**
 * Serializes async work per key: work on one transaction never interleaves across awaits with other work on the
 * same transaction, while different transactions proceed concurrently.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Work queued or running per key, counted synchronously so `isBusy` is exact the moment work ends. */
  private readonly pending = new Map<string, number>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    const release = () => {
      const left = (this.pending.get(key) ?? 1) - 1;
      if (left === 0) this.pending.delete(key);
      else this.pending.set(key, left);
    };
    const result = previous.then(work, work).finally(release);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Whether work for `key` is queued or running right now. */
  isBusy(key: string): boolean {
    return this.pending.has(key);
  }
}
