import { request, type ClientRequest } from 'node:http';
import { connect, type Socket } from 'node:net';

/** One parsed SSE event. */
export interface SoakEvent {
  id: string | null;
  event: string;
  data: string;
}

/**
 * A reading SSE client for long runs: parses frames as they arrive and hands each to `onEvent`, keeping nothing
 * itself (a 10-minute soak publishes around a million events). Counts what it received and whether the stream
 * ended, so a test can tell a dropped reader from a quiet one.
 */
export class SseTally {
  events = 0;
  bytes = 0;
  ended = false;
  status = 0;
  private buffer = '';
  private req: ClientRequest | null = null;

  private constructor(private readonly onEvent: (event: SoakEvent) => void) {}

  static open(
    url: string,
    onEvent: (event: SoakEvent) => void,
    headers: Record<string, string> = {},
  ): Promise<SseTally> {
    const tally = new SseTally(onEvent);
    return new Promise((resolve, reject) => {
      const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
        tally.status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => tally.feed(chunk));
        res.on('end', () => (tally.ended = true));
        res.on('error', () => (tally.ended = true));
        resolve(tally);
      });
      tally.req = req;
      req.on('error', (error) => {
        tally.ended = true;
        reject(error);
      });
      req.end();
    });
  }

  close(): void {
    this.req?.destroy();
  }

  private feed(chunk: string): void {
    this.bytes += chunk.length;
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let id: string | null = null;
      let event = 'message';
      let data = '';
      let fields = 0;
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        fields++;
        if (field === 'id') id = value;
        else if (field === 'event') event = value;
        else if (field === 'data') data += (data ? '\n' : '') + value;
      }
      if (fields === 0) continue;
      this.events++;
      this.onEvent({ id, event, data });
    }
  }
}

/**
 * A raw TCP client that asks for the event stream and then never reads a byte (what a stalled consumer looks like
 * to the sidecar). Its errors are swallowed: the sidecar resets it when it drops it, which is expected.
 */
export function openStalledClient(base: string): Promise<Socket> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.pause();
      socket.write(
        `GET /internal/events HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      socket.off('error', reject);
      socket.on('error', () => undefined);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}
