import { isRelayError, isTerminalTxState, relayErrorJson } from '@solrelay/core';
import type { RelayPorts } from '../context';
import type { Settler } from '../settle/settle';
import { bundleEngineWindow, type TargetWindow } from '../settle/window';
import { sendAnswer, type SendBundleResult } from '../upstream/block-engine';
import type { StoredAttempt, StoredTx } from '../store/records';
import { isDatabaseOutage, isStoreConflict } from '../store/store';
import { attributeFault, type FaultApplier } from '../track/fault';
import type { Packer } from './packer';
import type { RegionTurn, SendJob, SendQueue } from './queue';

/** A send cut off by a store failure is tried again after this long. */
const RETRY_AFTER_STORE_FAILURE_MS = 1_000;
/**
 * A send that failed for any other reason (a bug, a record the code cannot handle) is tried again after 1 s, then
 * 2, 4, ... up to this: never dropped (its attempt is journaled and holds a tip), never a silent 1 Hz loop either.
 */
const MAX_RETRY_AFTER_UNEXPECTED_MS = 60_000;

/**
 * The sender: sends one queued attempt's journaled bytes to the block engine and turns the engine's answer into a
 * verdict: a transport error is not an attempt (same bytes again after a backoff); an id means `submitted`; a
 * refusal settles the attempt (settlement decides what follows).
 */
export class Sender {
  constructor(
    private readonly d: Pick<
      RelayPorts,
      | 'blockhashes'
      | 'chain'
      | 'crashPoint'
      | 'engine'
      | 'isClosed'
      | 'lastErrors'
      | 'leaders'
      | 'locks'
      | 'log'
      | 'metrics'
      | 'now'
      | 'rpc'
      | 'store'
    >,
    private readonly settle: Settler,
    private readonly queue: SendQueue,
    private readonly packer: Pick<Packer, 'faultOf' | 'observeSend'>,
    /** Applies the verdict on whose fault a refusal was. */
    private readonly faults: Pick<FaultApplier, 'apply'>,
    /**
     * Before an attempt's first send: sign an aged tip again, and pack passengers into its bundle (the attempt
     * builder's and the packer's). Returns the attempt as it goes out.
     */
    private readonly prepareFirstSend: (tx: StoredTx, attempt: StoredAttempt) => Promise<StoredAttempt> = (
      _tx,
      attempt,
    ) => Promise.resolve(attempt),
  ) {}

  /**
   * Send `job`'s bundle to the regional engine `region` (the queue chose it and spent its token). A failure of the
   * store on the way (the database unavailable, or a commit whose outcome is unknown) never loses the job: it goes
   * back to the queue and is tried again, re-read from the store first, so what goes out is always what the store
   * holds committed (the same bytes again at most, never a tip it does not hold).
   */
  async sendOne(job: SendJob, turn: RegionTurn): Promise<void> {
    try {
      await this.send(job, turn);
    } catch (error) {
      if (this.d.isClosed()) return;
      // Another host of the fleet runs it now (its row moved while this one was paused): not this host's to send.
      if (isRelayError(error, 'RELAY_E_TX_OWNED_ELSEWHERE')) {
        this.d.log.info(
          { tx_id: job.txId, owner: error.details.owner_host },
          'send dropped: another host runs it',
        );
        return;
      }
      // The store away, a commit of unknown outcome, or another writer moved the record: expected, and tried again
      // shortly (re-read first, so what goes out is what the store holds).
      if (isDatabaseOutage(error) || isStoreConflict(error)) {
        const level = isDatabaseOutage(error) ? 'debug' : 'warn';
        this.d.log[level]({ err: error, tx_id: job.txId }, 'send interrupted; trying again');
        this.queue.push({ ...job, failures: 0, notBefore: this.d.now() + RETRY_AFTER_STORE_FAILURE_MS });
        return;
      }
      // Anything else is a fault of relay's: said at error level and counted (relay_send_failures_total), and tried
      // again with a doubling back-off, so it is seen and does not spin.
      const failures = (job.failures ?? 0) + 1;
      const retryInMs = Math.min(
        RETRY_AFTER_STORE_FAILURE_MS * 2 ** Math.min(failures - 1, 16),
        MAX_RETRY_AFTER_UNEXPECTED_MS,
      );
      this.d.metrics.sendFailures.inc();
      this.d.log.error(
        { err: error, tx_id: job.txId, attempt: job.attempt, failures, retry_in_ms: retryInMs },
        'send failed unexpectedly; trying again later',
      );
      this.queue.push({ ...job, failures, notBefore: this.d.now() + retryInMs });
    }
  }

