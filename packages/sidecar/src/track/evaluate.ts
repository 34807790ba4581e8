import { TX_PROGRESS_PATH, isTerminalTxState, lossGrace } from '@solrelay/core';
import type { RelayPorts } from '../context';
import type { Settler } from '../settle/settle';
import { inFlight, signaturesOf } from '../store/queries';
import type { StoredAttempt, StoredTx } from '../store/records';
import { blockOrderNeeded, creditedAttempt, tipsInUserSlot } from './credit';
import { attributeFault, type FaultApplier } from './fault';
import { diagnoseTipTransaction, diagnoseUserTransactions } from '../operator/diagnose';
import {
  TIP_LANDING_HORIZON_SLOTS,
  commitmentRank,
  landingGoneBy,
  progress,
  windowPassed,
  inheritedTipMayLand,
  type StatusMap,
} from './judge';
import { readStatusesInto } from './read-statuses';

/**
 * What tracking asks of packing (send/packer.ts answers it): which transaction rides no more, which pack a rider rode
 * in, and whether a rider is why a pack did not land. Declared here so tracking does not reach back into sending.
 */
export interface PackingPort {
  /** `txId` sank a pack: it never rides again. */
  exclude(txId: string): void;
  /** A pack failed with no member named: none of its transactions rides again. */
  excludeAll(txId: string, attempt: StoredAttempt): void;
  /** The packed bundle `txId` last rode in, if it did. */
  carrierOf(txId: string): string | null;
  /** The rider of `attempt` to blame for its pack not landing, if one is. */
  faultOf(attempt: StoredAttempt): Promise<{ txId: string; detail: string } | null>;
}

/** Reads of a finalized block that must fail before the statuses' guess names the bundle that landed. */
const GUESS_AFTER_UNREADABLE_READS = 5;

/**
 * Evaluation of one transaction after a status read: drops readings of dead slots, counts leaked tips, and hands
 * settlement what the statuses prove (a user transaction failed on chain; the target window passed without a
 * landing; the signatures reached a commitment). The verdicts themselves are the pure functions of `judge.ts`.
 */
export class Evaluator {
  /** Signatures of blocks read to tell apart tips that share a slot, by slot (a confirmed block does not change). */
  private readonly blockOrders = new Map<number, readonly string[]>();
  /** `tx_id:slot` pairs whose credit the block order decided and that were logged (once each; recent only). */
  private readonly decidedByBlock = new Set<string>();
  /** `tx_id:slot` pairs whose finalized block could not be read, and how many times. */
  private readonly unreadableAtFinalized = new Map<string, number>();
  /** `tx_id:signature` of user signatures seen landed after their transaction ended failed or expired (reported once). */
  private readonly landedAfterTerminal = new Set<string>();

  constructor(
    private readonly d: Pick<RelayPorts, 'chain' | 'log' | 'metrics' | 'now' | 'oracle' | 'rpc' | 'store'>,
    private readonly settle: Settler,
    /** Applies the verdict on whose fault a lost attempt was. */
    private readonly faults: Pick<FaultApplier, 'apply'>,
    /** Packing: which pack a rider rode in, and whether a rider sank one. */
    private readonly packing: Pick<PackingPort, 'carrierOf' | 'faultOf'> = {
      carrierOf: () => null,
      faultOf: () => Promise.resolve(null),
    },
  ) {}

  /**
   * Under the transaction's lock, for a terminal transaction: a lost attempt's tip that landed alone afterwards
   * (confirmed, in a live slot) was paid: recorded as leaked, with its lifecycle entry, like a leak seen in flight.
   */
  async watchLateTips(txId: string, statuses: StatusMap): Promise<void> {
    const tx = await this.d.store.get(txId);
    if (!tx || !isTerminalTxState(tx.state)) return;
    this.checkLandedAfterTerminal(tx, statuses);
    for (const a of tx.attempts) {
      if (!a.tip_signature || a.leaked || a.stage !== 'failed') continue;
      const tipStatus = statuses.get(a.tip_signature);
      if (!tipStatus || this.d.chain.deadSlots.has(tipStatus.slot)) continue;
      if (commitmentRank(tipStatus.confirmationStatus) < 1) continue;
      await this.settle.markLeaked(tx, a, tipStatus.slot, { afterEnd: true });
    }
  }

