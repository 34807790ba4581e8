import { RelayError, type FleetHostStatus } from '@solrelay/core';
import pg from 'pg';
import { databaseError, lockConnectionConfig } from './connect';
import { advisoryLockHolder } from './lock-holder';
import type { DatabaseUrl } from './url';

/**
 * A host's session on the shared database (DESIGN §10): the fencing token of a fleet. Every start registers
 * `(host_id, epoch)` in `host_sessions` with a new epoch; the owner columns every write checks name that pair, so a
 * host whose session is over (ended, or its lease passed) can no longer touch a row, whatever it still believes.
 *
 * Two mechanisms, each for what it proves:
 *
 * - **The host-id lock** says whether a process with this host id is alive. A session-level advisory lock (docs §13.3.5,
 *   "Advisory Locks"; the functions in §9.27.10, "Advisory Lock Functions") held on a connection of its own for the
 *   session's life. The server releases it when that connection's session ends, so a killed process frees it as soon
 *   as its socket closes, while a paused one keeps it. Holding it therefore proves that no other live process runs
 *   under this id: a second sidecar with the same `RELAY_HOST_ID` is refused, naming the session that holds it, and a
 *   crash restart need not wait out the lease of the session it replaces (the dead process cannot write again).
 * - **The lease** says whether this epoch may still act. The heartbeat extends `lease_expires_at` only while it has not
 *   passed, and the database clock decides that (`now()` in the statement); the host itself only compares durations on
 *   its own monotonic clock (`performance.now()`), never wall-clock times with another machine's. A host that finds
 *   its lease gone stops sending at once, drops what it holds of that epoch, and registers again ({@link renew}).
 */

/**
 * The first key of the host-id lock, a fixed namespace (0x72656c68, "relh"); the second is `hashtext(host_id)`.
 *
 * The two-int4 form of the advisory lock functions on purpose: PostgreSQL keeps the one-bigint and the two-int4 key
 * spaces apart (docs §9.27.10: "these two key spaces do not overlap"), and pg_locks tells them apart by `objsubid`
 * (1 for a bigint key, whose high and low halves are `classid` and `objid`; 2 for two int4 keys, `classid` and
 * `objid` in that order; pg_locks is §54.12 in the PostgreSQL 15 docs). Every other lock relay takes (sole-writer.ts,
 * the migrations' and spend-limit's) is a single bigint, so none can ever collide with a host id's, whatever it hashes
 * to. Two different host ids hashing alike (2^-32 for a pair) would share a lock: the second is refused as if it had
 * the same id, which is loud and fixed by renaming one; it is never silent.
 */
const HOST_LOCK_NAMESPACE = 0x72656c68;

/** How long a start waits for the host-id lock (a killed predecessor's session takes a moment to end on the server). */
export const HOST_SESSION_WAIT_MS = 5_000;

/** `RELAY_LEASE_MS`'s default: how long a session lives without a heartbeat. */
export const HOST_LEASE_MS = 5_000;

/** How long {@link HostSession.end} waits for the database to record the end before dropping the connection anyway. */
const END_WAIT_MS = 2_000;

/** Sessions ended this recently are still listed by {@link HostSession.fleet} (a restart shows both epochs). */
const FLEET_ENDED_WITHIN = '10 minutes';

export interface HostSessionOptions {
  /** `RELAY_HOST_ID`: this sidecar's name in the database. */
  hostId: string;
  /** `RELAY_LEASE_MS`: how long the session lives without a heartbeat ({@link HOST_LEASE_MS} by default). */
  leaseMs?: number;
  /** How long `open` waits for the host-id lock before refusing ({@link HOST_SESSION_WAIT_MS} by default). */
  waitMs?: number;
  /**
   * Called once per epoch, at the first sign that it is over: the lease gone in the database, a heartbeat failed or
   * unanswered within the lease, or the lock's connection lost. The caller stops sending, drops what it holds of that
   * epoch and calls {@link HostSession.renew}. Must not throw (what it throws is ignored).
   */
  onLost: (reason: string) => void;
  /**
   * Milliseconds between heartbeats: `leaseMs / 5` by default, so four may fail or be slow before the lease runs out.
   * 0 runs no timer and leaves {@link HostSession.heartbeat} to the caller (tests).
   */
  heartbeatMs?: number;
}

/** One session as `/status` shows the fleet ({@link HostSession.fleet}); durations by the database clock. */
export type FleetHost = FleetHostStatus;

/** A heartbeat: the epoch it is for, whether its statement has been answered, and its outcome. */
interface Beat {
  epoch: number;
  answered: boolean;
  beat: Promise<boolean>;
}

