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
import type { EventHub } from './hub';

/** Tells everyone: `tx_status_changed` on the hub, and bundle entries in the lifecycle (audit) log. */
export class Announcer {
  constructor(
    private readonly d: {
      hub: EventHub;
      lifecycle: LifecycleLog<LifecycleEntry>;
      log: Logger;
      now: () => number;
      enqueuedAt: Map<string, number>;
    },
  ) {}

  publishStatus(
    tx: Pick<StoredTx, 'tx_id' | 'state' | 'signatures' | 'failure' | 'attempts'>,
    bundleId?: string | null,
  ): void {
    if (isTerminalTxState(tx.state)) this.d.enqueuedAt.delete(tx.tx_id);
    const last = tx.attempts[tx.attempts.length - 1];
    this.d.hub.publish(
      'tx_status_changed',
      txStatusChangedEvent({
        tx_id: tx.tx_id,
        state: tx.state,
        bundle_id: bundleId !== undefined ? bundleId : (last?.bundle_id ?? null),
        tx_signatures: tx.signatures,
        failure: tx.failure,
        ts: this.d.now(),
      }),
    );
  }

  /** Write the attempt's entry to the audit log. A write failure is logged, never thrown into the caller's flow. */
  appendLifecycle(tx: StoredTx, attempt: StoredAttempt): void {
    this.d.lifecycle.append(lifecycleEntry(tx, attempt)).catch((error: unknown) => {
      this.d.log.error({ err: error, bundle_id: attempt.bundle_id }, 'lifecycle log write failed');
    });
  }
}

export function lifecycleEntry(tx: StoredTx, attempt: StoredAttempt): LifecycleEntry {
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
