/**
 * The agent itself: its lifecycle (start, stop, a refused token), the transactions it tracks, and the decision
 * cycle that ties the stages together. The stages live in their own modules, each behind a context of only what it
 * needs: following events (`event-follower.ts`), the sidecar state (`sidecar-state.ts`), the model call
 * (`model-call.ts`), answer reconciliation (`reconcile.ts`), the trace (`trace.ts`), sending (`submit.ts`) and the
 * watchdog (`watchdog.ts`).
 */
import type { DecisionMode, RelayError } from '@solrelay/core';
import { buildSnapshot, chooseTier, reflexFor, type TrackedTx } from './decision';
import { EventFollower } from './event-follower';
import { messageOf } from './log-text';
import { BoundedModelCalls } from './model-call';
import {
  globalIntervalTimers,
  systemClock,
  type AgentLog,
  type AgentRelayClient,
  type Clock,
  type DecisionModel,
  type IntervalTimers,
  type PresenceChannel,
  type PresenceRegistration,
} from './ports';
import { reconcileModelAnswer, reflexPlan, type SubmitPlan } from './reconcile';
import { RerunAfterCurrent } from './rerun';
import { SidecarState } from './sidecar-state';
import { submitPlan, type SubmitContext, type SubmitRecord } from './submit';
import { sweepQueue, type SweepResult, type WatchdogContext } from './watchdog';

/** Defaults of the agent's knobs (the app maps env vars onto them). */
export const AGENT_DEFAULTS = {
  /** The cortex tier's hard deadline per decision (DESIGN §6). */
  cortexDeadlineMs: 6_000,
  /** Reflex's escalation to the model: shorter, because reflex already has an answer. */
  escalationDeadlineMs: 1_500,
  /** SPEC: the agent watchdog re-checks the queue every 30 s. */
  watchdogMs: 30_000,
  /** Model calls in flight at once; more wait, decisions without the model never do. */
  maxConcurrentModelCalls: 4,
  /** After the model says `hold`, do not ask it again for this many slots (one 4-slot leader window). */
  holdCooldownSlots: 4,
  /** After the sidecar refuses a submit (422, 503, network), wait this many slots before deciding again. */
  refusedCooldownSlots: 10,
  /**
   * Tip-floor data this old or older (by the agent's clock) is re-read with `GET /tip` before deciding; 0: always.
   * The sidecar pushes `tip_update` at every 2 s poll, so 5 s means the blocking re-read happens only when pushes
   * stopped; at 2 s it raced the push and put an HTTP round trip in front of many decisions (the latency tail).
   */
  floorMaxAgeMs: 5_000,
} as const;

/**
 * How many transactions reflex stopped are remembered (oldest forgotten first). They stay in the sidecar's queue
 * until it expires them; without this the watchdog would re-decide and stop each one on every run.
 */
const STOPPED_IDS_KEPT = 1_000;

export interface RelayAgentOptions {
  client: AgentRelayClient;
  presence: PresenceChannel;
  /** The model for cortex and reflex escalations; null when none is configured (reflex only). */
  model: DecisionModel | null;
  /** Said once at start when `model` is null (e.g. which env vars are missing). */
  modelUnavailableReason?: string;
  log: AgentLog;
  clock?: Clock;
  timers?: IntervalTimers;
  cortexDeadlineMs?: number;
  escalationDeadlineMs?: number;
  watchdogMs?: number;
  maxConcurrentModelCalls?: number;
  holdCooldownSlots?: number;
  refusedCooldownSlots?: number;
  floorMaxAgeMs?: number;
  /** Called after every accepted submit (measurements, tests). */
  onSubmit?: (record: SubmitRecord) => void;
  /**
   * Called once if the sidecar refuses the token (401) after `start()` resolved; the agent has then stopped itself
   * (retrying cannot fix a token). A refusal during start-up rejects `start()` instead.
   */
  onUnauthorized?: (error: RelayError) => void;
}

