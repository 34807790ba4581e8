import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_REQUEST_BODY_BYTES, RelayError } from '@solrelay/core';
import type { AppDeps } from '../deps';
import type { TokenCheck } from './auth';
import { sendError, sendJson } from './errors';

/**
 * `POST /tx/enqueue` in its ordinary form (a JSON body with a Content-Length within the limit, no content
 * encoding) goes straight to the relay, without express's router and body parser — that path is the API's hot one
 * and the framework was a fifth of its CPU. Every unusual enqueue (chunked, compressed, another charset, no length)
 * goes through the express app, so edge cases keep one implementation. Both paths answer with the same codes and
 * bodies, and check in the same order: the browser guard (run by the listener before this), then the token, then
 * the body.
 *
 * The returned handler answers such a request and returns true, or returns false having touched nothing.
 */
export function fastEnqueue(
  deps: Pick<AppDeps, 'relay' | 'log'>,
  checkToken: TokenCheck | null,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (req.method !== 'POST' || !(req.url === '/tx/enqueue' || req.url?.startsWith('/tx/enqueue?')))
      return false;
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
      enqueue(deps, checkToken, req, res, length);
      return true;
    }
    return false;
  };
}

function enqueue(
  deps: Pick<AppDeps, 'relay' | 'log'>,
  checkToken: TokenCheck | null,
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
