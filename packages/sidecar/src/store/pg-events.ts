import { compareEventCursors, type EventCursor } from '@solrelay/core';
import pg from 'pg';
import type { PgQuery } from './pg-lifecycle';
import { SingleFlight } from '../util/single-flight';

/**
 * The `events` table read in cursor order (DESIGN §10): the log SSE follows on PostgreSQL.
 *
 * A reader only takes rows whose xid is below its snapshot's xmin: every transaction that could still commit an
 * event with a lower cursor has ended by then, so reading "after the last cursor seen" never skips one, however
 * commits interleave. Within one sidecar a record's writes are chained (one ends before the next begins), so one
 * transaction's events also come in the order they were written.
 */

/** One stored event as SSE sends it. */
export interface StoredEvent {
  cursor: EventCursor;
  name: string;
  txId: string | null;
  /** The host whose commit wrote it (`RELAY_HOST_ID`), or null. */
  host: string | null;
  data: unknown;
  /** The payload exactly as stored (JSON text). */
  json: string;
}

/** The channel a store that notifies (`PgTxStoreOptions.notifyEvents`) tells followers on other hosts through. */
export const EVENTS_CHANNEL = 'relay_events';

/** Before every event: where a reader of the whole log starts. */
export const LOG_START: EventCursor = { xid: 0n, id: 0n };

// Aliased apart from the columns: ORDER BY xid, id must sort the xid8 and bigint columns, not their text.
const EVENT_COLUMNS = `xid::text AS xid_text, id::text AS id_text, name, tx_id, host_id, payload::text AS payload`;
const STABLE = `xid < pg_snapshot_xmin(pg_current_snapshot())`;

interface EventRow {
  xid_text: string;
  id_text: string;
  name: string;
  tx_id: string | null;
  host_id: string | null;
  payload: string;
}

function fromRow(row: EventRow): StoredEvent {
  return {
    cursor: { xid: BigInt(row.xid_text), id: BigInt(row.id_text) },
    name: row.name,
    txId: row.tx_id,
    host: row.host_id,
    data: JSON.parse(row.payload) as unknown,
    json: row.payload,
  };
}

/** Where a read goes: the pool, or a connection of its own ({@link OwnConnection}). */
interface Queryable {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/** The follower's read (see {@link PgEventLog.after}), named so each connection prepares it once. */
const AFTER = `WITH s AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
  r AS (
    SELECT ${EVENT_COLUMNS} FROM events
    WHERE (xid, id) > ($1::text::xid8, $2::bigint) AND xid < (SELECT xmin FROM s)
    ORDER BY events.xid, events.id LIMIT $3
  )
  SELECT * FROM r
  UNION ALL
  SELECT NULL, NULL, NULL, NULL, NULL, NULL FROM s
  WHERE EXISTS (SELECT 1 FROM events WHERE (xid, id) > ($1::text::xid8, $2::bigint) AND xid >= s.xmin)`;

const END = `SELECT ${EVENT_COLUMNS} FROM events WHERE ${STABLE} ORDER BY xid DESC, id DESC LIMIT 1`;

/**
 * One connection of a reader's own, outside the pool (the event follower's: its read at every commit neither waits
 * for a pooled connection behind the store's writes nor takes one from them, and its statements stay prepared on
 * it). Opened at the first read; a connection that failed is dropped and the next read opens another.
 */
export class OwnConnection implements Queryable {
  private client: pg.Client | null = null;
  private opening: Promise<pg.Client> | null = null;
  private closed = false;

  constructor(private readonly config: pg.ClientConfig) {}

  async query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    const client = await this.open();
    try {
      return await client.query<R>(config);
    } catch (error) {
      // A statement the server refused leaves the session as it was; anything else may have ended it.
      if (!(error instanceof pg.DatabaseError) || error.severity !== 'ERROR') this.drop(client);
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.opening?.catch(() => undefined);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private open(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error('event reader closed'));
    if (this.client) return Promise.resolve(this.client);
    this.opening ??= (async () => {
      const client = new pg.Client(this.config);
      client.on('error', () => this.drop(client));
      try {
        await client.connect();
      } catch (error) {
        void client.end().catch(() => undefined);
        throw error;
      }
      this.client = client;
      return client;
    })().finally(() => (this.opening = null));
    return this.opening;
  }

