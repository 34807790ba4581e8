import { randomBytes, randomUUID } from 'node:crypto';
import { chmod, readdir, readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { mkdtemp } from 'node:fs/promises';
import type { Sidecar } from '@solrelay/sidecar';
import { SseReader, get, post, spawnSidecar, waitUntil, type Stack } from '@solrelay/testkit';
import { corsHeaders, rawRequest, type RawAnswer } from '../../src/security-http';
import { writeResults } from '../../src/security-results';
import { openApiRoutes, sourceRoutes, type ApiRoute } from '../../src/security-routes';
import {
  credentialNeedles,
  findLeaks,
  haystackBytes,
  keypairNeedles,
  type Needle,
} from '../../src/security-secrets';
import {
  AGENT_MAIN,
  CLI_BIN,
  CapturedLog,
  SIDECAR_MAIN,
  applyPolicy,
  recordBundles,
  runNode,
  startInProcessStack,
  startNode,
  startProcessStack,
  type ProcessRun,
  type ProcessSidecar,
} from '../../src/security-stack';

/**
 * Issue #10, "Security": loopback bind, the bearer token on every route, CORS closed, DNS-rebinding refused, the
 * keypair file's permissions, no secret anywhere relay writes, body limits, and the policy holding against
 * hand-crafted /internal/submit bodies, checked against what the simnet's block engine actually received.
 */

const figures = {
  requests: { token: 0, cors_and_host: 0, limits: 0, policy: 0, process: 0 },
  token_route_matrix: { routes: 0, bad_credentials: 0, checked: 0, refusals: 0 },
  // needles and haystacks are sums over the separate searches; pairs is what was checked (Σ needles × haystacks).
  leak_search: { needles: 0, haystacks: 0, pairs: 0, characters: 0, leaks: 0 },
  policy: {
    refusals_by_code: {} as Record<string, number>,
    accepted: 0,
    bundles_received: 0,
    bundles_refused_by_engine: 0,
    engine_admission_refusals: 0,
  },
  bind: { listeners: [] as string[], non_loopback_probe: 'not run' },
  agent: { model_calls: 0, cortex_decisions: 0, cli_runs: 0 },
};

function count(part: keyof typeof figures.requests, answer: RawAnswer): RawAnswer {
  figures.requests[part]++;
  return answer;
}

const TOKEN = `tok-${randomBytes(24).toString('hex')}`;
const AUTH = { authorization: `Bearer ${TOKEN}` };

// Three stacks, started together to save wall time: the built process (bind, key file, log grep), an in-process
// sidecar with a token and a tight policy (auth matrix, policy), and one with no token (CORS, Host, limits).
let proc: Stack<ProcessSidecar>;
const procRuns: ProcessSidecar[] = [];
const procToken = `ptok-${randomBytes(24).toString('hex')}`;
const xToken = `xtok-${randomBytes(16).toString('hex')}`;
const engineUuid = randomUUID();
/** The webhook signing key; deliveries go to a closed port, so relay logs failed deliveries (without it). */
const webhookKey = randomBytes(32).toString('base64');
const webhookSecret = `whsec_${webhookKey}`;
/** A fake Anthropic key, in the real key's shape; the simnet's Messages endpoint accepts only this one. */
const anthropicKey = `sk-ant-api03-${randomBytes(60).toString('base64url')}-${randomBytes(6).toString('hex')}AA`;
let keyMode = 0o644;

let guarded: Stack<Sidecar>;
const guardedLog = new CapturedLog('debug');
let open: Stack<Sidecar>;
const openLog = new CapturedLog('debug');

const POLICY = {
  'max-tip': 200_000,
  'min-tip': 1000,
  'escalation-step': 50_000,
  'max-retries': 1,
  'spend-limit': 500_000_000,
  'rate-limit': 100_000,
};

beforeAll(async () => {
  [proc, guarded, open] = await Promise.all([
    startProcessStack({
      simnet: { xToken, llmApiKey: anthropicKey },
      env: {
        RELAY_API_TOKEN: procToken,
        LOG_LEVEL: 'debug',
        BYPASS_AGENT: '1',
        BUNDLE_ENGINE_UUID: engineUuid,
        RELAY_WEBHOOK_URL: 'http://127.0.0.1:9/relay-hooks',
        RELAY_WEBHOOK_SECRET: webhookSecret,
      },
      started: procRuns,
      beforeStart: (env) => chmod(env.KEYPAIR_PATH as string, keyMode),
    }),
    startInProcessStack({
      env: { RELAY_API_TOKEN: TOKEN, RELAY_AGENT_GRACE_S: '86400' },
      policy: POLICY,
      log: guardedLog,
    }),
    startInProcessStack({ env: { RELAY_AGENT_GRACE_S: '86400' }, log: openLog }),
  ]);
  processScenario = runProcessScenario();
  malformedKeyFailures = runMalformedKeypairs();
  // Judged by the tests at the end; marked handled here so a failure is reported there, not as unhandled.
  processScenario.catch(() => undefined);
  malformedKeyFailures.catch(() => undefined);
}, 90_000);

afterAll(async () => {
  await Promise.allSettled([processScenario, malformedKeyFailures]);
  await Promise.all([proc?.close(), guarded?.close(), open?.close()]);
  writeResults('security', figures);
});

// ------------------------------------------------------------------------------------------ the built process

/** Listening sockets on `port` from /proc/net/tcp{,6}: the kernel's own answer to "what is bound where". */
async function listenersOn(port: number): Promise<string[]> {
  const out: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const lines = (await readFile(file, 'utf8')).trim().split('\n').slice(1);
    for (const line of lines) {
      const [, local, , state] = line.trim().split(/\s+/);
      const [addr, portHex] = (local ?? '').split(':');
      if (state !== '0A' || parseInt(portHex ?? '', 16) !== port || !addr) continue;
      if (addr.length === 8) {
        out.push(
          (addr.match(/../g) ?? [])
            .reverse()
            .map((h) => parseInt(h, 16))
            .join('.'),
        );
      } else {
        out.push(`ipv6:${addr}`);
      }
    }
  }
  return out;
}

