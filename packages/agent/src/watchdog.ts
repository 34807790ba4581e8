/**
 * The watchdog's sweep (SPEC: the agent re-checks the queue every 30 s, and after any gap): read `/queue`, forget
 * what left it unseen, and re-decide what is pending at the sidecar with no decision under way (a `tx_enqueued` or
 * `bundle_settled` missed during a reconnect gap or before a restart), its state rebuilt from `/tx/{id}`.
 */
import { isTerminalTxState, type RelayError, type TxRecord } from '@solrelay/core';
import type { TrackedTx } from './decision';
import { messageOf } from './log-text';
import type { AgentLog, AgentRelayClient, Clock } from './ports';
import { isTokenRefusal } from './sidecar-errors';

/** What one sweep did: transactions whose record it read, and how many of those it re-decided. */
export type SweepResult = { checked: number; redecided: number };

/** What a sweep needs from the agent. */
export interface WatchdogContext {
  readonly client: Pick<AgentRelayClient, 'queue' | 'tx'>;
  readonly log: AgentLog;
  readonly clock: Clock;
  /** The sweep period: a submitted transaction younger than this is waiting for its settle, not missing it. */
  readonly watchdogMs: number;
  /** The transactions the agent tracks, by id. */
  readonly txs: Map<string, TrackedTx>;
  /** Transactions reflex stopped: they wait in the queue for the sidecar to expire them. */
  readonly stoppedIds: Set<string>;
  /** Transactions with a decision under way. */
  readonly deciding: ReadonlySet<string>;
  isStopped(): boolean;
  /** Whether the sidecar state was read (nothing can be decided before). */
  hasWorld(): boolean;
  kick(txId: string): void;
  forget(txId: string): void;
  refuse(error: RelayError): void;
}

/** One sweep of the queue (see the module comment). */
export async function sweepQueue(ctx: WatchdogContext, reason: string): Promise<SweepResult> {
  const { client, log, clock, txs, stoppedIds, deciding } = ctx;
  if (ctx.isStopped() || !ctx.hasWorld()) return { checked: 0, redecided: 0 };
  // Only what was tracked before /queue was read can be judged by it; a tx_enqueued arriving meanwhile is newer.
  const trackedBefore = new Map(txs);
  let queue;
  try {
    queue = await client.queue();
  } catch (error) {
    if (isTokenRefusal(error)) ctx.refuse(error);
    else log.error(`watchdog: cannot read /queue (${messageOf(error)})`);
    return { checked: 0, redecided: 0 };
  }
  if (ctx.isStopped()) return { checked: 0, redecided: 0 };
  const inQueue = new Set(queue.entries.map((entry) => entry.tx_id));
  // What left the queue without the agent seeing its terminal event.
  for (const [txId, tx] of trackedBefore) if (!inQueue.has(txId) && txs.get(txId) === tx) ctx.forget(txId);
  for (const txId of [...stoppedIds]) if (!inQueue.has(txId)) stoppedIds.delete(txId);
  let checked = 0;
  const missed: string[] = [];
  for (const entry of queue.entries) {
    if (ctx.isStopped()) break;
    // Reflex stopped it; it waits in the queue for the sidecar to expire it. Deciding again would only stop it again.
    if (stoppedIds.has(entry.tx_id)) continue;
    const known = txs.get(entry.tx_id);
    // Pending ones are already re-decided on every slot; only unknown or "submitted" ones can hide a missed event.
    if (known && (known.status === 'pending' || deciding.has(entry.tx_id))) continue;
    // A "submitted" one whose cycle began within the last period is waiting for its settle event, not missing
    // it: the next sweep looks at it. Reading every in-flight record each sweep was hundreds of sequential GETs
    // (landed transactions wait ~32 slots for finality) and showed as the decision-latency tail.
    if (known?.status === 'submitted' && clock.now() - known.cycle_started_ms < ctx.watchdogMs) continue;
    const knownStatus = known?.status;
    let record: TxRecord;
    try {
      record = await client.tx(entry.tx_id);
    } catch (error) {
      log.error(`watchdog: cannot read ${entry.tx_id} (${messageOf(error)})`);
      continue;
    }
    if (ctx.isStopped()) break;
    checked += 1;
    // The event path acted while /tx was read (tracked it, submitted, settled, forgot it): the record may predate
    // that, and acting on it could submit the same attempt twice. The events and the next sweep cover it.
    const current = txs.get(entry.tx_id);
    if (current !== known || current?.status !== knownStatus || deciding.has(entry.tx_id)) continue;
    if (isTerminalTxState(record.state)) {
      ctx.forget(record.tx_id);
      continue;
    }
    const needsDecision = record.state === 'pending' && !attemptInFlight(record);
    txs.set(record.tx_id, trackedFromRecord(record, needsDecision, clock.now()));
    if (needsDecision) missed.push(record.tx_id);
  }
  for (const txId of missed) {
    log.line(`watchdog redecide ${txId} (pending with no decision)`);
    ctx.kick(txId);
  }
  if (reason !== 'interval' || missed.length > 0) {
    log.line(
      `watchdog ${reason} queue=${queue.entries.length} checked=${checked} redecided=${missed.length}`,
    );
  }
  return { checked, redecided: missed.length };
}

/** The last attempt is still out (no outcome, not failed): a new one would be refused (`RELAY_E_TX_WRONG_STATE`). */
function attemptInFlight(record: TxRecord): boolean {
  const last = record.attempts[record.attempts.length - 1];
  return !!last && last.outcome === null && last.stage !== 'failed';
}

/** Rebuild a transaction's state after a restart or a gap: `/tx/{id}` has its attempts with tip and outcome. */
export function trackedFromRecord(record: TxRecord, needsDecision: boolean, nowMs: number): TrackedTx {
  let previous: TrackedTx['previous'] = null;
  for (let i = record.attempts.length - 1; i >= 0; i--) {
    const attempt = record.attempts[i]!;
    if (attempt.outcome) {
      previous = {
        tip_lamports: attempt.tip_lamports,
        outcome: attempt.outcome,
        compute_units: attempt.compute_units ?? null,
      };
      break;
    }
  }
  return {
    tx_id: record.tx_id,
    priority: record.priority,
    max_tip: record.max_tip,
    tip: record.tip,
    enqueue_slot: record.enqueued_slot,
    expires_at_slot: record.expires_at_slot,
    retries: record.retries,
    previous,
    // `/tx/{id}` does not say the next bundle's CU nor its contention: reflex bids the flat percentile until an
    // event tells them.
    compute_units: null,
    contention: null,
    status: needsDecision ? 'pending' : 'submitted',
    cooldown_until_slot: 0,
    cycle_started_ms: nowMs,
  };
}