/** What a registration found and made. */
interface Registration {
  epoch: number;
  startedAt: Date;
  /** Epochs of this host id it ended (a dead predecessor's open session, or this host's own lapsed one). */
  replaced: number[];
  /** `performance.now()` when the registering transaction was sent: the lease is counted from there. */
  sentAt: number;
}

export class HostSession {
  /** This epoch's lease was found gone (or the session renewed or ended): nothing more is done for it. */
  private lost = false;
  private ended = false;
  private ending: Promise<void> | undefined;
  private renewing: Promise<number> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The heartbeat in flight: the epoch it is for, and whether its statement has been answered. */
  private inflight: Beat | undefined;
  /** The lock's connection; undefined once it is gone (renew opens another). */
  private client: pg.Client | undefined;
  /** The backend of a lock connection this session gave up, which may still hold the lock ({@link lockHostId}). */
  private droppedBackend: LockBackend | undefined;
  /** `performance.now()` when the last statement that extended the lease was sent (the registration, or a heartbeat). */
  private lastExtendedSentAt: number;
  private currentEpoch: number;
  private lastEpoch: number | undefined;
  private startedAtValue: Date;
  private replacedValue: number[];

  private constructor(
    client: pg.Client,
    private readonly config: pg.ClientConfig,
    private readonly target: DatabaseUrl,
    readonly hostId: string,
    readonly leaseMs: number,
    private readonly heartbeatMs: number,
    private readonly onLost: (reason: string) => void,
    registration: Registration,
  ) {
    this.client = client;
    this.currentEpoch = registration.epoch;
    this.startedAtValue = registration.startedAt;
    this.replacedValue = registration.replaced;
    this.lastExtendedSentAt = registration.sentAt;
    this.watch(client);
    this.startTimer();
  }

  /**
   * Take this host id's lock on a connection of its own, waiting up to `waitMs` for a killed predecessor's session to
   * end on the server, and register a new epoch. Refuses with `RELAY_E_HOST_ID_IN_USE`, naming the PostgreSQL session
   * that holds the id, when another live process runs under it; any other failure is the coded error of
   * {@link databaseError}.
   */
  static async open(
    config: pg.ClientConfig,
    target: DatabaseUrl,
    o: HostSessionOptions,
  ): Promise<HostSession> {
    const leaseMs = o.leaseMs ?? HOST_LEASE_MS;
    if (!Number.isSafeInteger(leaseMs) || leaseMs <= 0)
      throw new RangeError(`leaseMs must be a positive integer`);
    const heartbeatMs = o.heartbeatMs ?? Math.max(1, Math.floor(leaseMs / 5));
    if (!(heartbeatMs >= 0 && heartbeatMs < leaseMs))
      throw new RangeError(`heartbeatMs must be below leaseMs`);
    const client = await lockHostId(config, target, o.hostId, o.waitMs ?? HOST_SESSION_WAIT_MS);
    try {
      const registration = await register(client, o.hostId, leaseMs);
      return new HostSession(client, config, target, o.hostId, leaseMs, heartbeatMs, o.onLost, registration);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw databaseError(error, target);
    }
  }

  /** The epoch this session registered last: what the owner columns of its rows name. */
  get epoch(): number {
    return this.currentEpoch;
  }

  /** The epoch before the last {@link renew} (undefined before any): rows it still owns are this host's to adopt. */
  get previousEpoch(): number | undefined {
    return this.lastEpoch;
  }

  /** When the current epoch started (database clock). */
  get startedAt(): Date {
    return this.startedAtValue;
  }

  /** Epochs of this host id the last registration ended, for the log: a crashed predecessor's, or a lapsed own. */
  get replaced(): readonly number[] {
    return this.replacedValue;
  }

  /**
   * Whether this epoch may still act: not found lost, and less than `leaseMs` since the last statement that extended
   * the lease was sent, by this process's monotonic clock. Counting from the send, not the answer, is conservative
   * (the database extended it no earlier than that), and it needs no statement: a process that was paused longer
   * than its lease knows it is no longer live as soon as it runs again, before any answer could tell it. Once false it
   * stays false for the epoch (a late answer never revives it; {@link heartbeat} reports the loss).
   */
  get live(): boolean {
    return !this.lost && !this.ended && performance.now() - this.lastExtendedSentAt < this.leaseMs;
  }

