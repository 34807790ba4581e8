/**
 * What a long-running command (`relay up`, `relay start`, `relay up --hosts`) started, stopped in the reverse order
 * at its end, with a line when stopping starts and when it is over (stopping can take seconds: agents' groups,
 * hosts ending their sessions, open streams).
 */
export class Teardown {
  private readonly stops: Array<() => Promise<unknown>> = [];

  constructor(private readonly err: (line: string) => void) {}

  /** Registers how to stop something just started. */
  push(stop: () => Promise<unknown>): void {
    this.stops.push(stop);
  }

  /** Registers `thing`'s own `stop()`, and hands it back: `const cluster = teardown.add(await startCluster())`. */
  add<T extends { stop(): Promise<unknown> }>(thing: T): T {
    this.stops.push(() => thing.stop());
    return thing;
  }

  /** Stops everything registered, last first; a failure to stop one is reported and the rest still stop. */
  async stopAll(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse())
      await stop().catch((e: unknown) => this.err(`relay: while stopping: ${(e as Error).message}`));
  }

  /** `relay: <why>`, everything stopped, `relay: stopped`; resolves with `exitCode`. */
  async end(why: string, exitCode: number): Promise<number> {
    this.err(`relay: ${why}`);
    await this.stopAll();
    this.err('relay: stopped');
    return exitCode;
  }
}