/**
 * The decision agent. It registers on the presence stream (and learns the sidecar's decision mode there), follows
 * `tx_enqueued`, `bundle_settled`, `slot_update`, `mode_changed`, `policy_changed` and `tip_update` through the
 * client, decides each pending transaction with the reflex tier (core's `decideReflex`, the model only on hard
 * cases) or the cortex tier (the model on every submission, the reflex decision on any failure), and submits with
 * `client.submit`. A watchdog re-reads `/queue` every 30 s (and after any gap) and re-decides what was missed.
 *
 * Everything with I/O is injected (client, presence, model, clock, timers), so the logic runs against fakes.
 *
 * @example
 * const agent = new RelayAgent({ client, presence, model, log: { line: console.log, error: console.error } });
 * await agent.start();
 */
export class RelayAgent {
  private readonly o: Required<
    Pick<
      RelayAgentOptions,
      | 'cortexDeadlineMs'
      | 'escalationDeadlineMs'
      | 'watchdogMs'
      | 'holdCooldownSlots'
      | 'refusedCooldownSlots'
      | 'floorMaxAgeMs'
    >
  >;
  private readonly client: AgentRelayClient;
  private readonly model: DecisionModel | null;
  private readonly log: AgentLog;
  private readonly clock: Clock;
  private readonly timers: IntervalTimers;
  private readonly state: SidecarState;
  private readonly events: EventFollower;
  private readonly modelCalls: BoundedModelCalls;
  private readonly submitting: SubmitContext;
  private readonly watchdog: WatchdogContext;
  private readonly txs = new Map<string, TrackedTx>();
  private readonly deciding = new Set<string>();
  private readonly redecide = new Set<string>();
  private readonly holdLogged = new Set<string>();
  /** Transactions reflex stopped (insertion order = age); the watchdog skips them. */
  private readonly stoppedIds = new Set<string>();
  private registrations = 0;
  private watchdogTimer: unknown = null;
  private readonly sweeps = new RerunAfterCurrent<string, SweepResult>((reason) =>
    sweepQueue(this.watchdog, reason),
  );
  private started = false;
  private startedUp = false;
  private stopped = false;
  private refusal: RelayError | null = null;

  constructor(private readonly options: RelayAgentOptions) {
    this.client = options.client;
    this.model = options.model;
    this.log = options.log;
    this.clock = options.clock ?? systemClock;
    this.timers = options.timers ?? globalIntervalTimers;
    this.o = {
      cortexDeadlineMs: options.cortexDeadlineMs ?? AGENT_DEFAULTS.cortexDeadlineMs,
      escalationDeadlineMs: options.escalationDeadlineMs ?? AGENT_DEFAULTS.escalationDeadlineMs,
      watchdogMs: options.watchdogMs ?? AGENT_DEFAULTS.watchdogMs,
      holdCooldownSlots: options.holdCooldownSlots ?? AGENT_DEFAULTS.holdCooldownSlots,
      refusedCooldownSlots: options.refusedCooldownSlots ?? AGENT_DEFAULTS.refusedCooldownSlots,
      floorMaxAgeMs: options.floorMaxAgeMs ?? AGENT_DEFAULTS.floorMaxAgeMs,
    };
    const isStopped = () => this.stopped;
    const refuse = (error: RelayError) => this.refuse(error);
    const kick = (txId: string) => this.kick(txId);
    const forget = (txId: string) => this.forget(txId);
    const { client, log, clock } = this;
    this.modelCalls = new BoundedModelCalls(
      options.maxConcurrentModelCalls ?? AGENT_DEFAULTS.maxConcurrentModelCalls,
      clock,
      this.timers,
    );
    this.state = new SidecarState({
      client,
      log,
      clock,
      timers: this.timers,
      floorMaxAgeMs: this.o.floorMaxAgeMs,
      modelAvailable: this.model !== null,
      isStopped,
      refuse,
    });
    this.events = new EventFollower({
      client,
      log,
      clock,
      state: this.state,
      txs: this.txs,
      stoppedIds: this.stoppedIds,
      isStopped,
      kick,
      forget,
      catchUp: (why) => this.catchUp(why),
      refuse,
    });
    this.submitting = {
      client,
      log,
      clock,
      refusedCooldownSlots: this.o.refusedCooldownSlots,
      onSubmit: options.onSubmit,
      world: () => this.state.world,
      stopTx: (txId, why) => this.stopTx(txId, why),
      forget,
      refuse,
      reread: (why) => void this.state.reread(why),
    };
    this.watchdog = {
      client,
      log,
      clock,
      watchdogMs: this.o.watchdogMs,
      txs: this.txs,
      stoppedIds: this.stoppedIds,
      deciding: this.deciding,
      isStopped,
      hasWorld: () => this.state.world !== null,
      kick,
      forget,
      refuse,
    };
  }

