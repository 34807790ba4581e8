import type { ServerResponse } from 'node:http';
import {
  compareEventCursors,
  formatEventCursor,
  parseEventCursor,
  type EventCursor,
  type RelayEventMap,
} from '@solrelay/core';

/**
 * Server-Sent Events fan-out with resumable ids.
 *
 * Every published event gets the id `<bootId>-<seq>` and goes into a ring buffer. A client reconnecting with a
 * `Last-Event-ID` from this boot that is still in the ring gets everything after it, then live events; an id
 * from another boot or older than the ring gets one `resync` event telling it to re-read state. Each event is
 * serialized once. Live frames are batched: clients without a filter (the global stream) share one batch, joined
 * and encoded once per flush and written to each as the same Buffer; filtered clients (per-transaction streams)
 * keep their own small queues. A flush runs once per event-loop turn, or every few ms when many clients are
 * attached, so a burst of N events to C clients costs C socket writes rather than N × C, and no per-client copy
 * (the write path and its garbage dominated the sidecar's profile under fan-out before). A client whose unsent bytes pass the buffer limit is dropped (and counted) so a
 * reader that stalls never slows the others or grows memory without bound.
 *
 * Written directly on node's ServerResponse rather than through an SSE library because the buffer limit and the
 * ring replay both need the socket's own backlog (`writableLength`).
 *
 * **On PostgreSQL** (`followStore`) a transaction's events come from the database's event log, not from `publish`:
 * `publishStored` takes them in cursor order and their SSE id is the cursor (`<xid>.<id>`, see core's
 * `parseEventCursor`), valid across restarts. A client resuming with a cursor the ring still covers is replayed from
 * the ring; an older one from the table (`StoredEventSource.between`), while the live events that arrive meanwhile
 * wait in its queue, so none comes twice and none is skipped. A cursor that is malformed, ahead of the log or no
 * longer in the table gets `resync`. Everything else published (`slot_update`, `mode_changed`, ...) is this host's
 * own news: sent live without an id (a client's Last-Event-ID stays the last cursor), never replayed.
 */

export interface HubEvent {
  id: string;
  seq: number;
  /** The event log's cursor of a stored event (PostgreSQL); absent for events published in process. */
  cursor?: EventCursor;
  /** The host whose commit wrote a stored event (several sidecars on one database); absent when not known. */
  host?: string;
  name: string;
  data: unknown;
  /** The serialized frame, shared by every client. */
  frame: string;
}

export interface SubscribeOptions {
  /** The client's `Last-Event-ID` header, if any. */
  lastEventId?: string | undefined;
  /** Only events for which this returns true are sent (replayed or live). */
  filter?: (event: HubEvent) => boolean;
  /** Called after each live event is written; return true to close the stream after it. */
  closeAfter?: (event: HubEvent) => boolean;
  /** Extra frames to write right after the headers (e.g. a per-transaction stream's current state). */
  initialFrames?: string[];
  /** End the stream immediately after the initial frames. */
  endAfterInitial?: boolean;
  /**
   * On the event log only: resume after this cursor (the server's own, e.g. the last event of a record it just read;
   * not checked against the table), and read only this transaction's events when replaying from the table.
   */
  after?: EventCursor;
  replayTxId?: string;
}

/** A stored event as the event log gives it (see store/pg-events.ts). */
export interface StoredHubEvent {
  cursor: EventCursor;
  /** The host whose commit wrote it, when known. */
  host?: string | null;
  name: string;
  data: unknown;
  /** The payload as JSON text, when the caller has it (saves serializing it again). */
  json?: string;
}

/** Where a client resuming from a cursor the ring no longer covers is replayed from (the `events` table). */
export interface StoredEventSource {
  /** Events after `after` and at or before `upTo`, oldest first, at most `limit`; only `txId`'s when given. */
  between(after: EventCursor, upTo: EventCursor, limit: number, txId?: string): Promise<StoredHubEvent[]>;
  /** Whether `cursor` names an event the table still holds. */
  exists(cursor: EventCursor): Promise<boolean>;
}