  /**
   * Extend the lease by `leaseMs` from now (database clock), only if it is still live in the database. True if it
   * was; false if the epoch is over (then `onLost` has been called). One heartbeat at a time: a call while one is in
   * flight gets that one's answer.
   */
  heartbeat(): Promise<boolean> {
    if (this.lost || this.ended) return Promise.resolve(false);
    if (this.inflight?.epoch === this.currentEpoch) return this.inflight.beat;
    if (performance.now() - this.lastExtendedSentAt >= this.leaseMs) {
      this.lose(
        `the lease ran out by this host's own clock before the next heartbeat (was the process paused?)`,
      );
      return Promise.resolve(false);
    }
    if (!this.client) {
      this.lose('the connection holding the host id lock is gone');
      return Promise.resolve(false);
    }
    const inflight: Beat = { epoch: this.currentEpoch, answered: false, beat: Promise.resolve(false) };
    inflight.beat = this.beat(inflight);
    this.inflight = inflight;
    void inflight.beat.finally(() => {
      if (this.inflight === inflight) this.inflight = undefined;
    });
    return inflight.beat;
  }

  private async beat(inflight: Beat): Promise<boolean> {
    const { epoch } = inflight;
    const client = this.client as pg.Client;
    const sentAt = performance.now();
    let extended: boolean;
    try {
      const { rowCount } = await client.query(
        `UPDATE host_sessions SET heartbeat_at = now(), lease_expires_at = now() + $3 * interval '1 millisecond'
         WHERE host_id = $1 AND epoch = $2 AND ended_at IS NULL AND lease_expires_at > now()
         RETURNING epoch`,
        [this.hostId, String(epoch), this.leaseMs],
      );
      inflight.answered = true;
      extended = rowCount === 1;
    } catch (error) {
      inflight.answered = true;
      if (epoch === this.currentEpoch) this.lose(`the heartbeat failed: ${messageOf(error)}`);
      return false;
    }
    // Renewed or ended meanwhile: this answer is about an epoch that is already over.
    if (epoch !== this.currentEpoch || this.lost || this.ended) return false;
    if (!extended) {
      this.lose(`the database found the lease of epoch ${epoch} gone (it ran out or the session was ended)`);
      return false;
    }
    // Answered, but only after the previous lease had run out by this host's clock: `live` has already said false,
    // and it does not come back for this epoch (someone may have acted on it).
    if (performance.now() - this.lastExtendedSentAt >= this.leaseMs) {
      this.lose(`the heartbeat was answered only after the lease had run out by this host's own clock`);
      return false;
    }
    this.lastExtendedSentAt = sentAt;
    return true;
  }

