import type { RequestListener } from 'node:http';
import express from 'express';
import type { AppDeps } from './deps';
import { bearerAuth, tokenChecker } from './middleware/auth';
import { browserGuard } from './middleware/browser-guard';
import { errorHandler, sendError, unknownRoute } from './middleware/errors';
import { fastEnqueue } from './middleware/fast-enqueue';
import { parseJsonBody, requireJsonContentType } from './middleware/json-body';
import { agentRoutes } from './routes/agent';
import { livenessRoute, operatorRoutes } from './routes/operator';
import { dashboardFiles, openApiRoute } from './routes/static';
import { transactionRoutes } from './routes/transactions';

export type { AppDeps } from './deps';

/**
 * The HTTP + SSE API of DESIGN §3. Every answer that is not 2xx carries `{"error":{code,message,details}}`.
 *
 * Order is behaviour: what is registered first runs first. Route groups register on the app itself rather than
 * as `express.Router()` sub-apps, because a sub-router answers an unmatched OPTIONS on its own (200 with `Allow`)
 * where this app answers 404 `RELAY_E_REQUEST_UNKNOWN_ROUTE`.
 */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  // Before the token: liveness probes and the dashboard's files carry none.
  livenessRoute(app);
  dashboardFiles(app, deps);

  // The token before the body: an unauthenticated request is refused before its body is read or judged.
  if (deps.apiToken) app.use(bearerAuth(tokenChecker(deps.apiToken)));
  app.use(requireJsonContentType);
  app.use(parseJsonBody());

  transactionRoutes(app, deps);
  agentRoutes(app, deps);
  operatorRoutes(app, deps);
  openApiRoute(app);

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