  /** The sidecar's decision mode as last seen (null before the first read). */
  get mode(): DecisionMode | null {
    return this.state.mode;
  }

  /** What the agent knows about a transaction it tracks (a copy), or null. */
  tracked(txId: string): TrackedTx | null {
    const tx = this.txs.get(txId);
    return tx ? { ...tx, previous: tx.previous ? { ...tx.previous } : null } : null;
  }

  /**
   * Subscribe to events, read the policy, slot, tip floor and mode (retrying on the client's reconnect schedule
   * until the sidecar answers), register on the presence stream, start the watchdog and run its first sweep
   * (which picks up whatever was queued before this process started).
   */
  async start(): Promise<void> {
    if (this.started) throw new Error('RelayAgent.start() was already called');
    this.started = true;
    if (!this.model) {
      this.log.line(
        `cortex unavailable: ${this.options.modelUnavailableReason ?? 'no model configured'}; deciding with reflex only`,
      );
    }
    this.events.follow();
    await this.state.reread('start');
    if (this.refusal) throw this.refusal;
    if (this.stopped) return;
    this.options.presence.open({
      registered: (registration) => this.onRegistered(registration),
      modeChanged: (mode) => this.state.setMode(mode),
      lost: ({ attempt, delay_ms, error }) =>
        this.log.error(
          `presence lost (${error?.message ?? 'disconnected'}); reconnecting in ${delay_ms} ms (attempt ${attempt})`,
        ),
      unauthorized: (error) => this.refuse(error),
    });
    this.watchdogTimer = this.timers.setInterval(() => void this.sweep('interval'), this.o.watchdogMs);
    await this.sweep('start');
    if (this.refusal) throw this.refusal;
    this.startedUp = true;
  }

  /** Stop deciding, close the presence stream and the watchdog. The client is the caller's to close. */
  stop(): void {
    this.stopped = true;
    if (this.watchdogTimer !== null) this.timers.clearInterval(this.watchdogTimer);
    this.watchdogTimer = null;
    this.events.close();
    this.options.presence.close();
  }

  /**
   * The watchdog: read `/queue` and, for every transaction that is pending at the sidecar with no attempt in flight
   * and that the agent is not already deciding (missed `tx_enqueued` / `bundle_settled` during a reconnect gap or
   * before a restart), rebuild its state from `/tx/{id}` and decide it. A call while a sweep runs gets one more
   * sweep after it (shared by all such calls): the running one may have read `/queue` before what the caller
   * reacts to (a reconnect, a resync).
   */
  sweep(reason: string): Promise<SweepResult> {
    return this.sweeps.request(reason);
  }

  // ------------------------------------------------------------------ gaps and refusals

  /**
   * Re-read the sidecar's state, then sweep the queue: after a gap in which events (a policy change, a mode
   * change, a settle) may have been lost or the sidecar restarted. Decisions wait for the re-read.
   */
  private catchUp(why: string): void {
    void this.state.reread(why).then(() => this.sweep(why));
  }

  /** The sidecar refused the token: retrying cannot help, so stop and say so once. */
  private refuse(error: RelayError): void {
    if (this.refusal) return;
    this.refusal = error;
    this.stop();
    // Whoever learns of it (start()'s rejection, onUnauthorized) reports it; only otherwise is it said here.
    if (!this.startedUp) return;
    if (this.options.onUnauthorized) this.options.onUnauthorized(error);
    else this.log.error(`the sidecar refused the token (${error.code}); the agent stopped`);
  }

  private onRegistered(registration: PresenceRegistration): void {
    this.registrations += 1;
    this.log.line(
      `registered model=${registration.model} provider=${registration.provider} mode=${registration.decision_mode}`,
    );
    this.state.setMode(registration.decision_mode);
    // A re-registration follows a gap in which the sidecar may have restarted or events were lost.
    if (this.registrations > 1) this.catchUp('re-registered');
  }

  // ------------------------------------------------------------------ tracked transactions