function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.setTimeout(3000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.on('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

// ------------------------------------------------------------------------------------------- the bearer token

type Route = { method: string; path: string; body?: string; chunked?: boolean; stream?: boolean };

describe('RELAY_API_TOKEN on every route but /healthz', () => {
  const validSubmit = JSON.stringify({ tx_id: 'tx_none', tip_lamports: 10_000, reason: 'auth' });
  /** Request bodies and queries for the routes that need one; any other route is sent bare (POSTs with `{}`). */
  const samples: Record<string, { body?: string; query?: string }> = {
    'POST /tx/enqueue': { body: '{"transaction":"AAAA"}' },
    'POST /internal/submit': { body: validSubmit },
    'POST /internal/mode': { body: '{"decision_mode":"reflex"}' },
    'GET /lifecycle': { query: 'last=5' },
    'GET /internal/agent/presence': { query: 'model=m&provider=p' },
  };
  const pathParams: Record<string, string> = { tx_id: 'tx_none', bundle_id: '0'.repeat(64) };
  /** Ways in that are not operations of the API: another framing, odd paths and methods. */
  const extras: Route[] = [
    { method: 'POST', path: '/tx/enqueue', body: '{"transaction":"AAAA"}', chunked: true },
    { method: 'POST', path: '/tx/enqueue?x=1', body: '{"transaction":"AAAA"}' },
    { method: 'GET', path: '/' },
    { method: 'GET', path: '/no-such-route' },
    { method: 'DELETE', path: '/tx/tx_none' },
    { method: 'OPTIONS', path: '/tx/enqueue' },
    { method: 'HEAD', path: '/status' },
  ];
  /** Every operation the sidecar's /openapi.json declares (but the public ones), then the extras. */
  let routes: Route[] = [];
  let api: ApiRoute[] = [];

  beforeAll(async () => {
    const doc = await rawRequest(guarded.sidecar.url, '/openapi.json', { headers: AUTH });
    expect(doc.status).toBe(200);
    api = openApiRoutes(doc.json);
    routes = [
      ...api
        .filter((route) => !route.public)
        .map((route): Route => {
          const sample = samples[`${route.method} ${route.path}`] ?? {};
          const path = route.path.replace(/\{([^}/]+)\}/g, (_, name: string) => pathParams[name] ?? 'x');
          const body = sample.body ?? (['POST', 'PUT', 'PATCH'].includes(route.method) ? '{}' : undefined);
          return {
            method: route.method,
            path: sample.query ? `${path}?${sample.query}` : path,
            ...(body !== undefined ? { body } : {}),
            ...(route.stream ? { stream: true } : {}),
          };
        }),
      ...extras,
    ];
  });

  test('the route list is the API: /openapi.json declares exactly what app.ts registers, only /healthz is public', () => {
    const declared = api.map((route) => route.key).sort();
    expect(declared.length).toBeGreaterThanOrEqual(19);
    expect(sourceRoutes().sort()).toEqual(declared);
    expect(api.filter((route) => route.public).map((route) => route.key)).toEqual(['GET /healthz']);
    expect(routes).toHaveLength(declared.length - 1 + extras.length);
  });

  const badCredentials: Array<[string, Record<string, string>, string]> = [
    ['none', {}, 'RELAY_E_AUTH_MISSING_TOKEN'],
    ['bare scheme', { authorization: 'Bearer' }, 'RELAY_E_AUTH_INVALID_TOKEN'],
    ['wrong token', { authorization: 'Bearer not-the-token' }, 'RELAY_E_AUTH_INVALID_TOKEN'],
    ['one char longer', { authorization: `Bearer ${TOKEN}0` }, 'RELAY_E_AUTH_INVALID_TOKEN'],
    ['one char shorter', { authorization: `Bearer ${TOKEN.slice(0, -1)}` }, 'RELAY_E_AUTH_INVALID_TOKEN'],
    ['upper-cased', { authorization: `Bearer ${TOKEN.toUpperCase()}` }, 'RELAY_E_AUTH_INVALID_TOKEN'],
    ['no scheme', { authorization: TOKEN }, 'RELAY_E_AUTH_INVALID_TOKEN'],
    [
      'Basic scheme',
      { authorization: `Basic ${Buffer.from(`relay:${TOKEN}`).toString('base64')}` },
      'RELAY_E_AUTH_INVALID_TOKEN',
    ],
    ['as a cookie', { cookie: `token=${TOKEN}` }, 'RELAY_E_AUTH_MISSING_TOKEN'],
    ['as x-api-key', { 'x-api-key': TOKEN }, 'RELAY_E_AUTH_MISSING_TOKEN'],
  ];

  const send = (route: Route, headers: Record<string, string>, query = '') =>
    rawRequest(guarded.sidecar.url, route.path + (query && (route.path.includes('?') ? '&' : '?') + query), {
      method: route.method,
      headers: { ...headers, ...(route.body ? { 'content-type': 'application/json' } : {}) },
      ...(route.body ? { body: route.body } : {}),
      ...(route.chunked ? { chunked: true } : {}),
      ...(route.stream ? { headersOnly: true } : {}),
    }).then((answer) => count('token', answer));

  /** A token in the query string is not a credential. */
  const queryParams = ['token', 'access_token', 'api_token'];

  test('every route refuses a missing or wrong token with 401 and a precise code', async () => {
    const failures: string[] = [];
    let checked = 0;
    let refusals = 0;
    for (const route of routes) {
      for (const [name, headers, code] of badCredentials) {
        const answer = await send(route, headers);
        checked++;
        refusals += answer.status === 401 ? 1 : 0;
        const gotCode = route.method === 'HEAD' ? code : answer.json?.error?.code;
        if (answer.status !== 401 || gotCode !== code) {
          failures.push(`${route.method} ${route.path} with ${name}: ${answer.status} ${gotCode}`);
        }
        if (answer.text.includes(TOKEN) || answer.text.includes(TOKEN.slice(0, -1))) {
          failures.push(`${route.method} ${route.path} with ${name}: the answer echoes the token`);
        }
      }
      for (const param of queryParams) {
        const answer = await send(route, {}, `${param}=${TOKEN}`);
        checked++;
        refusals += answer.status === 401 ? 1 : 0;
        const gotCode = route.method === 'HEAD' ? 'RELAY_E_AUTH_MISSING_TOKEN' : answer.json?.error?.code;
        if (answer.status !== 401 || gotCode !== 'RELAY_E_AUTH_MISSING_TOKEN')
          failures.push(`${route.method} ${route.path} with ?${param}=: ${answer.status} ${gotCode}`);
      }
    }
    figures.token_route_matrix.routes = routes.length;
    figures.token_route_matrix.bad_credentials = badCredentials.length + queryParams.length;
    figures.token_route_matrix.checked = checked;
    figures.token_route_matrix.refusals = refusals;
    expect(failures).toEqual([]);
    expect(checked).toBe(routes.length * (badCredentials.length + queryParams.length));
    expect(refusals).toBe(checked);
  }, 60_000);

  test('the right token opens every route, SSE included; /healthz needs none', async () => {
    let streams = 0;
    for (const route of routes) {
      const answer = await send(route, AUTH);
      expect([route.method, route.path, answer.status === 401]).toEqual([route.method, route.path, false]);
      // /readyz answers 503 RELAY_E_NOT_READY here (no agent, fallback grace of a day): not an auth refusal.
      if (route.path === '/readyz' && route.method === 'GET')
        expect(answer.json.error.code).toBe('RELAY_E_NOT_READY');
      else expect([route.path, answer.status < 500]).toEqual([route.path, true]);
      // An existing stream answers as one (a stream of an unknown transaction is a 404, also past the token).
      if (route.stream && answer.status === 200) {
        streams++;
        expect([route.path, answer.headers['content-type']]).toEqual([
          route.path,
          expect.stringMatching(/^text\/event-stream/),
        ]);
      }
    }
    expect(streams).toBeGreaterThanOrEqual(2); // /internal/events and the presence stream at least
    // A scheme in any case is the same scheme (RFC 9110).
    const status = routes.find((route) => route.method === 'GET' && route.path === '/status')!;
    expect((await send(status, { authorization: `bearer ${TOKEN}` })).status).toBe(200);
    const health = count('token', await rawRequest(guarded.sidecar.url, '/healthz'));
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ ok: true });
  }, 30_000);
});

// ---------------------------------------------------------------------------------- CORS, Origin and Host

