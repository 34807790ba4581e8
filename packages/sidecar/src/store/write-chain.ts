/**
 * Writes to one record apply in call order (the store's contract): each write to a key starts once every earlier
 * write to that key has settled, whether it resolved or was refused; writes to other keys run concurrently. An idle
 * key's write starts at once. Every store shares this, so a compare-and-set checks the record as every earlier write
 * of this process left it; across processes, the database's row locks order writes instead.
 */
export class WriteChain {
  /** The last write queued for each key (a later one waits for it). */
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Run `write` after every earlier write to `key` settled. */
  run<T>(key: string, write: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key);
    const run = before ? before.then(write, write) : write();
    const tail = run.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return run;
  }
}