  /**
   * Register again after a loss, with a new epoch: on the lock's connection if it is still there (the lock is still
   * held), otherwise on a new one that takes the lock again, waiting up to `waitMs` for it (0 by default: a caller that
   * retries does its own waiting), refused with `RELAY_E_HOST_ID_IN_USE` as {@link open} is. Ends the old row, inserts
   * the new one and restarts the heartbeat; returns the new epoch, the old one staying as {@link previousEpoch}.
   * Called while the epoch is still live, it gives that epoch up without calling `onLost` (the caller asked).
   */
  renew(waitMs = 0): Promise<number> {
    if (this.ended) return Promise.reject(new Error(`the host session of ${this.hostId} has ended`));
    this.renewing ??= this.reregister(waitMs).finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  private async reregister(waitMs: number): Promise<number> {
    this.lost = true;
    this.stopTimer();
    // A heartbeat still unanswered makes its connection suspect (the network, or a server that stopped answering):
    // drop it rather than wait, and take the lock again on a new one.
    const previous = this.client ? lockBackends.get(this.client) : this.droppedBackend;
    if (this.inflight && !this.inflight.answered) this.dropClient();
    this.inflight = undefined;
    let client = this.client;
    if (!client) {
      client = await lockHostId(this.config, this.target, this.hostId, waitMs, previous);
      if (this.ended) {
        await client.end().catch(() => undefined);
        throw new Error(`the host session of ${this.hostId} has ended`);
      }
      this.client = client;
      this.watch(client);
    }
    let registration: Registration;
    try {
      registration = await register(client, this.hostId, this.leaseMs);
    } catch (error) {
      throw databaseError(error, this.target);
    }
    // The connection may have ended while registering (its loss told no one: this epoch was already lost).
    if (this.client !== client)
      throw new Error(`the connection holding the host id lock of ${this.hostId} ended while registering`);
    // Even if end() was called meanwhile: it waits for this, then ends the epoch registered here.
    this.lastEpoch = this.currentEpoch;
    this.currentEpoch = registration.epoch;
    this.startedAtValue = registration.startedAt;
    this.replacedValue = registration.replaced;
    this.lastExtendedSentAt = registration.sentAt;
    this.lost = false;
    this.startTimer();
    return registration.epoch;
  }

  /**
   * Stop the heartbeat, record the end of the epoch (a successor sees it ended, not merely lapsed) and release the
   * lock by closing its connection. Idempotent; never fails: if the database cannot be told, the lease runs out by
   * itself and the server frees the lock when the connection's session ends.
   */
  end(): Promise<void> {
    this.ending ??= this.close();
    return this.ending;
  }

  private async close(): Promise<void> {
    this.ended = true;
    this.stopTimer();
    await this.renewing?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    let timeout: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        client.query(
          'UPDATE host_sessions SET ended_at = now() WHERE host_id = $1 AND epoch = $2 AND ended_at IS NULL',
          [this.hostId, String(this.currentEpoch)],
        ),
        new Promise((resolve) => {
          timeout = setTimeout(resolve, END_WAIT_MS);
          timeout.unref();
        }),
      ]);
    } catch {
      // below: the connection goes either way
    } finally {
      clearTimeout(timeout);
    }
    await client.end().catch(() => undefined);
  }

  /**
   * Every session of the fleet not ended, and those ended in the last ten minutes, oldest epoch first per host; one
   * statement, every duration by the database clock (no host's clock is compared with another's).
   */
  static async fleet(
    query: (text: string, values?: unknown[]) => Promise<pg.QueryResult>,
  ): Promise<FleetHost[]> {
    const { rows } = await query(
      `SELECT s.host_id, s.epoch::text AS epoch, s.started_at, s.ended_at,
              round(extract(epoch FROM now() - s.heartbeat_at) * 1000)::bigint::text AS heartbeat_age_ms,
              round(extract(epoch FROM s.lease_expires_at - now()) * 1000)::bigint::text AS lease_remaining_ms,
              (s.ended_at IS NULL AND s.lease_expires_at > now()) AS live,
              (SELECT count(*) FROM transactions t
               WHERE t.terminal_at IS NULL AND t.owner_host = s.host_id AND t.owner_epoch = s.epoch)::text AS owned
       FROM host_sessions s
       WHERE s.ended_at IS NULL OR s.ended_at > now() - interval '${FLEET_ENDED_WITHIN}'
       ORDER BY s.host_id, s.epoch`,
    );
    return (
      rows as Array<{
        host_id: string;
        epoch: string;
        started_at: Date | string;
        ended_at: Date | string | null;
        heartbeat_age_ms: string;
        lease_remaining_ms: string;
        live: boolean;
        owned: string;
      }>
    ).map((r) => ({
      host_id: r.host_id,
      epoch: Number(r.epoch),
      started_at: new Date(r.started_at).toISOString(),
      heartbeat_age_ms: Number(r.heartbeat_age_ms),
      lease_remaining_ms: Number(r.lease_remaining_ms),
      live: r.live,
      ended_at: r.ended_at === null ? null : new Date(r.ended_at).toISOString(),
      owned: Number(r.owned),
    }));
  }

  /** The first loss of this epoch: stop the heartbeat and tell the owner, once. */
  private lose(reason: string): void {
    if (this.lost || this.ended) return;
    this.lost = true;
    this.stopTimer();
    try {
      this.onLost(reason);
    } catch {
      // onLost must not throw; the loss stands either way.
    }
  }

  /** The lock lives and dies with its connection's session: losing the connection is losing the host id. */
  private watch(client: pg.Client): void {
    const gone = (error?: Error) => {
      if (client !== this.client) return;
      this.client = undefined;
      // Gone on this side; the server may not know yet and still hold the lock for it.
      this.droppedBackend = lockBackends.get(client);
      client.end().catch(() => undefined);
      this.lose(
        `the connection holding the host id lock ${error ? `failed: ${messageOf(error)}` : 'ended'} (the lock went with it)`,
      );
    };
    client.on('error', gone);
    client.on('end', () => gone());
  }

  private dropClient(): void {
    const client = this.client;
    this.droppedBackend = client ? lockBackends.get(client) : undefined;
    this.client = undefined;
    client?.end().catch(() => undefined);
  }

  private startTimer(): void {
    if (this.heartbeatMs === 0 || this.timer || this.ended) return;
    this.timer = setInterval(() => this.tick(), this.heartbeatMs);
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    if (this.lost || this.ended) return;
    // A heartbeat still unanswered when the lease runs out by this host's clock: the epoch is over now, not whenever
    // the statement returns.
    if (this.inflight) {
      if (performance.now() - this.lastExtendedSentAt >= this.leaseMs)
        this.lose(`no heartbeat was answered within the lease (${this.leaseMs} ms)`);
      return;
    }
    void this.heartbeat();
  }
}

