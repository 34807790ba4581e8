import { RelayError } from '@solrelay/core';

/**
 * `RELAY_DATABASE_URL` checked and redacted, without loading the driver (the sidecar's config reads it at start-up).
 */

/** A checked `RELAY_DATABASE_URL`. */
export interface DatabaseUrl {
  /** As given (with its password): only ever handed to the driver. */
  url: string;
  /** The same with the password replaced by `***`: what messages, logs and `relay db status` show. */
  redacted: string;
  host: string;
  port: number;
  database: string;
  user: string;
}

const PROTOCOLS = ['postgres:', 'postgresql:'];

/** The URL with any password replaced by `***`; works on text that is not a URL too (it never echoes a password). */
export function redactDatabaseUrl(raw: string): string {
  try {
    const parsed = new URL(raw);
    if (PROTOCOLS.includes(parsed.protocol)) {
      if (parsed.password) parsed.password = '***';
      for (const key of [...parsed.searchParams.keys()]) {
        if (key.toLowerCase() === 'password') parsed.searchParams.set(key, '***');
      }
      return parsed.toString().replace('%2A%2A%2A', '***');
    }
  } catch {
    // not a URL: below
  }
  // Anything else: hide all that precedes the last "@" but a scheme (it may hold a password), and password= values.
  const at = raw.lastIndexOf('@');
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(raw)?.[0] ?? '';
  return (at >= 0 ? `${scheme}***${raw.slice(at)}` : raw).replace(/(password=)[^&]*/gi, '$1***');
}

function invalid(raw: string, reason: string): RelayError<'RELAY_E_DB_INVALID_URL'> {
  return new RelayError('RELAY_E_DB_INVALID_URL', { url: redactDatabaseUrl(raw), reason });
}

/**
 * Checks a database URL: `postgres://user[:password]@host[:port]/database[?params]` (or `postgresql://`). Throws
 * `RELAY_E_DB_INVALID_URL` naming what is wrong, the URL shown redacted.
 */
export function parseDatabaseUrl(raw: string): DatabaseUrl {
  const text = raw.trim();
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw invalid(
      text,
      'not a URL (expected postgres://user:password@host:5432/database; percent-encode special characters in the password)',
    );
  }
  if (!PROTOCOLS.includes(parsed.protocol)) {
    throw invalid(text, `expected postgres:// or postgresql://, got ${parsed.protocol}//`);
  }
  if (!parsed.hostname) throw invalid(text, 'no host (expected postgres://user:password@host:5432/database)');
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (!database || database.includes('/')) {
    throw invalid(text, 'name one database in the path (postgres://user:password@host:5432/database)');
  }
  const user = decodeURIComponent(parsed.username);
  if (!user) throw invalid(text, 'no user (expected postgres://user:password@host:5432/database)');
  return {
    url: text,
    redacted: redactDatabaseUrl(text),
    host: parsed.hostname,
    port: parsed.port ? Number(parsed.port) : 5432,
    database,
    user,
  };
}