describe('browsers: CORS closed, cross-site writes and DNS rebinding refused (no token configured)', () => {
  const foreignOrigins = [
    'https://evil.example',
    'null',
    'http://127.0.0.1:1', // another local port: same site, other origin
    'http://localhost.evil.example',
  ];
  const req = (path: string, options: Parameters<typeof rawRequest>[2] = {}) =>
    rawRequest(open.sidecar.url, path, options).then((answer) => count('cors_and_host', answer));

  test('no Access-Control-Allow-* for a foreign Origin, preflight or not', async () => {
    const failures: string[] = [];
    for (const origin of foreignOrigins) {
      for (const path of [
        '/tx/enqueue',
        '/internal/submit',
        '/internal/mode',
        '/status',
        '/internal/events',
      ]) {
        const preflight = await req(path, {
          method: 'OPTIONS',
          headers: {
            origin,
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'content-type, authorization',
          },
        });
        if (corsHeaders(preflight.headers).length > 0 || preflight.status < 400)
          failures.push(
            `OPTIONS ${path} from ${origin}: ${preflight.status} ${corsHeaders(preflight.headers)}`,
          );
      }
      for (const path of ['/status', '/policy', '/internal/mode', '/metrics']) {
        const answer = await req(path, { headers: { origin } });
        if (corsHeaders(answer.headers).length > 0 || answer.status !== 403)
          failures.push(`GET ${path} from ${origin}: ${answer.status} ${corsHeaders(answer.headers)}`);
        else if (answer.json?.error?.code !== 'RELAY_E_AUTH_FORBIDDEN_ORIGIN')
          failures.push(`GET ${path} from ${origin}: code ${answer.json?.error?.code}`);
      }
    }
    expect(failures).toEqual([]);
  }, 30_000);

  test('"simple" cross-site POSTs (text/plain, forms) change nothing', async () => {
    const recorder = recordBundles(open.simnet);
    try {
      const queueBefore = (await get(open.sidecar.url, '/queue')).body.pending;
      const modeBefore = (await get(open.sidecar.url, '/internal/mode')).body.decision_mode;
      const otherMode = modeBefore === 'reflex' ? 'cortex' : 'reflex';
      const wire = open.transfer(31);
      const bodies: Record<string, string> = {
        '/tx/enqueue': JSON.stringify({ transaction: wire }),
        '/internal/mode': JSON.stringify({ decision_mode: otherMode }),
        '/internal/submit': JSON.stringify({ tx_id: 'tx_x', tip_lamports: 10_000, reason: 'csrf' }),
      };
      const types = [
        'text/plain',
        'text/plain;charset=UTF-8',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=----x',
        'text/plain; application/json',
      ];
      const failures: string[] = [];
      for (const [path, body] of Object.entries(bodies)) {
        for (const type of types) {
          for (const origin of [undefined, 'https://evil.example']) {
            const answer = await req(path, {
              method: 'POST',
              headers: { 'content-type': type, ...(origin ? { origin } : {}) },
              body,
            });
            if (answer.status !== 415 && answer.status !== 403)
              failures.push(`${path} as ${type} from ${origin ?? '(no origin)'}: ${answer.status}`);
          }
        }
        // A JSON POST from a foreign page (a browser would preflight it; a forged one is refused anyway).
        const forged = await req(path, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: 'https://evil.example' },
          body,
        });
        if (forged.status !== 403) failures.push(`${path} JSON from a foreign origin: ${forged.status}`);
      }
      expect(failures).toEqual([]);
      expect((await get(open.sidecar.url, '/queue')).body.pending).toBe(queueBefore);
      expect((await get(open.sidecar.url, '/internal/mode')).body.decision_mode).toBe(modeBefore);
      expect(recorder.bundles).toEqual([]);
      expect(recorder.admissionRefusals()).toBe(0);

      // The dashboard is same-origin: its Origin equals the Host it talks to, and that works.
      const own = new URL(open.sidecar.url).origin;
      const sameOrigin = await req('/internal/mode', {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: own, 'sec-fetch-site': 'same-origin' },
        body: JSON.stringify({ decision_mode: otherMode }),
      });
      expect(sameOrigin.status).toBe(200);
      expect(corsHeaders(sameOrigin.headers)).toEqual([]);
      const back = await req('/internal/mode', {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: own },
        body: JSON.stringify({ decision_mode: modeBefore }),
      });
      expect(back.json.decision_mode).toBe(modeBefore);
    } finally {
      recorder.stop();
    }
  }, 30_000);

  test('a cross-site GET cannot register a fake agent (EventSource or <img>)', async () => {
    // Without the Origin / Sec-Fetch-Site check a page could hold this stream open and stand in for the agent,
    // which turns the sidecar's own fallback reflex off: nothing would be submitted while the page is open.
    const path = '/internal/agent/presence?model=evil&provider=evil';
    const viaEventSource = await req(path, {
      headers: { origin: 'https://evil.example', accept: 'text/event-stream' },
      headersOnly: true,
    });
    expect(viaEventSource.status).toBe(403);
    const viaImage = await req(path, {
      headers: { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors' },
      headersOnly: true,
    });
    expect(viaImage.status).toBe(403);
    expect(viaImage.json.error.code).toBe('RELAY_E_AUTH_FORBIDDEN_ORIGIN');
    const sameSite = await req(path, { headers: { 'sec-fetch-site': 'same-site' }, headersOnly: true });
    expect(sameSite.status).toBe(403);
    expect((await get(open.sidecar.url, '/internal/agent/info')).status).toBe(404);
    // A user typing the address (Sec-Fetch-Site: none) or a non-browser client is not a cross-site request.
    const typed = await req('/status', { headers: { 'sec-fetch-site': 'none' } });
    expect(typed.status).toBe(200);
  });

  test('DNS rebinding: a Host that is not a loopback name is refused while bound to loopback', async () => {
    const port = new URL(open.sidecar.url).port;
    const wire = open.transfer(32);
    const queueBefore = (await get(open.sidecar.url, '/queue')).body.pending;
    const failures: string[] = [];
    for (const host of [
      `evil.example:${port}`,
      'evil.example',
      `127.0.0.1.nip.io:${port}`,
      `10.0.0.1:${port}`,
      `localhost.evil.example:${port}`,
    ]) {
      const status = await req('/status', { headers: { host } });
      const enqueue = await req('/tx/enqueue', {
        method: 'POST',
        headers: { host, 'content-type': 'application/json' },
        body: JSON.stringify({ transaction: wire }),
      });
      const events = await req('/internal/events', { headers: { host }, headersOnly: true });
      for (const [what, answer] of [
        ['GET /status', status],
        ['POST /tx/enqueue', enqueue],
        ['GET /internal/events', events],
      ] as const) {
        if (answer.status !== 403) failures.push(`${what} with Host ${host}: ${answer.status}`);
      }
      if (status.json?.error?.code !== 'RELAY_E_AUTH_FORBIDDEN_HOST')
        failures.push(`Host ${host}: code ${status.json?.error?.code}`);
    }
    expect(failures).toEqual([]);
    expect((await get(open.sidecar.url, '/queue')).body.pending).toBe(queueBefore);
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `LOCALHOST:${port}`,
      `[::1]:${port}`,
      `127.0.0.2:${port}`,
      `dashboard.localhost:${port}`,
    ]) {
      const answer = await req('/status', { headers: { host } });
      expect([host, answer.status]).toEqual([host, 200]);
    }
  }, 30_000);

  test('the `relay web` dev server (its proxy forwards Origin and Host 127.0.0.1:5173) is the dashboard; other pages through it are not', async () => {
    // What apps/web/vite.config.ts makes the dev server forward: with changeOrigin false, the browser's own Host
    // (the dev server's address) and Origin reach the sidecar unchanged, plus Sec-Fetch-Site: same-origin.
    const config = await readFile(join(__dirname, '..', '..', '..', 'apps', 'web', 'vite.config.ts'), 'utf8');
    expect(config).toMatch(/changeOrigin:\s*false/);
    const devPort = /WEB_PORT \?\? (\d+)/.exec(config)?.[1];
    const devHost = /server:\s*\{\s*host:\s*'([^']+)'/.exec(config)?.[1];
    expect([devHost, devPort]).toEqual(['127.0.0.1', '5173']);
    const dev = `${devHost}:${devPort}`;
    const modeBefore = (await get(open.sidecar.url, '/internal/mode')).body.decision_mode;
    const otherMode = modeBefore === 'reflex' ? 'cortex' : 'reflex';
    const failures: string[] = [];
    // The dashboard page served by the dev server, as 127.0.0.1 or as localhost (both resolve to it).
    for (const [host, origin] of [
      [dev, `http://${dev}`],
      [`localhost:${devPort}`, `http://localhost:${devPort}`],
    ] as const) {
      const page = { host, origin, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors' };
      const status = await req('/status', { headers: page });
      const events = await req('/internal/events', {
        headers: { ...page, accept: 'text/event-stream' },
        headersOnly: true,
      });
      const toggled = await req('/internal/mode', {
        method: 'POST',
        headers: { ...page, 'content-type': 'application/json' },
        body: JSON.stringify({ decision_mode: otherMode }),
      });
      const back = await req('/internal/mode', {
        method: 'POST',
        headers: { ...page, 'content-type': 'application/json' },
        body: JSON.stringify({ decision_mode: modeBefore }),
      });
      for (const [what, answer, want] of [
        ['GET /status', status, 200],
        ['GET /internal/events', events, 200],
        ['POST /internal/mode', toggled, 200],
        ['POST /internal/mode back', back, 200],
      ] as const) {
        if (answer.status !== want)
          failures.push(`${what} via ${origin}: ${answer.status} ${answer.text.slice(0, 120)}`);
        if (corsHeaders(answer.headers).length > 0) failures.push(`${what} via ${origin}: CORS headers`);
      }
      if (toggled.json?.decision_mode !== otherMode) failures.push(`mode via ${origin}: ${toggled.text}`);
      if (!/^text\/event-stream/.test(String(events.headers['content-type'])))
        failures.push(`events via ${origin}: ${String(events.headers['content-type'])}`);
    }
    // Another page reaching the sidecar through the dev server: a different origin than the Host it came in on.
    for (const origin of [
      `http://127.0.0.1:${Number(devPort) + 1}`,
      `http://localhost:${devPort}`, // not the origin of 127.0.0.1:5173
      'https://evil.example',
    ]) {
      const forged = await req('/internal/mode', {
        method: 'POST',
        headers: { host: dev, origin, 'content-type': 'application/json' },
        body: JSON.stringify({ decision_mode: otherMode }),
      });
      if (forged.status !== 403 || forged.json?.error?.code !== 'RELAY_E_AUTH_FORBIDDEN_ORIGIN')
        failures.push(
          `POST /internal/mode via ${dev} from ${origin}: ${forged.status} ${forged.json?.error?.code}`,
        );
      const preflight = await req('/internal/mode', {
        method: 'OPTIONS',
        headers: { host: dev, origin, 'access-control-request-method': 'POST' },
      });
      if (corsHeaders(preflight.headers).length > 0 || preflight.status < 400)
        failures.push(
          `OPTIONS via ${dev} from ${origin}: ${preflight.status} ${corsHeaders(preflight.headers)}`,
        );
    }
    expect(failures).toEqual([]);
    expect((await get(open.sidecar.url, '/internal/mode')).body.decision_mode).toBe(modeBefore);
  }, 30_000);

  test('body and header size limits: 413 / 431, and the sidecar stays up', async () => {
    const limit = 256 * 1024;
    const padded = (size: number) => {
      const head = '{"transaction":"';
      return `${head}${'A'.repeat(size - head.length - 2)}"}`;
    };
    const lim = (path: string, options: Parameters<typeof rawRequest>[2]) =>
      rawRequest(open.sidecar.url, path, options).then((answer) => count('limits', answer));
    const over = await lim('/tx/enqueue', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: padded(limit + 1),
    });
    expect(over.status).toBe(413);
    expect(over.json.error.code).toBe('RELAY_E_REQUEST_BODY_TOO_LARGE');
    const atLimit = await lim('/tx/enqueue', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: padded(limit),
    });
    expect(atLimit.status).toBeGreaterThanOrEqual(400);
    expect(atLimit.status).not.toBe(413);
    expect(atLimit.status).toBeLessThan(500);
    // No Content-Length: counted while streaming, refused at the limit, not buffered whole.
    const chunked = await lim('/tx/enqueue', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: padded(2 * 1024 * 1024),
      chunked: true,
    }).catch((error: Error) => ({ status: -1, json: null, text: error.message }) as unknown as RawAnswer);
    expect([chunked.status, chunked.json?.error?.code]).toEqual([413, 'RELAY_E_REQUEST_BODY_TOO_LARGE']);
    for (const path of ['/internal/submit', '/internal/mode']) {
      const big = await lim(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tx_id: 'tx_x', tip_lamports: 1, reason: 'r'.repeat(limit) }),
      });
      expect([path, big.status]).toEqual([path, 413]);
    }
    const header = await lim('/status', { headers: { 'x-pad': 'h'.repeat(64 * 1024) } });
    expect(header.status).toBe(431);
    const deep = await lim('/tx/enqueue', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
    });
    expect(deep.status).toBeGreaterThanOrEqual(400);
    expect(deep.status).toBeLessThan(500);
    expect((await get(open.sidecar.url, '/healthz')).status).toBe(200);
  }, 30_000);

  test('the in-process logs of both sidecars hold no token and no key bytes', () => {
    const haystacks = { 'guarded sidecar log': guardedLog.text, 'open sidecar log': openLog.text };
    const needles = [
      ...keypairNeedles(guarded.tipper.secretKey),
      ...keypairNeedles(open.tipper.secretKey),
      ...credentialNeedles('RELAY_API_TOKEN', TOKEN),
    ];
    const leaks = findLeaks(haystacks, needles);
    figures.leak_search.needles += needles.length;
    figures.leak_search.haystacks += 2;
    figures.leak_search.pairs += needles.length * 2;
    figures.leak_search.characters += haystackBytes(haystacks);
    figures.leak_search.leaks += leaks.length;
    expect(leaks).toEqual([]);
  });
});

