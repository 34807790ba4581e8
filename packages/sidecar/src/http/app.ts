import { existsSync } from 'node:fs';
import type { RequestListener } from 'node:http';
import { join } from 'node:path';
import express, { type Request } from 'express';
import {
  DEFAULT_LIFECYCLE_LAST,
  LifecycleQuerySchema,
  RelayError,
  isTerminalTxState,
  parseModeRequest,
  parseRequestBody,
  txStatusChangedEvent,
} from '@solrelay/core';
import { EventHub as Hub } from '../events/hub';
import type { AppDeps } from './deps';
import { bearerAuth, tokenChecker } from './middleware/auth';
import { browserGuard } from './middleware/browser-guard';
import { errorHandler, sendError, unknownRoute } from './middleware/errors';
import { fastEnqueue } from './middleware/fast-enqueue';
import { parseJsonBody, requireJsonContentType } from './middleware/json-body';
import { openApiDocument } from './openapi';

export type { AppDeps } from './deps';

/** The HTTP + SSE API of DESIGN §3. Every answer that is not 2xx carries `{"error":{code,message,details}}`. */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  if (deps.webDist && existsSync(join(deps.webDist, 'index.html'))) {
    // The dashboard's static files need no token; its API calls carry it.
    app.use(express.static(deps.webDist, { index: 'index.html', fallthrough: true }));
  }

  // The token before the body: an unauthenticated request is refused before its body is read or judged.
  if (deps.apiToken) app.use(bearerAuth(tokenChecker(deps.apiToken)));
  app.use(requireJsonContentType);
  app.use(parseJsonBody());

  const { relay, hub } = deps;

  app.post('/tx/enqueue', async (req, res) => {
    const { response, created } = await relay.enqueue(req.body);
    res.status(created ? 202 : 200).json(response);
  });

  app.get('/tx/events/:txId', async (req, res) => {
    const txId = req.params.txId as string;
    const tx = await relay.stored(txId);
    if (!tx) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: txId });
    const current = txStatusChangedEvent({
      tx_id: tx.tx_id,
      state: tx.state,
      bundle_id: tx.attempts[tx.attempts.length - 1]?.bundle_id ?? null,
      tx_signatures: tx.signatures,
      failure: tx.failure,
      ts: (deps.now ?? Date.now)(),
    });
    const terminal = isTerminalTxState(tx.state);
    hub.subscribe(res, {
      initialFrames: [Hub.frame('tx_status_changed', current)],
      endAfterInitial: terminal,
      filter: (event) =>
        event.name === 'tx_status_changed' && (event.data as { tx_id: string }).tx_id === txId,
      closeAfter: (event) => isTerminalTxState((event.data as { state: 'pending' }).state),
    });
  });

  app.get('/tx/:txId', async (req, res) => {
    res.json(await relay.txRecord(req.params.txId as string));
  });

  app.get('/internal/events', (req, res) => {
    hub.subscribe(res, { lastEventId: headerValue(req, 'last-event-id') });
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

  app.get('/status', async (_req, res) => {
    res.json(await deps.status());
  });

  app.get('/tip', (_req, res) => {
    res.json(deps.tip());
  });

  app.get('/queue', async (_req, res) => {
    res.json(await relay.queueView());
  });

  app.get('/lifecycle', (req, res) => {
    const { last } = parseRequestBody(LifecycleQuerySchema, {
      last: req.query.last ?? DEFAULT_LIFECYCLE_LAST,
    });
    res.json({ entries: deps.lifecycle.recent(last) });
  });

  app.get('/bundle/:bundleId', async (req, res) => {
    const bundleId = req.params.bundleId as string;
    if (!/^[0-9a-f]{64}$/.test(bundleId)) {
      throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
        field: 'bundle_id',
        reason: 'expected 64 lowercase hex characters',
      });
    }
    const entry = await deps.lifecycle.find(bundleId);
    if (!entry) throw new RelayError('RELAY_E_BUNDLE_NOT_FOUND', { bundle_id: bundleId });
    res.json(entry);
  });

  app.get('/policy', (_req, res) => {
    res.json(deps.policy.view());
  });

  app.get('/readyz', (_req, res) => {
    const ready = deps.ready();
    if (ready.ready) {
      res.json(ready);
      return;
    }
    const error = new RelayError('RELAY_E_NOT_READY', {
      reason: ready.reasons.join('; '),
      reasons: ready.reasons,
    });
    res.status(503).json(error.toBody());
  });

  app.get('/metrics', async (_req, res) => {
    deps.metrics.sseClients.set(hub.clientCount);
    deps.metrics.sseDropped.set(hub.counters.slowClientsDropped);
    deps.metrics.sseBuffered.set(hub.bufferedBytes);
    deps.metrics.sseBufferedPeak.set(hub.counters.peakBufferedBytes);
    deps.metrics.sseClientBufferedPeak.set(hub.counters.peakClientBufferedBytes);
    deps.metrics.queueDepth.set((await relay.counts()).active);
    for (const t of relay.tipperStatus()) {
      if (t.balance_lamports !== null)
        deps.metrics.tipperBalance.set({ tipper: t.pubkey }, t.balance_lamports);
      deps.metrics.tipperReserved.set({ tipper: t.pubkey }, t.reserved_lamports);
    }
    for (const t of relay.tipperShortfalls())
      deps.metrics.tipperShortfall.set({ tipper: t.pubkey }, t.lamports);
    deps.metrics.spendWindow.set(await relay.spentThisHour());
    deps.metrics.spendLimit.set(deps.policy.current['spend-limit']);
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });

  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });

  app.use(unknownRoute);
  app.use(errorHandler(deps.log));
  return app;
}

/**
 * The server's request listener. For every request, in this order: the browser guard (Host and Origin, before
 * anything else, token or not); then the ordinary `POST /tx/enqueue` takes the fast path (token, then body, without
 * express); every other request goes through the express app (see `createApp` for its order).
 */
export function createRequestListener(deps: AppDeps): RequestListener {
  const app = createApp(deps);
  const guard = browserGuard(deps.apiHost, deps.allowedHosts ?? []);
  const enqueue = fastEnqueue(deps, deps.apiToken ? tokenChecker(deps.apiToken) : null);
  return (req, res) => {
    const forbidden = guard(req);
    if (forbidden) {
      req.resume();
      sendError(res, forbidden, deps.log);
      return;
    }
    if (enqueue(req, res)) return;
    app(req, res);
  };
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
