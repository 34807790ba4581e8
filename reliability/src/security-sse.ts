import type { SseMessage, SseReader } from '@solrelay/testkit';

/**
 * The wall-clock time (Date.now(), the clock the sidecar stamps `ts` with) at which each message of `reader` was
 * parsed, index for index with `reader.messages`. Installed by wrapping the array's push, so it must be called
 * before the messages to be timed arrive.
 */
export function stampReceipts(reader: SseReader): number[] {
  const messages = reader.messages;
  // Messages that arrived before the wrap have no receipt time.
  const stamps: number[] = messages.map(() => Number.NaN);
  const push = messages.push.bind(messages);
  messages.push = (...items: SseMessage[]) => {
    const now = Date.now();
    for (let i = 0; i < items.length; i++) stamps.push(now);
    return push(...items);
  };
  return stamps;
}

/** One event's delivery lag: receipt minus the `ts` the sidecar put in it when it published. */
export interface Lag {
  event: string;
  receivedAt: number;
  lagMs: number;
}

/**
 * The lag of every message received in [fromMs, toMs) whose data carries a numeric `ts` (tx_enqueued, slot_update,
 * tx_status_changed, policy_changed, ...). Messages without one are skipped.
 */
export function deliveryLags(
  reader: SseReader,
  stamps: readonly number[],
  fromMs: number,
  toMs: number,
): Lag[] {
  const out: Lag[] = [];
  reader.messages.forEach((message, i) => {
    const receivedAt = stamps[i];
    if (receivedAt === undefined || !(receivedAt >= fromMs && receivedAt < toMs)) return;
    let ts: unknown;
    try {
      ts = (JSON.parse(message.data) as { ts?: unknown }).ts;
    } catch {
      return;
    }
    if (typeof ts !== 'number' || !Number.isFinite(ts)) return;
    out.push({ event: message.event, receivedAt, lagMs: receivedAt - ts });
  });
  return out;
}