/**
 * A new connection holding this host id's lock, trying every 100 ms for up to `waitMs`; refuses with
 * `RELAY_E_HOST_ID_IN_USE` naming the holder when it stays taken.
 */
/** A server backend, named so that a pid the server reused is never mistaken for it. */
interface LockBackend {
  pid: number;
  started: string;
}

/** The backend holding each lock connection's lock (learned when it took the lock). */
const lockBackends = new WeakMap<pg.Client, LockBackend>();

/**
 * Take the host id's lock on a new connection. `previous`: this session's own earlier lock backend, whose connection
 * it gave up (a heartbeat unanswered: the network, or a server that stopped answering); if that backend still holds
 * the lock (the server has not noticed the connection gone), it is ended first, so a renew never waits on itself.
 */
async function lockHostId(
  config: pg.ClientConfig,
  target: DatabaseUrl,
  hostId: string,
  waitMs: number,
  previous?: LockBackend,
): Promise<pg.Client> {
  const client = new pg.Client(lockConnectionConfig(config, 'host'));
  // Until the session watches it: an error on an idle client without a listener would crash the process.
  client.on('error', () => undefined);
  try {
    await client.connect();
    const deadline = performance.now() + waitMs;
    let endedPrevious = previous === undefined;
    for (;;) {
      const { rows } = await client.query<{ got: boolean }>(
        'SELECT pg_try_advisory_lock($1::int4, hashtext($2)) AS got',
        [HOST_LOCK_NAMESPACE, hostId],
      );
      if (rows[0]?.got) {
        const me = await client.query<LockBackend>(
          `SELECT pid, extract(epoch FROM backend_start)::text AS started FROM pg_stat_activity
           WHERE pid = pg_backend_pid()`,
        );
        if (me.rows[0]) lockBackends.set(client, me.rows[0]);
        return client;
      }
      if (!endedPrevious && previous) {
        endedPrevious = true;
        await client.query(
          `SELECT pg_terminate_backend(pid, 1000) FROM pg_stat_activity
           WHERE pid = $1 AND extract(epoch FROM backend_start)::text = $2`,
          [previous.pid, previous.started],
        );
        continue;
      }
      if (performance.now() >= deadline) {
        throw new RelayError('RELAY_E_HOST_ID_IN_USE', {
          host_id: hostId,
          url: target.redacted,
          holder: await holderOf(client, hostId),
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch (error) {
    await client.end().catch(() => undefined);
    throw databaseError(error, target);
  }
}

/**
 * Register a new epoch in one transaction: end any session of this host id still open (its process is dead: this
 * connection holds the host id's lock, which a live one would still hold) and insert the new one, its lease counted
 * from the transaction's start (`now()`).
 */
async function register(client: pg.Client, hostId: string, leaseMs: number): Promise<Registration> {
  const sentAt = performance.now();
  await client.query('BEGIN');
  try {
    const ended = await client.query<{ epoch: string }>(
      'UPDATE host_sessions SET ended_at = now() WHERE host_id = $1 AND ended_at IS NULL RETURNING epoch::text',
      [hostId],
    );
    const { rows } = await client.query<{ epoch: string; started_at: Date }>(
      `INSERT INTO host_sessions (host_id, lease_expires_at) VALUES ($1, now() + $2 * interval '1 millisecond')
       RETURNING epoch::text, started_at`,
      [hostId, leaseMs],
    );
    await client.query('COMMIT');
    const row = rows[0];
    const epoch = Number(row?.epoch);
    if (!row || !Number.isSafeInteger(epoch))
      throw new Error(`the new host epoch ${row?.epoch} is not a safe integer`);
    return { epoch, startedAt: row.started_at, replaced: ended.rows.map((r) => Number(r.epoch)), sentAt };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Who holds this host id's lock, from pg_locks and pg_stat_activity (the role may see only its own sessions'
 * details). Advisory locks belong to one database, and the two-int4 form shows as `objsubid` 2 with the keys in
 * `classid` and `objid` (oids: an int4 key below zero shows as itself plus 2^32).
 */
function holderOf(client: pg.Client, hostId: string): Promise<string> {
  return advisoryLockHolder(
    client,
    `l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND l.classid::bigint = $1::bigint AND l.objid::bigint = (hashtext($2)::bigint & 4294967295)`,
    [HOST_LOCK_NAMESPACE, hostId],
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
