import { RELAY_ERROR_CODES, httpStatusOf, isTerminalTxState, type RelayErrorCode } from '@solrelay/core';
import type { Sidecar } from '@solrelay/sidecar';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import { RawClient, isFailure, sendBytes, type RawAnswer } from '../../src/fuzz-http';
import { generateCases, materialise, type FuzzCase, type Materialised } from '../../src/fuzz-requests';
import { bump, fuzzSeed, mapPool, recordFuzzFigures } from '../../src/fuzz-results';
import { fuzzLabel, openApiRoutes, sourceRoutes } from '../../src/security-routes';
import { startFuzzStack } from '../../src/fuzz-stack';
import { fastTransfer, mutate } from '../../src/fuzz-tx';

/**
 * Bad input, HTTP (issue #10): fast-check generates more than ten thousand malformed requests across every route of
 * the API and sends them to one real sidecar on a real simnet. Every answer must be a 4xx carrying a relay error
 * code from core's table (or a 2xx where the request happened to be valid), never a 500; a 503 only as
 * RELAY_E_NOT_READY; no transaction that is unsigned, corrupted, oversize or mis-encoded is ever accepted; a bad
 * token never gets past the door; SSE routes answer an error or a stream whose first frame is the right one. After
 * the run the process is healthy, a fresh transaction lands, and every transaction accepted during the run is
 * still known — also after a restart — and reaches a terminal state.
 */

const TOKEN = 'fuzz-token-0123456789';
// About 80 % of the generated requests are malformed, and at least 10,000 refusals are asserted: 13,500 it stays
// (a CI run at 10,500 had 8,436).
const REQUESTS = Number(process.env.RELAY_FUZZ_REQUESTS ?? 13_500);
const CONCURRENCY = 12;
const POOL_SIZE = 32;
const CODES = new Set<string>(RELAY_ERROR_CODES);

let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startFuzzStack({
    env: { RELAY_API_TOKEN: TOKEN, RELAY_AGENT_GRACE_S: '0' },
    // Room for every valid transaction the run happens to send; the limits themselves are not what is under test.
    policy: { 'rate-limit': 1_000_000, 'max-queue': 1_000_000 },
  });
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

const auth = { authorization: `Bearer ${TOKEN}` };

interface Frame {
  event: string;
  data: unknown;
}

function firstFrame(text: string): Frame | null {
  const block = text.split('\n\n').find((b) => b.split('\n').some((line) => line.startsWith('event:')));
  if (!block) return null;
  let event = 'message';
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data += line.slice(5).trim();
  }
  try {
    return { event, data: JSON.parse(data) };
  } catch {
    return { event, data };
  }
}