  private async send(job: SendJob, turn: RegionTurn): Promise<void> {
    const { region } = turn;
    // Under the lock: is this attempt still to be sent, and with which bytes?
    const wires = await this.d.locks.run(job.txId, async () => {
      const tx = await this.d.store.get(job.txId);
      // Several hosts: a transaction another host adopted (while this one was paused) is that host's to send.
      if (tx && !this.d.store.owns(tx.tx_id)) return null;
      const journaled = tx?.attempts.find((a) => a.attempt === job.attempt);
      if (!tx || !journaled || journaled.stage !== 'journaled' || isTerminalTxState(tx.state)) return null;
      // Timing is checked again as the bundle goes out: a tip that aged in the queue is signed again first, and
      // waiting transactions may ride along (packing).
      let attempt: StoredAttempt;
      try {
        attempt = await this.prepareFirstSend(tx, journaled);
      } catch (error) {
        // The store could not take the refreshed tip or the pack (or its commit's outcome is unknown): nothing goes out
        // now; later, what the store then holds goes out, as it is (re-read first).
        const level = isDatabaseOutage(error) ? 'debug' : 'warn';
        this.d.log[level]({ err: error, tx_id: tx.tx_id }, 'preparing the first send failed; sending later');
        this.queue.queueSend(tx, journaled.attempt, 1_000);
        return null;
      }
      // The tip transaction's blockhash died before the engine took the bundle: these bytes can never land.
      if (
        attempt.tip_last_valid_block_height !== null &&
        this.d.chain.blockHeight > attempt.tip_last_valid_block_height
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
    // The request leaves a paced token after the region's last one and the engine's second after its answer
    // (SendQueue), however long this one took to prepare.
    await turn.ready();
    let sent = false;
    let result: SendBundleResult;
    try {
      if (this.d.isClosed()) return;
      // A 429 came from that region while this one waited its turn: back to the queue (the same bytes, later).
      if (this.queue.isCooling(region)) {
        this.queue.push({ ...job, notBefore: this.d.now() });
        return;
      }
      // The queue held sends when it took this job; a consensus migration's window may have opened since (the lock,
      // the store read and a re-signed tip came in between). Its blocks pack no user transactions (DESIGN §12): the
      // job goes back to the queue, which holds it until the window closes.
      if (this.d.chain.consensus.snapshot().holdSends) {
        this.queue.push({ ...job, notBefore: this.d.now() });
        return;
      }
      sent = true;
      result = await this.d.engine.sendBundle(wires, region);
    } finally {
      turn.end(sent);
    }
    this.d.crashPoint?.('attempt.sent');
    // A region that failed in transport cools (for what it asked, else its own backoff); one that answered is well.
    if (!result.ok && result.kind === 'transport') this.queue.cool(region, result.retryAfterMs);
    else this.queue.answered(region);
    this.d.metrics.engineRequests.inc({
      region: this.regionName(region),
      result: sendAnswer(result),
    });
    await this.d.locks.run(job.txId, () => this.recordSendResult(job, region, result));
  }

  private async recordSendResult(job: SendJob, region: number, result: SendBundleResult): Promise<void> {
    const tx = await this.d.store.get(job.txId);
    const attempt = tx?.attempts.find((a) => a.attempt === job.attempt);
    // Another send of the same journaled bytes was recorded first (the bytes are read under the lock, sent outside
    // it: a job queued again by the outage re-read while the sender held it goes out twice). The same transactions,
    // the same signatures, the tip's among them: at most one of the two can land, so no second tip can come of it.
    // Counted, nothing more to do.
    if (
      tx &&
      attempt &&
      attempt.stage !== 'journaled' &&
      !isTerminalTxState(tx.state) &&
      attempt.stage !== 'failed'
    )
      this.d.metrics.repeatedSends.inc();
    // The engine took it but what followed was recorded first (its landing came in before this answer): the region
    // that took it is still the attempt's.
    if (
      tx &&
      attempt &&
      result.ok &&
      attempt.stage !== 'journaled' &&
      attempt.stage !== 'failed' &&
      !attempt.region
    ) {
      await this.settle.recordRegion(tx, attempt, this.regionName(region));
      return;
    }
    if (!tx || !attempt || attempt.stage !== 'journaled' || isTerminalTxState(tx.state)) return;
    if (!result.ok && result.kind === 'transport') {
      // Not an attempt: resend the identical bytes after a backoff.
      this.d.lastErrors.engine = result.message;
      this.d.metrics.transportErrors.inc({ status: String(result.status ?? 'unknown') });
      const sendErrors = attempt.send_errors + 1;
      await this.d.store.transition(
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
    this.d.lastErrors.engine = null;
    if (result.ok) {
      this.packer.observeSend(1 + (attempt.passengers?.length ?? 0));
      if (result.bundleId !== attempt.bundle_id) {
        this.d.log.warn(
          { tx_id: tx.tx_id, ours: attempt.bundle_id, engine: result.bundleId },
          'engine returned a different bundle id',
        );
      }
      await this.settle.markSubmitted(
        tx,
        attempt,
        (slot) => this.targetWindow(slot),
        this.regionName(region),
      );
      return;
    }
    if (result.rejection === 'already_processed') {
      // Something of this bundle already executed: follow the signatures to find out what.
      await this.settle.markSubmitted(
        tx,
        attempt,
        (slot) => this.targetWindow(slot),
        this.regionName(region),
      );
      return;
    }
    // A refusal: whose fault it is (the user's blockhash, a rider's, the tip's, the bundle's form) decides what
    // follows. Only what can tell is looked at: the user's blockhash for an expired one, the riders of a pack.
    const packed = (attempt.passengers?.length ?? 0) > 0;
    const userBlockhashDead =
      result.rejection === 'blockhash_expired' && (await this.d.blockhashes.anyUserBlockhashDead(tx));
    const riderFault =
      packed && result.rejection !== 'invalid_bundle' && !userBlockhashDead
        ? await this.packer.faultOf(attempt)
        : null;
    const verdict = attributeFault(
      tx,
      attempt,
      { source: 'engine-refusal', rejection: result.rejection, message: result.message },
      { userBlockhashDead, riderFault },
    );
    await this.faults.apply(tx, attempt, verdict);
  }

  /** A regional engine's name as /status and /metrics give it (its index when it has none). */
  private regionName(region: number): string {
    return this.d.engine.regions[region]?.name ?? String(region);
  }

  /** The bundle-engine window an attempt sent now can land in: its first slot and the last slot of that leader. */
  private targetWindow(slot: number): TargetWindow {
    return bundleEngineWindow(this.d.leaders, slot);
  }
}
