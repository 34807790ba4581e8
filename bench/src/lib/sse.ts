import http from 'node:http';

export interface SseEvent {
  event: string;
  data: string;
  /** Date.now() when the frame was read. */
  receivedAt: number;
}

/**
 * A raw SSE reader on node's http (no EventSource library: at 1,000 readers the library's cost would be measured
 * instead of the sidecar's). A `parse: false` reader only counts bytes, which is what most of the 1,000 fan-out
 * subscribers do so the load generator does not parse 1,000 copies of every frame.
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
    private readonly options: { parse: boolean; onEvent?: (event: SseEvent) => void; agent?: http.Agent },
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
    if (!this.options.parse) return;
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
