import { request, type IncomingHttpHeaders } from 'node:http';

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON answers
  json: any;
}

export interface RawRequest {
  method?: string;
  /** Sent exactly as given; a `host` entry replaces the one node would write. */
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the body with `Transfer-Encoding: chunked` (no Content-Length). */
  chunked?: boolean;
  /** For an event stream (`text/event-stream`), resolve at the headers and drop the connection. */
  headersOnly?: boolean;
  timeoutMs?: number;
}

/**
 * One HTTP request with full control of the headers (Host, Origin, Content-Type, chunking), which fetch does not
 * allow. Every answer is read whole unless `headersOnly`.
 */
export function rawRequest(base: string, path: string, options: RawRequest = {}): Promise<RawAnswer> {
  const { hostname, port } = new URL(base);
  const headers: Record<string, string> = { ...options.headers };
  if (options.body !== undefined && !options.chunked && headers['content-length'] === undefined) {
    headers['content-length'] = String(Buffer.byteLength(options.body));
  }
  if (options.chunked) headers['transfer-encoding'] = 'chunked';
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method: options.method ?? 'GET', path, headers }, (res) => {
      const answer = (text: string): RawAnswer => {
        let json: unknown = undefined;
        try {
          json = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        return { status: res.statusCode ?? 0, headers: res.headers, text, json };
      };
      if (options.headersOnly && /^text\/event-stream/.test(res.headers['content-type'] ?? '')) {
        resolve(answer(''));
        req.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve(answer(Buffer.concat(chunks).toString('utf8'))));
      res.on('error', reject);
    });
    req.setTimeout(options.timeoutMs ?? 15_000, () => req.destroy(new Error(`no answer to ${path}`)));
    req.on('error', reject);
    if (options.body !== undefined) req.end(options.body);
    else req.end();
  });
}

/** The `access-control-*` headers of an answer (CORS grants); a closed API sends none. */
export function corsHeaders(headers: IncomingHttpHeaders): string[] {
  return Object.keys(headers).filter((name) => name.toLowerCase().startsWith('access-control-'));
}