// ------------------------------------------------------------------------------------- policy on /internal/submit

describe('the policy holds against hand-crafted /internal/submit bodies', () => {
  let recorder: ReturnType<typeof recordBundles>;
  const accepted = new Map<string, { txId: string; tip: number }>();
  let tipperBefore = 0;

  beforeAll(() => {
    recorder = recordBundles(guarded.simnet);
    tipperBefore = guarded.simnet.cluster.getBalance(guarded.tipper.publicKey.toBase58());
  });
  afterAll(() => recorder?.stop());

  const url = () => guarded.sidecar.url;
  async function submit(body: unknown): Promise<RawAnswer> {
    const answer = count(
      'policy',
      await rawRequest(url(), '/internal/submit', {
        method: 'POST',
        headers: { ...AUTH, 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    );
    if (answer.status === 202) {
      figures.policy.accepted++;
      accepted.set(answer.json.bundle_id, { txId: answer.json.tx_id, tip: answer.json.tip_lamports });
    } else if (answer.json?.error?.code) {
      const code = answer.json.error.code as string;
      figures.policy.refusals_by_code[code] = (figures.policy.refusals_by_code[code] ?? 0) + 1;
    }
    return answer;
  }
  async function enqueue(extra: Record<string, unknown> = {}): Promise<string> {
    const answer = await post(url(), '/tx/enqueue', { transaction: guarded.transfer(7), ...extra }, AUTH);
    expect(answer.status).toBe(202);
    return answer.body.tx_id;
  }
  const record = async (txId: string) => (await get(url(), `/tx/${txId}`, AUTH)).body;
  const refused = (answer: RawAnswer) => ({
    status: answer.status,
    code: answer.json?.error?.code,
    key: answer.json?.error?.details?.key,
    field: answer.json?.error?.details?.field,
    limit: answer.json?.error?.details?.limit,
  });
  const waitRetries = (txId: string, retries: number) =>
    waitUntil(
      async () => {
        const tx = await record(txId);
        return tx.retries >= retries && tx.attempts.every((a: { stage: string }) => a.stage === 'failed')
          ? tx
          : null;
      },
      30_000,
      `${txId} to settle ${retries} failed attempt(s)`,
    );

  let capped: string;
  let plain: string;

  test('tips outside [min-tip, max-tip], above the caller max_tip, or not lamports are refused', async () => {
    capped = await enqueue({ max_tip: 60_000 });
    plain = await enqueue();
    const base = { tx_id: plain, reason: 'hand-crafted' };
    expect(refused(await submit({ tx_id: capped, reason: 'x', tip_lamports: 60_001 }))).toMatchObject({
      status: 422,
      code: 'RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED',
      key: 'max_tip',
      limit: 60_000,
    });
    for (const tip of [200_001, 10_000_000, Number.MAX_SAFE_INTEGER]) {
      expect(refused(await submit({ ...base, tip_lamports: tip }))).toMatchObject({
        status: 422,
        code: 'RELAY_E_POLICY_MAX_TIP_EXCEEDED',
        key: 'max-tip',
        limit: 200_000,
      });
    }
    for (const tip of [999, 0]) {
      expect(refused(await submit({ ...base, tip_lamports: tip }))).toMatchObject({
        status: 422,
        code: 'RELAY_E_POLICY_MIN_TIP_NOT_MET',
        key: 'min-tip',
      });
    }
    expect(refused(await submit(`{"tx_id":"${plain}","reason":"x","tip_lamports":-0}`)).code).toBe(
      'RELAY_E_POLICY_MIN_TIP_NOT_MET',
    );
    for (const tip of [-1, 1.5, 1e20, 2 ** 53, 1e308, '5000', null, true, [5000], {}, '']) {
      expect([tip, refused(await submit({ ...base, tip_lamports: tip }))]).toEqual([
        tip,
        expect.objectContaining({
          status: 400,
          code: 'RELAY_E_REQUEST_INVALID_FIELD',
          field: 'tip_lamports',
        }),
      ]);
    }
    for (const text of [
      `{"tx_id":"${plain}","reason":"x","tip_lamports":1e400}`,
      `{"tx_id":"${plain}","reason":"x","tip_lamports":-1e400}`,
    ]) {
      expect(refused(await submit(text)).status).toBe(400);
    }
  });

  test('wrong shapes, unknown keys and unknown transactions are refused by name', async () => {
    const base = { tx_id: plain, tip_lamports: 10_000, reason: 'x' };
    const cases: Array<[unknown, number, string, string | undefined]> = [
      [{ ...base, tx_id: 5 }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'tx_id'],
      [{ ...base, tx_id: '' }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'tx_id'],
      [{ tx_id: plain, tip_lamports: 10_000 }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'reason'],
      [{ ...base, reason: 'r'.repeat(2001) }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'reason'],
      [{ ...base, bypass: true }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'bypass'],
      [{ ...base, source: 'bypass' }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'source'],
      [{ ...base, max_tip: 10_000_000 }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'max_tip'],
      [{ ...base, policy: { 'max-tip': 1e9 } }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'policy'],
      [{ ...base, escalated: 'yes' }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'escalated'],
      [{ ...base, decision_mode: 'bypass' }, 400, 'RELAY_E_REQUEST_INVALID_FIELD', 'decision_mode'],
      [
        `{"tx_id":"${plain}","tip_lamports":10000,"reason":"x","__proto__":{"tip_lamports":1}}`,
        400,
        'RELAY_E_REQUEST_INVALID_FIELD',
        '__proto__',
      ],
      [[base], 400, 'RELAY_E_REQUEST_INVALID_FIELD', undefined],
      ['null', 400, 'RELAY_E_REQUEST_INVALID_FIELD', undefined],
      ['"submit"', 400, 'RELAY_E_REQUEST_INVALID_FIELD', undefined],
      [{ ...base, tx_id: 'tx_01NOSUCHTRANSACTION' }, 404, 'RELAY_E_TX_NOT_FOUND', undefined],
    ];
    for (const [body, status, code, field] of cases) {
      const answer = refused(await submit(body));
      expect([body, answer.status, answer.code]).toEqual([body, status, code]);
      if (field) expect([body, answer.field]).toEqual([body, field]);
    }
    expect(recorder.bundles).toEqual([]);
    expect((await record(plain)).attempts).toEqual([]);
  });

  test('one attempt at a time: a duplicate or concurrent submit is refused, one bundle is sent', async () => {
    guarded.simnet.engine.auction.setFixedClearingTip(10_000_000); // every bid loses: attempts fail, retries
    const txId = await enqueue();
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => submit({ tx_id: txId, tip_lamports: 10_000, reason: 'race' })),
    );
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    for (const answer of answers.filter((a) => a.status !== 202)) {
      expect(refused(answer)).toMatchObject({ status: 409, code: 'RELAY_E_TX_WRONG_STATE' });
    }
    expect(refused(await submit({ tx_id: txId, tip_lamports: 10_000, reason: 'again' })).code).toBe(
      'RELAY_E_TX_WRONG_STATE',
    );
    const sigs = (await record(txId)).tx_signatures as string[];
    await waitUntil(
      () => recorder.bundles.some((b) => b.signatures.includes(sigs[0]!)),
      10_000,
      'the bundle',
    );
    expect(recorder.bundles.filter((b) => b.signatures.includes(sigs[0]!))).toHaveLength(1);

    // escalation-step bounds the retry; max-retries (1) stops the third attempt.
    await waitRetries(txId, 1);
    expect(refused(await submit({ tx_id: txId, tip_lamports: 60_001, reason: 'too far' }))).toMatchObject({
      status: 422,
      code: 'RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED',
      key: 'escalation-step',
      limit: 60_000,
    });
    expect((await submit({ tx_id: txId, tip_lamports: 60_000, reason: 'one step' })).status).toBe(202);
    await waitRetries(txId, 2);
    const stopped = await submit({ tx_id: txId, tip_lamports: 60_000, reason: 'a third' });
    expect(refused(stopped)).toMatchObject({ status: 409, code: 'RELAY_E_TX_WRONG_STATE' });
    expect(stopped.json.error.details.state).toMatch(/attempts stopped/);
    const sent = recorder.bundles.filter((b) => b.signatures.includes(sigs[0]!));
    expect(sent.map((b) => b.tipLamports)).toEqual([10_000, 60_000]);
  }, 60_000);

  test('a policy lowered at runtime binds the very next submit', async () => {
    const txId = await enqueue();
    expect((await submit({ tx_id: txId, tip_lamports: 20_000, reason: 'first' })).status).toBe(202);
    await waitRetries(txId, 1);
    await applyPolicy(guarded, { ...POLICY, 'max-retries': 0, 'max-tip': 50_000 }, AUTH);
    expect(refused(await submit({ tx_id: txId, tip_lamports: 20_000, reason: 'retry' }))).toMatchObject({
      status: 422,
      code: 'RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED',
      key: 'max-retries',
      limit: 0,
    });
    expect(refused(await submit({ tx_id: plain, tip_lamports: 50_001, reason: 'old cap' }))).toMatchObject({
      status: 422,
      code: 'RELAY_E_POLICY_MAX_TIP_EXCEEDED',
      limit: 50_000,
    });
    await applyPolicy(guarded, { ...POLICY, 'spend-limit': 400_000 }, AUTH);
    guarded.resetAuction(); // bids of 5,000 and up land again
  }, 60_000);

  test('spend-limit caps the tips reserved in the rolling hour, landed ones included', async () => {
    const first = await enqueue();
    const second = await enqueue();
    expect((await submit({ tx_id: first, tip_lamports: 200_000, reason: 'big' })).status).toBe(202);
    expect((await submit({ tx_id: second, tip_lamports: 190_000, reason: 'big too' })).status).toBe(202);
    // 205,000 + 195,000 reserved (tips + fees): one more lamport-bearing attempt would pass 400,000.
    expect(refused(await submit({ tx_id: plain, tip_lamports: 1000, reason: 'over' }))).toMatchObject({
      status: 422,
      code: 'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED',
      key: 'spend-limit',
      limit: 400_000,
    });
    // Finalized within a minute: a CI run with the route fuzz beside it once took longer than the 30 s this allowed
    // (not reproduced alone: ~2.5 s); the state it was in is named if it times out.
    for (const txId of [first, second]) {
      await waitUntil(
        async () => (await record(txId)).state === 'finalized',
        60_000,
        `${txId} finalized`,
      ).catch(async (error: unknown) => {
        throw new Error(`${(error as Error).message}; its record: ${JSON.stringify(await record(txId))}`);
      });
    }
    // Landed tips stay reserved; a terminal transaction takes no attempt.
    expect(refused(await submit({ tx_id: plain, tip_lamports: 1000, reason: 'still over' })).code).toBe(
      'RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED',
    );
    const terminal = await submit({ tx_id: first, tip_lamports: 1000, reason: 'after the end' });
    expect(refused(terminal)).toMatchObject({ status: 409, code: 'RELAY_E_TX_WRONG_STATE' });
    expect(terminal.json.error.details.state).toBe('finalized');
  }, 120_000);

  test('expiry-slots and a caller-paid tip bound the attempt too', async () => {
    const expiring = await enqueue({ expiry_slots: 1 });
    const { expires_at_slot } = await record(expiring);
    await waitUntil(
      async () => (await get(url(), '/status', AUTH)).body.slot > expires_at_slot,
      10_000,
      'the expiry slot to pass',
    );
    // Refused either by the submit check itself or, once the sidecar's expiry sweep has stopped the
    // transaction, as a transaction that takes no more attempts: both are precise, neither sends anything.
    const late = await submit({ tx_id: expiring, tip_lamports: 1000, reason: 'late' });
    if (late.status === 422) {
      expect(refused(late)).toMatchObject({
        code: 'RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED',
        key: 'expiry-slots',
      });
    } else {
      expect(refused(late)).toMatchObject({ status: 409, code: 'RELAY_E_TX_WRONG_STATE' });
      expect(late.json.error.details.state).toMatch(/attempts stopped|expired/);
    }
    expect((await record(expiring)).attempts).toEqual([]);
    const included = await enqueue({ tip: 'included' });
    expect(refused(await submit({ tx_id: included, tip_lamports: 5000, reason: 'raise' }))).toMatchObject({
      status: 422,
      code: 'RELAY_E_TX_TIP_NOT_RAISABLE',
    });
  }, 30_000);

  test('the block engine received nothing beyond policy, and the tipper paid exactly the landed tips', async () => {
    // Every bundle that reached the engine, accepted or refused; and nothing was turned away unseen at its door.
    figures.policy.bundles_received = recorder.bundles.length;
    figures.policy.bundles_refused_by_engine = recorder.bundles.filter((b) => !b.accepted).length;
    figures.policy.engine_admission_refusals = recorder.admissionRefusals();
    expect(recorder.admissionRefusals()).toBe(0);
    const submitted = new Map<string, string[]>(); // tx_id -> its signatures, for the accepted submits
    for (const { txId } of accepted.values())
      submitted.set(txId, (await record(txId)).tx_signatures as string[]);
    for (const bundle of recorder.bundles) {
      expect(bundle.tipLamports).toBeGreaterThanOrEqual(POLICY['min-tip']);
      expect(bundle.tipLamports).toBeLessThanOrEqual(POLICY['max-tip']);
      if (bundle.accepted) {
        expect(accepted.has(bundle.bundleId!)).toBe(true);
        expect(bundle.tipLamports).toBe(accepted.get(bundle.bundleId!)!.tip);
      } else {
        // A refused bundle still has to be one relay was allowed to send: an accepted submit's, at its tip.
        const owner = [...accepted.values()].find(
          (a) =>
            a.tip === bundle.tipLamports &&
            (submitted.get(a.txId) ?? []).some((sig) => bundle.signatures.includes(sig)),
        );
        expect([bundle.refusal, owner === undefined]).toEqual([bundle.refusal, false]);
      }
    }
    const perTx = new Map<string, number>();
    for (const { txId } of accepted.values()) perTx.set(txId, (perTx.get(txId) ?? 0) + 1);
    for (const attempts of perTx.values()) expect(attempts).toBeLessThanOrEqual(1 + POLICY['max-retries']);
    const landed = recorder.bundles.filter(
      (b) => b.accepted && guarded.simnet.engine.getBundle(b.bundleId!)?.state === 'landed',
    );
    expect(landed.map((b) => b.tipLamports).sort()).toEqual([190_000, 200_000]);
    const paid = tipperBefore - guarded.simnet.cluster.getBalance(guarded.tipper.publicKey.toBase58());
    expect(paid).toBe(190_000 + 200_000 + 2 * 5000);
  });
});

/**
 * The built process's scenario, started in beforeAll and run while the in-process tests go on (the process has
 * its own core): bind check, traffic of every kind, a restart with the key file fixed, then every text the
 * sidecar wrote or answered. The tests at the end await it and judge.
 */
let processScenario: Promise<Record<string, string>>;
let malformedKeyFailures: Promise<Array<[string, string]>>;

async function runProcessScenario(): Promise<Record<string, string>> {
  const port = Number(new URL(proc.sidecar.url).port);
  expect(new URL(proc.sidecar.url).hostname).toBe('127.0.0.1');
  const listeners = await listenersOn(port);
  figures.bind.listeners = listeners;
  expect(listeners).toEqual(['127.0.0.1']);
  const external = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal);
  if (external) {
    const outcome = await tryConnect(external.address, port);
    figures.bind.non_loopback_probe = `${external.address}: ${outcome}`;
    expect(outcome).toBe('ECONNREFUSED');
  } else {
    figures.bind.non_loopback_probe = 'no non-loopback IPv4 interface on this machine';
  }
  const haystacks: Record<string, string> = {};
  const auth = { authorization: `Bearer ${procToken}` };
  const record = (name: string, answer: RawAnswer) => {
    count('process', answer);
    haystacks[name] = `${JSON.stringify(answer.headers)}\n${answer.text}`;
    return answer;
  };
  const url = () => proc.sidecar.url;
  await waitUntil(async () => (await get(url(), '/tip', auth)).body.source !== 'none', 15_000, 'tips');

  const events = await SseReader.open(`${url()}/internal/events`, auth);
  expect(events.status).toBe(200);
  const presence = await SseReader.open(
    `${url()}/internal/agent/presence?model=grep-model&provider=grep`,
    auth,
  );
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const answer = record(
      `enqueue ${i}`,
      await rawRequest(url(), '/tx/enqueue', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ transaction: proc.transfer(100 + i) }),
        chunked: i === 2, // the framework path too
      }),
    );
    expect(answer.status).toBe(202);
    ids.push(answer.json.tx_id);
  }
  const perTx = await SseReader.open(`${url()}/tx/events/${ids[0]}`, auth);
  for (const id of ids) {
    await waitUntil(
      async () => (await get(url(), `/tx/${id}`, auth)).body.state === 'finalized',
      30_000,
      `${id} finalized`,
    );
  }
  await perTx.waitFor((r) => r.ended, 10_000);

  // Refused credentials, each echoing something close to the token.
  const wrong = [
    `Bearer ${procToken}x`,
    `Bearer ${procToken.slice(0, -1)}`,
    `Basic ${Buffer.from(`relay:${procToken}`).toString('base64')}`,
    procToken,
    `Token ${procToken}`,
  ];
  for (const [i, authorization] of wrong.entries()) {
    const answer = record(
      `wrong credential ${i}`,
      await rawRequest(url(), '/status', { headers: { authorization } }),
    );
    expect(answer.status).toBe(401);
  }
  record(`token in the query`, await rawRequest(url(), `/status?token=${procToken}`));
  // Error answers with the right token.
  const errors: Array<[string, string, unknown]> = [
    ['POST', '/tx/enqueue', { transaction: 'AAAA' }],
    ['POST', '/tx/enqueue', { transaction: proc.transfer(1), max_tip: -1 }],
    ['POST', '/internal/submit', { tx_id: ids[0], tip_lamports: 10_000, reason: 'again' }],
    ['POST', '/internal/submit', { tx_id: 'tx_unknown', tip_lamports: 10_000, reason: 'x' }],
    ['POST', '/internal/mode', { decision_mode: 'turbo' }],
    ['GET', '/tx/tx_unknown', undefined],
    ['GET', '/bundle/zz', undefined],
    ['GET', '/nope', undefined],
  ];
  for (const [method, path, body] of errors) {
    const answer = record(
      `${method} ${path} ${JSON.stringify(body)}`,
      await rawRequest(url(), path, {
        method,
        headers: { ...auth, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.status).toBeLessThan(500);
  }
  const bundleId = (await get(url(), `/tx/${ids[0]}`, auth)).body.attempts[0].bundle_id as string;
  for (const path of [
    '/status',
    '/tip',
    '/queue',
    '/lifecycle?last=100',
    '/policy',
    '/metrics',
    '/readyz',
    '/openapi.json',
    '/internal/mode',
    '/internal/agent/info',
    `/tx/${ids[0]}`,
    `/bundle/${bundleId}`,
  ]) {
    const answer = record(`GET ${path}`, await rawRequest(url(), path, { headers: auth }));
    expect(answer.status).toBeLessThan(500);
  }
  // The tipper's public key is shown on purpose: proof that the search sees real content.
  expect(haystacks['GET /status']).toContain(proc.tipper.publicKey.toBase58());

  // Restart on the same files with the key file fixed (0600): recovery logs too, and no permission warning.
  events.close();
  presence.close();
  haystacks['SSE /internal/events'] = events.messages.map((m) => `${m.id} ${m.event} ${m.data}`).join('\n');
  haystacks['SSE /tx/events'] = perTx.messages.map((m) => `${m.id} ${m.event} ${m.data}`).join('\n');
  haystacks['SSE presence'] = presence.messages.map((m) => `${m.event} ${m.data}`).join('\n');
  expect(events.events('tx_status_changed').length).toBeGreaterThan(0);
  keyMode = 0o600;
  // The second run: the agent process decides, in cortex mode, with the simnet's Messages endpoint as its model
  // (which takes only `anthropicKey`), and the CLI inspects what it did.
  await proc.restart({ BYPASS_AGENT: '0', AGENT_DECISION_MODE: 'cortex' });
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' };
  const agent = startNode(AGENT_MAIN, {
    ...base,
    RELAY_URL: url(),
    RELAY_API_TOKEN: procToken,
    ANTHROPIC_API_KEY: anthropicKey,
    ANTHROPIC_BASE_URL: proc.simnet.endpoints.anthropicBaseUrl,
  });
  let agentRun: ProcessRun;
  try {
    await waitUntil(
      async () => (await get(url(), '/internal/agent/info', auth)).status === 200,
      30_000,
      'the agent to register',
    );
    const modelCallsBefore = proc.simnet.llm.requests.length;
    const afterIds: string[] = [];
    for (let i = 0; i < 2; i++) {
      const after = record(
        `enqueue after restart ${i}`,
        await rawRequest(url(), '/tx/enqueue', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ transaction: proc.transfer(200 + i) }),
        }),
      );
      expect(after.status).toBe(202);
      afterIds.push(after.json.tx_id);
    }
    for (const id of afterIds) {
      await waitUntil(
        async () => (await get(url(), `/tx/${id}`, auth)).body.state === 'finalized',
        30_000,
        `${id} finalized after restart`,
      );
    }
    // The model was asked, with the key (the simnet refuses any other), and cortex's traces are in the lifecycle.
    const modelCalls = proc.simnet.llm.requests.slice(modelCallsBefore);
    expect(modelCalls.length).toBeGreaterThan(0);
    expect(modelCalls.every((call) => call.headers.apiKey || call.headers.authorization)).toBe(true);
    const entries = (await get(url(), '/lifecycle?last=100', auth)).body.entries as Array<{
      tx_id: string;
      bundle_id: string;
      decision_mode: string;
      ai_decision_trace: unknown;
    }>;
    const cortex = entries.filter(
      (e) => afterIds.includes(e.tx_id) && e.decision_mode === 'cortex' && e.ai_decision_trace,
    );
    expect(cortex.length).toBeGreaterThan(0);
    figures.agent.cortex_decisions = cortex.length;
    figures.agent.model_calls = modelCalls.length;

    // The CLI's inspect commands, with the token, as an operator runs them; then one with a wrong token.
    const cliEnv = { ...base, RELAY_URL: url(), RELAY_API_TOKEN: procToken, NO_COLOR: '1' };
    const bundle = cortex[0]!.bundle_id;
    const commands = [
      ['status'],
      ['status', '--json'],
      ['tip'],
      ['queue', '--json'],
      ['lifecycle', '--last', '50'],
      ['lifecycle', '--json'],
      ['bundle', bundle],
      ['bundle', bundle, '--json'],
    ];
    const runs = await Promise.all(commands.map((args) => runNode(CLI_BIN, args, cliEnv)));
    for (const [i, run] of runs.entries()) {
      const name = `relay ${commands[i]!.join(' ')}`;
      expect([name, run.code]).toEqual([name, 0]);
      haystacks[`${name} (stdout)`] = run.stdout;
      haystacks[`${name} (stderr)`] = run.stderr;
      figures.requests.process++;
    }
    // Real content: the CLI printed the cortex decision's bundle.
    expect(haystacks[`relay bundle ${bundle} --json (stdout)`]).toContain(bundle);
    const refused = await runNode(CLI_BIN, ['status'], { ...cliEnv, RELAY_API_TOKEN: `${procToken}x` });
    figures.requests.process++;
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/RELAY_E_AUTH_INVALID_TOKEN|token/);
    haystacks['relay status, wrong token (stdout)'] = refused.stdout;
    haystacks['relay status, wrong token (stderr)'] = refused.stderr;
    figures.agent.cli_runs = runs.length + 1;
  } finally {
    agentRun = await agent.stop();
  }
  haystacks['agent process stdout'] = agentRun.stdout;
  haystacks['agent process stderr'] = agentRun.stderr;
  expect(agentRun.stdout).toContain('starting relay=');
  await proc.sidecar.close();
  expect(procRuns).toHaveLength(2);
  expect(procRuns[1]!.output()).not.toContain('readable by other users');

  for (const [i, run] of procRuns.entries()) haystacks[`process output, run ${i + 1}`] = run.output();
  expect(haystacks['process output, run 1']).toContain('relay sidecar listening');
  haystacks['lifecycle.jsonl'] = await readFile(proc.env.LIFECYCLE_PATH as string, 'utf8');
  // The decision traces on their own too (the agent's inputs, the model's answer and rationale), one per line.
  haystacks['lifecycle ai_decision_trace entries'] = haystacks['lifecycle.jsonl']
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        const trace = (JSON.parse(line) as { ai_decision_trace?: unknown }).ai_decision_trace;
        return trace ? JSON.stringify(trace) : '';
      } catch {
        return '';
      }
    })
    .filter((text) => text !== '')
    .join('\n');
  expect(haystacks['lifecycle ai_decision_trace entries']).toContain('[simnet]'); // cortex's rationale
  const journalDir = join(proc.env.RELAY_DATA_DIR as string, 'journal');
  for (const file of await readdir(journalDir)) {
    haystacks[`journal/${file}`] = await readFile(join(journalDir, file), 'utf8');
  }
  // The webhook outbox holds every event owed to the (closed) endpoint.
  const outboxDir = join(proc.env.RELAY_DATA_DIR as string, 'webhooks');
  for (const file of await readdir(outboxDir)) {
    haystacks[`webhooks/${file}`] = await readFile(join(outboxDir, file), 'utf8');
  }
  expect(haystacks['lifecycle.jsonl']).toContain(bundleId);

  return haystacks;
}

