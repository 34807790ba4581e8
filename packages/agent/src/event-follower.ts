/**
 * Event following: the sidecar's event stream (`GET /internal/events`, through the client) turned into the
 * agent's state. Enqueues and failed settles start decisions, slots re-decide held transactions, terminal states
 * end tracking, mode / policy / tip events update the sidecar state. After a gap (a `resync`, or the stream
 * reconnecting) events may be lost, so the agent catches up: re-read the state, then sweep the queue.
 */
import { isTerminalTxState, type RelayError, type RelayEventMap } from '@solrelay/core';
import type { TrackedTx } from './decision';
import { shortBundleId } from './log-text';
import type { AgentLog, AgentRelayClient, Clock } from './ports';
import type { SidecarState } from './sidecar-state';

/** What following events needs from the agent. */
export interface EventFollowerContext {
  readonly client: Pick<AgentRelayClient, 'on'>;
  readonly log: AgentLog;
  readonly clock: Clock;
  readonly state: Pick<SidecarState, 'applySlot' | 'applyPolicy' | 'applyTip' | 'setMode'>;
  /** The transactions the agent tracks, by id. */
  readonly txs: Map<string, TrackedTx>;
  /** Transactions reflex stopped; a terminal state ends them. */
  readonly stoppedIds: Set<string>;
  isStopped(): boolean;
  /** Start (or queue) a decision for a pending transaction. */
  kick(txId: string): void;
  /** Stop tracking a transaction. */
  forget(txId: string): void;
  /** Re-read the sidecar state, then sweep the queue. */
  catchUp(why: string): void;
  /** The sidecar refused the token. */
  refuse(error: RelayError): void;
}

/** Subscribes the agent to the sidecar's events; `close()` unsubscribes. */
export class EventFollower {
  private readonly offs: Array<() => void> = [];
  private eventsDown = false;

  constructor(private readonly ctx: EventFollowerContext) {}

  follow(): void {
    const { ctx } = this;
    const on = <K extends keyof RelayEventMap>(name: K, handler: (data: RelayEventMap[K]) => void) => {
      this.offs.push(ctx.client.on(name, (data) => !ctx.isStopped() && handler(data)));
    };
    on('tx_enqueued', (e) => this.onEnqueued(e));
    on('bundle_settled', (e) => this.onSettled(e));
    on('slot_update', (e) => this.onSlot(e));
    on('tx_status_changed', (e) => this.onStatusChanged(e));
    on('tx_adopted', (e) => this.onAdopted(e));
    on('mode_changed', (e) => ctx.state.setMode(e.decision_mode));
    on('policy_changed', (e) => ctx.state.applyPolicy(e));
    on('tip_update', (e) => ctx.state.applyTip(e));
    // The sidecar restarted or dropped events the client asked to replay: policy, mode and queue may all differ.
    on('resync', () => ctx.catchUp('resync'));
    this.offs.push(
      ctx.client.on('connection', (e) => {
        if (ctx.isStopped()) return;
        if (e.state === 'unauthorized' && e.error) {
          ctx.refuse(e.error);
        } else if (e.state === 'reconnecting' && !this.eventsDown) {
          this.eventsDown = true;
          ctx.log.error(`event stream lost; reconnecting in ${e.delay_ms ?? 0} ms`);
        } else if (e.state === 'open' && this.eventsDown) {
          this.eventsDown = false;
          // Events were missed while the stream was down (the sidecar may have restarted): re-read and re-check.
          ctx.catchUp('events reconnected');
        }
      }),
    );
  }

  close(): void {
    for (const off of this.offs.splice(0)) off();
  }

  private onEnqueued(e: RelayEventMap['tx_enqueued']): void {
    const { ctx } = this;
    if (ctx.txs.has(e.tx_id)) return;
    const tx: TrackedTx = {
      tx_id: e.tx_id,
      priority: e.priority,
      max_tip: e.max_tip,
      tip: e.tip,
      enqueue_slot: e.slot,
      expires_at_slot: e.expires_at_slot,
      retries: 0,
      previous: null,
      compute_units: e.compute_units ?? null,
      contention: e.contention ?? null,
      status: 'pending',
      cooldown_until_slot: 0,
      cycle_started_ms: ctx.clock.now(),
    };
    ctx.txs.set(tx.tx_id, tx);
    ctx.log.line(
      `enqueued ${tx.tx_id} priority=${tx.priority} tip=${tx.tip} max_tip=${tx.max_tip ?? 'none'} expires_at_slot=${tx.expires_at_slot}` +
        ` cu=${tx.compute_units ?? 'unknown'} contention=${tx.contention?.class ?? 'unread'}`,
    );
    ctx.kick(tx.tx_id);
  }

