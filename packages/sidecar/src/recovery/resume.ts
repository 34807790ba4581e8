import { isTerminalTxState } from '@solrelay/core';
import type { RelayPorts } from '../context';
import type { BypassDecider } from '../deciders/bypass';
import { lifecycleEntry } from '../events/announce';
import type { Packer } from '../send/packer';
import type { SendQueue } from '../send/queue';
import { inFlight } from '../store/queries';
import type { StoredTx } from '../store/records';

/** Start-up after a restart: resend what was journaled but not acknowledged, and repair the lifecycle log. */
export class Recovery {
  constructor(
    private readonly d: Pick<RelayPorts, 'announce' | 'bypass' | 'lifecycle' | 'store'>,
    private readonly queue: SendQueue,
    private readonly bypass: Pick<BypassDecider, 'submit'>,
    private readonly packer: Pick<Packer, 'adoptAfterRestart'>,
  ) {}

  /**
   * Resend what was journaled but not acknowledged before a restart (the same bytes), resume tracking, and write
   * again the lifecycle entries the crash lost.
   */
  async resumeAfterRestart(): Promise<{ resent: number; tracked: number; relogged: number }> {
    const relogged = await this.relogLostLifecycleEntries();
    // Passengers of a pack still in flight wait for it, held, rather than go out alone beside it.
    const held = await this.packer.adoptAfterRestart();
    const counted = { resent: 0, tracked: 0 };
    for (const tx of await this.d.store.live()) this.resume(tx, held, counted);
    return { ...counted, relogged };
  }

  /**
   * Several hosts (DESIGN §10): resume what the takeover sweep adopted from a host whose session ended, as a restart
   * resumes its own: an attempt journaled and not acknowledged is resent as its committed bytes (never rebuilt, never
   * a new tip), one in flight is tracked until it lands or provably cannot, a pending one is decided (bypass here;
   * the agent is told by the `tx_adopted` event the sweep wrote).
   */
  async resumeAdopted(txIds: readonly string[]): Promise<{ resent: number; tracked: number }> {
    const held = await this.packer.adoptAfterRestart(new Set(txIds));
    const counted = { resent: 0, tracked: 0 };
    for (const txId of txIds) {
      const tx = await this.d.store.get(txId);
      if (tx && !isTerminalTxState(tx.state)) this.resume(tx, held, counted);
    }
    return counted;
  }

  private resume(
    tx: StoredTx,
    held: ReadonlySet<string>,
    counted: { resent: number; tracked: number },
  ): void {
    const flying = inFlight(tx);
    if (held.has(tx.tx_id)) {
      counted.tracked++;
    } else if (flying?.stage === 'journaled' && tx.wires) {
      // Once (a resume tried again after a failure may find it queued already).
      if (!this.queue.has(tx.tx_id, flying.attempt)) this.queue.queueSend(tx, flying.attempt);
      counted.resent++;
    } else if (tx.attempts.length > 0) {
      counted.tracked++;
    }
    // Bypass decides at enqueue; a transaction accepted just before a crash has had no decision yet.
    if (!flying && tx.state === 'pending' && !tx.stopped && this.d.bypass.enabled)
      void this.bypass.submit(tx.tx_id);
  }

  /**
   * A bundle's lifecycle entry is written after the journal records its stage change, so a crash in between (or in
   * the middle of the write: start-up cuts a torn last line) leaves the log a stage behind the journal, or without
   * the bundle. The journal is the truth: append the entry of every attempt whose latest logged entry does not match
   * it. A bundle missing from a partial index is only re-logged when it is newer than the oldest indexed one (older
   * ones were evicted, not lost).
   */
  private async relogLostLifecycleEntries(): Promise<number> {
    const log = this.d.lifecycle;
    const oldest = log.indexesWholeFile ? undefined : log.oldest();
    let relogged = 0;
    for (const tx of await this.d.store.all()) {
      for (const attempt of tx.attempts) {
        if (attempt.stage === 'journaled') continue; // not submitted yet: no entry is due
        const logged = log.get(attempt.bundle_id);
        if (logged) {
          if (logged.stage === attempt.stage && logged.slot_landed === attempt.slot_landed) continue;
        } else if (!log.indexesWholeFile) {
          if (!oldest || (attempt.slot_submitted ?? attempt.created_slot) < oldest.slot_submitted) continue;
        }
        this.d.announce.appendLifecycle(lifecycleEntry(tx, attempt));
        relogged++;
      }
    }
    return relogged;
  }
}