async function runMalformedKeypairs(): Promise<Array<[string, string]>> {
  const dir = await mkdtemp(join(tmpdir(), 'relay-badkey-'));
  const secret = proc.tipper.secretKey;
  const bodies = {
    'trailing comma': `${JSON.stringify([...secret]).slice(0, -1)},]`,
    'a byte out of range': JSON.stringify([...secret.subarray(0, 63), 300]),
    'one byte short': JSON.stringify([...secret.subarray(0, 63)]),
  };
  return Promise.all(
    Object.entries(bodies).map(async ([name, text]): Promise<[string, string]> => {
      const path = join(dir, `${name.replace(/ /g, '-')}.json`);
      await writeFile(path, text, { mode: 0o600 });
      figures.requests.process++;
      const failure = await spawnSidecar(SIDECAR_MAIN, {
        ...proc.env,
        KEYPAIR_PATH: path,
        LOG_LEVEL: 'debug',
      }).then(
        async (running) => {
          await running.stop();
          return 'started';
        },
        (error: Error) => error.message,
      );
      return [name, failure];
    }),
  );
}

describe('the built sidecar process (its scenario ran alongside the tests above)', () => {
  test('listens on 127.0.0.1 only, by default', async () => {
    await processScenario;
    expect(figures.bind.listeners).toEqual(['127.0.0.1']);
    expect(figures.bind.non_loopback_probe).not.toMatch(/connected|timeout/);
  }, 90_000);

  test('warns about a keypair file readable by others, and not once it is 0600', async () => {
    await processScenario;
    expect(procRuns[0]!.output()).toContain('keypair file is readable by other users');
    expect(procRuns[0]!.output()).toMatch(/"mode":"644"/);
    expect(procRuns).toHaveLength(2);
    expect(procRuns[1]!.output()).not.toContain('readable by other users');
  }, 90_000);

  test('no secret reaches the logs, answers, metrics, SSE, lifecycle or journal (grep at LOG_LEVEL=debug)', async () => {
    const haystacks = await processScenario;
    const needles: Needle[] = [
      ...keypairNeedles(proc.tipper.secretKey),
      ...credentialNeedles('RELAY_API_TOKEN', procToken),
      ...credentialNeedles('STREAM_X_TOKEN', xToken),
      ...credentialNeedles('BUNDLE_ENGINE_UUID', engineUuid),
      ...credentialNeedles('ANTHROPIC_API_KEY', anthropicKey),
      ...credentialNeedles('RELAY_WEBHOOK_SECRET', webhookSecret),
      ...credentialNeedles('RELAY_WEBHOOK_SECRET key', webhookKey),
    ];
    const leaks = findLeaks(haystacks, needles);
    figures.leak_search.needles += needles.length;
    figures.leak_search.haystacks += Object.keys(haystacks).length;
    figures.leak_search.pairs += needles.length * Object.keys(haystacks).length;
    figures.leak_search.characters += haystackBytes(haystacks);
    figures.leak_search.leaks += leaks.length;
    expect(leaks).toEqual([]);
  }, 90_000);

  test('a malformed keypair file stops start-up without echoing its bytes', async () => {
    const secret = proc.tipper.secretKey;
    for (const [name, failure] of await malformedKeyFailures) {
      expect([name, failure]).toEqual([name, expect.stringContaining('RELAY_E_CONFIG_UNREADABLE_KEYPAIR')]);
      const leaks = findLeaks({ [`start-up error (${name})`]: failure }, keypairNeedles(secret));
      figures.leak_search.needles += 10;
      figures.leak_search.haystacks += 1;
      figures.leak_search.pairs += 10;
      figures.leak_search.characters += failure.length;
      expect(leaks).toEqual([]);
    }
  }, 90_000);
});