  private drop(client: pg.Client): void {
    if (this.client === client) this.client = null;
    void client.end().catch(() => undefined);
  }
}

export class PgEventLog {
  /**
   * `query`: the store's own for reads (a database that is away answers SSE resumes with the coded 503 and marks the
   * store unavailable, never a 500); `pool` only for the LISTEN connection.
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly query: PgQuery = (text, values) => pool.query(text, values),
  ) {}

  /** Reads with no connection named go through the store's query (its coded 503 when the database is away). */
  private readonly viaStore: Queryable = {
    query: <R extends pg.QueryResultRow>(config: pg.QueryConfig) => this.query<R>(config.text, config.values),
  };

  /** A connection of its own on the log's database (the follower's reads): closed by its holder. */
  ownConnection(): OwnConnection {
    return new OwnConnection(this.pool.options);
  }

  /** The newest event every reader can see (below xmin), or LOG_START when there is none. */
  async end(via: Queryable = this.viaStore): Promise<EventCursor> {
    const { rows } = await via.query<EventRow>({ name: 'relay_events_end', text: END });
    const row = rows[0];
    return row ? fromRow(row).cursor : LOG_START;
  }

  /**
   * Up to `limit` events after `after`, oldest first, below xmin (the follower's read: one query per wake); `held`
   * when events after them are committed but wait on an older transaction still running (so not read yet).
   */
  async after(
    after: EventCursor,
    limit: number,
    via: Queryable = this.viaStore,
  ): Promise<{ events: StoredEvent[]; held: boolean }> {
    // One snapshot's xmin for both parts; the second yields one row (name null) when something is held back.
    const { rows } = await via.query<EventRow | (Record<keyof EventRow, null> & { name: null })>({
      name: 'relay_events_after',
      text: AFTER,
      values: [after.xid.toString(), after.id.toString(), limit],
    });
    const events: StoredEvent[] = [];
    let held = false;
    for (const row of rows) {
      if (row.name === null) held = true;
      else events.push(fromRow(row as EventRow));
    }
    // UNION ALL promises no order: the log's order is restored here.
    events.sort((a, b) => compareEventCursors(a.cursor, b.cursor));
    return { events, held };
  }