  /**
   * `failed` and `expired` mean the transaction provably cannot land, so a user signature of one seen on chain
   * afterwards would be a broken proof. Impossible by construction; watched anyway (while its blockhash could still
   * be live), logged as an error and counted (`relay_landed_after_terminal_total`, which the fault matrix expects
   * to stay 0). The record is not changed: a terminal state is final, and the metric is the alarm.
   */
  private checkLandedAfterTerminal(tx: StoredTx, statuses: StatusMap): void {
    // A transaction that failed on chain (its own error) ended from that landing: nothing to contradict.
    if ((tx.state !== 'failed' && tx.state !== 'expired') || tx.landed_slot !== null) return;
    // One of them on chain with its own error (uncled and re-broadcast apart, or sent by someone else): a failure,
    // as the record says, whatever its siblings did.
    if (tx.state === 'failed' && tx.signatures.some((s) => statuses.get(s)?.err)) return;
    for (const signature of tx.signatures) {
      const status = statuses.get(signature);
      if (!status || this.d.chain.deadSlots.has(status.slot)) continue;
      const key = `${tx.tx_id}:${signature}`;
      if (this.landedAfterTerminal.has(key)) continue;
      this.landedAfterTerminal.add(key);
      if (this.landedAfterTerminal.size > 10_000) this.landedAfterTerminal.clear();
      this.d.metrics.landedAfterTerminal.inc({ state: tx.state });
      this.d.log.error(
        { tx_id: tx.tx_id, signature, slot: status.slot, state: tx.state, err: status.err ?? null },
        `a ${tx.state} transaction's signature landed: its terminal state was not proof`,
      );
    }
  }

