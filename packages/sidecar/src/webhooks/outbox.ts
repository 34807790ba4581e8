import {
  isTerminalTxState,
  txStatusChangedEvent,
  webhookMessageId,
  type BundleSettledEvent,
  type RelayEventMap,
  type WebhookEventType,
} from '@solrelay/core';
import type { JournalCodec } from '../journal/journal';
import type { StoredAttempt, StoredTx } from '../store/records';

/**
 * The webhook outbox: every event owed to an endpoint, kept in its own journal until the endpoint took it (or the
 * retry window passed), so a receiver that is down, or a sidecar restart, loses nothing.
 *
 * The events themselves come from the transaction store's journal, which is committed first; an event is added
 * here right after it is published. A crash between the two commits would lose that event, so the outbox also
 * keeps, per transaction, how many status changes and which settled bundles it has taken (a cursor), and on start
 * it adds whatever the store's records hold beyond their cursors (`reconcile`). At least once, by construction.
 */

export interface OutboxMessage {
  /** The `webhook-id`: one per event, the same on every retry and every endpoint, so receivers can dedupe. */
  id: string;
  type: WebhookEventType;
  /** The event's time (ms), the payload's `timestamp`. */
  ts: number;
  data: RelayEventMap[WebhookEventType];
  /** Deliveries of one key (the transaction) to one endpoint go out in order. */
  key: string;
  /** Endpoints (URLs) still owed this message. */
  owed: string[];
  /** When the message was queued (ms): the retry window counts from here. */
  queuedAt: number;
}

interface Cursor {
  /** `tx_status_changed` events taken: one per entry of the record's `history`. */
  statuses: number;
  /** Bundles whose `bundle_settled` was taken. */
  settled: string[];
  terminal: boolean;
}

export interface OutboxState {
  messages: Map<string, OutboxMessage>;
  cursors: Map<string, Cursor>;
  /** Keys of terminal cursors, oldest first (bounded: see TERMINAL_CURSORS_KEPT). */
  terminalOrder: string[];
  /** The cursors were seeded from the store once (the first start with webhooks configured). */
  initialized: boolean;
}

export type OutboxOp =
  | { k: 'init'; cursors: Array<[key: string, cursor: Cursor]> }
  | { k: 'add'; m: OutboxMessage }
  /** A snapshot's still-owed message: like `add`, without advancing the cursor again. */
  | { k: 'restore'; m: OutboxMessage }
  | { k: 'done'; id: string; endpoint: string; how: 'delivered' | 'expired' | 'unconfigured' }
  | { k: 'cursor'; key: string; cursor: Cursor };

/**
 * Terminal transactions whose cursors are kept. A terminal record without a cursor is taken as fully announced at
 * start (nothing is backfilled for it); the store keeps terminal records up to its own retention, so this only has
 * to outlive the crash window, not the store.
 */
export const TERMINAL_CURSORS_KEPT = 10_000;

function trimTerminal(state: OutboxState): void {
  while (state.terminalOrder.length > TERMINAL_CURSORS_KEPT) {
    const oldest = state.terminalOrder.shift() as string;
    state.cursors.delete(oldest);
  }
}

function advance(state: OutboxState, m: Pick<OutboxMessage, 'type' | 'key' | 'data'>): void {
  let cursor = state.cursors.get(m.key);
  // A settlement after its transaction's cursor aged out (a late tip): a new cursor would read as "nothing taken"
  // and re-send the whole history at the next start.
  if (!cursor && m.type === 'bundle_settled') return;
  if (!cursor) {
    cursor = { statuses: 0, settled: [], terminal: false };
    state.cursors.set(m.key, cursor);
  }
  if (m.type === 'bundle_settled') {
    cursor.settled.push((m.data as BundleSettledEvent).bundle_id);
    return;
  }
  cursor.statuses++;
  const txState = (m.data as RelayEventMap['tx_status_changed']).state;
  if (isTerminalTxState(txState) && !cursor.terminal) {
    cursor.terminal = true;
    state.terminalOrder.push(m.key);
    trimTerminal(state);
  }
}

