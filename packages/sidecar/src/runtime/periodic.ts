import type { Logger } from 'pino';

/**
 * Background work on an interval: each task runs once at once, then every `ms`. A failing run is logged at debug
 * and the next one runs as usual (an upstream that is down shows in health, not in a crash). Timers never keep the
 * process alive; `stop()` clears them all.
 */
export class Periodic {
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(private readonly log: Logger) {}

  every(ms: number, work: () => Promise<void> | void): void {
    const run = () => {
      Promise.resolve()
        .then(work)
        .catch((error: unknown) => this.log.debug({ err: error }, 'periodic task failed'));
    };
    run();
    const timer = setInterval(run, ms);
    timer.unref();
    this.timers.push(timer);
  }

  stop(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
  }
}
