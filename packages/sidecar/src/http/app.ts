import { createHash, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { join } from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import {
  DEFAULT_LIFECYCLE_LAST,
  LifecycleQuerySchema,
  MAX_REQUEST_BODY_BYTES,
  RelayError,
  isRelayError,
  isTerminalTxState,
  parseModeRequest,
  parseRequestBody,
  txStatusChangedEvent,
  type LifecycleEntry,
  type ReadyResponse,
  type StatusResponse,
} from '@solrelay/core';
import type { Logger } from 'pino';
import type { EventHub } from '../events/hub';
import type { LifecycleLog } from '../lifecycle/log';
import type { Metrics } from '../metrics';
import type { PolicyStore } from '../policy/policy-store';
import type { Relay } from '../relay';
import { EventHub as Hub } from '../events/hub';
import { openApiDocument } from './openapi';

export interface AppDeps {
  relay: Relay;
  hub: EventHub;
  lifecycle: LifecycleLog<LifecycleEntry>;
  policy: PolicyStore;
  metrics: Metrics;
  log: Logger;
  apiToken: string | undefined;
  status: () => Promise<StatusResponse>;
  ready: () => ReadyResponse;
  tip: () => unknown;
  /** Built dashboard files served at `/`, when present. */
  webDist?: string | undefined;
  /** The address the API is bound to: on a loopback address, Host headers are checked (DNS rebinding). */
  apiHost?: string | undefined;
  /** Host names accepted besides loopback ones; `*` turns the Host check off. */
  allowedHosts?: readonly string[] | undefined;
  /** The service's clock (event timestamps); the system's when absent. */
  now?: () => number;
}

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

  if (deps.apiToken) app.use(bearerAuth(deps.apiToken));

  app.use((req, _res, next) => {
    if (req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH') {
      const type = req.headers['content-type'] ?? '';
      if (!/^application\/json\s*(;|$)/i.test(type)) {
        next(new RelayError('RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE', { content_type: type || '(none)' }));
        return;
      }
    }
    next();
  });
  app.use(express.json({ limit: MAX_REQUEST_BODY_BYTES, strict: false, type: 'application/json' }));

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

  app.use((req, _res, next) => {
    next(new RelayError('RELAY_E_REQUEST_UNKNOWN_ROUTE', { method: req.method, path: req.path }));
  });

  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    sendError(res, error, deps.log);
  });

  return app;
}

/**
 * The server's request listener: `POST /tx/enqueue` in its ordinary form (a JSON body with a Content-Length
 * within the limit, no content encoding) goes straight to the relay, without express's router and body parser —
 * that path is the API's hot one and the framework was a fifth of its CPU. Every other request, including every
 * unusual enqueue (chunked, compressed, another charset, no length), goes through the express app, so edge cases
 * keep one implementation. Both paths answer with the same codes and bodies.
 */
export function createRequestListener(deps: AppDeps): RequestListener {
  const app = createApp(deps);
  const checkToken = deps.apiToken ? tokenChecker(deps.apiToken) : null;
  const guard = browserGuard(deps.apiHost, deps.allowedHosts ?? []);
  return (req, res) => {
    const forbidden = guard(req);
    if (forbidden) {
      req.resume();
      sendError(res, forbidden, deps.log);
      return;
    }
    if (req.method === 'POST' && (req.url === '/tx/enqueue' || req.url?.startsWith('/tx/enqueue?'))) {
      const length = Number(req.headers['content-length']);
      const type = req.headers['content-type'];
      if (
        Number.isSafeInteger(length) &&
        length > 0 &&
        length <= MAX_REQUEST_BODY_BYTES &&
        req.headers['transfer-encoding'] === undefined &&
        req.headers['content-encoding'] === undefined &&
        type !== undefined &&
        /^application\/json\s*(;\s*charset=utf-8\s*)?$/i.test(type)
      ) {
        fastEnqueue(deps, checkToken, req, res, length);
        return;
      }
    }
    app(req, res);
  };
}