  private forget(txId: string): void {
    this.txs.delete(txId);
    this.holdLogged.delete(txId);
    this.redecide.delete(txId);
  }

  /** Reflex ended this transaction's attempts; it stays queued at the sidecar until expiry, so remember to skip it. */
  private stopTx(txId: string, why: string): void {
    this.log.line(`stop ${txId} reason=${why}`);
    this.forget(txId);
    this.stoppedIds.add(txId);
    if (this.stoppedIds.size > STOPPED_IDS_KEPT) {
      const oldest = this.stoppedIds.values().next().value;
      if (oldest !== undefined) this.stoppedIds.delete(oldest);
    }
  }

  /**
   * Whether a decision for `tx` may still act: the agent runs, still tracks this very object (not forgotten or
   * rebuilt by the watchdog) and it is still pending. Checked after every await of a decision.
   */
  private stillPending(tx: TrackedTx): boolean {
    return !this.stopped && this.txs.get(tx.tx_id) === tx && tx.status === 'pending';
  }

  // ------------------------------------------------------------------ deciding

  /** Start a decision for a pending transaction unless one is running (then run another right after it). */
  private kick(txId: string): void {
    const tx = this.txs.get(txId);
    const world = this.state.world;
    if (this.stopped || !tx || tx.status !== 'pending' || !world) return;
    if (this.deciding.has(txId)) {
      this.redecide.add(txId);
      return;
    }
    if (world.slot < tx.cooldown_until_slot) return;
    this.deciding.add(txId);
    void this.decide(tx)
      .catch((error: unknown) => this.log.error(`decision for ${txId} failed: ${messageOf(error)}`))
      .finally(() => {
        this.deciding.delete(txId);
        if (this.redecide.delete(txId)) this.kick(txId);
      });
  }

  /**
   * One decision: reflex first (stop, hold, or a tip), then the tier; when the tier asks the model, its answer is
   * reconciled with reflex's. Whatever comes out is submitted within the policy.
   */
  private async decide(tx: TrackedTx): Promise<void> {
    // The model's deadline counts from here: time spent reading the floor or queued for a model slot is part of it.
    const decisionStartedMs = this.clock.now();
    // A re-read of policy / status / tip / mode is under way (resync, re-registration, 422): decide on its result.
    const reading = this.state.rereading;
    if (reading) await reading;
    if (!this.stillPending(tx)) return;
    await this.state.freshFloor();
    if (!this.stillPending(tx)) return;
    const world = this.state.world;
    if (!world) return;
    const reflex = reflexFor(tx, world);
    if (reflex.action === 'stop') {
      this.stopTx(tx.tx_id, reflex.reason);
      return;
    }
    if (reflex.action === 'hold') {
      if (!this.holdLogged.has(tx.tx_id))
        this.log.line(`hold ${tx.tx_id} tier=reflex reason=${reflex.reason}`);
      this.holdLogged.add(tx.tx_id);
      return;
    }
    this.holdLogged.delete(tx.tx_id);
    const mode = this.state.mode ?? 'reflex';
    const choice = chooseTier(mode, reflex, this.model !== null);
    const snapshot = buildSnapshot(tx, world, reflex);
    if (!choice.ask_model || !this.model) {
      await this.submit(tx, reflexPlan(choice, snapshot, reflex));
      return;
    }

    const deadlineMs = choice.escalated ? this.o.escalationDeadlineMs : this.o.cortexDeadlineMs;
    const model = this.model;
    const result = await this.modelCalls.askWithin(
      model,
      snapshot,
      deadlineMs,
      decisionStartedMs + deadlineMs,
    );
    if (!this.stillPending(tx)) return;

    const answer = reconcileModelAnswer({ choice, model, result, snapshot, reflex }, tx, world);
    if (answer.action === 'hold') {
      tx.cooldown_until_slot = world.slot + this.o.holdCooldownSlots;
      this.log.line(
        `hold ${tx.tx_id} tier=${choice.tier} model=${model.model} latency_ms=${result.latency_ms} reason=${answer.rationale}`,
      );
      return;
    }
    await this.submit(tx, answer.plan);
  }

  private submit(tx: TrackedTx, plan: SubmitPlan): Promise<void> {
    return submitPlan(this.submitting, tx, plan);
  }
}