export const outboxCodec: JournalCodec<OutboxState, OutboxOp> = {
  initial: () => ({ messages: new Map(), cursors: new Map(), terminalOrder: [], initialized: false }),
  apply(state, op) {
    switch (op.k) {
      case 'init':
        for (const [key, cursor] of op.cursors) {
          state.cursors.set(key, cursor);
          if (cursor.terminal) state.terminalOrder.push(key);
        }
        trimTerminal(state);
        state.initialized = true;
        return;
      case 'add':
      case 'restore':
        state.messages.set(op.m.id, { ...op.m, owed: [...op.m.owed] });
        if (op.k === 'add') advance(state, op.m);
        return;
      case 'done': {
        const message = state.messages.get(op.id);
        if (!message) return;
        message.owed = message.owed.filter((endpoint) => endpoint !== op.endpoint);
        if (message.owed.length === 0) state.messages.delete(op.id);
        return;
      }
      case 'cursor':
        state.cursors.set(op.key, op.cursor);
        if (op.cursor.terminal) {
          state.terminalOrder.push(op.key);
          trimTerminal(state);
        }
        state.initialized = true;
        return;
    }
  },
  *snapshot(state) {
    // Cursors first (terminal ones oldest first, so the bound drops the same ones after a restart), then what is
    // still owed, in queue order; an empty `init` keeps `initialized` when there are no cursors at all.
    yield { k: 'init', cursors: [] };
    const terminal = new Set(state.terminalOrder);
    for (const [key, cursor] of state.cursors) if (!terminal.has(key)) yield { k: 'cursor', key, cursor };
    for (const key of state.terminalOrder) {
      const cursor = state.cursors.get(key);
      if (cursor) yield { k: 'cursor', key, cursor };
    }
    for (const message of state.messages.values()) yield { k: 'restore', m: message };
  },
};

export interface MissedEvent {
  id: string;
  type: WebhookEventType;
  data: RelayEventMap[WebhookEventType];
  ts: number;
}

/**
 * What a record holds that the outbox has not taken: the events to add for it at start, in the order they
 * happened, with the ids the live events had. A status rebuilt from history carries the record's latest failure
 * class and bundle (history keeps only the state and when); the state and time are exact.
 */
export function missedEvents(record: StoredTx, cursor: Cursor | undefined, now: number): MissedEvent[] {
  const terminal = isTerminalTxState(record.state);
  // No cursor: either its cursor aged out after the transaction ended (nothing missed), or the crash came before
  // its first event was taken (everything missed).
  if (!cursor && terminal) return [];
  const taken = cursor ?? { statuses: 0, settled: [], terminal: false };
  const events: MissedEvent[] = [];
  const last = record.attempts[record.attempts.length - 1];
  for (const [offset, entry] of record.history.slice(taken.statuses).entries()) {
    events.push({
      id: webhookMessageId({ kind: 'status', txId: record.tx_id, index: taken.statuses + offset }),
      type: 'tx_status_changed',
      ts: entry.ts,
      data: txStatusChangedEvent({
        tx_id: record.tx_id,
        state: entry.state,
        bundle_id: last?.bundle_id ?? null,
        tx_signatures: record.signatures,
        failure: record.failure,
        ts: entry.ts,
      }),
    });
  }
  for (const attempt of settledAttempts(record)) {
    if (taken.settled.includes(attempt.bundle_id)) continue;
    const ts = attempt.timeline[attempt.stage]?.ts ?? now;
    events.push({
      id: webhookMessageId({
        kind: 'settled',
        txId: record.tx_id,
        bundleId: attempt.bundle_id,
        stage: attempt.stage,
      }),
      type: 'bundle_settled',
      ts,
      data: {
        bundle_id: attempt.bundle_id,
        stage: attempt.stage,
        failure_type: attempt.stage === 'failed' ? (attempt.outcome ?? 'dropped') : null,
        tx_id: record.tx_id,
        tip_lamports: attempt.tip_lamports,
        retries: record.retries,
        ts,
      },
    });
  }
  // Statuses and settlements interleaved as they happened (a stable sort keeps a status before the settlement
  // published right after it at the same instant).
  return events.sort((a, b) => a.ts - b.ts);
}

/** The attempts whose settlement (`bundle_settled`) was published: those that finalized or failed. */
function settledAttempts(record: StoredTx): Array<StoredAttempt & { stage: 'finalized' | 'failed' }> {
  return record.attempts.filter(
    (a): a is StoredAttempt & { stage: 'finalized' | 'failed' } =>
      a.stage === 'finalized' || a.stage === 'failed',
  );
}

/** The cursor of a record as if every event it holds had been taken (seeding at the first start). */
export function cursorOf(record: StoredTx): Cursor {
  return {
    statuses: record.history.length,
    settled: settledAttempts(record).map((a) => a.bundle_id),
    terminal: isTerminalTxState(record.state),
  };
}
