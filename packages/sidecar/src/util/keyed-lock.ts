/**
 * Serializes async work per key: work on one transaction never interleaves across awaits with other work on the
 * same transaction, while different transactions proceed concurrently.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(work, work);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  isBusy(key: string): boolean {
    return this.tails.has(key);
  }
}
