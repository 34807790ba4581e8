/**
 * The agent's copy of the sidecar state a decision reads: slot, leader outlook, tip floor and policy (a
 * `DecisionWorld`), and the decision mode, which the sidecar owns (DESIGN §6). Events keep it current; it is read
 * whole at start-up and re-read whenever events may have been missed. A re-read never undoes an event that
 * arrived while it was out.
 */
import { reconnectDelay } from '@solrelay/client';
import {
  DEFAULT_POLICY,
  type DecisionMode,
  type Policy,
  type RelayError,
  type RelayEventMap,
  type StatusResponse,
  type TipFloor,
} from '@solrelay/core';
import { leaderViewFromSlotUpdate, type DecisionWorld } from './decision';
import { messageOf } from './log-text';
import { RerunAfterCurrent } from './rerun';
import type { AgentLog, AgentRelayClient, Clock, IntervalTimers } from './ports';
import { isTokenRefusal } from './sidecar-errors';

/** What the sidecar state needs from the agent. */
export interface SidecarStateContext {
  readonly client: Pick<AgentRelayClient, 'policy' | 'status' | 'mode' | 'tip'>;
  readonly log: AgentLog;
  readonly clock: Clock;
  readonly timers: IntervalTimers;
  /** Tip-floor data this old or older is re-read with `GET /tip` before deciding. */
  readonly floorMaxAgeMs: number;
  /** Whether a model is configured (cortex without one is said in the log). */
  readonly modelAvailable: boolean;
  isStopped(): boolean;
  /** The sidecar refused the token. */
  refuse(error: RelayError): void;
}

/** Counters and the clock when a re-read started, to tell which of its answers are older than events seen since. */
interface ReadStart {
  modeChanges: number;
  policyChanges: number;
  readStartedMs: number;
}

/** The agent's copy of the sidecar's slot, leaders, tip floor, policy and decision mode. */
export class SidecarState {
  private current: DecisionWorld | null = null;
  private floorAtMs = 0;
  private floorRefresh: Promise<void> | null = null;
  private currentMode: DecisionMode | null = null;
  /** Counts mode / policy changes seen on events, so a re-read that was out meanwhile does not undo them. */
  private modeChanges = 0;
  private policyChanges = 0;
  private readonly reads = new RerunAfterCurrent<string, void>((why) => this.read(why));

  constructor(private readonly ctx: SidecarStateContext) {}

  /** The world a decision reads; null until the first read answered. */
  get world(): DecisionWorld | null {
    return this.current;
  }

  /** The sidecar's decision mode as last seen (null before the first read). */
  get mode(): DecisionMode | null {
    return this.currentMode;
  }

  /** The re-read under way, or null: decisions wait for it. */
  get rereading(): Promise<void> | null {
    return this.reads.running;
  }

  /**
   * Read `/policy`, `/status`, `/tip` and `/internal/mode` until they answer (the client's reconnect schedule
   * between tries). At start-up, and again whenever the agent may have missed changes: a `resync`, a presence
   * re-registration, an event-stream reconnect (the sidecar may have restarted with another policy), a 422. A call
   * while one is out gets a read that starts after it.
   */
  reread(why: string): Promise<void> {
    return this.reads.request(why);
  }

  setMode(mode: DecisionMode): void {
    this.modeChanges += 1;
    if (mode === this.currentMode) return;
    const previous = this.currentMode;
    this.currentMode = mode;
    if (previous !== null) this.ctx.log.line(`mode ${mode} (was ${previous})`);
    if (mode === 'cortex' && !this.ctx.modelAvailable)
      this.ctx.log.line('mode cortex requested, but cortex is unavailable: reflex decides');
  }

  /** A `slot_update`: true when it moved the slot forward (older or repeated slots are ignored). */
  applySlot(e: RelayEventMap['slot_update']): boolean {
    const world = this.current;
    if (!world || e.slot <= world.slot) return false;
    world.slot = e.slot;
    world.leaders = leaderViewFromSlotUpdate(e);
    world.leader = {
      identity: e.leader,
      bundle_engine: e.bundle_engine_leader,
      next_bundle_engine_slot: e.next_bundle_engine_slot,
    };
    // Once seen, a window stays (a later update of an older sidecar without the field does not erase it).
    if (e.vote_only_windows) world.vote_only_windows = e.vote_only_windows;
    return true;
  }