export interface EventHubOptions {
  bootId: string;
  /** Events kept for `Last-Event-ID` replay. Default 10,000. */
  ringSize?: number;
  /** Unsent bytes a client may accumulate before it is dropped. Default 4 MiB. */
  clientBufferLimitBytes?: number;
  /**
   * Flush cadence under fan-out. A flush that wrote to W clients is followed by the next one no sooner than
   * `W / flushWritesPerMs` ms later (at most `maxFlushDelayMs`), so socket writes stay near
   * `flushWritesPerMs × 1000` per second however fast events come, while a handful of clients (an agent, a
   * dashboard) still get every event in the turn it was published. Defaults: 10 writes per ms, 25 ms
   * (100 clients: a write each every 10 ms; 1,000 clients: every 25 ms).
   */
  flushWritesPerMs?: number;
  maxFlushDelayMs?: number;
  /** Interval of the `: keep-alive` comment. Default 15 s; 0 disables. */
  keepAliveMs?: number;
  /** Wall clock for `ts`; injected so tests can pin it. */
  now?: () => number;
}

interface Client {
  res: ServerResponse;
  filter: ((event: HubEvent) => boolean) | undefined;
  closeAfter: ((event: HubEvent) => boolean) | undefined;
  /** No filter and no closeAfter: receives the shared broadcast batch instead of its own queue. */
  everything: boolean;
  /** Frames queued since the last flush (filtered clients only). */
  queued: string[];
  queuedBytes: number;
  /** A `closeAfter` event was queued: end the stream after the next flush, queue nothing more. */
  closing: boolean;
  /** Being replayed from the table: live frames wait in `queued` until the replay is written. */
  held: boolean;
  /** Stored events up to this cursor are not sent (the server's own `after`, not yet reached by the log). */
  skipThrough?: EventCursor;
}

/** Rows per query of a replay from the table. */
const REPLAY_BATCH = 1000;

export class EventHub {
  readonly bootId: string;
  private seq = 0;
  private readonly ring: (HubEvent | undefined)[];
  private ringStart = 0; // index of the oldest event in `ring`
  private ringCount = 0;
  private readonly clients = new Set<Client>();
  private readonly limit: number;
  private readonly keepAlive: NodeJS.Timeout | null;
  private readonly listeners = new Set<(event: HubEvent) => void>();
  /** Filtered clients with queued frames. */
  private readonly dirty = new Set<Client>();
  /** Frames for every unfiltered client since the last flush. */
  private broadcast: string[] = [];
  private unfilteredClients = 0;
  private flushScheduled: { cancel(): void } | null = null;
  private lastFlushAt = -Infinity;
  private lastFlushWrites = 0;
  /** Set by `followStore`: the event log's reader, and the cursor of the last stored event published. */
  private stored: { source: StoredEventSource; start: EventCursor; position: EventCursor } | null = null;
  readonly counters = {
    published: 0,
    slowClientsDropped: 0,
    resyncsSent: 0,
    replayedEvents: 0,
    /** The most unsent bytes all clients held together, measured after each flush (see `bufferedBytes`). */
    peakBufferedBytes: 0,
    /** The most unsent bytes one client held, measured after each write to it. */
    peakClientBufferedBytes: 0,
  };

