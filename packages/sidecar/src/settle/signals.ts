/**
 * What settlement tells the rest of relay, without calling it: settlement is the only writer of transitions and
 * never calls a decider. A decider that wants to act on a settlement subscribes here at wiring time.
 */
export interface SettleSignalMap {
  /**
   * An attempt ended and its transaction is pending again, waiting for another attempt (emitted after the journal
   * commit that re-pended it, and after its events). Listeners run synchronously and must not throw: start async
   * work with `void`.
   */
  'back-to-pending': { txId: string };
  /** An attempt settled without landing (journaled first): whatever waited on it (packed passengers) may go. */
  'attempt-ended': { txId: string; attempt: number };
  /** A bundle an engine took landed (counted at `confirmed`) or ended without landing; once per bundle. */
  'bundle-settled': { landed: boolean };
}

export class SettleSignals {
  private readonly listeners: {
    [K in keyof SettleSignalMap]: Array<(data: SettleSignalMap[K]) => void>;
  } = { 'back-to-pending': [], 'attempt-ended': [], 'bundle-settled': [] };

  /** Subscribe; returns the unsubscribe function. */
  on<K extends keyof SettleSignalMap>(name: K, listener: (data: SettleSignalMap[K]) => void): () => void {
    const list = this.listeners[name];
    list.push(listener);
    return () => {
      const i = list.indexOf(listener);
      if (i >= 0) list.splice(i, 1);
    };
  }

  emit<K extends keyof SettleSignalMap>(name: K, data: SettleSignalMap[K]): void {
    for (const listener of [...this.listeners[name]]) listener(data);
  }
}