  /** A `policy_changed`: a reload the sidecar accepted replaces the policy. */
  applyPolicy(e: RelayEventMap['policy_changed']): void {
    if (!e.ok || !this.current) return;
    this.policyChanges += 1;
    this.current.policy = e.values;
    this.ctx.log.line(
      `policy reloaded tip-percentile=${e.values['tip-percentile']} min-tip=${e.values['min-tip']} max-tip=${e.values['max-tip']} escalation-step=${e.values['escalation-step']}`,
    );
  }

  /** A `tip_update`: the floor the sidecar pushes at every poll. */
  applyTip(e: TipFloor): void {
    if (!this.current) return;
    this.current.floor = floorOf(e);
    this.floorAtMs = this.ctx.clock.now();
  }

  /** Re-read the tip floor when it is `floorMaxAgeMs` old; on failure keep the last one, marked stale. */
  async freshFloor(): Promise<void> {
    const { client, clock, log } = this.ctx;
    // `<`, not `<=`: the clock counts whole ms, so a max age of 0 must still re-read a floor read this same ms.
    if (clock.now() - this.floorAtMs < this.ctx.floorMaxAgeMs) return;
    this.floorRefresh ??= client
      .tip()
      .then((tip) => {
        if (!this.current) return;
        this.current.floor = floorOf(tip);
        this.floorAtMs = clock.now();
      })
      .catch((error: unknown) => {
        // Keep the last floor but call it stale: reflex then treats the decision as a hard case.
        if (this.current) this.current.floor = { ...this.current.floor, stale: true };
        log.error(`tip floor unavailable (${messageOf(error)}); using the last one, marked stale`);
      })
      .finally(() => {
        this.floorRefresh = null;
      });
    await this.floorRefresh;
  }

  private async read(why: string): Promise<void> {
    const { client, clock, log, timers } = this.ctx;
    for (let attempt = 1; !this.ctx.isStopped(); attempt += 1) {
      const before: ReadStart = {
        modeChanges: this.modeChanges,
        policyChanges: this.policyChanges,
        readStartedMs: clock.now(),
      };
      try {
        const [policy, status, mode, tip] = await Promise.all([
          client.policy(),
          client.status(),
          client.mode(),
          client.tip(),
        ]);
        if (this.ctx.isStopped()) return;
        this.apply(why, worldFromStatus(status, tip, policy.values), mode.decision_mode, before);
        return;
      } catch (error) {
        if (isTokenRefusal(error)) {
          this.ctx.refuse(error);
          return;
        }
        const delay = reconnectDelay(attempt);
        log.error(
          `sidecar not answering (${messageOf(error)}); retrying in ${delay} ms (attempt ${attempt})`,
        );
        await new Promise<void>((resolve) => timers.setTimeout(resolve, delay));
      }
    }
  }

  private apply(why: string, read: DecisionWorld, mode: DecisionMode, before: ReadStart): void {
    const world = this.current;
    if (!world) {
      this.current = read;
      this.floorAtMs = this.ctx.clock.now();
    } else {
      // An event that arrived while the reads were out is newer than what they returned: keep it.
      if (this.policyChanges === before.policyChanges) world.policy = read.policy;
      if (this.floorAtMs <= before.readStartedMs) {
        world.floor = read.floor;
        this.floorAtMs = this.ctx.clock.now();
      }
      if (read.slot >= world.slot) {
        world.slot = read.slot;
        world.leaders = read.leaders;
        world.leader = read.leader;
      }
      const p = world.policy;
      this.ctx.log.line(
        `re-read sidecar state (${why}) slot=${world.slot} tip-percentile=${p['tip-percentile']} min-tip=${p['min-tip']} max-tip=${p['max-tip']} escalation-step=${p['escalation-step']}`,
      );
    }
    if (this.modeChanges === before.modeChanges) this.setMode(mode);
  }
}

function worldFromStatus(status: StatusResponse, tip: TipFloor, policy: Policy | undefined): DecisionWorld {
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

/** The floor fields of a tip answer or event (without `updated_at`, `source` and the like). */
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
