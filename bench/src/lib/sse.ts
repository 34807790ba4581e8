import http from 'node:http';
import { connect, type Socket } from 'node:net';

export interface SseEvent {
  event: string;
  data: string;
  /** Date.now() when the frame was read. */
  receivedAt: number;
}

/**
 * A raw SSE reader on node's http (no EventSource library: its cost would be measured instead of the sidecar's).
 * Subscribers that only count bytes are `RawSseCounter`s, cheaper still.
 */
export class SseReader {
  bytes = 0;
  frames = 0;
  private buffer = '';
  private request: http.ClientRequest | null = null;
  private response: http.IncomingMessage | null = null;
  closed = false;

  constructor(
    private readonly url: string,
    private readonly options: { onEvent?: (event: SseEvent) => void; agent?: http.Agent },
  ) {}

  /** Resolves when the response headers arrive (the subscription is live). */
  open(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.request = http.get(
        this.url,
        { headers: { accept: 'text/event-stream' }, agent: this.options.agent ?? false },
        (res) => {
          if (res.statusCode !== 200) {
            reject(new Error(`SSE ${this.url}: ${res.statusCode}`));
            res.resume();
            return;
          }
          this.response = res;
          res.on('data', (chunk: Buffer) => this.onChunk(chunk));
          res.on('close', () => (this.closed = true));
          res.on('error', () => (this.closed = true));
          resolve();
        },
      );
      this.request.on('error', (e) => {
        this.closed = true;
        reject(e);
      });
    });
  }

  private onChunk(chunk: Buffer): void {
    this.bytes += chunk.length;
    const receivedAt = Date.now();
    this.buffer += chunk.toString('utf8');
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const frame = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let event = 'message';
      let data = '';
      for (const line of frame.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data = line.slice(6);
      }
      if (!data) continue; // keep-alive comment
      this.frames++;
      this.options.onEvent?.({ event, data, receivedAt });
    }
  }

  close(): void {
    this.response?.destroy();
    this.request?.destroy();
    this.closed = true;
  }
}

/**
 * A subscriber that only counts what arrives, on a bare TCP socket: no HTTP parser, no chunk decoding, no 'data'
 * event per chunk through node's HTTP client. At 1,000 subscribers in one process the HTTP client's own cost per
 * read made the readers, not the server, the limit of the measurement. `bytes` counts the body as sent on the wire
 * (chunk framing included, identical for subscribers of one stream), from the end of the response headers.
 */
export class RawSseCounter {
  bytes = 0;
  closed = false;
  private socket: Socket | null = null;

  constructor(private readonly url: string) {}

  /** Resolves when the response headers arrive; rejects on a status other than 200. */
  open(): Promise<void> {
    const { hostname, port, pathname, search } = new URL(this.url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname);
      this.socket = socket;
      let head = '';
      let inBody = false;
      socket.on('data', (chunk: Buffer) => {
        if (inBody) {
          this.bytes += chunk.length;
          return;
        }
        head += chunk.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        inBody = true;
        if (!/^HTTP\/1\.1 200 /.test(head)) {
          reject(new Error(`SSE ${this.url}: ${head.split('\r\n')[0]}`));
          socket.destroy();
          return;
        }
        this.bytes += Buffer.byteLength(head.slice(end + 4), 'latin1');
        resolve();
      });
      socket.on('close', () => (this.closed = true));
      socket.on('error', (e) => {
        this.closed = true;
        reject(e);
      });
      socket.write(
        `GET ${pathname}${search} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAccept: text/event-stream\r\n\r\n`,
      );
    });
  }

  close(): void {
    this.socket?.destroy();
    this.closed = true;
  }
}

/**
 * The fan-out benchmarks' subscribers on `url`: `timed` SSE readers that parse every frame (given to `onEvent`),
 * spread through the connection order (the hub writes each flush to its clients in the order they came, so timing
 * only the first would leave out most of each flush's write loop), and byte counters for the rest; opened 100 at a
 * time.
 */
export async function openFanoutSubscribers(
  url: string,
  subscribers: number,
  timed: number,
  onEvent: (event: SseEvent) => void,
): Promise<{ timed: SseReader[]; counters: RawSseCounter[]; all: (SseReader | RawSseCounter)[] }> {
  const readers: SseReader[] = [];
  const counters: RawSseCounter[] = [];
  const all: (SseReader | RawSseCounter)[] = [];
  const every = Math.max(1, Math.floor(subscribers / timed));
  for (let i = 0; i < subscribers; i++) {
    if (i % every === 0 && readers.length < timed) {
      const reader = new SseReader(url, { onEvent });
      readers.push(reader);
      all.push(reader);
    } else {
      const counter = new RawSseCounter(url);
      counters.push(counter);
      all.push(counter);
    }
  }
  for (let i = 0; i < all.length; i += 100) await Promise.all(all.slice(i, i + 100).map((r) => r.open()));
  return { timed: readers, counters, all };
}
