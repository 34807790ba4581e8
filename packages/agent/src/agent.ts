import { reconnectDelay } from '@solrelay/client';
import {
  DEFAULT_POLICY,
  isRelayError,
  isTerminalTxState,
  type AiDecisionTrace,
  type DecisionMode,
  type RelayError,
  type RelayEventMap,
  type StatusResponse,
  type TipFloor,
  type TxRecord,
} from '@solrelay/core';
import {
  allowedTipRange,
  buildSnapshot,
  checkModelAnswer,
  chooseTier,
  leaderViewFromSlotUpdate,
  reflexFor,
  violationOf,
  type DecisionWorld,
  type TrackedTx,
} from './decision';
import { ConcurrencyLimiter } from './limiter';
import { RerunAfterCurrent } from './rerun';
import {
  globalIntervalTimers,
  systemClock,
  type AgentLog,
  type AgentRelayClient,
  type Clock,
  type DecisionModel,
  type IntervalTimers,
  type ModelResult,
  type PresenceChannel,
  type PresenceRegistration,
} from './ports';
import type { DecisionSnapshot } from './snapshot';

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

/** Extra time past the deadline before the agent stops waiting for a model adapter that ignores its own deadline. */
const DEADLINE_GRACE_MS = 250;

/**
 * How many transactions reflex stopped are remembered (oldest forgotten first). They stay in the sidecar's queue
 * until it expires them; without this the watchdog would re-decide and stop each one on every run.
 */
const STOPPED_IDS_KEPT = 1_000;

type SweepResult = { checked: number; redecided: number };

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

/** One accepted submission, as reported to `onSubmit`. */
export interface SubmitRecord {
  tx_id: string;
  bundle_id: string;
  tip_lamports: number;
  /** The tier the sidecar's mode chose for this decision (what the trace records as `decision_mode`). */
  tier: DecisionMode;
  /**
   * The tier that produced the submitted tip, sent as the submit's `decision_mode` (the lifecycle records it):
   * `cortex` when the model's answer was used, `reflex` for reflex's own decision, including every fallback.
   */
  decision_mode: DecisionMode;
  escalated: boolean;
  fallback_reason: string | null;
  /** From the start of the decision cycle (enqueue, a failed attempt's settle, or the watchdog) to the 202. */
  latency_ms: number;
  model_latency_ms: number | null;
}

/** The trace sent with every submit (lands in the lifecycle entry's `ai_decision_trace`). */
export type AgentDecisionTrace = AiDecisionTrace & {
  /**
   * The tier the agent's mode chose (what was attempted; with `fallback_reason` set, reflex's decision was sent). The
   * tier that produced the tip goes in the submit's own `decision_mode`.
   */
  decision_mode: DecisionMode;
  escalated: boolean;
  inputs: DecisionSnapshot;
  cache_hit?: boolean;
  reflex?: { tip_lamports: number; reason: string };
};

