import { RelayError, parseModeRequest } from '@solrelay/core';
import type { Request } from 'express';
import { EventHub as Hub, type HubEvent } from '../../events/hub';
import type { AppDeps, Routes } from '../deps';

/**
 * The agent's routes under `/internal`: the event stream, `submit`, the decision mode, and the presence stream
 * that registers an agent for as long as it stays open.
 */
export function agentRoutes(app: Routes, deps: Pick<AppDeps, 'relay' | 'hub' | 'now' | 'fleetHostId'>): void {
  const { relay, hub } = deps;
  const me = deps.fleetHostId;
  // `?scope=host` in a fleet (the agent's): what this host's own commits wrote and its own news (events without a
  // writing host). Another host's transactions are its agent's to decide (a submit here would be refused with
  // RELAY_E_TX_OWNED_ELSEWHERE). Without it (dashboards, clients): every host's events.
  const ours =
    me === undefined ? undefined : (event: HubEvent) => event.host === undefined || event.host === me;

  app.get('/internal/events', (req, res) => {
    const scope = req.query.scope ?? 'fleet';
    if (scope !== 'fleet' && scope !== 'host')
      throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
        field: 'scope',
        reason: 'expected "fleet" (every host\'s events, the default) or "host" (this sidecar\'s own)',
      });
    const filter = scope === 'host' ? ours : undefined;
    hub.subscribe(res, { lastEventId: headerValue(req, 'last-event-id'), ...(filter ? { filter } : {}) });
  });

  app.post('/internal/submit', async (req, res) => {
    res.status(202).json(await relay.submit(req.body, 'agent'));
  });

  app.get('/internal/mode', (_req, res) => {
    res.json({ decision_mode: relay.decisionMode });
  });

  app.post('/internal/mode', (req, res) => {
    const { decision_mode } = parseModeRequest(req.body);
    res.json({ decision_mode: relay.setMode(decision_mode) });
  });

  app.get('/internal/agent/presence', (req, res) => {
    const model = stringQuery(req, 'model');
    const provider = stringQuery(req, 'provider');
    if (!model)
      throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
        field: 'model',
        reason: 'the agent must name its model',
      });
    if (!provider)
      throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
        field: 'provider',
        reason: 'the agent must name its provider',
      });
    const connection = relay.agentConnected(model, provider);
    res.on('close', () => relay.agentDisconnected(connection.id));
    hub.subscribe(res, {
      initialFrames: [
        Hub.frame('registered', {
          decision_mode: relay.decisionMode,
          model,
          provider,
          ts: (deps.now ?? Date.now)(),
        }),
      ],
      // The presence stream carries mode changes too, so an agent learns the mode without a second stream.
      filter: (event) => event.name === 'mode_changed',
    });
  });

  app.get('/internal/agent/info', (_req, res) => {
    const agent = relay.agent;
    if (!agent) throw new RelayError('RELAY_E_AGENT_NOT_CONNECTED', {});
    res.json({ model: agent.model, provider: agent.provider, connected_since: agent.since });
  });
}

function headerValue(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function stringQuery(req: Request, name: string): string | null {
  const value = req.query[name];
  if (typeof value !== 'string') return null;
  const trimmed = value.trim();
  return trimmed.length > 0 && trimmed.length <= 200 ? trimmed : null;
}
