import { isRelayError } from '@solrelay/core';
import type { RelayPorts } from '../context';
import type { AttemptBuilder } from '../attempts/builder';
import type { SettleSignals } from '../settle/signals';
import { inFlight } from '../store/queries';
import type { StoredTx } from '../store/records';
import { isDatabaseOutage } from '../store/store';

/**
 * The bypass decider: every transaction is submitted at once at the fixed tip, and again at the same tip whenever
 * settlement re-pends it (it subscribes to settlement's `back-to-pending`; settlement never calls it), until its
 * expiry slot: past it no attempt may be made (`expiry-slots`), and the expiry pass, which needs the transaction's
 * lock free, takes it to `expired` once its blockhash is provably dead.
 */
export class BypassDecider {
  constructor(
    private readonly d: Pick<RelayPorts, 'bypass' | 'chain' | 'locks' | 'log' | 'store'>,
    private readonly attempts: AttemptBuilder,
  ) {}

  /** Wiring: retry at once what settlement puts back to pending (when bypass is on). */
  subscribe(signals: SettleSignals): () => void {
    return signals.on('back-to-pending', ({ txId }) => {
      if (this.d.bypass.enabled) void this.submit(txId);
    });
  }

  /** Submit a pending transaction with no attempt in flight at the fixed tip (refusals are logged, not thrown). */
  async submit(txId: string): Promise<void> {
    try {
      const tx = await this.d.store.get(txId);
      if (!tx || tx.state !== 'pending' || tx.stopped || inFlight(tx) || this.pastExpiry(tx)) return;
      await this.attempts.submit(
        {
          tx_id: txId,
          tip_lamports: tx.tip === 'included' ? 0 : this.d.bypass.tipLamports,
          reason: 'bypass: fixed tip',
        },
        'bypass',
      );
    } catch (error) {
      // Waiting for the tippers' funds is logged once by the pool, and the database being away (or new tips held after
      // it) once by the store and the outage gate, not at every slot's retry of every transaction.
      const level =
        isRelayError(error, 'RELAY_E_TIPPER_UNDERFUNDED') ||
        isRelayError(error, 'RELAY_E_NOT_READY') ||
        isDatabaseOutage(error)
          ? 'debug'
          : 'warn';
      this.d.log[level]({ tx_id: txId, err: error }, 'bypass submit refused');
    }
  }

  /**
   * Bypass decides at enqueue, but a refusal then (tippers short, RPC down, spend limit) must not strand the
   * transaction: every slot, retry the ones still waiting for an attempt.
   */
  async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      // Not past the expiry slot: a refused submit there every slot would hold the lock the expiry pass waits for
      // (it skips a busy transaction), and a transaction refused a tip until then (spend limit) would never end.
      for (const tx of await this.d.store.awaitingAttempt())
        if (!this.pastExpiry(tx) && !this.d.locks.isBusy(tx.tx_id)) void this.submit(tx.tx_id);
    } finally {
      this.sweeping = false;
    }
  }

  private sweeping = false;

  private pastExpiry(tx: StoredTx): boolean {
    return this.d.chain.slot > this.d.chain.deadlineOf(tx);
  }
}
