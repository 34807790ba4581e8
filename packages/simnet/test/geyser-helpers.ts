import type { EventEmitter } from 'node:events';
/** Shared helpers for the geyser conformance tests (not a test file itself). */

/**
 * A SubscribeRequest with every map present: both client generations call Object.entries() on each. Typed `never`
 * so it fits either client's generated SubscribeRequest type (their shapes differ slightly; the wire is the same).
 */
export function subscribeRequest(overrides: Record<string, unknown> = {}): never {
  return {
    accounts: {},
    slots: {},
    transactions: {},
    transactionsStatus: {},
    blocks: {},
    blocksMeta: {},
    entry: {},
    accountsDataSlice: [],
    ...overrides,
  } as never;
}

/** Collects a stream's updates and errors, and waits for one matching a predicate. */
export class Collector<T = Record<string, unknown>> {
  readonly updates: T[] = [];
  error: (Error & { code?: number; details?: string }) | null = null;
  private waiters: Array<() => void> = [];

  constructor(stream: EventEmitter) {
    stream.on('data', (update: T) => {
      this.updates.push(update);
      this.wake();
    });
    stream.on('error', (error: Error) => {
      this.error = error;
      this.wake();
    });
  }

  // Generous limits: they are hang backstops, not expectations (a loaded 2-core CI box delivers late, not never).
  async waitFor(predicate: (update: T) => boolean, timeoutMs = 15_000, from = 0): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.updates.slice(from).find(predicate);
      if (found) return found;
      if (this.error) throw this.error;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; saw ${this.updates.length} updates`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async waitForError(timeoutMs = 15_000): Promise<Error & { code?: number; details?: string }> {
    const deadline = Date.now() + timeoutMs;
    while (!this.error) {
      if (Date.now() > deadline) throw new Error('timed out waiting for a stream error');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return this.error;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

let nextPingId = 1_000;

/**
 * Resolves once the server has taken every request written to `stream` before: it answers requests in order, and a
 * ping alone changes no filter. What a test waits on instead of sleeping and hoping the filters are in place.
 */
export async function requestsApplied(
  stream: { write(request: never): unknown },
  updates: Collector<{ pong?: { id: number } }>,
): Promise<void> {
  const id = ++nextPingId;
  const from = updates.updates.length;
  stream.write(subscribeRequest({ ping: { id } }));
  await updates.waitFor((u) => u.pong?.id === id, undefined, from);
}