  /**
   * Up to `limit` events after `after` and at or before `upTo` (a cursor the follower has passed), oldest first;
   * only `txId`'s when given: a replay for a client resuming.
   */
  async between(after: EventCursor, upTo: EventCursor, limit: number, txId?: string): Promise<StoredEvent[]> {
    const values: unknown[] = [
      after.xid.toString(),
      after.id.toString(),
      upTo.xid.toString(),
      upTo.id.toString(),
    ];
    let where = `(xid, id) > ($1::text::xid8, $2::bigint) AND (xid, id) <= ($3::text::xid8, $4::bigint)`;
    if (txId !== undefined) {
      values.push(txId);
      where += ` AND tx_id = $${values.length}`;
    }
    values.push(limit);
    const { rows } = await this.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM events WHERE ${where} ORDER BY xid, id LIMIT $${values.length}`,
      values,
    );
    return rows.map(fromRow);
  }

  /**
   * LISTEN on {@link EVENTS_CHANNEL} on a connection of its own (held from the pool until stopped): `onNotify` on
   * each notification; `onLost` once if the connection fails. Resolves with the function that stops listening.
   */
  async listen(onNotify: () => void, onLost: (error: unknown) => void): Promise<() => Promise<void>> {
    const client = await this.pool.connect();
    let lost = false;
    const fail = (error: unknown) => {
      if (lost) return;
      lost = true;
      client.removeAllListeners('notification');
      client.release(true);
      onLost(error);
    };
    client.on('notification', () => onNotify());
    client.on('error', fail);
    try {
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (error) {
      fail(error);
      throw error;
    }
    return async () => {
      if (lost) return;
      lost = true;
      client.removeAllListeners('notification');
      await client.query(`UNLISTEN ${EVENTS_CHANNEL}`).catch(() => undefined);
      client.off('error', fail);
      client.release();
    };
  }

  /** Whether `cursor` names an event still kept (not from another database, not dropped by retention). */
  async exists(cursor: EventCursor): Promise<boolean> {
    const { rows } = await this.query(`SELECT 1 FROM events WHERE xid = $1::text::xid8 AND id = $2::bigint`, [
      cursor.xid.toString(),
      cursor.id.toString(),
    ]);
    return rows.length > 0;
  }
}

export interface EventFollowerOptions {
  /** Where each batch goes, in cursor order (never the same event twice, none skipped). */
  deliver: (events: StoredEvent[]) => void;
  /** A read failed (the follower tries again at the next wake or poll). */
  onError?: (error: unknown) => void;
  /** The fallback poll, for commits nobody told this process about. Default 1 s. */
  pollMs?: number;
  /** Rows per query. Default 500 (a full batch is followed by the next at once). */
  batch?: number;
  /** Also woken by NOTIFY on EVENTS_CHANNEL (commits of other hosts), listening again at a poll if it was lost. */
  listen?: boolean;
}

/**
 * Follows the event log from its end at start: woken at once by each local commit (`wake`, one query per wake,
 * wakes during a read coalesce into one more read), by NOTIFY from other hosts (`listen`), and by a slow poll as a
 * fallback. Its reads go on a connection of its own ({@link OwnConnection}), not the store's pool.
 */
export class EventFollower {
  private cursor: EventCursor = LOG_START;
  private readonly reads = new SingleFlight(() => this.readAll());
  private timer: NodeJS.Timeout | null = null;
  private recheckTimer: NodeJS.Timeout | null = null;
  /** How long the last recheck waited (ms); 0 while nothing is held. */
  private heldFor = 0;
  private closed = false;
  /** Stops LISTEN; null while not listening. */
  private unlisten: (() => Promise<void>) | null = null;
  private listening: Promise<void> | null = null;
  /** Where the follower's reads go. */
  private readonly connection: OwnConnection;

  constructor(
    private readonly log: PgEventLog,
    private readonly o: EventFollowerOptions,
  ) {
    this.connection = log.ownConnection();
  }

  /** The last event delivered (or where the follower started). */
  get position(): EventCursor {
    return this.cursor;
  }

  /** Start at the log's end: what was committed before is history (a client resuming reads it from the table). */
  async start(): Promise<EventCursor> {
    this.cursor = await this.log.end(this.connection);
    if (this.o.listen) await this.relisten();
    this.timer = setInterval(() => {
      if (this.o.listen && !this.unlisten) void this.relisten();
      this.wake();
    }, this.o.pollMs ?? 1000);
    this.timer.unref();
    return this.cursor;
  }

  private relisten(): Promise<void> {
    this.listening ??= this.log
      .listen(
        () => this.wake(),
        (error) => {
          this.unlisten = null;
          this.o.onError?.(error);
        },
      )
      .then(
        (stop) => {
          if (this.closed) void stop();
          else this.unlisten = stop;
        },
        (error: unknown) => this.o.onError?.(error),
      )
      .finally(() => (this.listening = null));
    return this.listening;
  }

  wake(): void {
    if (!this.closed) this.reads.request();
  }

  /** Resolves once every event committed before the call has been delivered (tests, shutdown). */
  async settle(): Promise<void> {
    await this.reads.idle();
    this.wake();
    await this.reads.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.recheckTimer) clearTimeout(this.recheckTimer);
    await this.listening;
    await this.unlisten?.();
    this.unlisten = null;
    await this.reads.idle();
    await this.connection.close();
  }

  private async readAll(): Promise<void> {
    const batch = this.o.batch ?? 500;
    try {
      for (;;) {
        const { events, held } = await this.log.after(this.cursor, batch, this.connection);
        if (this.closed) return;
        if (events.length > 0) {
          this.cursor = (events[events.length - 1] as StoredEvent).cursor;
          this.o.deliver(events);
        }
        if (events.length === batch) continue;
        this.recheck(held);
        return;
      }
    } catch (error) {
      this.o.onError?.(error);
    }
  }

  /**
   * Committed events wait on an older transaction still running, which need not be a write of this process (its
   * commit would wake us) — a lease, maintenance, another host without NOTIFY: read again after 1, 2, 4, ... ms
   * (at most the poll) until nothing is held.
   */
  private recheck(held: boolean): void {
    if (!held) {
      this.heldFor = 0;
      return;
    }
    if (this.recheckTimer) return;
    this.heldFor = Math.min(Math.max(1, this.heldFor * 2), this.o.pollMs ?? 1000);
    this.recheckTimer = setTimeout(() => {
      this.recheckTimer = null;
      this.wake();
    }, this.heldFor);
    this.recheckTimer.unref();
  }
}
