import { MAX_REQUEST_BODY_BYTES, RelayError } from '@solrelay/core';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';

/** A request that carries a body must say it is JSON (415 `RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE` otherwise). */
export function requireJsonContentType(req: Request, _res: Response, next: NextFunction): void {
  if (req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH') {
    const type = req.headers['content-type'] ?? '';
    if (!/^application\/json\s*(;|$)/i.test(type)) {
      next(new RelayError('RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE', { content_type: type || '(none)' }));
      return;
    }
  }
  next();
}

/** express's JSON parser within relay's body limit; its errors are mapped by `toRelayError`. */
export function parseJsonBody(): RequestHandler {
  return express.json({ limit: MAX_REQUEST_BODY_BYTES, strict: false, type: 'application/json' });
}
