import type { ServerResponse } from 'node:http';

/**
 * Server-Sent Events fan-out with resumable ids.
 *
 * Every published event gets the id `<bootId>-<seq>` and goes into a ring buffer. A client reconnecting with a
 * `Last-Event-ID` from this boot that is still in the ring gets everything after it, then live events; an id
 * from another boot or older than the ring gets one `resync` event telling it to re-read state. Each event is
 * serialized once and written to every client; a client whose unsent bytes pass the buffer limit is dropped
 * (and counted) so a reader that stalls never slows the others or grows memory without bound.
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
  /** Interval of the `: keep-alive` comment. Default 15 s; 0 disables. */
  keepAliveMs?: number;
  /** Wall clock for `ts`; injected so tests can pin it. */
  now?: () => number;
}

interface Client {
  res: ServerResponse;
  filter: ((event: HubEvent) => boolean) | undefined;
  closeAfter: ((event: HubEvent) => boolean) | undefined;
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
  readonly counters = { published: 0, slowClientsDropped: 0, resyncsSent: 0, replayedEvents: 0 };

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

  /** The id of the newest event, or null before the first. */
  get lastId(): string | null {
    return this.seq === 0 ? null : `${this.bootId}-${this.seq}`;
  }

  /** Publish one event to the ring, every matching client and every in-process listener. */
  publish(name: string, data: unknown): HubEvent {
    const seq = ++this.seq;
    const id = `${this.bootId}-${seq}`;
    const frame = `id: ${id}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
    const event: HubEvent = { id, seq, name, data, frame };
    this.remember(event);
    this.counters.published++;
    for (const client of this.clients) this.deliver(client, event);
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
    const client: Client = { res, filter: options.filter, closeAfter: options.closeAfter };
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
    this.clients.add(client);
    const detach = () => this.clients.delete(client);
    res.on('close', detach);
    res.on('error', detach);
  }

  /** Close every client stream (shutdown). */
  closeAll(): void {
    for (const client of this.clients) client.res.end();
    this.clients.clear();
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

  private deliver(client: Client, event: HubEvent): void {
    if (client.filter && !client.filter(event)) return;
    const { res } = client;
    if (res.writableLength > this.limit) {
      this.counters.slowClientsDropped++;
      this.clients.delete(client);
      res.destroy();
      return;
    }
    res.write(event.frame);
    if (client.closeAfter?.(event)) {
      this.clients.delete(client);
      res.end();
    }
  }

  private broadcastRaw(text: string): void {
    for (const client of this.clients) {
      if (client.res.writableLength <= this.limit) client.res.write(text);
    }
  }

  private now(): number {
    return this.options.now ? this.options.now() : Date.now();
  }
}