  constructor(private readonly options: EventHubOptions) {
    this.bootId = options.bootId;
    if (this.bootId.includes('-'))
      throw new Error('bootId must not contain "-" (it separates boot and sequence)');
    this.ring = new Array(options.ringSize ?? 10_000);
    this.limit = options.clientBufferLimitBytes ?? 4 * 1024 * 1024;
    const every = options.keepAliveMs ?? 15_000;
    this.keepAlive = every > 0 ? setInterval(() => this.broadcastRaw(': keep-alive\n\n'), every) : null;
    this.keepAlive?.unref();
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /**
   * Unsent bytes held for clients right now: each socket's backlog (`writableLength`, what node has not yet handed
   * to the kernel) plus each filtered client's queue. The buffer limit bounds each client's share, so this stays at
   * most about the limit times the number of clients.
   */
  get bufferedBytes(): number {
    let total = 0;
    for (const client of this.clients) total += client.res.writableLength + client.queuedBytes;
    return total;
  }

  /** The id of the newest event, or null before the first. */
  get lastId(): string | null {
    if (this.stored) return this.stored.position.id === 0n ? null : formatEventCursor(this.stored.position);
    return this.seq === 0 ? null : `${this.bootId}-${this.seq}`;
  }

  /** The transactions' events come from the event log (`followStore`), not from `publish`. */
  get followsStore(): boolean {
    return this.stored !== null;
  }

  /**
   * Take the transactions' events from the event log from now on (PostgreSQL): `start` is where its follower
   * starts (the log's end), `source` replays what a resuming client missed. Call before any client subscribes.
   */
  followStore(source: StoredEventSource, start: EventCursor): void {
    this.stored = { source, start, position: start };
    // The ring holds stored events only from here on.
    this.ring.fill(undefined);
    this.ringStart = 0;
    this.ringCount = 0;
  }

  /** Stored events, in cursor order, each after the last (the follower guarantees it): ring, clients, listeners. */
  publishStored(events: readonly StoredHubEvent[]): void {
    const stored = this.stored;
    if (!stored) throw new Error('publishStored needs followStore first');
    for (const e of events) {
      const id = formatEventCursor(e.cursor);
      const frame = `id: ${id}\nevent: ${e.name}\ndata: ${e.json ?? JSON.stringify(e.data)}\n\n`;
      const event: HubEvent = { id, seq: ++this.seq, cursor: e.cursor, name: e.name, data: e.data, frame };
      if (e.host) event.host = e.host;
      stored.position = e.cursor;
      this.remember(event);
      this.fanOut(event);
    }
  }

  /**
   * Publish one event to the ring, every matching client and every in-process listener. Only the events of core's
   * `RelayEventMap`, each with its own payload: what goes out on `/internal/events` is what clients are typed for.
   */
  publish<K extends keyof RelayEventMap>(name: K, data: RelayEventMap[K]): HubEvent {
    if (this.stored) {
      // This host's own news on the event log's stream: live only, no id (the client's last cursor stays).
      const event: HubEvent = { id: '', seq: this.seq, name, data, frame: EventHub.frame(name, data) };
      this.fanOut(event);
      return event;
    }
    const seq = ++this.seq;
    const id = `${this.bootId}-${seq}`;
    const frame = `id: ${id}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
    const event: HubEvent = { id, seq, name, data, frame };
    this.remember(event);
    this.fanOut(event);
    return event;
  }

  private fanOut(event: HubEvent): void {
    const { frame } = event;
    this.counters.published++;
    if (this.unfilteredClients > 0) {
      this.broadcast.push(frame);
      this.scheduleFlush();
    }
    if (this.clients.size > this.unfilteredClients) {
      for (const client of this.clients) if (!client.everything) this.deliver(client, event);
    }
    for (const listener of this.listeners) listener(event);
  }

  /** In-process subscription (metrics, lifecycle hooks). Returns an unsubscribe function. */
  onEvent(listener: (event: HubEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Serialize a frame without publishing it (for per-stream initial state). */
  static frame(name: string, data: unknown, id?: string): string {
    return `${id ? `id: ${id}\n` : ''}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  }

  /** Attach an SSE response. Writes headers, initial frames, the replay (or `resync`), then live events. */
  subscribe(res: ServerResponse, options: SubscribeOptions = {}): void {
    // What is batched was published before this client arrived: write it out first, so the batch the new client
    // shares holds only events after its replay.
    this.flush();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    for (const frame of options.initialFrames ?? []) res.write(frame);
    if (options.endAfterInitial) {
      res.end();
      return;
    }
    const client: Client = {
      res,
      filter: options.filter,
      closeAfter: options.closeAfter,
      everything: !options.filter && !options.closeAfter,
      queued: [],
      queuedBytes: 0,
      closing: false,
      held: false,
    };
    if (this.stored) {
      this.subscribeStored(client, options);
      return;
    }
    if (options.lastEventId !== undefined && options.lastEventId !== '') {
      const replay = this.eventsAfter(options.lastEventId);
      if (replay === null) {
        const fromThisBoot = options.lastEventId.startsWith(`${this.bootId}-`);
        this.resync(res, fromThisBoot ? 'too_old' : 'unknown_boot');
      } else {
        for (const event of replay) {
          if (client.filter && !client.filter(event)) continue;
          res.write(event.frame);
          this.counters.replayedEvents++;
          if (client.closeAfter?.(event)) {
            res.end();
            return;
          }
        }
      }
    }
    this.attach(client);
  }

  private attach(client: Client): void {
    this.addClient(client);
    const detach = () => this.removeClient(client);
    client.res.on('close', detach);
    client.res.on('error', detach);
  }

  private resync(res: ServerResponse, reason: 'too_old' | 'unknown_boot'): void {
    this.counters.resyncsSent++;
    res.write(
      EventHub.frame('resync', { reason, boot_id: this.bootId, last_id: this.lastId, ts: this.now() }),
    );
  }

  /** Writes one replayed event; false when the stream ended after it (`closeAfter`). */
  private replayOne(client: Client, event: HubEvent): boolean {
    if (client.filter && !client.filter(event)) return true;
    client.res.write(event.frame);
    this.counters.replayedEvents++;
    if (!client.closeAfter?.(event)) return true;
    client.res.end();
    return false;
  }

  /** A subscription on the event log: resume from the ring, or from the table while live events wait. */
  private subscribeStored(client: Client, options: SubscribeOptions): void {
    const stored = this.stored as NonNullable<EventHub['stored']>;
    const { res } = client;
    let after: EventCursor | null = options.after ?? null;
    const told = options.after === undefined;
    if (after === null && options.lastEventId !== undefined && options.lastEventId !== '') {
      after = parseEventCursor(options.lastEventId);
      if (after === null) this.resync(res, 'unknown_boot');
    }
    if (after !== null && compareEventCursors(after, stored.position) > 0) {
      // Ahead of this log: from a client, not a cursor of this database (or made up); from the server (a record it
      // just read), committed but not yet followed: live events up to it are what the record already shows.
      if (told) this.resync(res, 'unknown_boot');
      else client.skipThrough = after;
      after = null;
    }
    if (after === null) {
      this.attach(client);
      return;
    }
    const fromRing = this.ringAfter(after);
    if (fromRing) {
      for (const event of fromRing) if (!this.replayOne(client, event)) return;
      this.attach(client);
      return;
    }
    // Older than the ring: replay from the table up to where the ring is now; what comes live meanwhile waits.
    const everything = client.everything;
    client.everything = false;
    client.held = true;
    this.attach(client);
    void this.replayStored(client, after, stored.position, told, options.replayTxId).then(
      (open) => {
        client.held = false;
        if (!open) {
          this.removeClient(client);
          return;
        }
        // Write what waited, then (an unfiltered client) join the shared batch: `flush` empties it first.
        this.flush();
        if (everything && this.clients.has(client)) {
          client.everything = true;
          this.unfilteredClients++;
        }
      },
      () => {
        // The table could not be read: end the stream; the client reconnects with the same Last-Event-ID.
        client.held = false;
        this.removeClient(client);
        res.destroy();
      },
    );
  }

  /** Replays (after, upTo] from the table; false when the stream ended (closed, closeAfter, unknown cursor). */
  private async replayStored(
    client: Client,
    after: EventCursor,
    upTo: EventCursor,
    check: boolean,
    txId: string | undefined,
  ): Promise<boolean> {
    const { source } = this.stored as NonNullable<EventHub['stored']>;
    if (check && !(await source.exists(after))) {
      // Not in the table: from another database, or dropped by retention.
      this.resync(client.res, 'too_old');
      return !client.res.destroyed;
    }
    let from = after;
    for (;;) {
      const batch = await source.between(from, upTo, REPLAY_BATCH, txId);
      if (client.res.destroyed || client.res.writableEnded) return false;
      for (const e of batch) {
        const id = formatEventCursor(e.cursor);
        const frame = `id: ${id}\nevent: ${e.name}\ndata: ${e.json ?? JSON.stringify(e.data)}\n\n`;
        const event: HubEvent = { id, seq: 0, cursor: e.cursor, name: e.name, data: e.data, frame };
        if (e.host) event.host = e.host;
        if (!this.replayOne(client, event)) return false;
      }
      if (batch.length < REPLAY_BATCH) return true;
      from = (batch[batch.length - 1] as StoredHubEvent).cursor;
    }
  }

  /**
   * The ring's stored events after `after`, or null when the ring no longer covers it (events after it were
   * evicted, or it is older than the follower's start).
   */
  private ringAfter(after: EventCursor): HubEvent[] | null {
    const stored = this.stored as NonNullable<EventHub['stored']>;
    const size = this.ring.length;
    const oldest = this.ringCount === size ? this.ring[this.ringStart]?.cursor : stored.start;
    if (!oldest || compareEventCursors(after, oldest) < 0) return null;
    const out: HubEvent[] = [];
    for (let i = this.ringCount - 1; i >= 0; i--) {
      const event = this.ring[(this.ringStart + i) % size] as HubEvent;
      if (!event.cursor || compareEventCursors(event.cursor, after) <= 0) break;
      out.push(event);
    }
    return out.reverse();
  }

  /** Write every queued frame now (normally done once per event-loop turn). */
  flush(): void {
    if (this.flushScheduled) {
      this.flushScheduled.cancel();
      this.flushScheduled = null;
    }
    let writes = 0;
    if (this.broadcast.length > 0) {
      writes += this.unfilteredClients;
      const body = Buffer.from(this.broadcast.length === 1 ? this.broadcast[0]! : this.broadcast.join(''));
      this.broadcast = [];
      const chunk = new SharedChunk(body);
      for (const client of this.clients) if (client.everything) this.writeChunk(client, chunk);
    }
    const held: Client[] = [];
    for (const client of this.dirty) {
      if (client.held) {
        held.push(client);
        continue;
      }
      if (client.queued.length === 0) continue;
      writes++;
      const body = Buffer.from(client.queued.length === 1 ? client.queued[0]! : client.queued.join(''));
      client.queued = [];
      client.queuedBytes = 0;
      this.writeChunk(client, new SharedChunk(body));
    }
    this.dirty.clear();
    for (const client of held) this.dirty.add(client);
    if (writes > 0) {
      this.lastFlushAt = performance.now();
      this.lastFlushWrites = writes;
      const buffered = this.bufferedBytes;
      if (buffered > this.counters.peakBufferedBytes) this.counters.peakBufferedBytes = buffered;
    }
  }

  /** Close every client stream (shutdown), after writing what is queued. */
  closeAll(): void {
    this.flush();
    for (const client of this.clients) client.res.end();
    this.clients.clear();
    this.unfilteredClients = 0;
  }

  dispose(): void {
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.closeAll();
    this.listeners.clear();
  }

  /** Events with a sequence after `lastEventId`, or null when the id is from another boot or already evicted. */
  eventsAfter(lastEventId: string): HubEvent[] | null {
    const dash = lastEventId.lastIndexOf('-');
    if (dash <= 0) return null;
    const boot = lastEventId.slice(0, dash);
    const seqText = lastEventId.slice(dash + 1);
    if (boot !== this.bootId || !/^\d{1,15}$/.test(seqText)) return null;
    const seq = Number(seqText);
    if (seq > this.seq) return null;
    const oldest = this.seq - this.ringCount + 1; // seq of the oldest event kept
    if (seq < oldest - 1) return null; // events in between were evicted
    const out: HubEvent[] = [];
    for (let s = seq + 1; s <= this.seq; s++) {
      const event = this.ring[(this.ringStart + (s - oldest)) % this.ring.length];
      if (event) out.push(event);
    }
    return out;
  }

  private remember(event: HubEvent): void {
    const size = this.ring.length;
    if (this.ringCount < size) {
      this.ring[(this.ringStart + this.ringCount) % size] = event;
      this.ringCount++;
    } else {
      this.ring[this.ringStart] = event;
      this.ringStart = (this.ringStart + 1) % size;
    }
  }

  private addClient(client: Client): void {
    this.clients.add(client);
    if (client.everything) this.unfilteredClients++;
  }

  private removeClient(client: Client): void {
    if (this.clients.delete(client) && client.everything) this.unfilteredClients--;
    this.dirty.delete(client);
  }

  private deliver(client: Client, event: HubEvent): void {
    if (client.closing || (client.filter && !client.filter(event))) return;
    if (client.skipThrough && event.cursor) {
      if (compareEventCursors(event.cursor, client.skipThrough) <= 0) return;
      delete client.skipThrough;
    }
    this.enqueue(client, event.frame);
    if (client.closeAfter?.(event)) {
      client.closing = true;
      this.removeClient(client);
      this.dirty.add(client); // still written once more, then ended
    }
  }

  private enqueue(client: Client, frame: string): void {
    if (client.held && client.queuedBytes + frame.length > this.limit) {
      // Live events waiting on a replay past the buffer limit: as slow as a reader that stalls.
      this.counters.slowClientsDropped++;
      this.removeClient(client);
      client.res.destroy();
      return;
    }
    client.queued.push(frame);
    client.queuedBytes += frame.length;
    this.dirty.add(client);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    const run = () => {
      this.flushScheduled = null;
      this.flush();
    };
    const delay = this.flushDelayMs();
    if (delay <= 0) {
      const immediate = setImmediate(run);
      this.flushScheduled = { cancel: () => clearImmediate(immediate) };
    } else {
      const timer = setTimeout(run, delay);
      this.flushScheduled = { cancel: () => clearTimeout(timer) };
    }
  }

  private flushDelayMs(): number {
    const spacing = Math.min(
      this.options.maxFlushDelayMs ?? 25,
      this.lastFlushWrites / (this.options.flushWritesPerMs ?? 10),
    );
    return Math.ceil(this.lastFlushAt + spacing - performance.now());
  }

  /**
   * Write one flush's chunk to a client, or drop the client if its unsent bytes would pass the limit.
   *
   * Straight to the socket, already framed: `ServerResponse.write` builds each client's chunk header, corks the
   * socket and schedules its uncork for every call, which at 1,000 subscribers was most of a flush's JS time. The
   * response's headers are on the socket (`subscribe` flushes them) and every write to it goes through the same
   * socket queue in order, so frames written by `res.write` (initial state, replay) and here never interleave.
   * `res.end()` still writes the chunked terminator. Anything but a plain chunked response goes through `res.write`.
   */
  private writeChunk(client: Client, chunk: SharedChunk): void {
    const { res } = client;
    if (res.destroyed || res.writableEnded) return;
    const bytes = chunk.body.length;
    // The socket's own backlog plus this chunk: past the limit the reader is not keeping up.
    if (res.writableLength + bytes > this.limit) {
      this.counters.slowClientsDropped++;
      this.removeClient(client);
      res.destroy();
      return;
    }
    const socket = res.socket;
    // Straight to the socket only for a chunked response that owns a writable, uncorked socket. Otherwise node's own
    // write path: a response waiting behind earlier ones on its connection (pipelining) has no socket yet and node
    // holds its writes; a HEAD response has no body and node drops them; HTTP/1.0 (no chunking) is rare.
    if (socket && res.chunkedEncoding && socket.writable && !res.writableCorked)
      socket.write(chunk.chunked());
    else res.write(chunk.body);
    const backlog = res.writableLength;
    if (backlog > this.counters.peakClientBufferedBytes) this.counters.peakClientBufferedBytes = backlog;
    if (client.closing) res.end();
  }

  private broadcastRaw(text: string): void {
    if (this.unfilteredClients > 0) {
      this.broadcast.push(text);
      this.scheduleFlush();
    }
    for (const client of this.clients) {
      if (!client.everything && !client.closing) this.enqueue(client, text);
    }
  }

  private now(): number {
    return this.options.now ? this.options.now() : Date.now();
  }
}

/**
 * One flush's frames as bytes, and (built once, on first use) the same bytes as an HTTP/1.1 chunk: what every
 * client of a flush is sent, as a chunk on its socket or as the body through `res.write`.
 */
class SharedChunk {
  private framed: Buffer | null = null;
  constructor(readonly body: Buffer) {}

  chunked(): Buffer {
    this.framed ??= Buffer.concat([
      Buffer.from(`${this.body.length.toString(16)}\r\n`, 'latin1'),
      this.body,
      CRLF,
    ]);
    return this.framed;
  }
}

const CRLF = Buffer.from('\r\n', 'latin1');
