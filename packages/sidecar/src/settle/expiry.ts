import type { RelayPorts } from '../context';
import { tipStillLive } from '../chain/tip-life';
import { inFlight } from '../store/queries';
import type { Settler } from './settle';

/** A history answer counts as proof only from a node at most this many slots behind relay's stream. */
const CONTEXT_SLACK_SLOTS = 2;

/**
 * Passes in a row a transaction past its expiry may be skipped because its lock is busy; the next pass waits for the
 * lock. A decider that submits again and again (an agent past the expiry slot, refused each time) must not keep a
 * transaction from ever ending: the sidecar enforces expiry whatever the decider does.
 */
const BUSY_PASSES_BEFORE_WAITING = 8;

/** Expiry: the slot's tracking pass asks it which transactions can provably no longer land, and settles them. */
export class Expiry {
  /** Per transaction past its expiry: the passes in a row that found its lock busy. */
  private readonly busyPasses = new Map<string, number>();

  constructor(
    private readonly d: Pick<RelayPorts, 'blockhashes' | 'chain' | 'locks' | 'now' | 'rpc' | 'store'>,
    private readonly settle: Settler,
  ) {}

  /**
   * `expired` only with proof that nothing can land: attempts have stopped (or the expiry slot passed) and a user
   * transaction's blockhash is dead for good (`BlockhashChecks.provablyDead`) or its durable nonce advanced without
   * it.
   */
  async checkExpiry(): Promise<void> {
    // The finalized block height, read once per pass and only when something waits for proof.
    let finalizedHeight: number | null | undefined;
    const live = await this.d.store.live();
    // Counts of transactions no longer live are dropped (none to drop, the usual case: no set is built).
    if (this.busyPasses.size > 0) {
      const liveIds = new Set(live.map((tx) => tx.tx_id));
      for (const id of this.busyPasses.keys()) if (!liveIds.has(id)) this.busyPasses.delete(id);
    }
    for (const tx of live) {
      if (tx.state !== 'pending' && tx.state !== 'submitted') continue;
      // Through a migration window nothing is expired: blocks after the transition may be rolled back, and a
      // blockhash that looks dead now may be alive on the surviving fork.
      if (this.d.chain.consensus.snapshot().migrating) return;
      // DESIGN §10, rule 3: an attempt adopted from another host was kept unsettled while its tip might land; once it
      // provably cannot, it is settled here whatever stage it was left in (journaled: a resend the engine refused, or
      // one whose tip died before it went out), so the transaction is decided again.
      const held = inFlight(tx);
      if (
        held &&
        held.attempt <= (tx.inherited_attempts ?? 0) &&
        !tipStillLive(held, this.d.chain) &&
        !this.d.locks.isBusy(tx.tx_id)
      ) {
        await this.d.locks.run(tx.tx_id, async () => {
          const current = await this.d.store.get(tx.tx_id);
          const flying = current ? inFlight(current) : undefined;
          if (!current || flying?.attempt !== held.attempt) return;
          await this.settle.settleFailed(current, flying, 'dropped', {
            countRetry: false,
            detail: 'an attempt inherited from another host whose tip can no longer land',
          });
        });
        continue;
      }
      // relay's give-up slot, not counting a migration window's vote-only slots the transaction lived through.
      const pastExpiry = this.d.chain.slot > this.d.chain.deadlineOf(tx);
      if (!tx.stopped && !pastExpiry) continue;
      if (this.d.locks.isBusy(tx.tx_id)) {
        // Busy now: look again next slot, and after enough busy passes wait for the lock.
        const passes = (this.busyPasses.get(tx.tx_id) ?? 0) + 1;
        this.busyPasses.set(tx.tx_id, passes);
        if (passes <= BUSY_PASSES_BEFORE_WAITING) continue;
      }
      this.busyPasses.delete(tx.tx_id);
      if (finalizedHeight === undefined)
        // Never a height that stepped backwards, nor one read mid-migration (DESIGN §12; SIMD-0371 deletes blocks).
        finalizedHeight = this.d.chain.finalizedHeightGuard.accept(
          (await this.d.rpc.getBlockHeight('finalized').catch(() => null)) ?? null,
          this.d.chain.consensus.snapshot().migrating,
        );
      const dead = await this.d.blockhashes.provablyDead(tx, finalizedHeight);
      await this.d.locks.run(tx.tx_id, async () => {
        const current = await this.d.store.get(tx.tx_id);
        if (!current || (current.state !== 'pending' && current.state !== 'submitted')) return;
        if (!dead) {
          // No further attempt after the expiry slot; the transaction waits for proof one way or the other.
          if (
            !current.stopped &&
            this.d.chain.slot > this.d.chain.deadlineOf(current) &&
            !inFlight(current)
          ) {
            await this.settle.stop(current.tx_id, { state: current.state });
          }
          return;
        }
        // The proof, read under the lock: no user signature is anywhere in the chain's history. (A durable-nonce
        // transaction's own landing advances its nonce, so the nonce alone proves nothing.)
        const read = await this.d.rpc
          .getSignatureStatusesWithContext(current.signatures, { searchTransactionHistory: true })
          .catch(() => null);
        // From a node that is not behind relay: one behind may not have seen a landing yet.
        if (!read || read.contextSlot < this.d.chain.slot - CONTEXT_SLACK_SLOTS) return;
        if (read.statuses.some((status) => status !== null)) return; // it landed: the tracker moves it forward
        for (const a of current.attempts) {
          if (!a.outcome && a.stage !== 'failed') {
            await this.settle.settleFailed(current, a, 'dropped', {
              countRetry: false,
              detail: 'the blockhash expired',
              final: false,
            });
          }
        }
        await this.settle.moveTo(current, 'expired', this.d.chain.slot, this.d.now(), {});
      });
    }
  }
}
