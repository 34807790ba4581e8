import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';

/**
 * A raw HTTP client for the bad-input suite. fetch normalises too much (it refuses some methods and headers and
 * always frames bodies itself), so requests go out through node:http with exactly the method, path bytes,
 * headers and body framing the generator chose. Server-Sent Events answers are recognised by their content type,
 * read up to the first frame and closed at once.
 */

export interface RawRequest {
  method: string;
  /** Sent as is (node:http sends characters up to U+00FF as single bytes). */
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
  /** `length`: a Content-Length body (the default); `chunked`: the body in two chunked pieces. */
  framing?: 'length' | 'chunked';
}

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as text (an SSE answer: what arrived before it was closed). */
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
  sse: boolean;
  ms: number;
}

export interface RawFailure {
  /** No answer: the connection failed or reset, or nothing came back in time. */
  error: string;
  ms: number;
  reusedSocket?: boolean;
}

/** Header values go on the wire as bytes; characters beyond Latin-1 are sent as their UTF-8 bytes. */
export function wireHeader(value: string): string {
  for (let i = 0; i < value.length; i++) {
    if (value.charCodeAt(i) > 0xff) return Buffer.from(value, 'utf8').toString('latin1');
  }
  return value;
}

/** Without the control characters node:http refuses in a header value (tab stays). */
export function stripControls(value: string): string {
  let out = '';
  for (const ch of value) {
    const code = ch.charCodeAt(0);
    if ((code >= 0x20 && code !== 0x7f) || code === 0x09) out += ch;
  }
  return out;
}

