import type { IncomingMessage } from 'node:http';
import { RelayError } from '@solrelay/core';

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
export function browserGuard(
  apiHost: string | undefined,
  allowedHosts: readonly string[],
): (req: Pick<IncomingMessage, 'headers'>) => RelayError | null {
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
