import { request, type IncomingMessage, type ClientRequest } from 'node:http';

export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/**
 * A minimal SSE reader over node:http for tests: collects parsed messages and lets a test wait for a condition.
 * Deliberately independent of the client SDK so the server's wire format is checked on its own.
 */
export class SseReader {
  readonly messages: SseMessage[] = [];
  status = 0;
  headers: IncomingMessage['headers'] = {};
  ended = false;
  private buffer = '';
  private waiters: Array<() => void> = [];
  private req: ClientRequest | null = null;
  private res: IncomingMessage | null = null;

  static open(url: string, headers: Record<string, string> = {}): Promise<SseReader> {
    const reader = new SseReader();
    return new Promise((resolve, reject) => {
      const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
        reader.res = res;
        reader.status = res.statusCode ?? 0;
        reader.headers = res.headers;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => reader.feed(chunk));
        res.on('end', () => {
          reader.ended = true;
          reader.notify();
        });
        res.on('error', () => {
          reader.ended = true;
          reader.notify();
        });
        resolve(reader);
      });
      reader.req = req;
      req.on('error', reject);
      req.end();
    });
  }

  /** Stop reading from the socket (to simulate a stalled consumer) without closing it. */
  pause(): void {
    this.res?.pause();
  }

  close(): void {
    this.req?.destroy();
  }

  events(name?: string): SseMessage[] {
    return name ? this.messages.filter((m) => m.event === name) : this.messages;
  }

  async waitFor(predicate: (r: SseReader) => boolean, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this)) {
      if (Date.now() > deadline) {
        throw new Error(
          `SSE wait timed out; got ${JSON.stringify(this.messages.slice(-5))} ended=${this.ended}`,
        );
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  private feed(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const message: SseMessage = { event: 'message', data: '' };
      let hasField = false;
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        hasField = true;
        if (field === 'id') message.id = value;
        else if (field === 'event') message.event = value;
        else if (field === 'data') message.data += (message.data ? '\n' : '') + value;
      }
      if (hasField) this.messages.push(message);
    }
    this.notify();
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