interface Decided {
  tip: number;
  reason: string;
  tier: DecisionMode;
  /** The tier whose answer is submitted: `cortex` only when the model's answer is used. */
  decidedBy: DecisionMode;
  escalated: boolean;
  fallback: string | null;
  trace: AgentDecisionTrace;
  model_latency_ms: number | null;
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
  private readonly limiter: ConcurrencyLimiter;
  private readonly txs = new Map<string, TrackedTx>();
  private readonly deciding = new Set<string>();
  private readonly redecide = new Set<string>();
  private readonly holdLogged = new Set<string>();
  /** Transactions reflex stopped (insertion order = age); the watchdog skips them. */
  private readonly stoppedIds = new Set<string>();
  private readonly offs: Array<() => void> = [];
  private world: DecisionWorld | null = null;
  private floorAtMs = 0;
  private floorRefresh: Promise<void> | null = null;
  private currentMode: DecisionMode | null = null;
  /** Counts mode / policy changes seen on events, so a re-read that was out meanwhile does not undo them. */
  private modeChanges = 0;
  private policyChanges = 0;
  private registrations = 0;
  private watchdogTimer: unknown = null;
  private readonly sweeps = new RerunAfterCurrent<string, SweepResult>((reason) => this.runSweep(reason));
  private readonly worldReads = new RerunAfterCurrent<string, void>((why) => this.readWorld(why));
  private eventsDown = false;
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
    this.limiter = new ConcurrencyLimiter(
      options.maxConcurrentModelCalls ?? AGENT_DEFAULTS.maxConcurrentModelCalls,
    );
    this.o = {
      cortexDeadlineMs: options.cortexDeadlineMs ?? AGENT_DEFAULTS.cortexDeadlineMs,
      escalationDeadlineMs: options.escalationDeadlineMs ?? AGENT_DEFAULTS.escalationDeadlineMs,
      watchdogMs: options.watchdogMs ?? AGENT_DEFAULTS.watchdogMs,
      holdCooldownSlots: options.holdCooldownSlots ?? AGENT_DEFAULTS.holdCooldownSlots,
      refusedCooldownSlots: options.refusedCooldownSlots ?? AGENT_DEFAULTS.refusedCooldownSlots,
      floorMaxAgeMs: options.floorMaxAgeMs ?? AGENT_DEFAULTS.floorMaxAgeMs,
    };
  }

  /** The sidecar's decision mode as last seen (null before the first read). */
  get mode(): DecisionMode | null {
    return this.currentMode;
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
    this.subscribe();
    await this.worldReads.request('start');
    if (this.refusal) throw this.refusal;
    if (this.stopped) return;
    this.options.presence.open({
      registered: (registration) => this.onRegistered(registration),
      modeChanged: (mode) => this.setMode(mode),
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
    for (const off of this.offs.splice(0)) off();
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

  // ------------------------------------------------------------------ start-up and re-reads

  /**
   * Read `/policy`, `/status`, `/tip` and `/internal/mode` until they answer (the client's reconnect schedule
   * between tries). At start-up, and again whenever the agent may have missed changes: a `resync`, a presence
   * re-registration, an event-stream reconnect (the sidecar may have restarted with another policy), a 422.
   */
  private async readWorld(why: string): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt += 1) {
      const before = {
        modeChanges: this.modeChanges,
        policyChanges: this.policyChanges,
        readStartedMs: this.clock.now(),
      };
      try {
        const [policy, status, mode, tip] = await Promise.all([
          this.client.policy(),
          this.client.status(),
          this.client.mode(),
          this.client.tip(),
        ]);
        if (this.stopped) return;
        this.applyWorld(why, worldFromStatus(status, tip, policy.values), mode.decision_mode, before);
        return;
      } catch (error) {
        if (isTokenRefusal(error)) {
          this.refuse(error);
          return;
        }
        const delay = reconnectDelay(attempt);
        this.log.error(
          `sidecar not answering (${messageOf(error)}); retrying in ${delay} ms (attempt ${attempt})`,
        );
        await new Promise<void>((resolve) => this.timers.setTimeout(resolve, delay));
      }
    }
  }

  private applyWorld(
    why: string,
    read: DecisionWorld,
    mode: DecisionMode,
    before: { modeChanges: number; policyChanges: number; readStartedMs: number },
  ): void {
    const world = this.world;
    if (!world) {
      this.world = read;
      this.floorAtMs = this.clock.now();
    } else {
      // An event that arrived while the reads were out is newer than what they returned: keep it.
      if (this.policyChanges === before.policyChanges) world.policy = read.policy;
      if (this.floorAtMs <= before.readStartedMs) {
        world.floor = read.floor;
        this.floorAtMs = this.clock.now();
      }
      if (read.slot >= world.slot) {
        world.slot = read.slot;
        world.leaders = read.leaders;
        world.leader = read.leader;
      }
      const p = world.policy;
      this.log.line(
        `re-read sidecar state (${why}) slot=${world.slot} tip-percentile=${p['tip-percentile']} min-tip=${p['min-tip']} max-tip=${p['max-tip']} escalation-step=${p['escalation-step']}`,
      );
    }
    if (this.modeChanges === before.modeChanges) this.setMode(mode);
  }

  /**
   * Re-read the sidecar's state, then sweep the queue: after a gap in which events (a policy change, a mode
   * change, a settle) may have been lost or the sidecar restarted. Decisions wait for the re-read.
   */
  private catchUp(why: string): void {
    void this.worldReads.request(why).then(() => this.sweep(why));
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

  private subscribe(): void {
    const on = <K extends keyof RelayEventMap>(name: K, handler: (data: RelayEventMap[K]) => void) => {
      this.offs.push(this.client.on(name, (data) => !this.stopped && handler(data)));
    };
    on('tx_enqueued', (e) => this.onEnqueued(e));
    on('bundle_settled', (e) => this.onSettled(e));
    on('slot_update', (e) => this.onSlot(e));
    on('tx_status_changed', (e) => {
      if (!isTerminalTxState(e.state)) return;
      this.stoppedIds.delete(e.tx_id);
      if (!this.txs.has(e.tx_id)) return;
      if (e.state !== 'finalized') this.log.line(`${e.state} ${e.tx_id} failure=${e.failure ?? 'none'}`);
      this.forget(e.tx_id);
    });
    on('mode_changed', (e) => this.setMode(e.decision_mode));
    on('policy_changed', (e) => {
      if (!e.ok || !this.world) return;
      this.policyChanges += 1;
      this.world.policy = e.values;
      this.log.line(
        `policy reloaded tip-percentile=${e.values['tip-percentile']} min-tip=${e.values['min-tip']} max-tip=${e.values['max-tip']} escalation-step=${e.values['escalation-step']}`,
      );
    });
    on('tip_update', (e) => {
      if (!this.world) return;
      this.world.floor = floorOf(e);
      this.floorAtMs = this.clock.now();
    });
    // The sidecar restarted or dropped events the client asked to replay: policy, mode and queue may all differ.
    on('resync', () => this.catchUp('resync'));
    this.offs.push(
      this.client.on('connection', (e) => {
        if (this.stopped) return;
        if (e.state === 'unauthorized' && e.error) {
          this.refuse(e.error);
        } else if (e.state === 'reconnecting' && !this.eventsDown) {
          this.eventsDown = true;
          this.log.error(`event stream lost; reconnecting in ${e.delay_ms ?? 0} ms`);
        } else if (e.state === 'open' && this.eventsDown) {
          this.eventsDown = false;
          // Events were missed while the stream was down (the sidecar may have restarted): re-read and re-check.
          this.catchUp('events reconnected');
        }
      }),
    );
  }

  private onRegistered(registration: PresenceRegistration): void {
    this.registrations += 1;
    this.log.line(
      `registered model=${registration.model} provider=${registration.provider} mode=${registration.decision_mode}`,
    );
    this.setMode(registration.decision_mode);
    // A re-registration follows a gap in which the sidecar may have restarted or events were lost.
    if (this.registrations > 1) this.catchUp('re-registered');
  }

  private setMode(mode: DecisionMode): void {
    this.modeChanges += 1;
    if (mode === this.currentMode) return;
    const previous = this.currentMode;
    this.currentMode = mode;
    if (previous !== null) this.log.line(`mode ${mode} (was ${previous})`);
    if (mode === 'cortex' && !this.model)
      this.log.line('mode cortex requested, but cortex is unavailable: reflex decides');
  }

  // ------------------------------------------------------------------ events

  private onEnqueued(e: RelayEventMap['tx_enqueued']): void {
    if (this.txs.has(e.tx_id)) return;
    const tx: TrackedTx = {
      tx_id: e.tx_id,
      priority: e.priority,
      max_tip: e.max_tip,
      tip: e.tip,
      enqueue_slot: e.slot,
      expires_at_slot: e.expires_at_slot,
      retries: 0,
      previous: null,
      status: 'pending',
      cooldown_until_slot: 0,
      cycle_started_ms: this.clock.now(),
    };
    this.txs.set(tx.tx_id, tx);
    this.log.line(
      `enqueued ${tx.tx_id} priority=${tx.priority} tip=${tx.tip} max_tip=${tx.max_tip ?? 'none'} expires_at_slot=${tx.expires_at_slot}`,
    );
    this.kick(tx.tx_id);
  }

  private onSettled(e: RelayEventMap['bundle_settled']): void {
    const tx = this.txs.get(e.tx_id);
    if (!tx) return;
    if (e.stage === 'finalized') {
      this.log.line(`finalized ${e.tx_id} bundle=${short(e.bundle_id)} tip=${e.tip_lamports}`);
      this.forget(e.tx_id);
      return;
    }
    tx.previous = { tip_lamports: e.tip_lamports, outcome: e.failure_type ?? 'dropped' };
    tx.retries = e.retries;
    tx.status = 'pending';
    tx.cooldown_until_slot = 0;
    tx.cycle_started_ms = this.clock.now();
    this.log.line(
      `settled ${e.tx_id} bundle=${short(e.bundle_id)} outcome=${tx.previous.outcome} tip=${e.tip_lamports} retries=${e.retries}`,
    );
    this.kick(e.tx_id);
  }

  private onSlot(e: RelayEventMap['slot_update']): void {
    if (!this.world || e.slot <= this.world.slot) return;
    this.world.slot = e.slot;
    this.world.leaders = leaderViewFromSlotUpdate(e);
    this.world.leader = {
      identity: e.leader,
      bundle_engine: e.bundle_engine_leader,
      next_bundle_engine_slot: e.next_bundle_engine_slot,
    };
    // Held transactions are re-decided on every slot: the hold ends when a bundle-engine leader comes near.
    for (const [txId, tx] of this.txs) if (tx.status === 'pending') this.kick(txId);
  }

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
    if (this.stopped || !tx || tx.status !== 'pending' || !this.world) return;
    if (this.deciding.has(txId)) {
      this.redecide.add(txId);
      return;
    }
    if (this.world.slot < tx.cooldown_until_slot) return;
    this.deciding.add(txId);
    void this.decide(tx)
      .catch((error: unknown) => this.log.error(`decision for ${txId} failed: ${messageOf(error)}`))
      .finally(() => {
        this.deciding.delete(txId);
        if (this.redecide.delete(txId)) this.kick(txId);
      });
  }

  private async decide(tx: TrackedTx): Promise<void> {
    // The model's deadline counts from here: time spent reading the floor or queued for a model slot is part of it.
    const decisionStartedMs = this.clock.now();
    // A re-read of policy / status / tip / mode is under way (resync, re-registration, 422): decide on its result.
    const reading = this.worldReads.running;
    if (reading) await reading;
    if (!this.stillPending(tx)) return;
    await this.freshFloor();
    if (!this.stillPending(tx)) return;
    const world = this.world;
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
    const mode = this.currentMode ?? 'reflex';
    const choice = chooseTier(mode, reflex, this.model !== null);
    const snapshot = buildSnapshot(tx, world, reflex);
    if (!choice.ask_model || !this.model) {
      await this.send(tx, {
        tip: reflex.tip_lamports,
        reason: reflex.reason,
        tier: choice.tier,
        decidedBy: 'reflex',
        escalated: false,
        fallback: choice.unavailable,
        model_latency_ms: null,
        trace: {
          decision_mode: choice.tier,
          escalated: false,
          inputs: snapshot,
          rationale: reflex.reason,
          fallback_reason: choice.unavailable,
        },
      });
      return;
    }

    const deadlineMs = choice.escalated ? this.o.escalationDeadlineMs : this.o.cortexDeadlineMs;
    const model = this.model;
    const result = await this.askModelWithin(model, snapshot, deadlineMs, decisionStartedMs + deadlineMs);
    if (!this.stillPending(tx)) return;

    const base = {
      decision_mode: choice.tier,
      escalated: choice.escalated,
      model: model.model,
      provider: model.provider,
      request_id: result.request_id,
      latency_ms: result.latency_ms,
      ...(result.usage
        ? { usage: { ...result.usage }, cache_hit: result.usage.cache_read_input_tokens > 0 }
        : {}),
      inputs: snapshot,
      reflex: { tip_lamports: reflex.tip_lamports, reason: reflex.reason },
    };
    let fallback: string | null = null;
    let toolInput: unknown = undefined;
    let answer: { action: 'submit' | 'hold'; tip_lamports: number; rationale: string } | null = null;
    if (!result.ok) {
      fallback = `${result.reason}: ${result.detail}`;
    } else {
      toolInput = result.tool_input;
      const checked = checkModelAnswer(result.tool_input, allowedTipRange(tx, world.policy));
      if (checked.ok) answer = checked.answer;
      else fallback = `invalid_answer: ${checked.problem}`;
    }

    if (answer?.action === 'hold') {
      tx.cooldown_until_slot = world.slot + this.o.holdCooldownSlots;
      this.log.line(
        `hold ${tx.tx_id} tier=${choice.tier} model=${model.model} latency_ms=${result.latency_ms} reason=${answer.rationale}`,
      );
      return;
    }
    // The policy may have changed, or slots passed, while the model thought: check the answer as the sidecar will.
    if (answer && violationOf(answer.tip_lamports, tx, world)) {
      fallback = `invalid_answer: breaks ${violationOf(answer.tip_lamports, tx, world)?.key}`;
      answer = null;
    }
    const decided: Decided = answer
      ? {
          tip: answer.tip_lamports,
          reason: `${choice.escalated ? 'escalated' : 'cortex'}: ${answer.rationale || 'model decision'}`,
          tier: choice.tier,
          decidedBy: 'cortex',
          escalated: choice.escalated,
          fallback: null,
          model_latency_ms: result.latency_ms,
          trace: { ...base, tool_input: toolInput, rationale: answer.rationale, fallback_reason: null },
        }
      : {
          tip: reflex.tip_lamports,
          reason: `${reflex.reason} (model fallback: ${fallback})`,
          tier: choice.tier,
          decidedBy: 'reflex',
          escalated: choice.escalated,
          fallback,
          model_latency_ms: result.latency_ms,
          trace: {
            ...base,
            ...(toolInput === undefined ? {} : { tool_input: toolInput }),
            rationale: reflex.reason,
            fallback_reason: fallback,
          },
        };
    await this.send(tx, decided);
  }

  /**
   * A model call that ends by `deadlineAtMs` (agent clock) however busy the model is: it waits for a free slot
   * only until the deadline (then `model_busy`), and the call itself gets what is left of the deadline.
   */
  private async askModelWithin(
    model: DecisionModel,
    snapshot: DecisionSnapshot,
    deadlineMs: number,
    deadlineAtMs: number,
  ): Promise<ModelResult> {
    const queuedAtMs = this.clock.now();
    const failed = (reason: 'model_busy' | 'timeout', detail: string): ModelResult => ({
      ok: false,
      reason,
      detail,
      request_id: null,
      latency_ms: this.clock.now() - queuedAtMs,
      usage: null,
    });
    if (deadlineAtMs - queuedAtMs <= 0)
      return failed('timeout', `the ${deadlineMs} ms deadline passed before the model was asked`);
    let giveUpTimer: unknown = null;
    const giveUp = new Promise<void>((resolve) => {
      giveUpTimer = this.timers.setTimeout(resolve, deadlineAtMs - queuedAtMs);
    });
    try {
      const run = await this.limiter.runBefore(giveUp, () =>
        this.askModel(model, snapshot, Math.max(1, deadlineAtMs - this.clock.now())),
      );
      return run.ran
        ? run.value
        : failed('model_busy', `no free model slot within the ${deadlineMs} ms deadline`);
    } finally {
      this.timers.clearTimeout(giveUpTimer);
    }
  }

  /** One model call under a hard deadline: the adapter's own signal, and this guard in case it ignores it. */
  private async askModel(
    model: DecisionModel,
    snapshot: DecisionSnapshot,
    deadlineMs: number,
  ): Promise<ModelResult> {
    const started = this.clock.now();
    let timer: unknown = null;
    const guard = new Promise<ModelResult>((resolve) => {
      timer = this.timers.setTimeout(
        () =>
          resolve({
            ok: false,
            reason: 'timeout',
            detail: `no answer within ${deadlineMs} ms`,
            request_id: null,
            latency_ms: this.clock.now() - started,
            usage: null,
          }),
        deadlineMs + DEADLINE_GRACE_MS,
      );
    });
    const call = model.decide({ snapshot, deadlineMs }).catch((error: unknown): ModelResult => ({
      ok: false,
      reason: 'request_error',
      detail: messageOf(error),
      request_id: null,
      latency_ms: this.clock.now() - started,
      usage: null,
    }));
    try {
      return await Promise.race([call, guard]);
    } finally {
      this.timers.clearTimeout(timer);
    }
  }

  private async send(tx: TrackedTx, decided: Decided): Promise<void> {
    const world = this.world;
    if (!world) return;
    const violation = violationOf(decided.tip, tx, world);
    if (violation) {
      // Reflex's own decision is built inside the bounds; this only trips when the world moved during a decision.
      if (violation.key === 'expiry-slots' || violation.key === 'max-retries') {
        this.stopTx(tx.tx_id, `${violation.key} (${violation.actual} > ${violation.limit})`);
      } else {
        this.log.error(
          `not submitting ${tx.tx_id}: tip ${decided.tip} breaks ${violation.key} (limit ${violation.limit})`,
        );
        tx.cooldown_until_slot = world.slot + this.o.refusedCooldownSlots;
      }
      return;
    }
    tx.status = 'submitted';
    const reason = decided.reason.slice(0, 2_000) || 'agent decision';
    try {
      const response = await this.client.submit({
        tx_id: tx.tx_id,
        tip_lamports: decided.tip,
        reason,
        escalated: decided.escalated,
        decision_mode: decided.decidedBy,
        trace: decided.trace,
      });
      const latency = Math.max(0, this.clock.now() - tx.cycle_started_ms);
      this.log.line(
        `submit ${tx.tx_id} tip=${decided.tip} tier=${decided.tier} escalated=${decided.escalated} latency_ms=${latency}` +
          `${decided.model_latency_ms === null ? '' : ` model_ms=${decided.model_latency_ms}`}` +
          `${decided.fallback ? ` fallback=${decided.fallback.split(':')[0]}` : ''}` +
          ` bundle=${short(response.bundle_id)} reason=${oneLine(reason)}`,
      );
      this.options.onSubmit?.({
        tx_id: tx.tx_id,
        bundle_id: response.bundle_id,
        tip_lamports: decided.tip,
        tier: decided.tier,
        decision_mode: decided.decidedBy,
        escalated: decided.escalated,
        fallback_reason: decided.fallback,
        latency_ms: latency,
        model_latency_ms: decided.model_latency_ms,
      });
    } catch (error) {
      if (isRelayError(error) && error.status === 409) {
        // Not pending at the sidecar (an attempt is in flight, or attempts stopped): wait for events or the watchdog.
        this.log.line(`skip ${tx.tx_id} reason=${oneLine(error.message)}`);
        return;
      }
      if (isRelayError(error) && error.status === 404) {
        this.forget(tx.tx_id);
        return;
      }
      if (isTokenRefusal(error)) {
        this.refuse(error);
        return;
      }
      tx.status = 'pending';
      tx.cooldown_until_slot = world.slot + this.o.refusedCooldownSlots;
      const key =
        isRelayError(error) && typeof error.details.key === 'string' ? ` key=${error.details.key}` : '';
      this.log.error(`submit ${tx.tx_id} refused${key}: ${oneLine(messageOf(error))}`);
      // The sidecar judged the tip by a policy (or state) this agent does not have: re-read it before retrying,
      // or the same refused tip comes back after the cooldown. Not for spend-limit: the rolling budget is spent
      // (the sidecar's reservations, not a policy this agent lacks), so a re-read cannot change the answer; the
      // cooldown waits for reservations to be released or to age out of the hour.
      if (isRelayError(error) && error.status === 422 && error.details.key !== 'spend-limit')
        void this.worldReads.request('submit refused (422)');
    }
  }

  private async freshFloor(): Promise<void> {
    // `<`, not `<=`: the clock counts whole ms, so a max age of 0 must still re-read a floor read this same ms.
    if (this.clock.now() - this.floorAtMs < this.o.floorMaxAgeMs) return;
    this.floorRefresh ??= this.client
      .tip()
      .then((tip) => {
        if (!this.world) return;
        this.world.floor = floorOf(tip);
        this.floorAtMs = this.clock.now();
      })
      .catch((error: unknown) => {
        // Keep the last floor but call it stale: reflex then treats the decision as a hard case.
        if (this.world) this.world.floor = { ...this.world.floor, stale: true };
        this.log.error(`tip floor unavailable (${messageOf(error)}); using the last one, marked stale`);
      })
      .finally(() => {
        this.floorRefresh = null;
      });
    await this.floorRefresh;
  }

  // ------------------------------------------------------------------ watchdog

  private async runSweep(reason: string): Promise<SweepResult> {
    if (this.stopped || !this.world) return { checked: 0, redecided: 0 };
    // Only what was tracked before /queue was read can be judged by it; a tx_enqueued arriving meanwhile is newer.
    const trackedBefore = new Map(this.txs);
    let queue;
    try {
      queue = await this.client.queue();
    } catch (error) {
      if (isTokenRefusal(error)) this.refuse(error);
      else this.log.error(`watchdog: cannot read /queue (${messageOf(error)})`);
      return { checked: 0, redecided: 0 };
    }
    if (this.stopped) return { checked: 0, redecided: 0 };
    const inQueue = new Set(queue.entries.map((entry) => entry.tx_id));
    // What left the queue without the agent seeing its terminal event.
    for (const [txId, tx] of trackedBefore)
      if (!inQueue.has(txId) && this.txs.get(txId) === tx) this.forget(txId);
    for (const txId of [...this.stoppedIds]) if (!inQueue.has(txId)) this.stoppedIds.delete(txId);
    let checked = 0;
    const missed: string[] = [];
    for (const entry of queue.entries) {
      if (this.stopped) break;
      // Reflex stopped it; it waits in the queue for the sidecar to expire it. Deciding again would only stop it again.
      if (this.stoppedIds.has(entry.tx_id)) continue;
      const known = this.txs.get(entry.tx_id);
      // Pending ones are already re-decided on every slot; only unknown or "submitted" ones can hide a missed event.
      if (known && (known.status === 'pending' || this.deciding.has(entry.tx_id))) continue;
      // A "submitted" one whose cycle began within the last period is waiting for its settle event, not missing
      // it: the next sweep looks at it. Reading every in-flight record each sweep was hundreds of sequential GETs
      // (landed transactions wait ~32 slots for finality) and showed as the decision-latency tail.
      if (known?.status === 'submitted' && this.clock.now() - known.cycle_started_ms < this.o.watchdogMs)
        continue;
      const knownStatus = known?.status;
      let record: TxRecord;
      try {
        record = await this.client.tx(entry.tx_id);
      } catch (error) {
        this.log.error(`watchdog: cannot read ${entry.tx_id} (${messageOf(error)})`);
        continue;
      }
      if (this.stopped) break;
      checked += 1;
      // The event path acted while /tx was read (tracked it, submitted, settled, forgot it): the record may predate
      // that, and acting on it could submit the same attempt twice. The events and the next sweep cover it.
      const current = this.txs.get(entry.tx_id);
      if (current !== known || current?.status !== knownStatus || this.deciding.has(entry.tx_id)) continue;
      if (isTerminalTxState(record.state)) {
        this.forget(record.tx_id);
        continue;
      }
      const needsDecision = record.state === 'pending' && !attemptInFlight(record);
      this.txs.set(record.tx_id, trackedFromRecord(record, needsDecision, this.clock.now()));
      if (needsDecision) missed.push(record.tx_id);
    }
    for (const txId of missed) {
      this.log.line(`watchdog redecide ${txId} (pending with no decision)`);
      this.kick(txId);
    }
    if (reason !== 'interval' || missed.length > 0) {
      this.log.line(
        `watchdog ${reason} queue=${queue.entries.length} checked=${checked} redecided=${missed.length}`,
      );
    }
    return { checked, redecided: missed.length };
  }
}

