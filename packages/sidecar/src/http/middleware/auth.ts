import { createHash, timingSafeEqual } from 'node:crypto';
import { RelayError } from '@solrelay/core';
import type { NextFunction, Request, Response } from 'express';

/** Judges an `Authorization` header: the error to answer with, or null when the token matches. */
export type TokenCheck = (header: string | undefined) => RelayError | null;

/** Bearer-token check, in constant time (hashing both sides first equalizes lengths). Tokens are never logged. */
export function tokenChecker(token: string): TokenCheck {
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

/** The express form of the check, for every route behind the token (the fast enqueue path calls `check` itself). */
export function bearerAuth(check: TokenCheck) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const refused = check(req.headers.authorization);
    if (refused) next(refused);
    else next();
  };
}