function fastEnqueue(
  deps: AppDeps,
  checkToken: ((header: string | undefined) => RelayError | null) | null,
  req: IncomingMessage,
  res: ServerResponse,
  length: number,
): void {
  const refused = checkToken?.(req.headers.authorization);
  if (refused) {
    req.resume();
    sendError(res, refused, deps.log);
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  req.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received <= length) chunks.push(chunk);
  });
  req.on('error', () => res.destroy());
  req.on('end', () => {
    if (received !== length) {
      sendError(
        res,
        new RelayError('RELAY_E_REQUEST_MALFORMED_JSON', {
          reason: 'the body length does not match Content-Length',
        }),
        deps.log,
      );
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8'));
    } catch (error) {
      sendError(
        res,
        new RelayError('RELAY_E_REQUEST_MALFORMED_JSON', {
          reason: (error as Error).message.slice(0, 200),
        }),
        deps.log,
      );
      return;
    }
    deps.relay.enqueue(body).then(
      ({ response, created }) => sendJson(res, created ? 202 : 200, response),
      (error: unknown) => sendError(res, error, deps.log),
    );
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** One error answer for both paths: relay's code and message, `retry-after` on 429, a log line for a bug. */
function sendError(res: ServerResponse, error: unknown, log: Logger): void {
  const relayError = toRelayError(error);
  if (relayError.status >= 500 && relayError.code !== 'RELAY_E_NOT_READY') {
    log.error({ err: error }, 'request failed');
  }
  if (res.headersSent) {
    res.end();
    return;
  }
  const retryAfter = relayError.details.retry_after_s;
  if (relayError.status === 429)
    res.setHeader('retry-after', String(typeof retryAfter === 'number' ? retryAfter : 1));
  sendJson(res, relayError.status, relayError.toBody());
}

/** Map framework and parser errors to relay's codes; anything unknown is a bug (500). */
function toRelayError(error: unknown): RelayError {
  if (isRelayError(error)) return error;
  const e = error as { type?: string; status?: number; message?: string };
  if (e?.type === 'entity.too.large')
    return new RelayError('RELAY_E_REQUEST_BODY_TOO_LARGE', { limit_bytes: MAX_REQUEST_BODY_BYTES });
  if (e?.type === 'entity.parse.failed') {
    return new RelayError('RELAY_E_REQUEST_MALFORMED_JSON', {
      reason: (e.message ?? 'unparsable').slice(0, 200),
    });
  }
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
    return new RelayError('RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE', {
      content_type: e.message ?? 'unsupported encoding',
    });
  }
  if (e?.type === 'request.aborted')
    return new RelayError('RELAY_E_REQUEST_MALFORMED_JSON', { reason: 'the request was aborted' });
  if (e?.status === 400)
    return new RelayError('RELAY_E_REQUEST_MALFORMED_JSON', {
      reason: (e.message ?? 'bad request').slice(0, 200),
    });
  return new RelayError('RELAY_E_INTERNAL_ERROR', { reason: 'unexpected error; see the sidecar log' });
}

/** Bearer-token check, in constant time (hashing both sides first equalizes lengths). Tokens are never logged. */
function tokenChecker(token: string): (header: string | undefined) => RelayError | null {
  const expected = createHash('sha256').update(token).digest();
  return (header) => {
    if (!header) return new RelayError('RELAY_E_AUTH_MISSING_TOKEN', {});
    const match = /^Bearer\s+(.+)$/i.exec(header);
    const given = createHash('sha256')
      .update(match?.[1] ?? '')
      .digest();
    if (!match || !timingSafeEqual(given, expected)) return new RelayError('RELAY_E_AUTH_INVALID_TOKEN', {});
    return null;
  };
}

const LOOPBACK_IPV4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** `localhost`, `*.localhost` (RFC 6761: always loopback), 127.0.0.0/8, ::1. Brackets and a trailing dot ignored. */
function isLoopbackName(host: string): boolean {
  const name = host
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
  return (
    name === 'localhost' ||
    name.endsWith('.localhost') ||
    LOOPBACK_IPV4.test(name) ||
    name === '::1' ||
    name === '0:0:0:0:0:0:0:1'
  );
}

/** The host name of a Host header, without its port. */
function hostName(header: string): string {
  const bracketed = /^(\[[^\]]*\])(:\d*)?$/.exec(header);
  return (bracketed ? bracketed[1]! : header.replace(/:\d*$/, '')).toLowerCase();
}

/**
 * What a browser must not do, checked before anything else (every route, both request paths):
 * - a cross-origin request: an `Origin` other than the origin the request addresses (`null` included), or
 *   `Sec-Fetch-Site: cross-site | same-site` (no-cors requests such as `<img>` carry no Origin) — 403
 *   `RELAY_E_AUTH_FORBIDDEN_ORIGIN`. relay sends no CORS headers; its dashboard is same-origin.
 * - DNS rebinding: while bound to a loopback address, a `Host` that is not a loopback name (nor in
 *   `RELAY_ALLOWED_HOSTS`) — 403 `RELAY_E_AUTH_FORBIDDEN_HOST`. A page that rebinds its own name to 127.0.0.1 is
 *   same-origin with itself, so only the Host it sends gives it away. `*` turns this check off.
 * Non-browser clients (the SDK, the CLI, the agent, curl) send no Origin and a loopback Host, so they pass.
 */
function browserGuard(
  apiHost: string | undefined,
  allowedHosts: readonly string[],
): (req: IncomingMessage) => RelayError | null {
  const checkHost = apiHost !== undefined && isLoopbackName(apiHost) && !allowedHosts.includes('*');
  const allowed = new Set(allowedHosts.map((h) => h.replace(/^\[(.*)\]$/, '$1').toLowerCase()));
  return (req) => {
    const host = req.headers.host;
    if (checkHost && host !== undefined) {
      const name = hostName(host);
      if (!isLoopbackName(name) && !allowed.has(name.replace(/^\[(.*)\]$/, '$1'))) {
        return new RelayError('RELAY_E_AUTH_FORBIDDEN_HOST', { host: host.slice(0, 200) });
      }
    }
    const site = req.headers['sec-fetch-site'];
    if (site === 'cross-site' || site === 'same-site') {
      return new RelayError('RELAY_E_AUTH_FORBIDDEN_ORIGIN', { origin: `(Sec-Fetch-Site: ${site})` });
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !sameOrigin(origin, host)) {
      return new RelayError('RELAY_E_AUTH_FORBIDDEN_ORIGIN', { origin: origin.slice(0, 200) });
    }
    return null;
  };
}

/** True when `origin` (scheme://host[:port]) names the host and port the request was sent to. */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    return url.host === new URL(`${url.protocol}//${host}`).host;
  } catch {
    return false; // "null" (sandboxed frames, file:) or unparsable
  }
}

function bearerAuth(token: string) {
  const check = tokenChecker(token);
  return (req: Request, _res: Response, next: NextFunction) => {
    const refused = check(req.headers.authorization);
    if (refused) next(refused);
    else next();
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