/** The last attempt is still out (no outcome, not failed): a new one would be refused with 409. */
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
      previous = { tip_lamports: attempt.tip_lamports, outcome: attempt.outcome };
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
    status: needsDecision ? 'pending' : 'submitted',
    cooldown_until_slot: 0,
    cycle_started_ms: nowMs,
  };
}

function worldFromStatus(
  status: StatusResponse,
  tip: TipFloor,
  policy: DecisionWorld['policy'],
): DecisionWorld {
  const slotEvent = {
    slot: status.slot,
    leader: status.leader,
    bundle_engine_leader: status.bundle_engine_leader,
    next_bundle_engine_slot: status.next_bundle_engine_leader_slot,
  };
  return {
    slot: status.slot,
    leaders: leaderViewFromSlotUpdate(slotEvent),
    leader: {
      identity: status.leader,
      bundle_engine: status.bundle_engine_leader,
      next_bundle_engine_slot: status.next_bundle_engine_leader_slot,
    },
    floor: floorOf(tip),
    policy: policy ?? DEFAULT_POLICY,
  };
}

function floorOf(tip: TipFloor): TipFloor {
  return {
    p25: tip.p25,
    p50: tip.p50,
    p75: tip.p75,
    p95: tip.p95,
    p99: tip.p99,
    ema: tip.ema,
    stale: tip.stale,
  };
}

function short(bundleId: string): string {
  return bundleId.slice(0, 12);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A 401 from the sidecar: the token is missing or wrong, which no retry can fix. */
export function isTokenRefusal(error: unknown): error is RelayError {
  return isRelayError(error) && error.status === 401;
}