  /** Under the transaction's lock: judge its statuses and settle what they show. */
  async evaluate(
    txId: string,
    statuses: StatusMap,
    readAt: { slot: number; ts: number; contextSlot?: number },
  ): Promise<void> {
    let tx = await this.d.store.get(txId);
    if (!tx || isTerminalTxState(tx.state)) return;
    // Moved to a slot that died while the move was being written (the dead-slot notice came in between): undo it.
    const early = tx.state === 'landed' || tx.state === 'processed';
    if (early && tx.landed_slot !== null && this.d.chain.deadSlots.has(tx.landed_slot)) {
      await this.settle.unland(tx.tx_id, tx.landed_slot);
      return;
    }
    // Statuses read before a slot was declared dead describe a fork that is gone. Only this transaction's
    // signatures are looked at here (the map holds every followed one: scanning it whole per transaction was
    // quadratic in the in-flight count, the largest cost of a busy tracker).
    for (const signature of signaturesOf(tx)) {
      const status = statuses.get(signature);
      if (status && this.d.chain.deadSlots.has(status.slot)) statuses.delete(signature);
    }
    const userStatuses = tx.signatures.map((s) => statuses.get(s));
    const landedAll = userStatuses.every((s) => s !== undefined);
    const failedStatus = userStatuses.find((s) => s && s.err);
    const now = this.d.now();

    // A landing whose block left the chain without notice: a block on an abandoned fork gets no dead-slot message
    // (Yellowstone sends SLOT_DEAD only on replay failure); its slot never confirms and its statuses turn null. Proof
    // (DESIGN §2): the root has passed the landing slot, the answer comes from a node that has seen that root, and
    // the chain's history has none of the user transactions either.
    const gone = userStatuses.every((s) => s === undefined);
    if (early && gone && tx.landed_slot !== null && (await this.landingGone(tx, tx.landed_slot, readAt))) {
      this.d.metrics.orphanedLandings.inc();
      this.d.log.info(
        { tx_id: tx.tx_id, slot: tx.landed_slot, finalized_slot: this.d.chain.finalizedSlot },
        'landing gone from the chain (abandoned fork, no dead-slot notice): back to pending',
      );
      await this.settle.unland(
        tx.tx_id,
        tx.landed_slot,
        `the block of slot ${tx.landed_slot} left the chain`,
      );
      return;
    }

    // Tips that landed without their bundle (an uncled block broke it up and its transactions were re-broadcast one
    // by one): leaked. That is every tip on chain but the one of the bundle that landed with the user transactions,
    // counted once confirmed (a processed tip can still be rolled back with its block, and then was never paid).
    if (landedAll) await this.readTipsPastHorizon(tx, statuses);
    const credit = landedAll ? await this.credit(tx, statuses) : { attempt: null, unresolved: [] };
    const credited = credit.attempt;
    let leaks = 0;
    for (const a of tx.attempts) {
      if (!a.tip_signature || a.leaked || a === credited || credit.unresolved.includes(a)) continue;
      const tipStatus = statuses.get(a.tip_signature);
      if (tipStatus && commitmentRank(tipStatus.confirmationStatus) >= 1) {
        leaks++;
        await this.settle.markLeaked(tx, a, tipStatus.slot);
        if (!a.outcome) {
          await this.settle.settleFailed(tx, a, 'dropped', {
            countRetry: false,
            detail: 'tip leaked: the tip transaction landed without the bundle',
            // The user transactions are on chain (another way): no new attempt, the tracker moves them on below.
            ...(landedAll ? { final: false } : {}),
          });
        }
      }
    }
    // What follows is judged on the record as the leaks left it.
    if (leaks > 0) {
      tx = await this.d.store.get(txId);
      if (!tx || isTerminalTxState(tx.state)) return;
    }

    if (failedStatus) {
      // A user transaction executed and failed in a block that may still leave the chain: at `processed` a fork can
      // be abandoned, and a block after a consensus migration's boundary can be rolled back (DESIGN §12). Until that
      // block is confirmed (finalized inside a migration window) the failure is not proof; nothing is judged yet.
      const needed = this.d.chain.consensus.inMigrationWindow(failedStatus.slot) ? 2 : 1;
      if (commitmentRank(failedStatus.confirmationStatus) < needed) return;
      // Confirmed: it is on chain for good, nothing else can land.
      for (const a of tx.attempts)
        if (!a.outcome && a.stage !== 'failed')
          await this.settle.settleFailed(tx, a, 'simulation_failed', {
            countRetry: false,
            detail: 'a user transaction failed on chain',
            final: false,
          });
      await this.settle.moveTo(tx, 'failed', failedStatus.slot, now, {
        failure: 'simulation_failed',
        bundleId: credited?.bundle_id ?? null,
      });
      return;
    }
    if (!landedAll) {
      const flying = inFlight(tx);
      // Judged as of the slot the answer describes: a node behind relay has simply not seen the landing yet.
      const seenAt = { slot: Math.min(readAt.slot, readAt.contextSlot ?? readAt.slot), ts: readAt.ts };
      if (
        flying &&
        windowPassed(flying, seenAt, lossGrace(this.d.chain.consensus.snapshot().kind)) &&
        // Adopted from another host: followed, not judged lost, until its tip provably cannot land (DESIGN §10).
        !inheritedTipMayLand(tx, flying, this.d.chain)
      ) {
        // JSON-RPC has no push channel: relay looks, in the order blame goes (the user's own transactions, a
        // rider, relay's tip), only as far as it must; the verdict is the judge's.
        const userFault = await diagnoseUserTransactions(this.d.rpc, tx, seenAt.slot);
        const riderFault = userFault ? null : await this.packing.faultOf(flying);
        const tipFault = userFault || riderFault ? null : await diagnoseTipTransaction(this.d.rpc, flying);
        const verdict = attributeFault(
          tx,
          flying,
          {
            source: 'window',
            detail: `target window ${flying.target_slot ?? '?'}..${flying.window_end_slot} passed without landing`,
            belowFloor: flying.tip_lamports < this.d.oracle.view(now).p50,
          },
          { userFault, riderFault, tipFault },
        );
        await this.faults.apply(tx, flying, verdict);
      }
      return;
    }

    const { slot, target } = progress(
      userStatuses as Array<{ slot: number; confirmationStatus?: string | undefined }>,
    );
    if (TX_PROGRESS_PATH.indexOf(target) <= TX_PROGRESS_PATH.indexOf(tx.state)) return; // a null or lower never demotes
    await this.settle.moveTo(tx, target, slot, now, {
      // A transaction that rode in another's packed bundle names that bundle.
      bundleId: credited?.bundle_id ?? this.packing.carrierOf(tx.tx_id),
      landedSlot: slot,
      attempt: credited,
      inDoubt: credit.unresolved,
    });
  }

  private async landingGone(
    tx: StoredTx,
    landedSlot: number,
    readAt: { contextSlot?: number },
  ): Promise<boolean> {
    if (!landingGoneBy(landedSlot, this.d.chain.finalizedSlot, readAt.contextSlot)) return false;
    try {
      const history = await this.d.rpc.getSignatureStatusesWithContext(tx.signatures, {
        searchTransactionHistory: true,
      });
      // A node behind the root relay knows may not have the landing yet: no proof from it.
      if (history.contextSlot < this.d.chain.finalizedSlot) return false;
      return history.statuses.every((status) => status === null);
    } catch {
      return false; // RPC cannot say now: the next pass asks again
    }
  }

