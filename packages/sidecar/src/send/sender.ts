import { isTerminalTxState, relayErrorJson } from '@solrelay/core';
import type { RelayContext } from '../context';
import type { Settler, TargetWindow } from '../settle/settle';
import { sendAnswer, type SendBundleResult } from '../upstream/block-engine';
import type { StoredAttempt, StoredTx } from '../store/records';
import type { Packer } from './packer';
import type { SendJob, SendQueue } from './queue';

/** With no bundle-engine leader data, an attempt is judged after this many slots. */
const UNKNOWN_WINDOW_SLOTS = 8;

/**
 * The sender: sends one queued attempt's journaled bytes to the block engine and turns the engine's answer into a
 * verdict: a transport error is not an attempt (same bytes again after a backoff); an id means `submitted`; a
 * refusal settles the attempt (settlement decides what follows).
 */
export class Sender {
  constructor(
    private readonly ctx: RelayContext,
    private readonly settle: Settler,
    private readonly queue: SendQueue,
    private readonly packer: Pick<Packer, 'faultOf' | 'exclude' | 'excludeAll' | 'observeSend'>,
    /**
     * Before an attempt's first send: sign an aged tip again, and pack passengers into its bundle (the attempt
     * builder's and the packer's). Returns the attempt as it goes out.
     */
    private readonly prepareFirstSend: (tx: StoredTx, attempt: StoredAttempt) => Promise<StoredAttempt> = (
      _tx,
      attempt,
    ) => Promise.resolve(attempt),
  ) {}

  /** Send `job`'s bundle to the regional engine `region` (the queue chose it and spent its token). */
  async sendOne(job: SendJob, region: number): Promise<void> {
    // Under the lock: is this attempt still to be sent, and with which bytes?
    const wires = await this.ctx.locks.run(job.txId, async () => {
      const tx = await this.ctx.store.get(job.txId);
      const journaled = tx?.attempts.find((a) => a.attempt === job.attempt);
      if (!tx || !journaled || journaled.stage !== 'journaled' || isTerminalTxState(tx.state)) return null;
      // Timing is checked again as the bundle goes out: a tip that aged in the queue is signed again first, and
      // waiting transactions may ride along (packing).
      let attempt: StoredAttempt;
      try {
        attempt = await this.prepareFirstSend(tx, journaled);
      } catch (error) {
        // The journal could not take the refreshed tip or the pack: the journaled bytes go out later, as they are.
        this.ctx.o.log.warn(
          { err: error, tx_id: tx.tx_id },
          'preparing the first send failed; sending later',
        );
        this.queue.queueSend(tx, journaled.attempt, 1_000);
        return null;
      }
      // The tip transaction's blockhash died before the engine took the bundle: these bytes can never land.
      if (
        attempt.tip_last_valid_block_height !== null &&
        this.ctx.chain.blockHeight > attempt.tip_last_valid_block_height
      ) {
        await this.settle.settleFailed(tx, attempt, 'dropped', {
          countRetry: false,
          detail: 'tip blockhash expired before the engine took the bundle',
        });
        return null;
      }
      return [
        ...(tx.wires ?? []).map((w) => Buffer.from(w, 'base64')),
        ...(attempt.passenger_wires ?? []).map((w) => Buffer.from(w, 'base64')),
        ...(attempt.tip_tx ? [Buffer.from(attempt.tip_tx, 'base64')] : []),
      ];
    });
    if (!wires) return;
    const result = await this.ctx.o.engine.sendBundle(wires, region);
    this.ctx.o.crashPoint?.('attempt.sent');
    // A region that failed in transport cools (for what it asked, else its own backoff); one that answered is well.
    if (!result.ok && result.kind === 'transport') this.queue.cool(region, result.retryAfterMs);
    else this.queue.answered(region);
    this.ctx.o.metrics.engineRequests.inc({
      region: this.ctx.o.engine.regions[region]?.name ?? String(region),
      result: sendAnswer(result),
    });
    await this.ctx.locks.run(job.txId, () => this.recordSendResult(job, region, result));
  }

