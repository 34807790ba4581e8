import type { RelayPorts } from '../context';
import type { BypassDecider } from '../deciders/bypass';
import { lifecycleEntry } from '../events/announce';
import type { Packer } from '../send/packer';
import type { SendQueue } from '../send/queue';
import { inFlight } from '../store/queries';

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
    let resent = 0;
    let tracked = 0;
    // Passengers of a pack still in flight wait for it, held, rather than go out alone beside it.
    const held = await this.packer.adoptAfterRestart();
    for (const tx of await this.d.store.live()) {
      const flying = inFlight(tx);
      if (held.has(tx.tx_id)) {
        tracked++;
      } else if (flying?.stage === 'journaled' && tx.wires) {
        this.queue.queueSend(tx, flying.attempt);
        resent++;
      } else if (tx.attempts.length > 0) {
        tracked++;
      }
      // Bypass decides at enqueue; a transaction accepted just before a crash has had no decision yet.
      if (!flying && tx.state === 'pending' && !tx.stopped && this.d.bypass.enabled)
        void this.bypass.submit(tx.tx_id);
    }
    return { resent, tracked, relogged };
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
