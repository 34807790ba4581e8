import type { ServerResponse } from 'node:http';
import type { RelayEventMap } from '@solrelay/core';

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
 */

export interface HubEvent {
  id: string;
  seq: number;
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
}

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
    return this.seq === 0 ? null : `${this.bootId}-${this.seq}`;
  }

  /**
   * Publish one event to the ring, every matching client and every in-process listener. Only the events of core's
   * `RelayEventMap`, each with its own payload: what goes out on `/internal/events` is what clients are typed for.
   */
  publish<K extends keyof RelayEventMap>(name: K, data: RelayEventMap[K]): HubEvent {
    const seq = ++this.seq;
    const id = `${this.bootId}-${seq}`;
    const frame = `id: ${id}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
    const event: HubEvent = { id, seq, name, data, frame };
    this.remember(event);
    this.counters.published++;
    if (this.unfilteredClients > 0) {
      this.broadcast.push(frame);
      this.scheduleFlush();
    }
    if (this.clients.size > this.unfilteredClients) {
      for (const client of this.clients) if (!client.everything) this.deliver(client, event);
    }
    for (const listener of this.listeners) listener(event);
    return event;
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
    };
    if (options.lastEventId !== undefined && options.lastEventId !== '') {
      const replay = this.eventsAfter(options.lastEventId);
      if (replay === null) {
        this.counters.resyncsSent++;
        const fromThisBoot = options.lastEventId.startsWith(`${this.bootId}-`);
        res.write(
          EventHub.frame('resync', {
            reason: fromThisBoot ? 'too_old' : 'unknown_boot',
            boot_id: this.bootId,
            last_id: this.lastId,
            ts: this.now(),
          }),
        );
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
    this.addClient(client);
    const detach = () => this.removeClient(client);
    res.on('close', detach);
    res.on('error', detach);
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
      const chunk = Buffer.from(this.broadcast.length === 1 ? this.broadcast[0]! : this.broadcast.join(''));
      this.broadcast = [];
      for (const client of this.clients) if (client.everything) this.writeChunk(client, chunk, chunk.length);
    }
    for (const client of this.dirty) {
      if (client.queued.length === 0) continue;
      writes++;
      const chunk = client.queued.length === 1 ? client.queued[0]! : client.queued.join('');
      const bytes = client.queuedBytes;
      client.queued = [];
      client.queuedBytes = 0;
      this.writeChunk(client, chunk, bytes);
    }
    this.dirty.clear();
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
    this.enqueue(client, event.frame);
    if (client.closeAfter?.(event)) {
      client.closing = true;
      this.removeClient(client);
      this.dirty.add(client); // still written once more, then ended
    }
  }

  private enqueue(client: Client, frame: string): void {
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

  /** Write one flush's chunk to a client, or drop the client if its unsent bytes would pass the limit. */
  private writeChunk(client: Client, chunk: string | Buffer, bytes: number): void {
    const { res } = client;
    if (res.destroyed || res.writableEnded) return;
    // The socket's own backlog plus this chunk: past the limit the reader is not keeping up.
    if (res.writableLength + bytes > this.limit) {
      this.counters.slowClientsDropped++;
      this.removeClient(client);
      res.destroy();
      return;
    }
    res.write(chunk);
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
