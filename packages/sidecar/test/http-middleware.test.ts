import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RelayError } from '@solrelay/core';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { createRequestListener } from '../src/http/app';
import { bearerAuth, tokenChecker } from '../src/http/middleware/auth';
import { browserGuard } from '../src/http/middleware/browser-guard';
import { sendError, toRelayError } from '../src/http/middleware/errors';
import { fastEnqueue } from '../src/http/middleware/fast-enqueue';
import { requireJsonContentType } from '../src/http/middleware/json-body';

/** A stub whose every member throws: a middleware that reaches for something it should not fails loudly. */
function unexpected<T>(name: string): T {
  return new Proxy(
    {},
    {
      get: (_t, key) => {
        throw new Error(`${name}.${String(key)}: not expected here`);
      },
    },
  ) as T;
}

function send(
  port: number,
  method: string,
  path: string,
  head: Record<string, string>,
  body: string,
  chunked = false,
): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent: false,
        headers: chunked ? head : { ...head, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    if (chunked) req.write(body); // written before end: node sends it chunked, without a Content-Length
    req.end(chunked ? undefined : body);
  });
}

const headers = (h: Record<string, string>) => ({ headers: h });

describe('browser guard', () => {
  const guard = browserGuard('127.0.0.1', ['relay.internal']);

  test('a foreign Origin is refused with RELAY_E_AUTH_FORBIDDEN_ORIGIN (403)', () => {
    const refused = guard(headers({ host: '127.0.0.1:8080', origin: 'https://evil.example' }));
    expect(refused?.code).toBe('RELAY_E_AUTH_FORBIDDEN_ORIGIN');
    expect(refused?.status).toBe(403);
    expect(guard(headers({ host: '127.0.0.1:8080', origin: 'null' }))?.code).toBe(
      'RELAY_E_AUTH_FORBIDDEN_ORIGIN',
    );
    expect(guard(headers({ host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8081' }))?.code).toBe(
      'RELAY_E_AUTH_FORBIDDEN_ORIGIN',
    );
    expect(guard(headers({ host: '127.0.0.1:8080', 'sec-fetch-site': 'cross-site' }))?.code).toBe(
      'RELAY_E_AUTH_FORBIDDEN_ORIGIN',
    );
  });

  test('the same origin, and clients that send no Origin, pass', () => {
    expect(guard(headers({ host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8080' }))).toBeNull();
    expect(guard(headers({ host: '127.0.0.1:8080', 'sec-fetch-site': 'same-origin' }))).toBeNull();
    expect(guard(headers({ host: 'localhost:8080' }))).toBeNull();
    expect(guard(headers({ host: 'relay.internal:8080' }))).toBeNull();
  });

  test('bound to loopback, a foreign Host is refused with RELAY_E_AUTH_FORBIDDEN_HOST (403), before Origin', () => {
    const refused = guard(headers({ host: 'evil.example:8080', origin: 'http://evil.example:8080' }));
    expect(refused?.code).toBe('RELAY_E_AUTH_FORBIDDEN_HOST');
    expect(refused?.status).toBe(403);
  });

  test('the Host check is off when not bound to loopback, or with `*`', () => {
    expect(browserGuard('0.0.0.0', [])(headers({ host: 'evil.example' }))).toBeNull();
    expect(browserGuard('127.0.0.1', ['*'])(headers({ host: 'evil.example' }))).toBeNull();
  });
});

describe('auth', () => {
  const check = tokenChecker('s3cret');

  test('a missing token is RELAY_E_AUTH_MISSING_TOKEN (401); a wrong one RELAY_E_AUTH_INVALID_TOKEN (401)', () => {
    expect(check(undefined)?.code).toBe('RELAY_E_AUTH_MISSING_TOKEN');
    expect(check(undefined)?.status).toBe(401);
    expect(check('Bearer wrong')?.code).toBe('RELAY_E_AUTH_INVALID_TOKEN');
    expect(check('Basic s3cret')?.code).toBe('RELAY_E_AUTH_INVALID_TOKEN');
    expect(check('Bearer s3cret')).toBeNull();
    expect(check('bearer   s3cret')).toBeNull();
  });

  test('the express form passes the refusal to next, or calls next() alone', () => {
    const next = jest.fn();
    const middleware = bearerAuth(check);
    middleware({ headers: {} } as Request, unexpected<Response>('res'), next);
    expect(next.mock.calls[0][0]).toMatchObject({ code: 'RELAY_E_AUTH_MISSING_TOKEN' });
    middleware({ headers: { authorization: 'Bearer s3cret' } } as Request, unexpected<Response>('res'), next);
    expect(next.mock.calls[1]).toEqual([]);
  });
});

describe('errors', () => {
  function fakeResponse() {
    const written: { status?: number; headers: Record<string, unknown>; body?: string; ended: boolean } = {
      headers: {},
      ended: false,
    };
    const res = {
      headersSent: false,
      setHeader: (k: string, v: unknown) => void (written.headers[k] = v),
      writeHead: (status: number, h: Record<string, unknown>) => {
        written.status = status;
        Object.assign(written.headers, h);
      },
      end: (body?: string) => {
        written.body = body;
        written.ended = true;
      },
    };
    return { res: res as unknown as ServerResponse, written };
  }
  const log = () => ({ error: jest.fn() }) as unknown as Logger & { error: jest.Mock };

  test('framework errors map to relay codes; anything unknown is RELAY_E_INTERNAL_ERROR', () => {
    expect(toRelayError({ type: 'entity.too.large' }).code).toBe('RELAY_E_REQUEST_BODY_TOO_LARGE');
    expect(toRelayError({ type: 'entity.parse.failed', message: 'x' }).code).toBe(
      'RELAY_E_REQUEST_MALFORMED_JSON',
    );
    expect(toRelayError({ type: 'charset.unsupported' }).code).toBe('RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE');
    expect(toRelayError({ type: 'request.aborted' }).code).toBe('RELAY_E_REQUEST_MALFORMED_JSON');
    expect(toRelayError({ status: 400 }).code).toBe('RELAY_E_REQUEST_MALFORMED_JSON');
    expect(toRelayError(new Error('bug')).code).toBe('RELAY_E_INTERNAL_ERROR');
    const own = new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: 'x' });
    expect(toRelayError(own)).toBe(own);
  });

  test('the stable error body, retry-after on 429, and a log line only for a bug', () => {
    const bug = fakeResponse();
    const bugLog = log();
    sendError(bug.res, new Error('bug'), bugLog);
    expect(bug.written.status).toBe(500);
    expect(JSON.parse(bug.written.body!)).toEqual({
      error: { code: 'RELAY_E_INTERNAL_ERROR', message: expect.any(String), details: expect.any(Object) },
    });
    expect(bug.written.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(bugLog.error).toHaveBeenCalledTimes(1);

    const full = fakeResponse();
    const quiet = log();
    // Without a number of seconds in its details, a 429 still says when to retry: in 1 s.
    sendError(full.res, new RelayError('RELAY_E_QUEUE_FULL', { limit: 3 } as never), quiet);
    expect([full.written.status, full.written.headers['retry-after']]).toEqual([429, '1']);
    const rate = fakeResponse();
    sendError(rate.res, new RelayError('RELAY_E_RATE_LIMITED', { limit: 3, retry_after_s: 9 }), quiet);
    expect(rate.written.headers['retry-after']).toBe('9');
    sendError(
      fakeResponse().res,
      new RelayError('RELAY_E_NOT_READY', { reason: 'x', reasons: ['x'] }),
      quiet,
    );
    expect(quiet.error).not.toHaveBeenCalled();
  });

  test('after the headers went out, an error only ends the response', () => {
    const { res, written } = fakeResponse();
    (res as { headersSent: boolean }).headersSent = true;
    sendError(res, new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: 'x' }), log());
    expect(written).toEqual({ headers: {}, body: undefined, ended: true });
  });
});

describe('JSON body', () => {
  const run = (method: string, type?: string) => {
    const next = jest.fn();
    const req = { method, headers: type === undefined ? {} : { 'content-type': type } } as Request;
    requireJsonContentType(req, unexpected<Response>('res'), next);
    return next.mock.calls[0][0] as RelayError | undefined;
  };

  test('a body that is not JSON is RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE (415); GET needs no type', () => {
    expect(run('POST', 'text/plain')).toMatchObject({
      code: 'RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE',
      status: 415,
    });
    expect(run('PUT')).toMatchObject({ code: 'RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE' });
    expect(run('POST', 'application/json; charset=utf-8')).toBeUndefined();
    expect(run('GET')).toBeUndefined();
  });
});

describe('fast enqueue', () => {
  let server: Server;
  let port: number;
  const enqueue = jest.fn();
  beforeAll(async () => {
    const handle = fastEnqueue(
      { relay: { enqueue } as never, log: { error: jest.fn() } as unknown as Logger },
      tokenChecker('s3cret'),
    );
    server = createServer((req, res) => {
      if (handle(req, res)) return;
      res.writeHead(299); // not taken: the listener hands the request to express
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  beforeEach(() => enqueue.mockReset());

  const post = (path: string, head: Record<string, string>, body: string, chunked = false) =>
    send(port, 'POST', path, head, body, chunked);
  const json = { 'content-type': 'application/json', authorization: 'Bearer s3cret' };

  test('an ordinary enqueue is answered here: 202 with the relay response, 200 for a repeat', async () => {
    enqueue.mockResolvedValueOnce({ response: { tx_id: 't' }, created: true });
    const first = await post('/tx/enqueue', json, '{"a":1}');
    expect([first.status, JSON.parse(first.body)]).toEqual([202, { tx_id: 't' }]);
    expect(enqueue).toHaveBeenCalledWith({ a: 1 });
    enqueue.mockResolvedValueOnce({ response: { tx_id: 't' }, created: false });
    expect((await post('/tx/enqueue?x=1', json, '{"a":1}')).status).toBe(200);
  });

  test('the token is checked before the body: no token is 401 without reading or judging it', async () => {
    const res = await post('/tx/enqueue', { 'content-type': 'application/json' }, '{not json');
    expect([res.status, JSON.parse(res.body).error.code]).toEqual([401, 'RELAY_E_AUTH_MISSING_TOKEN']);
    expect(enqueue).not.toHaveBeenCalled();
  });

  test('a malformed body is RELAY_E_REQUEST_MALFORMED_JSON (400); a refusal keeps its code and retry-after', async () => {
    const bad = await post('/tx/enqueue', json, '{"a":');
    expect([bad.status, JSON.parse(bad.body).error.code]).toEqual([400, 'RELAY_E_REQUEST_MALFORMED_JSON']);
    enqueue.mockRejectedValueOnce(new RelayError('RELAY_E_QUEUE_FULL', { limit: 1, retry_after_s: 2 }));
    const full = await post('/tx/enqueue', json, '{"a":1}');
    expect([full.status, full.headers['retry-after'], JSON.parse(full.body).error.code]).toEqual([
      429,
      '2',
      'RELAY_E_QUEUE_FULL',
    ]);
  });

  test('anything unusual is left to express untouched', async () => {
    for (const [path, head, chunked] of [
      ['/tx/enqueue', json, true],
      ['/tx/enqueue', { ...json, 'content-type': 'application/json; charset=latin1' }, false],
      ['/tx/enqueue', { ...json, 'content-encoding': 'gzip' }, false],
      ['/tx/enqueue', { ...json, 'content-type': 'text/plain' }, false],
      ['/tx/enqueue/', json, false],
      ['/tx/other', json, false],
    ] as const) {
      expect([path, head, (await post(path, head, '{"a":1}', chunked)).status]).toEqual([path, head, 299]);
    }
    expect(enqueue).not.toHaveBeenCalled();
  });
});

describe('the order of checks, through the composed listener', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    // Every dependency but the log throws when touched: no check below may reach a route's work.
    server = createServer(
      createRequestListener({
        relay: unexpected('relay'),
        hub: unexpected('hub'),
        lifecycle: unexpected('lifecycle'),
        policy: unexpected('policy'),
        metrics: unexpected('metrics'),
        log: { error: jest.fn() } as unknown as Logger,
        apiToken: 's3cret',
        status: unexpected('status'),
        ready: unexpected('ready'),
        tip: unexpected('tip'),
        apiHost: '127.0.0.1',
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const code = async (answer: Promise<{ status: number; body: string }>) => {
    const { status, body } = await answer;
    return [status, body.startsWith('{"error"') ? JSON.parse(body).error.code : body];
  };
  const json = { 'content-type': 'application/json' };
  const token = { authorization: 'Bearer s3cret' };

  test('the browser guard runs first: before the token, on both enqueue paths and before /healthz', async () => {
    const foreign = { origin: 'https://evil.example' };
    const forbidden = [403, 'RELAY_E_AUTH_FORBIDDEN_ORIGIN'];
    expect(await code(send(port, 'POST', '/tx/enqueue', { ...json, ...foreign }, '{}'))).toEqual(forbidden);
    expect(await code(send(port, 'POST', '/tx/enqueue', { ...json, ...foreign }, '{}', true))).toEqual(
      forbidden,
    );
    expect(await code(send(port, 'GET', '/status', foreign, ''))).toEqual(forbidden);
    expect(await code(send(port, 'GET', '/healthz', { host: 'evil.example' }, ''))).toEqual([
      403,
      'RELAY_E_AUTH_FORBIDDEN_HOST',
    ]);
  });

  test('/healthz needs no token; everything else, unknown routes included, does', async () => {
    expect(await code(send(port, 'GET', '/healthz', {}, ''))).toEqual([200, '{"ok":true}']);
    expect(await code(send(port, 'GET', '/nope', {}, ''))).toEqual([401, 'RELAY_E_AUTH_MISSING_TOKEN']);
    expect(await code(send(port, 'GET', '/openapi.json', {}, ''))).toEqual([
      401,
      'RELAY_E_AUTH_MISSING_TOKEN',
    ]);
  });

  test('the token before the body: before its media type and its JSON, on the express path too', async () => {
    const missing = [401, 'RELAY_E_AUTH_MISSING_TOKEN'];
    expect(await code(send(port, 'POST', '/tx/enqueue', json, '{not json', true))).toEqual(missing);
    expect(await code(send(port, 'POST', '/internal/submit', { 'content-type': 'text/plain' }, 'x'))).toEqual(
      missing,
    );
    expect(
      await code(send(port, 'POST', '/internal/submit', { 'content-type': 'text/plain', ...token }, '{')),
    ).toEqual([415, 'RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE']);
    expect(await code(send(port, 'POST', '/internal/submit', { ...json, ...token }, '{', true))).toEqual([
      400,
      'RELAY_E_REQUEST_MALFORMED_JSON',
    ]);
  });

  test('OPTIONS is an unknown route (no router answers it with Allow)', async () => {
    expect(await code(send(port, 'OPTIONS', '/tx/enqueue', token, ''))).toEqual([
      404,
      'RELAY_E_REQUEST_UNKNOWN_ROUTE',
    ]);
  });
});
