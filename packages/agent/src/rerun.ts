/**
 * Runs an async task one at a time, where every caller needs a run that STARTED after its request (a watchdog
 * sweep or a re-read of the sidecar's state: a run already under way may have read before the change the caller
 * reacts to). A request while a run is under way gets one more run right after it; all such requests share that
 * one, so a burst of requests costs at most two runs.
 */
export class RerunAfterCurrent<A, T> {
  private current: Promise<T> | null = null;
  private next: Promise<T> | null = null;

  constructor(private readonly task: (arg: A) => Promise<T>) {}

  /** The run under way, or null. */
  get running(): Promise<T> | null {
    return this.next ?? this.current;
  }

  /** A run that starts now, or right after the current one (with the `arg` of the first request waiting for it). */
  request(arg: A): Promise<T> {
    const current = this.current;
    if (!current) return this.start(arg);
    this.next ??= current.then(
      () => this.startNext(arg),
      () => this.startNext(arg),
    );
    return this.next;
  }

  private startNext(arg: A): Promise<T> {
    this.next = null;
    // Someone may have started a run between the end of the last one and here; it began after the request too.
    return this.current ?? this.start(arg);
  }

  private start(arg: A): Promise<T> {
    const run = this.task(arg).finally(() => {
      if (this.current === run) this.current = null;
    });
    this.current = run;
    return run;
  }
}
