import { request } from 'node:http';
import { get, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/** Sends one GET with the exact headers given (fetch does not let a caller set Host or Origin). */
function send(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; code?: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, headers }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => {
        let code: string | undefined;
        try {
          code = JSON.parse(text).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('bound to loopback: cross-origin requests and foreign Host headers are refused', () => {
  let stack: Stack<Sidecar>;
  beforeAll(async () => {
    stack = await startRelayStack({ env: { RELAY_ALLOWED_HOSTS: 'relay.internal' } });
  }, 30_000);
  afterAll(async () => {
    await stack?.close();
  });

  test('Host: loopback names and RELAY_ALLOWED_HOSTS pass, anything else is 403', async () => {
    const { url } = stack.sidecar;
    const port = new URL(url).port;
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `[::1]:${port}`,
      `relay.internal:${port}`,
      'x.localhost',
    ]) {
      expect([host, (await send(url, '/status', { host })).status]).toEqual([host, 200]);
    }
    for (const host of [`evil.example:${port}`, `relay.internal.evil:${port}`, `192.168.1.5:${port}`]) {
      expect([host, await send(url, '/status', { host })]).toEqual([
        host,
        { status: 403, code: 'RELAY_E_AUTH_FORBIDDEN_HOST' },
      ]);
    }
  });

  test('Origin and Sec-Fetch-Site: only the same origin passes', async () => {
    const { url } = stack.sidecar;
    expect((await send(url, '/status', { origin: new URL(url).origin })).status).toBe(200);
    expect((await send(url, '/status', { 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    const foreign: Array<Record<string, string>> = [
      { origin: 'https://evil.example' },
      { origin: 'null' },
      { origin: `http://127.0.0.1:${Number(new URL(url).port) + 1}` },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of foreign) {
      expect(await send(url, '/status', headers)).toEqual({
        status: 403,
        code: 'RELAY_E_AUTH_FORBIDDEN_ORIGIN',
      });
    }
    expect((await get(url, '/healthz')).status).toBe(200);
  });
});

test('RELAY_ALLOWED_HOSTS=* turns the Host check off (the Origin check stays)', async () => {
  const stack = await startRelayStack({ env: { RELAY_ALLOWED_HOSTS: '*' } });
  try {
    const { url } = stack.sidecar;
    expect((await send(url, '/status', { host: 'anything.example' })).status).toBe(200);
    expect((await send(url, '/status', { origin: 'https://evil.example' })).status).toBe(403);
  } finally {
    await stack.close();
  }
}, 30_000);