export class RawClient {
  private readonly agent: Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(
    baseUrl: string,
    private readonly options: { maxSockets: number; timeoutMs: number; sseWaitMs: number },
  ) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets });
  }

  /** Requests sent again after a kept-alive socket turned out to be closed by the server (see `send`). */
  retries = 0;

  async send(req: RawRequest): Promise<RawAnswer | RawFailure> {
    // A server may answer a body it refuses (413, 415, 401) before reading it and close the connection while the
    // client is still uploading; node:http then reports EPIPE and drops the answer. Big bodies go over a plain
    // socket that keeps reading after a failed write.
    if (req.body !== undefined && req.body.length > 64 * 1024) return this.sendOverSocket(req);
    const first = await this.sendOnce(req, this.agent);
    // A request written on a kept-alive socket the server was closing at that moment (after answering a request it
    // did not read to the end, say) fails with ECONNRESET; node's documentation advises sending it again. It is
    // sent once more on a fresh connection whatever socket it used, and counted: a server that really died fails
    // the second time too (and the health checks after the run).
    if (isFailure(first) && /ECONNRESET|socket hang up/.test(first.error)) {
      this.retries++;
      return this.sendOnce(req, false);
    }
    return first;
  }

  private sendOnce(req: RawRequest, agent: Agent | false): Promise<RawAnswer | RawFailure> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise((resolve) => {
      let settled = false;
      const outgoing: { current?: ReturnType<typeof request> } = {};
      const timer = setTimeout(() => {
        outgoing.current?.destroy();
        finish({ error: `no answer within ${this.options.timeoutMs} ms`, ms: elapsed() });
      }, this.options.timeoutMs);
      const finish = (value: RawAnswer | RawFailure) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      };
      const headers: Record<string, string | string[]> = { ...req.headers };
      const chunked = req.framing === 'chunked' && req.body !== undefined;
      if (req.body !== undefined && !chunked) headers['content-length'] = String(req.body.length);
      // Said outright: node:http chunks a body by default only for methods that usually carry one, and would
      // send a DELETE's or HEAD's body unframed (the server then reads it as the next request).
      if (chunked) headers['transfer-encoding'] = 'chunked';
      let sent: ReturnType<typeof request>;
      try {
        sent = request({
          host: this.host,
          port: this.port,
          method: req.method,
          path: req.path,
          headers,
          agent,
        });
      } catch (error) {
        // The generator produced something node:http itself refuses to send: a bug in the generator.
        finish({ error: `client refused to send: ${(error as Error).message}`, ms: elapsed() });
        return;
      }
      outgoing.current = sent;
      sent.on('error', (error) =>
        finish({ error: error.message, ms: elapsed(), reusedSocket: sent.reusedSocket }),
      );
      sent.on('response', (res) => {
        const type = String(res.headers['content-type'] ?? '');
        const sse = type.startsWith('text/event-stream');
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          if (!sse && text.length > 0) {
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
          }
          finish({ status: res.statusCode ?? 0, headers: res.headers, text, json, sse, ms: elapsed() });
        };
        if (sse) {
          // A stream stays open: take what the server writes first (its initial frames), then hang up.
          const close = () => {
            done();
            sent.destroy();
          };
          const wait = setTimeout(close, this.options.sseWaitMs);
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            if (Buffer.concat(chunks).includes('\n\n')) {
              clearTimeout(wait);
              close();
            }
          });
          res.on('end', () => {
            clearTimeout(wait);
            close();
          });
          res.on('error', () => undefined);
          return;
        }
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= 4 * 1024 * 1024) chunks.push(chunk);
        });
        res.on('end', done);
        res.on('error', (error) => finish({ error: `response: ${error.message}`, ms: elapsed() }));
      });
      if (req.body === undefined) {
        sent.end();
      } else if (chunked) {
        const cut = Math.floor(req.body.length / 2);
        sent.write(req.body.subarray(0, cut));
        sent.end(req.body.subarray(cut));
      } else {
        sent.end(req.body);
      }
    });
  }

  private sendOverSocket(req: RawRequest): Promise<RawAnswer | RawFailure> {
    const started = performance.now();
    const body = req.body ?? Buffer.alloc(0);
    const chunked = req.framing === 'chunked';
    const lines = [`${req.method} ${req.path} HTTP/1.1`, `host: ${this.host}:${this.port}`];
    for (const [name, value] of Object.entries(req.headers)) {
      for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
    }
    // No `connection: close`: a server closing right after its answer while request bytes are still unread makes
    // the kernel reset the connection, and a reset discards an answer the client has not read yet.
    lines.push(chunked ? 'transfer-encoding: chunked' : `content-length: ${body.length}`);
    const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
    const payload = chunked
      ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')])
      : body;
    return new Promise((resolve) => {
      const socket = connect(this.port, this.host);
      const chunks: Buffer[] = [];
      let settled = false;
      const finish = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        const ms = Math.round(performance.now() - started);
        const all = Buffer.concat(chunks);
        const split = all.indexOf('\r\n\r\n');
        const match = /^HTTP\/1\.[01] (\d{3})/.exec(all.toString('latin1', 0, 16));
        if (split < 0 || !match) {
          resolve({ error: `no answer over a plain socket (${all.length} bytes)`, ms });
          return;
        }
        const headers: IncomingHttpHeaders = {};
        for (const line of all.toString('latin1', 0, split).split('\r\n').slice(1)) {
          const colon = line.indexOf(':');
          if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const text = all.subarray(split + 4).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: Number(match[1]), headers, text, json, sse: false, ms });
      };
      const timer = setTimeout(finish, this.options.timeoutMs);
      socket.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        // Done once the head and Content-Length bytes of body are in.
        const all = Buffer.concat(chunks);
        const split = all.indexOf('\r\n\r\n');
        if (split < 0) return;
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(all.toString('latin1', 0, split));
        if (length && all.length - split - 4 >= Number(length[1])) finish();
      });
      socket.on('end', finish);
      socket.on('close', finish);
      socket.on('error', () => undefined); // EPIPE / ECONNRESET mid-upload: the answer may already be in
      socket.on('connect', () => {
        // Written, not ended: a client that half-closes makes node's server abort a request it has not answered
        // yet (httpAllowHalfOpen is off), which is not what a real client does.
        socket.write(head);
        socket.write(payload);
      });
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

export function isFailure(answer: RawAnswer | RawFailure): answer is RawFailure {
  return 'error' in answer;
}

/**
 * Bytes written straight to a socket (broken framing node:http would not send), then whatever the server answers
 * until it closes or `waitMs` passes. Returns the status line's code, or 0 when nothing came back.
 */
export function sendBytes(
  baseUrl: string,
  bytes: Buffer,
  waitMs: number,
): Promise<{ status: number; text: string; closedByServer: boolean }> {
  const url = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    let closedByServer = false;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: match ? Number(match[1]) : 0, text, closedByServer });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      // A whole answer in (head and Content-Length bytes of body): no need to wait for the server to close.
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      const length = split < 0 ? null : /\r\ncontent-length:\s*(\d+)/i.exec(all.toString('latin1', 0, split));
      if (split >= 0 && length && all.length - split - 4 >= Number(length[1])) finish();
    });
    socket.on('end', () => {
      closedByServer = true;
      finish();
    });
    socket.on('error', () => finish());
    socket.on('connect', () => socket.write(bytes));
  });
}