test('≥ 10,000 malformed requests across every route: no 500, every refusal coded, nothing accepted that must not be', async () => {
  const seed = fuzzSeed();
  console.log(`fuzz-routes: seed ${seed} (replay with RELAY_FUZZ_SEED=${seed}), ${REQUESTS} requests`);
  const started = performance.now();
  const cases = generateCases(seed, REQUESTS);
  const generatedMs = Math.round(performance.now() - started);

  // Real signed transfers on a fresh blockhash, renewed as the run goes so valid ones stay valid.
  let pool: Buffer[] = [];
  let blockhash = '';
  const refill = () => {
    blockhash = stack.simnet.cluster.latestBlockhash('confirmed').blockhash;
    pool = Array.from({ length: POOL_SIZE }, (_, i) => fastTransfer(stack.payer, blockhash, 1000 + i));
  };
  refill();
  const refresher = setInterval(refill, 2000);

  const accepted = new Set<string>();
  const repeats: string[] = [];
  const bundles: string[] = [];
  const harnessSubmits: Array<Promise<unknown>> = [];
  const hub = () => stack.sidecar.hub;

  const histogram: Record<string, number> = {};
  const byRoute: Record<string, Record<string, number>> = {};
  const byCode: Record<string, number> = {};
  const failures: string[] = [];
  let mustRefuseSent = 0;
  /** Enqueues answered 2xx although their transactions must be refused (any route label: express also takes
   * `/tx/enqueue/` and `/TX/ENQUEUE`). */
  let mustRefuseAccepted = 0;
  /** Every tx_id an enqueue answer handed out (2xx, any route label), judged or not. */
  const enqueueAnswers = new Set<string>();
  let sseStreams = 0;
  let resyncs = 0;
  let badAuthSent = 0;
  const fail = (c: FuzzCase, m: Materialised, why: string) => {
    if (failures.length < 40) {
      failures.push(
        `${why} | ${c.method} ${m.request.path.slice(0, 160)} | body ${m.request.body?.subarray(0, 160).toString('utf8') ?? '-'} | ${JSON.stringify(c).slice(0, 300)}`,
      );
    } else if (failures.length === 40) failures.push('… more');
  };

  const client = new RawClient(stack.sidecar.url, {
    maxSockets: CONCURRENCY,
    timeoutMs: 20_000,
    sseWaitMs: 250,
  });
  const badAuth = (c: FuzzCase) =>
    c.auth.kind === 'missing' ||
    c.auth.kind === 'wrong' ||
    c.auth.kind === 'raw' ||
    c.auth.kind === 'good-plus';

  const judge = (c: FuzzCase, m: Materialised, a: RawAnswer) => {
    const { status } = a;
    bump(histogram, status);
    bump((byRoute[c.route] ??= {}), status);
    const body = a.json as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined;
    if (status === 431 && m.headBytes > 15_000) bump(histogram, 'head over 16 KiB'); // still coded, below
    if (status >= 400) {
      const code = body?.error?.code;
      if (c.method !== 'HEAD') {
        if (typeof code !== 'string' || !CODES.has(code))
          return fail(c, m, `${status} without a relay code: ${a.text.slice(0, 200)}`);
        bump(byCode, code);
        if (httpStatusOf(code as RelayErrorCode) !== status)
          return fail(c, m, `${code} answered with ${status}`);
        if (typeof body?.error?.message !== 'string' || body.error.message === '')
          return fail(c, m, `${code} without a message`);
        if (typeof body?.error?.details !== 'object' || body.error.details === null)
          return fail(c, m, `${code} without details`);
      } else if (!String(a.headers['content-type'] ?? '').startsWith('application/json')) {
        return fail(c, m, `HEAD ${status} is not typed as a JSON error`);
      }
      if (status >= 500 && !(status === 503 && (code === 'RELAY_E_NOT_READY' || c.method === 'HEAD'))) {
        return fail(c, m, `${status} ${String(code)}`);
      }
      return;
    }
    if (status === 304) {
      // `If-None-Match: *` on a GET of an existing resource: express answers 304 Not Modified, as RFC 9110 says.
      if (!('if-none-match' in m.request.headers) || (c.method !== 'GET' && c.method !== 'HEAD'))
        return fail(c, m, 'unexpected 304');
      return;
    }
    if (status < 200 || status >= 300) return fail(c, m, `unexpected status ${status}`);
    // 2xx from here on. An enqueue's answer (a tx_id with its signatures, no bundle_id) on whatever path took it.
    const enqueued = a.json as { tx_id?: unknown; signatures?: unknown; bundle_id?: unknown } | undefined;
    if (
      c.method === 'POST' &&
      typeof enqueued?.tx_id === 'string' &&
      Array.isArray(enqueued.signatures) &&
      enqueued.bundle_id === undefined
    ) {
      enqueueAnswers.add(enqueued.tx_id);
      if (m.mustRefuse) mustRefuseAccepted++;
    }
    if (badAuth(c)) {
      const healthz =
        (a.json as { ok?: unknown } | undefined)?.ok === true ||
        (c.method === 'HEAD' && /^\/healthz\/?$/i.test(m.request.path.split('?')[0] ?? ''));
      if (!healthz) return fail(c, m, `a request with a bad Authorization header got ${status}`);
    }
    if (c.route === 'POST /tx/enqueue' && c.method === 'POST') {
      if (m.mustRefuse) return fail(c, m, `accepted a transaction it must refuse (${status})`);
      const txId = (a.json as { tx_id?: unknown } | undefined)?.tx_id;
      if (typeof txId !== 'string' || !txId.startsWith('tx_'))
        return fail(c, m, `enqueue ${status} without a tx_id`);
      if (status === 202) {
        accepted.add(txId);
        // Stand in for the agent: decide a tip for it right away, through the same API the agent uses.
        harnessSubmits.push(
          (async () => {
            // Every other one waits a moment first, so the fuzz's own submits (hostile traces, odd tips) reach
            // transactions that can still take an attempt.
            if (accepted.size % 2 === 0) await new Promise((resolve) => setTimeout(resolve, 1500));
            const decided = await post(
              stack.sidecar.url,
              '/internal/submit',
              { tx_id: txId, tip_lamports: 20_000, reason: 'fuzz harness' },
              auth,
            );
            // A transaction that carries its own tip takes a submit at 0.
            if (decided.body?.error?.code === 'RELAY_E_TX_TIP_NOT_RAISABLE')
              await post(
                stack.sidecar.url,
                '/internal/submit',
                { tx_id: txId, tip_lamports: 0, reason: 'fuzz harness' },
                auth,
              );
          })().catch(() => undefined),
        );
      } else repeats.push(txId);
    }
    if (c.route === 'POST /internal/submit' && status === 202) {
      const bundleId = (a.json as { bundle_id?: unknown } | undefined)?.bundle_id;
      if (typeof bundleId === 'string') bundles.push(bundleId);
    }
    if (a.sse) {
      sseStreams++;
      if (c.method === 'HEAD') return;
      const frame = firstFrame(a.text);
      if (c.route === 'GET /internal/events' && m.lastEventId !== undefined && m.lastEventId !== '') {
        const match = new RegExp(`^${hub().bootId}-(\\d{1,15})$`).exec(m.lastEventId);
        const current = Number((hub().lastId ?? '-0').split('-')[1]);
        const mustResync = !match || Number(match[1]) > current;
        if (frame?.event === 'resync') resyncs++;
        if (mustResync && frame?.event !== 'resync') {
          return fail(
            c,
            m,
            `Last-Event-ID ${JSON.stringify(m.lastEventId.slice(0, 60))} did not start with resync: ${a.text.slice(0, 120)}`,
          );
        }
      }
      if (c.route === 'GET /tx/events/:id') {
        const txId = (frame?.data as { tx_id?: unknown } | undefined)?.tx_id;
        if (frame?.event !== 'tx_status_changed' || typeof txId !== 'string' || !accepted.has(txId)) {
          return fail(c, m, `tx stream did not start with its tx_status_changed: ${a.text.slice(0, 120)}`);
        }
      }
      if (c.route === 'GET /internal/agent/presence' && frame?.event !== 'registered') {
        return fail(c, m, `presence stream did not start with registered: ${a.text.slice(0, 120)}`);
      }
    }
  };

  const acceptedList = () => [...accepted];
  const context = {
    token: TOKEN,
    get bootId() {
      return hub().bootId;
    },
    lastSeq: () => Number((hub().lastId ?? '-0').split('-')[1]),
    tx: (slot: number, mutation: Parameters<typeof mutate>[1]) =>
      mutate(pool[slot % pool.length] as Buffer, mutation, { payer: stack.payer, blockhash }),
    txId: (pick: number) => {
      const ids = acceptedList();
      return ids.length ? (ids[pick % ids.length] as string) : 'tx_01J00000000000000000000000';
    },
    bundleId: (pick: number) =>
      bundles.length ? (bundles[pick % bundles.length] as string) : 'f'.repeat(64),
  };

  const runStarted = performance.now();
  try {
    await mapPool(cases, CONCURRENCY, async (c) => {
      const m = materialise(c, context);
      if (m.mustRefuse && c.route === 'POST /tx/enqueue') mustRefuseSent++;
      if (badAuth(c)) badAuthSent++;
      const answer = await client.send(m.request);
      if (isFailure(answer)) {
        bump(histogram, 'no answer');
        fail(c, m, `no answer: ${answer.error} (reused socket: ${String(answer.reusedSocket)})`);
        return;
      }
      judge(c, m, answer);
    });
  } finally {
    clearInterval(refresher);
    client.close();
  }
  const runMs = Math.round(performance.now() - runStarted);
  const mark = (what: string) =>
    console.log(`fuzz-routes: ${what} at ${Math.round(performance.now() - started)} ms`);
  mark('requests done');
  await Promise.all(harnessSubmits);

  // Framing the HTTP parser itself refuses (node answers these before relay sees a request): never a 5xx, never a
  // dead process.
  const framing: Array<[string, string]> = [
    ['garbage request line', 'HELLO\r\n\r\n'],
    ['no version', 'GET /status\r\n\r\n'],
    ['bad version', 'GET /status HTTP/9.9\r\nhost: 127.0.0.1\r\n\r\n'],
    ['header without colon', 'GET /status HTTP/1.1\r\nhost x\r\n\r\n'],
    ['space before colon', 'GET /status HTTP/1.1\r\nhost : x\r\n\r\n'],
    ['oversize header', `GET /status HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`],
    ['oversize url', `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`],
    [
      'CL and TE',
      'POST /tx/enqueue HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
    [
      'two CLs',
      'POST /tx/enqueue HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}',
    ],
    [
      'negative CL',
      'POST /tx/enqueue HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: -1\r\n\r\n{}',
    ],
    [
      'bad chunk size',
      'POST /tx/enqueue HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    ],
    [
      'TE gzip',
      'POST /tx/enqueue HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: gzip\r\n\r\n{}',
    ],
    ['bare LF', 'GET /status HTTP/1.1\nhost: x\n\n'],
    ['NUL in header', 'GET /status HTTP/1.1\r\nhost: 127.0.0.1\r\nx-a: a\u0000b\r\n\r\n'],
    ['absolute-form', `GET http://127.0.0.1/healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`],
    ['asterisk-form', 'OPTIONS * HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
    ['HTTP/1.0 no host', 'GET /healthz HTTP/1.0\r\n\r\n'],
    ['unknown method', 'BREW /status HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
    ['lowercase method', 'get /status HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
    ['raw UTF-8 in the path', 'GET /tx/\u00c3\u00a9 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
    ['raw Latin-1 in the query', 'GET /lifecycle?last=\u00e9 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
    ['space in the path', 'GET /tx/a b HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
    [
      'CL shorter than body',
      `POST /tx/enqueue HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer ${TOKEN}\r\ncontent-length: 2\r\n\r\n{}{"x":1}`,
    ],
  ];
  const framingStatus: Record<string, number> = {};
  for (const [name, bytes] of framing) {
    const answer = await sendBytes(stack.sidecar.url, Buffer.from(bytes, 'latin1'), 1500);
    framingStatus[name] = answer.status;
    bump(histogram, `framing ${answer.status || 'closed'}`);
    if (answer.status >= 500)
      failures.push(`framing "${name}" -> ${answer.status}: ${answer.text.slice(0, 200)}`);
    // What node's parser refuses is answered by relay's clientError handler, with a code like any route's.
    if (answer.status >= 400 && !/"code":"RELAY_E_[A-Z_]+"/.test(answer.text))
      failures.push(
        `framing "${name}" -> ${answer.status} without a relay code: ${answer.text.slice(0, 200)}`,
      );
  }
  // A body shorter than its Content-Length, then the client hangs up: the request is abandoned, the server lives.
  for (const path of ['/tx/enqueue', '/internal/submit', '/internal/mode']) {
    const answer = await sendBytes(
      stack.sidecar.url,
      Buffer.from(
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer ${TOKEN}\r\ncontent-length: 100\r\n\r\n{"transaction":`,
        'latin1',
      ),
      300,
    );
    if (answer.status >= 500) failures.push(`short body on ${path} -> ${answer.status}`);
  }

  mark('framing done');
  // ---------------------------------------------------------------- the process after the run
  // What the sidecar itself counted as new enqueues, against the tx_ids the answers handed out: an acceptance
  // the judge did not see (an answer lost, a path it did not classify) would show as a difference.
  const metricsText = (await get(stack.sidecar.url, '/metrics', auth)).body as string;
  const acceptedBySidecar = Number(
    /^relay_enqueues_total\{result="accepted"\} (\d+)$/m.exec(metricsText)?.[1] ?? 0,
  );
  // The routes the API declares (its /openapi.json, itself checked against app.ts): each must have been fuzzed.
  const declared = openApiRoutes((await get(stack.sidecar.url, '/openapi.json', auth)).body);
  expect(sourceRoutes().sort()).toEqual(declared.map((route) => route.key).sort());
  const healthz = await get(stack.sidecar.url, '/healthz');
  expect(healthz).toMatchObject({ status: 200, body: { ok: true } });
  expect((await get(stack.sidecar.url, '/status', auth)).status).toBe(200);
  // Every stream the run opened was released (no leaked SSE clients), and no agent registration outlived its stream.
  await waitUntil(() => hub().clientCount === 0, 20_000, 'every SSE client released');
  await waitUntil(() => stack.sidecar.relay.agent === null, 20_000, 'presence released');

  mark('streams released');
  // A valid transaction still goes in and lands.
  const fresh = await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer(4242) }, auth);
  expect(fresh.status).toBe(202);
  const freshId = fresh.body.tx_id as string;
  const submitted = await post(
    stack.sidecar.url,
    '/internal/submit',
    { tx_id: freshId, tip_lamports: 20_000, reason: 'after the fuzz' },
    auth,
  );
  expect(submitted.status).toBe(202);
  await waitUntil(
    async () => (await get(stack.sidecar.url, `/tx/${freshId}`, auth)).body.state === 'finalized',
    90_000,
    `${freshId} finalized after the fuzz`,
  ).catch(async (error: Error) => {
    const record = (await get(stack.sidecar.url, `/tx/${freshId}`, auth)).body;
    const status = (await get(stack.sidecar.url, '/status', auth)).body;
    throw new Error(`${error.message}\nrecord: ${JSON.stringify(record)}\nstatus: ${JSON.stringify(status)}`);
  });

  mark('fresh transaction finalized');
  // Nothing accepted during the run is lost: each is known and reaches a terminal state, and survives a restart.
  for (const id of repeats) expect(accepted.has(id)).toBe(true);
  // Every enqueue answered 2xx, on whatever path express routed it (a superset of `accepted`).
  const ids = [...enqueueAnswers];
  const states: Record<string, number> = {};
  await waitUntil(
    async () => {
      for (const key of Object.keys(states)) delete states[key];
      let terminal = 0;
      for (const id of ids) {
        const record = await get(stack.sidecar.url, `/tx/${id}`, auth);
        if (record.status !== 200) throw new Error(`accepted ${id} is not known: ${record.status}`);
        bump(
          states,
          record.body.failure
            ? `${record.body.state} (${String(record.body.failure)})`
            : (record.body.state as string),
        );
        if (isTerminalTxState(record.body.state)) terminal++;
      }
      return terminal === ids.length;
    },
    90_000,
    'every accepted transaction terminal',
  );
  mark('every accepted transaction terminal');
  const failedDetails: string[] = [];
  for (const id of ids) {
    const record = await get(stack.sidecar.url, `/tx/${id}`, auth);
    if (record.body.state !== 'finalized' && failedDetails.length < 8)
      failedDetails.push(
        `${record.body.state} tip=${record.body.tip} ${JSON.stringify(record.body.last_error?.message ?? null)}`,
      );
  }
  console.log(`fuzz-routes: accepted transactions that did not finalize: ${JSON.stringify(failedDetails)}`);
  await stack.restart();
  let lost = 0;
  for (const id of ids) {
    const record = await get(stack.sidecar.url, `/tx/${id}`, auth);
    if (record.status !== 200 || !isTerminalTxState(record.body.state)) lost++;
  }
  const totalMs = Math.round(performance.now() - started);

  const answered = Object.entries(histogram)
    .filter(([k]) => /^\d+$/.test(k))
    .reduce((n, [, v]) => n + v, 0);
  const refused4xx = Object.entries(histogram)
    .filter(([k]) => /^4\d\d$/.test(k))
    .reduce((n, [, v]) => n + v, 0);
  const figures = {
    seed,
    requests: cases.length + framing.length + 3,
    generated_requests: cases.length,
    framing_requests: framing.length + 3,
    answered,
    refused_4xx: refused4xx,
    status_histogram: histogram,
    status_500: histogram['500'] ?? 0,
    by_route: byRoute,
    by_code: byCode,
    framing_status: framingStatus,
    must_refuse_transactions_sent: mustRefuseSent,
    must_refuse_transactions_accepted: mustRefuseAccepted,
    enqueues_answered_accepted: enqueueAnswers.size,
    enqueues_counted_by_sidecar: acceptedBySidecar,
    routes_declared: declared.length,
    bad_auth_sent: badAuthSent,
    sse_streams_opened: sseStreams,
    resyncs_seen: resyncs,
    accepted_during_fuzz: ids.length,
    idempotent_repeats: repeats.length,
    accepted_final_states: states,
    lost,
    failures: failures.length,
    client_retries_on_reset: client.retries,
    concurrency: CONCURRENCY,
    generate_ms: generatedMs,
    run_ms: runMs,
    total_ms: totalMs,
  };
  console.log(`fuzz-routes figures: ${JSON.stringify(figures)}`);
  recordFuzzFigures('routes', figures);

  expect(failures).toEqual([]);
  expect(lost).toBe(0);
  expect(answered).toBe(cases.length);
  expect(histogram['500'] ?? 0).toBe(0);
  expect(refused4xx).toBeGreaterThanOrEqual(10_000);
  expect(mustRefuseSent).toBeGreaterThan(500);
  expect(mustRefuseAccepted).toBe(0);
  expect(acceptedBySidecar).toBe(enqueueAnswers.size);
  expect(enqueueAnswers.size).toBeGreaterThan(0);
  // Every route the API declares was reached, and the odd ways in too.
  const reached = Object.keys(byRoute);
  for (const route of [...declared.map(fuzzLabel), 'unknown routes', 'other methods', 'wrong method']) {
    expect(reached).toContain(route);
  }
}, 240_000);
