import type { ServerResponse } from 'node:http';
import { MAX_REQUEST_BODY_BYTES, RelayError, isRelayError } from '@solrelay/core';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';

/** A JSON answer written directly (the fast enqueue path and every error answer). */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * Answers that say relay cannot serve now, not that a request went wrong: the sidecar logs their cause once (the store
 * says when its database goes and comes back), not at every request refused meanwhile.
 */
const NOT_NOW = new Set(['RELAY_E_NOT_READY', 'RELAY_E_DB_UNAVAILABLE', 'RELAY_E_DB_COMMIT_UNKNOWN']);

/**
 * One error answer for both paths: relay's code and message, `retry-after` on 429 (and on a 503 that says when to
 * come back: the database unavailable), a log line for a bug.
 */
export function sendError(res: ServerResponse, error: unknown, log: Logger): void {
  const relayError = toRelayError(error);
  if (relayError.status >= 500 && !NOT_NOW.has(relayError.code)) {
    log.error({ err: error }, 'request failed');
  }
  if (res.headersSent) {
    res.end();
    return;
  }
  const retryAfter = relayError.details.retry_after_s;
  if (relayError.status === 429)
    res.setHeader('retry-after', String(typeof retryAfter === 'number' ? retryAfter : 1));
  else if (relayError.status === 503 && typeof retryAfter === 'number')
    res.setHeader('retry-after', String(retryAfter));
  sendJson(res, relayError.status, relayError.toBody());
}

/** Map framework and parser errors to relay's codes; anything unknown is a bug (500). */
export function toRelayError(error: unknown): RelayError {
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

/** The last route: whatever no route answered is `RELAY_E_REQUEST_UNKNOWN_ROUTE`. */
export function unknownRoute(req: Request, _res: Response, next: NextFunction): void {
  next(new RelayError('RELAY_E_REQUEST_UNKNOWN_ROUTE', { method: req.method, path: req.path }));
}

/** The express app's one error handler: every thrown or passed error leaves as the stable error body. */
export function errorHandler(log: Logger) {
  return (error: unknown, _req: Request, res: Response, _next: NextFunction): void => {
    sendError(res, error, log);
  };
}
