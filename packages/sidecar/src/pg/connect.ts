import { RelayError, isRelayError } from '@solrelay/core';
import pg from 'pg';
import { parseDatabaseUrl, type DatabaseUrl } from './url';

/**
 * Connecting to PostgreSQL (`RELAY_DATABASE_URL`, DESIGN §10): the URL checked and redacted, a pool with the timeouts
 * relay relies on, and every way a first connection fails turned into one coded error that names the cause and never
 * the password.
 */

/**
 * The connection settings relay expects (README "Running on PostgreSQL"). Short timeouts bound how long a lock or an
 * abandoned transaction can hold up the fleet; relay never holds a transaction open across an RPC or engine call, so
 * an idle transaction is a bug or a dead client, and its locks must go.
 */
export const DATABASE_DEFAULTS = {
  /** A statement running longer is cancelled (57014). */
  statementTimeoutMs: 10_000,
  /** Waiting longer for a row or table lock fails the statement (55P03) rather than queueing behind it. */
  lockTimeoutMs: 2_000,
  /** A session idle inside a transaction longer is ended by the server, which frees its locks. */
  idleInTransactionSessionTimeoutMs: 5_000,
  /** Giving up on opening a connection (DNS, TCP, TLS and authentication). */
  connectionTimeoutMs: 5_000,
  /**
   * How much longer than `statementTimeoutMs` this process waits for a statement's answer before it gives up on the
   * connection (node-postgres' `query_timeout`): the server would have cancelled the statement by then, so no answer
   * means the link is gone (a partition, a host cut off from the database). Without it a statement sent into a dead
   * link waits for TCP to give up (about 15 minutes by Linux's default `tcp_retries2`), and so would the enqueue
   * behind it. Given up: the store's outage (503s, no new tips) until the database answers again.
   */
  queryTimeoutMarginMs: 2_000,
  /** TCP keepalive on every connection, first probe after this idle time: a dead peer is noticed. */
  keepAliveInitialDelayMs: 10_000,
  /** Connections in the pool. */
  poolMax: 10,
  /**
   * Connections opened at start and kept open however idle: a burst after a quiet spell never waits on connection
   * setup (TCP, TLS and SCRAM authentication cost milliseconds of CPU on both ends, per connection). Measured on a
   * 2-core VM: 100 accepts at once took ~400 ms on a cold pool, ~100 ms on a warm one.
   */
  poolMin: 10,
  /** A connection idle in the pool longer is closed (those above `poolMin`). */
  idleTimeoutMs: 30_000,
  applicationName: 'relay',
} as const;

/** Overrides of {@link DATABASE_DEFAULTS}. */
export interface DatabaseOptions {
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  idleInTransactionSessionTimeoutMs?: number;
  connectionTimeoutMs?: number;
  keepAliveInitialDelayMs?: number;
  poolMax?: number;
  poolMin?: number;
  idleTimeoutMs?: number;
  /** See {@link DATABASE_DEFAULTS}; null: no client-side limit (`relay db migrate`, which may wait on another's lock). */
  queryTimeoutMarginMs?: number | null;
  applicationName?: string;
}

/** The pool relay uses (node-postgres'). */
export type DatabasePool = pg.Pool;

/**
 * A pool on `url` with relay's settings (see {@link DATABASE_DEFAULTS}); connects lazily. Use
 * {@link connectDatabase} to find out at start-up whether the database is there.
 */
export function createDatabasePool(target: DatabaseUrl, options: DatabaseOptions = {}): pg.Pool {
  const o = { ...DATABASE_DEFAULTS, ...options };
  // Server-side keepalives on every connection, not only the locks' (see withServerKeepalives): a client gone without
  // a FIN mid-statement, or one the server is blocked writing a result to, is ended within seconds, not hours, and
  // what its transaction held (the sweep's row locks, an advisory lock) is freed.
  const pool = new pg.Pool({
    ...withServerKeepalives(withReadCommitted({ connectionString: target.url })),
    max: o.poolMax,
    // pg-pool closes an idle client only while the pool holds more than `min` (pg-pool 3.x `_isAboveMin`).
    min: Math.min(o.poolMin, o.poolMax),
    idleTimeoutMillis: o.idleTimeoutMs,
    connectionTimeoutMillis: o.connectionTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: o.keepAliveInitialDelayMs,
    statement_timeout: o.statementTimeoutMs,
    ...(o.queryTimeoutMarginMs === null || o.statementTimeoutMs <= 0
      ? {}
      : { query_timeout: o.statementTimeoutMs + o.queryTimeoutMarginMs }),
    lock_timeout: o.lockTimeoutMs,
    idle_in_transaction_session_timeout: o.idleInTransactionSessionTimeoutMs,
    application_name: o.applicationName,
  });
  // An idle client whose connection dies (a server restart) emits on the pool; without a listener that would
  // crash the process. The next checkout opens a new connection, and its failure is the caller's to handle.
  pool.on('error', () => {});
  return pool;
}

/**
 * Server-side TCP keepalives for a lock's own connection (the sole-writer lock, a host id's lock): a session-level
 * advisory lock lives as long as the server's session, and a peer that vanished without a FIN (power loss, a VM
 * gone, a partition) leaves that session idle until the server's TCP keepalive gives up, two hours by the OS default.
 * With these the server notices within ~11 s (5 s idle, then 3 probes 2 s apart; `tcp_user_timeout` 10 s for data
 * sent and never acknowledged) and frees the lock (PostgreSQL docs §20.3.1, "Connection Settings"; each is settable
 * by any role at connection start). Ignored on Unix-domain sockets. Startup options given in the URL come first.
 */
