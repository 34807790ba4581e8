import type { DecisionMode } from '@solrelay/core';
import type { RelayContext } from '../context';
import { SIGNATURE_FEE_LAMPORTS } from '../engine/tip-tx';
import { newUlid } from '../util/ids';

/** Rent-exempt minimum of a 0-byte system account: the tipper must keep it. */
const RENT_EXEMPT_MINIMUM = 890_880;

export interface AgentConnection {
  id: string;
  model: string;
  provider: string;
  since: number;
}

/**
 * Operator state: the decision mode (the sidecar owns it), which agents are connected (and since when none is, for
 * the fallback decider), and the tipper's balance with the pause it causes.
 */
export class Operator {
  private mode: DecisionMode;
  private readonly agents = new Map<string, AgentConnection>();
  private agentAbsentSince: number;
  private tipperBalance: number | null = null;
  private pausedReason: string | null = null;
  /** After relay's own tip transaction failed for want of funds: the balance it needs before submission resumes. */
  private resumeAt: number | null = null;

  constructor(private readonly ctx: RelayContext) {
    this.mode = ctx.o.initialMode;
    this.agentAbsentSince = ctx.now();
  }

  get decisionMode(): DecisionMode {
    return this.mode;
  }

  get paused(): string | null {
    return this.pausedReason;
  }

  get balance(): number | null {
    return this.tipperBalance;
  }

  get agent(): AgentConnection | null {
    let latest: AgentConnection | null = null;
    for (const a of this.agents.values()) if (!latest || a.since > latest.since) latest = a;
    return latest;
  }

  /** Whether the sidecar is deciding by itself because no agent has been connected for the grace period. */
  get fallbackActive(): boolean {
    return (
      !this.ctx.o.bypass.enabled &&
      this.agents.size === 0 &&
      this.ctx.o.agentGraceMs > 0 &&
      this.ctx.now() - this.agentAbsentSince >= this.ctx.o.agentGraceMs
    );
  }

  setMode(mode: DecisionMode): DecisionMode {
    const previous = this.mode;
    if (mode !== previous) {
      this.mode = mode;
      this.ctx.o.hub.publish('mode_changed', { decision_mode: mode, previous, ts: this.ctx.now() });
    }
    return this.mode;
  }

  agentConnected(model: string, provider: string): AgentConnection {
    const connection: AgentConnection = { id: newUlid(), model, provider, since: this.ctx.now() };
    this.agents.set(connection.id, connection);
    this.ctx.o.hub.publish('agent_presence', { connected: true, model, provider, ts: connection.since });
    return connection;
  }

  agentDisconnected(id: string): void {
    const connection = this.agents.get(id);
    if (!connection) return;
    this.agents.delete(id);
    if (this.agents.size === 0) this.agentAbsentSince = this.ctx.now();
    this.ctx.o.hub.publish('agent_presence', {
      connected: false,
      model: connection.model,
      provider: connection.provider,
      ts: this.ctx.now(),
    });
  }

  /** Tipper balance from RPC. Below what one more minimal tip needs, submission pauses (never failing a user tx). */
  setTipperBalance(lamports: number): void {
    this.tipperBalance = lamports;
    const needed = RENT_EXEMPT_MINIMUM + this.ctx.o.policy()['min-tip'] + SIGNATURE_FEE_LAMPORTS;
    if (this.resumeAt !== null && lamports >= this.resumeAt) this.resumeAt = null;
    const reason =
      lamports < needed
        ? `tipper balance ${lamports} lamports is below ${needed} (rent-exempt minimum + min-tip + fee)`
        : this.resumeAt !== null
          ? `tipper balance ${lamports} lamports cannot pay the tip that failed (needs ${this.resumeAt})`
          : null;
    this.setPaused(reason, lamports);
  }

  /**
   * The block engine reports that relay's own tip transaction failed in simulation: an operator fault (the tipper
   * cannot pay), never the user's. Submission pauses until a balance read shows the tip, the fee and the rent-exempt
   * minimum covered.
   */
  tipTransactionFailed(tipLamports: number, detail: string): void {
    this.resumeAt = RENT_EXEMPT_MINIMUM + tipLamports + SIGNATURE_FEE_LAMPORTS;
    this.setPaused(
      `tip transaction failed in simulation (${detail}); waiting for the tipper's balance to cover it`,
    );
  }

  private setPaused(reason: string | null, balance: number | null = this.tipperBalance): void {
    if (reason === this.pausedReason) return;
    this.pausedReason = reason;
    if (reason) this.ctx.o.log.warn({ balance, reason }, 'submission paused: tipper underfunded');
    else this.ctx.o.log.info({ balance }, 'submission resumed: tipper funded');
  }
}