  /**
   * A fleet (DESIGN §10): this agent's sidecar took over a transaction from a host whose session ended. Pending, it is
   * decided as if just enqueued (its retries so far kept); with an attempt in flight, it waits for that attempt's
   * `bundle_settled` as any submitted one does (the sidecar resends only the committed bytes meanwhile).
   */
  private onAdopted(e: RelayEventMap['tx_adopted']): void {
    const { ctx } = this;
    if (ctx.txs.has(e.tx_id) || isTerminalTxState(e.state)) return;
    const pending = e.state === 'pending';
    ctx.txs.set(e.tx_id, {
      tx_id: e.tx_id,
      priority: e.priority,
      max_tip: e.max_tip,
      tip: e.tip,
      enqueue_slot: e.enqueued_slot,
      expires_at_slot: e.expires_at_slot,
      retries: e.retries,
      // Repriced from its last lost attempt, as after a bundle_settled (the CU it asked is not told: a flat reading).
      previous: e.previous_attempt
        ? {
            tip_lamports: e.previous_attempt.tip_lamports,
            outcome: e.previous_attempt.outcome,
            compute_units: null,
          }
        : null,
      compute_units: null,
      contention: null,
      status: pending ? 'pending' : 'submitted',
      cooldown_until_slot: 0,
      cycle_started_ms: ctx.clock.now(),
    });
    ctx.log.line(`adopted ${e.tx_id} from=${e.from_host_id} state=${e.state} retries=${e.retries}`);
    if (pending) ctx.kick(e.tx_id);
  }

  private onSettled(e: RelayEventMap['bundle_settled']): void {
    const { ctx } = this;
    const tx = ctx.txs.get(e.tx_id);
    if (!tx) return;
    if (e.stage === 'finalized') {
      ctx.log.line(`finalized ${e.tx_id} bundle=${shortBundleId(e.bundle_id)} tip=${e.tip_lamports}`);
      ctx.forget(e.tx_id);
      return;
    }
    tx.previous = {
      // A pack's lead reprices from its own tip, not the pack's (which may have been raised for its riders).
      tip_lamports: e.attempt_own_tip_lamports ?? e.tip_lamports,
      outcome: e.failure_type ?? 'dropped',
      compute_units: e.attempt_compute_units ?? null,
    };
    // The sidecar's newer counts win; without them (an older sidecar) what enqueue told stands.
    tx.compute_units = e.compute_units ?? tx.compute_units;
    tx.contention = e.contention ?? tx.contention;
    tx.retries = e.retries;
    tx.status = 'pending';
    tx.cooldown_until_slot = 0;
    tx.cycle_started_ms = ctx.clock.now();
    ctx.log.line(
      `settled ${e.tx_id} bundle=${shortBundleId(e.bundle_id)} outcome=${tx.previous.outcome} tip=${e.tip_lamports} retries=${e.retries}`,
    );
    ctx.kick(e.tx_id);
  }

  private onSlot(e: RelayEventMap['slot_update']): void {
    const { ctx } = this;
    if (!ctx.state.applySlot(e)) return;
    // Held transactions are re-decided on every slot: the hold ends when a bundle-engine leader comes near.
    for (const [txId, tx] of ctx.txs) if (tx.status === 'pending') ctx.kick(txId);
  }

  private onStatusChanged(e: RelayEventMap['tx_status_changed']): void {
    const { ctx } = this;
    if (!isTerminalTxState(e.state)) return;
    ctx.stoppedIds.delete(e.tx_id);
    if (!ctx.txs.has(e.tx_id)) return;
    if (e.state !== 'finalized') ctx.log.line(`${e.state} ${e.tx_id} failure=${e.failure ?? 'none'}`);
    ctx.forget(e.tx_id);
  }
}