  /**
   * The tips of attempts older than the landing horizon are not read each pass (they cannot land any more), but one
   * may have landed already: the bundle judged lost on a read that came too late, or credited long ago and still
   * finalizing. Once the user transactions are on chain, read those tips too, so the bundle that landed is credited
   * (and its tip counted as paid) however long ago it was built.
   */
  private async readTipsPastHorizon(tx: StoredTx, statuses: StatusMap): Promise<void> {
    const old = tx.attempts
      .filter(
        (a) =>
          a.tip_signature !== null &&
          !a.leaked &&
          !statuses.has(a.tip_signature) &&
          this.d.chain.slot - a.created_slot > TIP_LANDING_HORIZON_SLOTS,
      )
      .map((a) => a.tip_signature as string);
    if (old.length === 0) return;
    try {
      // Old by definition: past the status cache, only the history has them.
      await readStatusesInto(this.d.rpc, old, statuses, { searchTransactionHistory: true });
    } catch {
      /* RPC cannot say now: the next pass reads them again */
    }
  }

  /**
   * The attempt whose bundle landed (rule: `credit.ts`). Where statuses cannot tell whether a tip in the user
   * transactions' slot came with them as a bundle (`blockOrderNeeded`), the block's order can, once it is confirmed
   * (getBlock serves nothing below). Until then nothing is credited and those tips are `unresolved`: none is judged
   * leaked, and the transaction moves on without naming a bundle.
   */
  private async credit(
    tx: StoredTx,
    statuses: StatusMap,
  ): Promise<{ attempt: StoredAttempt | null; unresolved: StoredAttempt[] }> {
    if (!blockOrderNeeded(tx, statuses)) return { attempt: creditedAttempt(tx, statuses), unresolved: [] };
    const sharing = tipsInUserSlot(tx, statuses);
    const user = statuses.get(tx.signatures[0] as string);
    if (!user || commitmentRank(user.confirmationStatus) < 1) return { attempt: null, unresolved: sharing };
    const order = await this.blockOrder(user.slot);
    if (!order) {
      // Finalized and still no block to read (an RPC that keeps no transaction history, or refuses getBlock): the
      // transaction must not end with its bundle unnamed and the landed tip counted leaked, so the statuses' guess
      // decides, said out loud.
      if (user.confirmationStatus !== 'finalized') return { attempt: null, unresolved: sharing };
      // A transient refusal is tried again on later passes; only a block that stays unreadable is guessed.
      const key = `${tx.tx_id}:${user.slot}`;
      const failures = (this.unreadableAtFinalized.get(key) ?? 0) + 1;
      this.unreadableAtFinalized.set(key, failures);
      if (this.unreadableAtFinalized.size > 1024)
        this.unreadableAtFinalized.delete(this.unreadableAtFinalized.keys().next().value as string);
      if (failures < GUESS_AFTER_UNREADABLE_READS) return { attempt: null, unresolved: sharing };
      const guess = creditedAttempt(tx, statuses);
      this.d.log.warn(
        {
          tx_id: tx.tx_id,
          slot: user.slot,
          tips: sharing.map((a) => a.bundle_id),
          bundle_id: guess?.bundle_id,
        },
        'the block is unreadable: the bundle that landed is credited from statuses alone',
      );
      return { attempt: guess, unresolved: [] };
    }
    const attempt = creditedAttempt(tx, statuses, order);
    const key = `${tx.tx_id}:${user.slot}`;
    if (!this.decidedByBlock.has(key)) {
      this.decidedByBlock.add(key);
      for (const old of this.decidedByBlock) {
        if (this.decidedByBlock.size <= 1024) break;
        this.decidedByBlock.delete(old);
      }
      this.d.log.info(
        {
          tx_id: tx.tx_id,
          slot: user.slot,
          tips: sharing.map((a) => a.bundle_id),
          bundle_id: attempt?.bundle_id ?? null,
          guess: creditedAttempt(tx, statuses)?.bundle_id ?? null,
        },
        "a tip in the user transactions' slot is in doubt: the block order names the bundle that landed",
      );
    }
    return { attempt, unresolved: [] };
  }

  private async blockOrder(slot: number): Promise<readonly string[] | null> {
    const known = this.blockOrders.get(slot);
    if (known) return known;
    let order: string[] | null;
    try {
      order = await this.d.rpc.getBlockSignatures(slot);
    } catch {
      return null; // RPC cannot say now: the next pass asks again
    }
    if (!order) return null;
    this.blockOrders.set(slot, order);
    // A handful of recent slots is all the tracker ever asks about again.
    for (const old of this.blockOrders.keys()) {
      if (this.blockOrders.size <= 32) break;
      this.blockOrders.delete(old);
    }
    return order;
  }
}