export function withServerKeepalives(config: pg.ClientConfig): pg.ClientConfig {
  const keepalives =
    '-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 -c tcp_user_timeout=10000';
  return withOption(config, keepalives);
}

/**
 * READ COMMITTED for every session of relay's, whatever the role's or database's `default_transaction_isolation`:
 * the fleet's limits (migrations/004) count after taking their lock, with a fresh snapshot per query, which only READ
 * COMMITTED gives (PostgreSQL 15 docs §13.2.1); under REPEATABLE READ a limit could be passed unseen, and the
 * functions refuse to run (RLY05). The takeover sweep asks for REPEATABLE READ itself, per transaction.
 */
export function withReadCommitted(config: pg.ClientConfig): pg.ClientConfig {
  return withOption(config, '-c default_transaction_isolation=read\\ committed');
}

/** `config` with a startup option added (in the URL when it has one: the driver lets the URL's own win). */
function withOption(config: pg.ClientConfig, option: string): pg.ClientConfig {
  if (config.connectionString) {
    const url = new URL(config.connectionString);
    const given = url.searchParams.get('options');
    if (given?.includes(option)) return config;
    url.searchParams.set('options', given ? `${given} ${option}` : option);
    return { ...config, connectionString: url.toString() };
  }
  if (config.options?.includes(option)) return config;
  return { ...config, options: config.options ? `${config.options} ${option}` : option };
}

/**
 * The config of a lock's own connection (the sole-writer lock, a host id's lock), from the pool's: server-side
 * keepalives, its own application name, and no client-side statement limit (`query_timeout`). A lock connection's
 * statements are its owner's to time: a heartbeat left unanswered drops that connection at once (host-session.ts),
 * whereas node-postgres after a `query_timeout` keeps the query it gave up on as the active one, and the next
 * statement on that client (a re-registration's BEGIN) would wait behind it.
 */
export function lockConnectionConfig(config: pg.ClientConfig, role: string): pg.ClientConfig {
  const { query_timeout: _ignored, ...rest } = config;
  return withServerKeepalives({ ...rest, application_name: `${config.application_name ?? 'relay'}-${role}` });
}

/** invalid_password; invalid_authorization_specification (no such role, no pg_hba.conf entry). */
const AUTH_CODES = new Set(['28P01', '28000']);

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  // Node reports a host with several addresses that all refuse as an AggregateError of the attempts.
  const inner = (error as { errors?: unknown[] } | null)?.errors?.[0];
  return inner === undefined ? undefined : errorCode(inner);
}

/**
 * The coded error for a failure to connect to (or query) `target`; a RelayError passes through, anything else not
 * recognised becomes `RELAY_E_DB_UNREACHABLE` with the driver's message. The password never appears: the URL is
 * redacted, and the password is cut out of any message that repeats it.
 */
export function databaseError(error: unknown, target: DatabaseUrl): RelayError {
  if (isRelayError(error)) return error;
  const code = errorCode(error);
  const password = safePassword(target.url);
  let message = String((error as { message?: unknown } | null)?.message ?? error);
  if (password) message = message.split(password).join('***');
  const reason = code && !message.includes(code) ? `${message} (${code})` : message;
  const url = target.redacted;
  if (code === '3D000')
    return new RelayError('RELAY_E_DB_NOT_FOUND', { url, database: target.database }, { cause: error });
  if (code !== undefined && AUTH_CODES.has(code)) {
    return new RelayError('RELAY_E_DB_AUTH_FAILED', { url, user: target.user, reason }, { cause: error });
  }
  // The server asked for a password and none was given: the driver refuses before sending anything.
  if (/SASL|client password must be a string/i.test(message)) {
    return new RelayError(
      'RELAY_E_DB_AUTH_FAILED',
      { url, user: target.user, reason: `the server wants a password and the URL gives none (${message})` },
      { cause: error },
    );
  }
  // Refused, unresolvable, timed out, reset, a server starting up or out of connections (57P03, 53300); and
  // anything else that stops a first connection, with the driver's own words.
  return new RelayError('RELAY_E_DB_UNREACHABLE', { url, reason }, { cause: error });
}

function safePassword(raw: string): string {
  try {
    return decodeURIComponent(new URL(raw).password);
  } catch {
    return '';
  }
}

/**
 * Open a pool on `url` and check it with a first query, so a bad URL, an unreachable server, wrong credentials or a
 * missing database refuse at start-up with their own code (`RELAY_E_DB_INVALID_URL`, `RELAY_E_DB_UNREACHABLE`,
 * `RELAY_E_DB_AUTH_FAILED`, `RELAY_E_DB_NOT_FOUND`), never later at the first write.
 */
export async function connectDatabase(
  url: string | DatabaseUrl,
  options: DatabaseOptions = {},
): Promise<{ pool: pg.Pool; target: DatabaseUrl }> {
  const target = typeof url === 'string' ? parseDatabaseUrl(url) : url;
  const pool = createDatabasePool(target, options);
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => {});
    throw databaseError(error, target);
  }
  return { pool, target };
}

/**
 * Open the pool's kept connections (`poolMin`) now, all at once, rather than one by one under the first burst of
 * work. A failure here is the caller's (the database answered a moment ago; it is the same outage as any other).
 */
export async function warmPool(pool: pg.Pool): Promise<void> {
  const clients = await Promise.allSettled(
    Array.from({ length: pool.options.min ?? 0 }, () => pool.connect()),
  );
  for (const c of clients) if (c.status === 'fulfilled') c.value.release();
  const failed = clients.find((c): c is PromiseRejectedResult => c.status === 'rejected');
  if (failed) throw failed.reason;
}
