import { request } from 'node:http';
import { connect } from 'node:net';
import { get, post, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/** DESIGN §3: "A 500 is a bug." Every malformed request gets a 4xx with a RELAY_E_ code. */
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({ env: { RELAY_AGENT_GRACE_S: '0' } });
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('no malformed request is answered with a 5xx', async () => {
  const { url } = stack.sidecar;
  const good = stack.transfer(5);
  const wire = Buffer.from(good, 'base64');
  const truncated = wire.subarray(0, wire.length - 10).toString('base64');
  const zeroSigs = Buffer.concat([Buffer.from([0]), wire.subarray(65)]).toString('base64');
  const bodies: unknown[] = [
    null,
    'null',
    '"a string"',
    '[]',
    '123',
    {},
    { transaction: 123 },
    { transactions: [] },
    { transactions: [good, good, good, good, good] },
    { transactions: [null] },
    { transactions: 'x' },
    { transaction: good, encoding: 'hex' },
    { transaction: good, encoding: 'base58' },
    { transaction: '!!!!', encoding: 'base58' },
    { transaction: truncated },
    { transaction: zeroSigs },
    { transaction: good, priority: {} },
    { transaction: good, tip: 'sometimes' },
    { transaction: good, expiry_slots: -1 },
    { transaction: good, expiry_slots: 1e308 },
    { transaction: good, expiry_slots: 1.5 },
    { transaction: good, max_tip: 1e30 },
    { transaction: good, max_tip: '1000' },
    { transaction: good, transactions: [good] },
    { transaction: '' },
    { transaction: 'AA==' },
  ];
  const failures: string[] = [];
  for (const body of bodies) {
    const answer = await post(url, '/tx/enqueue', typeof body === 'string' ? body : JSON.stringify(body));
    if (answer.status >= 500 || (answer.status >= 400 && !answer.body?.error?.code))
      failures.push(`enqueue ${JSON.stringify(body)?.slice(0, 80)} -> ${answer.status}`);
  }
  const submits: unknown[] = [
    {},
    { tx_id: 'tx_nope', tip_lamports: 1000, reason: 'x' },
    { tx_id: 'tx_nope', tip_lamports: -5, reason: 'x' },
    { tx_id: 'tx_nope', tip_lamports: 1e20, reason: 'x' },
    { tx_id: 'tx_nope', tip_lamports: 1.5, reason: 'x' },
    { tx_id: 5, tip_lamports: 1000, reason: 'x' },
    { tx_id: 'tx_nope', tip_lamports: 1000, reason: 'x', trace: 'str' },
  ];
  for (const body of submits) {
    const answer = await post(url, '/internal/submit', body);
    if (answer.status >= 500) failures.push(`submit ${JSON.stringify(body)} -> ${answer.status}`);
  }
  for (const path of [
    '/lifecycle?last=abc',
    '/lifecycle?last=-1',
    '/lifecycle?last=1e12',
    '/lifecycle?last=1&last=2',
    '/bundle/zz',
    '/tx/%E0%A4%A',
    '/tx/events/%E0%A4%A',
    '/internal/agent/presence?model=a&model=b&provider=c',
  ]) {
    const answer = await get(url, path);
    if (answer.status >= 500) failures.push(`GET ${path} -> ${answer.status}`);
  }
  for (const body of ['{"decision_mode":"turbo"}', '{}', '[1]']) {
    const answer = await post(url, '/internal/mode', body);
    if (answer.status >= 500) failures.push(`mode ${body} -> ${answer.status}`);
  }
  const charset = await fetch(`${url}/tx/enqueue`, {
    method: 'POST',
    headers: { 'content-type': 'application/json; charset=utf-16' },
    body: '{}',
  });
  if (charset.status >= 500) failures.push(`charset utf-16 -> ${charset.status}`);
  expect(failures).toEqual([]);
}, 30_000);

test('an enqueue answers the same whether it takes the direct path or the framework path', async () => {
  const { hostname, port } = new URL(stack.sidecar.url);
  // Content-Length bodies take the direct path; chunked bodies go through express. Both must agree.
  const send = (body: string, chunked: boolean, type = 'application/json') =>
    new Promise<{ status: number; body: { error?: { code?: string } } }>((resolve, reject) => {
      const req = request(
        {
          host: hostname,
          port,
          method: 'POST',
          path: '/tx/enqueue',
          headers: chunked
            ? { 'content-type': type, 'transfer-encoding': 'chunked' }
            : { 'content-type': type, 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const cases = ['{"transaction":', '[]', '{"transaction":"AA=="}', '{}', 'null', '"x"'];
  for (const body of cases) {
    const direct = await send(body, false);
    const framework = await send(body, true);
    expect({ body, status: direct.status, code: direct.body.error?.code }).toEqual({
      body,
      status: framework.status,
      code: framework.body.error?.code,
    });
    expect(direct.status).toBeGreaterThanOrEqual(400);
    expect(direct.status).toBeLessThan(500);
  }
  const wire = stack.transfer(7);
  const accepted = await send(
    JSON.stringify({ transaction: wire }),
    false,
    'application/json; charset=utf-8',
  );
  expect(accepted.status).toBe(202);
  const again = await send(JSON.stringify({ transaction: wire }), true);
  expect(again.status).toBe(200);
});

test('requests the HTTP parser refuses still get a relay error body', async () => {
  const { hostname, port } = new URL(stack.sidecar.url);
  const raw = (text: string) =>
    new Promise<{ status: number; body: { error?: { code?: string } } }>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.write(text));
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      socket.on('error', reject);
      socket.on('close', () =>
        resolve({
          status: Number(answer.split(' ')[1]),
          body: JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)),
        }),
      );
    });
  const badUrl = await raw('GET /\u0001 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  expect(badUrl).toMatchObject({ status: 400, body: { error: { code: 'RELAY_E_REQUEST_MALFORMED_HTTP' } } });
  const hugeHeader = await raw(
    `GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
  );
  expect(hugeHeader).toMatchObject({
    status: 431,
    body: { error: { code: 'RELAY_E_REQUEST_HEADERS_TOO_LARGE' } },
  });
  expect((await get(stack.sidecar.url, '/healthz')).status).toBe(200);
});
