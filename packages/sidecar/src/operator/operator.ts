import type { DecisionMode } from '@solrelay/core';
import type { RelayPorts } from '../context';
import { newUlid } from '../util/ids';

export interface AgentConnection {
  id: string;
  model: string;
  provider: string;
  since: number;
}

/**
 * Operator state: the decision mode (the sidecar owns it) and which agents are connected (and since when none is, for
 * the fallback decider). The tippers' funds and the pause they cause are `tippers.ts`.
 */
export class Operator {
  private mode: DecisionMode;
  private readonly agents = new Map<string, AgentConnection>();
  private agentAbsentSince: number;

  constructor(
    private readonly d: Pick<RelayPorts, 'agentGraceMs' | 'bypass' | 'hub' | 'initialMode' | 'now'>,
  ) {
    this.mode = d.initialMode;
    this.agentAbsentSince = d.now();
  }

  get decisionMode(): DecisionMode {
    return this.mode;
  }

  get agent(): AgentConnection | null {
    let latest: AgentConnection | null = null;
    for (const a of this.agents.values()) if (!latest || a.since > latest.since) latest = a;
    return latest;
  }

  /** Whether the sidecar is deciding by itself because no agent has been connected for the grace period. */
  get fallbackActive(): boolean {
    return (
      !this.d.bypass.enabled &&
      this.agents.size === 0 &&
      this.d.agentGraceMs > 0 &&
      this.d.now() - this.agentAbsentSince >= this.d.agentGraceMs
    );
  }

  setMode(mode: DecisionMode): DecisionMode {
    const previous = this.mode;
    if (mode !== previous) {
      this.mode = mode;
      this.d.hub.publish('mode_changed', { decision_mode: mode, previous, ts: this.d.now() });
    }
    return this.mode;
  }

  agentConnected(model: string, provider: string): AgentConnection {
    const connection: AgentConnection = { id: newUlid(), model, provider, since: this.d.now() };
    this.agents.set(connection.id, connection);
    this.d.hub.publish('agent_presence', { connected: true, model, provider, ts: connection.since });
    return connection;
  }

  agentDisconnected(id: string): void {
    const connection = this.agents.get(id);
    if (!connection) return;
    this.agents.delete(id);
    if (this.agents.size === 0) this.agentAbsentSince = this.d.now();
    this.d.hub.publish('agent_presence', {
      connected: false,
      model: connection.model,
      provider: connection.provider,
      ts: this.d.now(),
    });
  }
}