  private async recordSendResult(job: SendJob, region: number, result: SendBundleResult): Promise<void> {
    const tx = await this.ctx.store.get(job.txId);
    const attempt = tx?.attempts.find((a) => a.attempt === job.attempt);
    if (!tx || !attempt || attempt.stage !== 'journaled' || isTerminalTxState(tx.state)) return;
    if (!result.ok && result.kind === 'transport') {
      // Not an attempt: resend the identical bytes after a backoff.
      this.ctx.lastErrors.engine = result.message;
      this.ctx.o.metrics.transportErrors.inc({ status: String(result.status ?? 'unknown') });
      const sendErrors = attempt.send_errors + 1;
      await this.ctx.store.transition(
        tx.tx_id,
        { attempt: { n: attempt.attempt, stage: 'journaled' } },
        {
          set: {
            last_error: relayErrorJson('RELAY_E_UPSTREAM_UNREACHABLE', {
              upstream: 'block engine',
              reason: result.message,
              status: result.status,
            }),
          },
          attempts: [{ n: attempt.attempt, set: { send_errors: sendErrors } }],
        },
      );
      // The same bytes go out again as soon as a region can take them (the one that failed cools: sendOne).
      this.queue.queueSend(tx, attempt.attempt);
      return;
    }
    // The engine answered (with an id or a verdict): it is reachable.
    this.ctx.lastErrors.engine = null;
    if (result.ok) {
      this.packer.observeSend(1 + (attempt.passengers?.length ?? 0));
      if (result.bundleId !== attempt.bundle_id) {
        this.ctx.o.log.warn(
          { tx_id: tx.tx_id, ours: attempt.bundle_id, engine: result.bundleId },
          'engine returned a different bundle id',
        );
      }
      await this.settle.markSubmitted(tx, attempt, (slot) => this.targetWindow(slot));
      return;
    }
    switch (result.rejection) {
      case 'already_processed':
        // Something of this bundle already executed: follow the signatures to find out what.
        await this.settle.markSubmitted(tx, attempt, (slot) => this.targetWindow(slot));
        return;
      case 'blockhash_expired': {
        const userDead = await this.ctx.blockhashes.anyUserBlockhashDead(tx);
        // A passenger's dead blockhash refused the pack: not the lead's, nor the tip's.
        const rider = userDead ? null : await this.packer.faultOf(attempt);
        if (rider) {
          this.packer.exclude(rider.txId);
          await this.settle.settleFailed(tx, attempt, 'dropped', {
            countRetry: false,
            detail: `transaction ${rider.txId} riding in this bundle: ${rider.detail}: ${result.message}`,
          });
          return;
        }
        // Then the tip's blockhash was the one refused: the next attempt must not reuse the cached one.
        if (!userDead) this.ctx.o.rpc.forgetBlockhash();
        await this.settle.settleFailed(tx, attempt, 'dropped', {
          countRetry: false,
          ...(userDead ? { stop: true } : {}),
          detail: userDead ? result.message : `tip transaction refused: ${result.message}`,
        });
        return;
      }
      case 'invalid_bundle':
        // A packed bundle refused for its form may be refused for a passenger's: nobody rides again, and the lead
        // goes on alone rather than fail for what may not be its own.
        if ((attempt.passengers?.length ?? 0) > 0) {
          this.packer.excludeAll(tx.tx_id, attempt);
          await this.settle.settleFailed(tx, attempt, 'dropped', {
            countRetry: false,
            detail: `packed bundle refused (its transactions go alone from now): ${result.message}`,
          });
          return;
        }
        await this.settle.settleFailed(tx, attempt, 'invalid_bundle', {
          countRetry: false,
          detail: result.message,
        });
        return;
      case 'dropped':
        // A refusal that says nothing about the bundle's form: an attempt that did not land, worth a retry.
        await this.settle.settleFailed(tx, attempt, 'dropped', {
          countRetry: true,
          detail: `engine: ${result.message}`,
        });
        return;
    }
  }

  /** The bundle-engine window an attempt sent now can land in: its first slot and the last slot of that leader. */
  private targetWindow(slot: number): TargetWindow {
    const next = this.ctx.o.leaders.nextBundleEngineSlot(slot, 64);
    if (next === null) return { slot: null, end: slot + UNKNOWN_WINDOW_SLOTS };
    const leader = this.ctx.o.leaders.leaderAt(next);
    let end = next;
    while (end - next < 16 && this.ctx.o.leaders.leaderAt(end + 1) === leader && leader !== null) end++;
    return { slot: next, end };
  }
}
