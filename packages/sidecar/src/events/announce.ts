import {
  isTerminalTxState,
  timelineDurations,
  txStatusChangedEvent,
  type BundleStage,
  type LifecycleEntry,
} from '@solrelay/core';
import type { Logger } from 'pino';
import type { LifecycleLog } from '../lifecycle/log';
import type { StoredAttempt, StoredTx } from '../store/records';
import type { ChangeFeed, StoreChange, TxEvent } from '../store/store';
import type { EventHub } from './hub';

/**
 * Tells everyone what the store committed: each change's events go to the hub (SSE, and webhooks through it) and
 * its lifecycle entries to the audit log, in commit order. Nothing is announced that is not durable. On an event
 * log (PostgreSQL, `hub.followsStore`) the hub takes the events from the log's follower instead, and this only
 * keeps the local bookkeeping (the audit log file, decision-latency starts).
 */
export class Announcer {
  constructor(
    private readonly d: {
      hub: EventHub;
      lifecycle: LifecycleLog<LifecycleEntry>;
      log: Logger;
      enqueuedAt: Map<string, number>;
      now: () => number;
    },
  ) {}

  /** Follow the store's change feed; returns the unsubscribe function. */
  follow(feed: ChangeFeed): () => void {
    return feed.subscribe((change) => this.announce(change));
  }

  private announce(change: StoreChange): void {
    for (const event of change.events) {
      if (event.kind === 'lifecycle') {
        this.appendLifecycle(event.entry);
        continue;
      }
      if (event.kind === 'tx_status_changed' && isTerminalTxState(event.data.state))
        this.d.enqueuedAt.delete(event.data.tx_id);
      if (this.d.hub.followsStore) continue;
      if (event.kind === 'bundle_settled') {
        this.d.hub.publish(event.kind, event.data);
        continue;
      }
      // A status event's `ts` is when it was told, after the commit (decision latency is measured from it).
      this.d.hub.publish(event.kind, { ...event.data, ts: this.d.now() });
    }
  }

  /** Write an entry to the audit log. A write failure is logged, never thrown into the caller's flow. */
  appendLifecycle(entry: LifecycleEntry): void {
    this.d.lifecycle.append(entry).catch((error: unknown) => {
      this.d.log.error({ err: error, bundle_id: entry.bundle_id }, 'lifecycle log write failed');
    });
  }
}

/** `tx_status_changed` for a record in the state it moves to. */
export function statusEvent(
  tx: Pick<StoredTx, 'tx_id' | 'state' | 'signatures' | 'failure' | 'attempts'>,
  bundleId: string | null | undefined,
  ts: number,
): TxEvent {
  const last = tx.attempts[tx.attempts.length - 1];
  return {
    kind: 'tx_status_changed',
    data: txStatusChangedEvent({
      tx_id: tx.tx_id,
      state: tx.state,
      bundle_id: bundleId !== undefined ? bundleId : (last?.bundle_id ?? null),
      tx_signatures: tx.signatures,
      failure: tx.failure,
      ts,
    }),
  };
}

export function lifecycleEntry(tx: Pick<StoredTx, 'tx_id'>, attempt: StoredAttempt): LifecycleEntry {
  const stage: BundleStage = attempt.stage === 'journaled' ? 'submitted' : attempt.stage;
  const durations = timelineDurations(attempt.timeline);
  return {
    v: 1,
    bundle_id: attempt.bundle_id,
    tx_id: tx.tx_id,
    attempt: attempt.attempt,
    stage,
    failure: stage === 'failed' ? (attempt.outcome ?? 'dropped') : null,
    slot_submitted: attempt.slot_submitted ?? attempt.created_slot,
    slot_landed: attempt.slot_landed,
    tip_lamports: attempt.tip_lamports,
    tip_floor_at_submit: attempt.floor_at_submit,
    compute_units: attempt.decision.pricing?.compute_units ?? null,
    tip_per_cu: attempt.decision.pricing?.tip_per_cu ?? null,
    contention: attempt.decision.pricing?.contention ?? null,
    priced_by: attempt.decision.pricing?.signal ?? null,
    region: attempt.region ?? null,
    leader: attempt.leader,
    decision_mode: attempt.decision.mode,
    bypass: attempt.decision.bypass,
    escalated: attempt.decision.escalated,
    ...durations,
    timeline: attempt.timeline,
    transactions: attempt.bundle_signatures,
    ai_decision_trace: attempt.decision.trace,
  };
}
