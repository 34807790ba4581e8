import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { isRelayError } from '@solrelay/core';
import { configFromEnv } from '../src/config';
import { startSidecar } from '../src/service';
import {
  BoundForwarder,
  boundFetch,
  grpcHostPort,
  probeLocalAddress,
  servedByEngine,
} from '../src/upstream/local-address';

/**
 * RELAY_ENGINE_LOCAL_ADDRESS (README "Running a fleet"): the literal is checked by the config, the machine's
 * addresses at start, and the JSON-RPC fetch and the gRPC forwarder connect from it. On Linux every 127.0.0.0/8
 * address is bindable on loopback; 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine.
 */
const minimal = {
  STREAM_ENDPOINT: 'http://127.0.0.1:10000',
  RPC_URL: 'http://127.0.0.1:8899',
  HOME: '/home/op',
};

async function codeOf(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (isRelayError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a RelayError');
}

function listening(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

test('unset, no local address is chosen; an IPv4 or IPv6 literal is taken as given', () => {
  expect(configFromEnv(minimal, '/srv/relay').engineLocalAddress).toBeUndefined();
  expect(
    configFromEnv({ ...minimal, RELAY_ENGINE_LOCAL_ADDRESS: ' 127.0.0.2 ' }, '/srv/relay').engineLocalAddress,
  ).toBe('127.0.0.2');
  expect(
    configFromEnv({ ...minimal, RELAY_ENGINE_LOCAL_ADDRESS: '::1' }, '/srv/relay').engineLocalAddress,
  ).toBe('::1');
});

test.each([
  ['localhost', /expected an IPv4 or IPv6 address/],
  ['127.0.0.256', /expected an IPv4 or IPv6 address/],
  ['127.0.0.2:9000', /expected an IPv4 or IPv6 address/],
  ['[::1]', /without brackets \(::1\)/],
  ['0.0.0.0', /wildcard/],
  ['::', /wildcard/],
])('RELAY_ENGINE_LOCAL_ADDRESS=%s is refused by the config, naming the variable', async (value, reason) => {
  const error = await codeOf(
    Promise.resolve().then(() =>
      configFromEnv({ ...minimal, RELAY_ENGINE_LOCAL_ADDRESS: value }, '/srv/relay'),
    ),
  );
  expect(error.code).toBe('RELAY_E_CONFIG_INVALID_ENV');
  expect(error.message).toMatch(/RELAY_ENGINE_LOCAL_ADDRESS/);
  expect(error.message).toMatch(reason);
});

test('an address of this machine passes the bind probe; one it does not have is refused with EADDRNOTAVAIL', async () => {
  await expect(probeLocalAddress('127.0.0.2')).resolves.toBeUndefined();
  const error = await codeOf(probeLocalAddress('192.0.2.1'));
  expect(error.code).toBe('RELAY_E_CONFIG_INVALID_ENV');
  expect(error.message).toMatch(/RELAY_ENGINE_LOCAL_ADDRESS/);
  expect(error.message).toMatch(/192\.0\.2\.1 is not an address of this machine \(EADDRNOTAVAIL\)/);
});

test('a sidecar given an address this machine does not have refuses to start before opening anything', async () => {
  // No keypair file, policy or data directory exists: the address is checked first.
  const config = configFromEnv(
    { ...minimal, RELAY_ENGINE_LOCAL_ADDRESS: '192.0.2.1', KEYPAIR_PATH: '/nonexistent/tipper.json' },
    '/nonexistent',
  );
  const error = await codeOf(startSidecar(config));
  expect(error.code).toBe('RELAY_E_CONFIG_INVALID_ENV');
  expect(error.message).toMatch(/RELAY_ENGINE_LOCAL_ADDRESS.*192\.0\.2\.1.*EADDRNOTAVAIL/);
});

test('the bound fetch connects from the local address', async () => {
  const server = createHttpServer((req, res) => res.end(JSON.stringify({ from: req.socket.remoteAddress })));
  const port = await listening(server);
  const bound = boundFetch('127.0.0.3');
  try {
    const answer = await bound.fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' });
    expect(await answer.json()).toEqual({ from: '127.0.0.3' });
    // The global fetch is untouched.
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).json()).toEqual({ from: '127.0.0.1' });
  } finally {
    await bound.close();
    server.close();
  }
});

test('the gRPC forwarder pipes both ways over a socket bound to the local address', async () => {
  const peers: string[] = [];
  const echo = createServer((socket) => {
    peers.push(socket.remoteAddress ?? '');
    socket.pipe(socket);
  });
  const port = await listening(echo);
  const forwarder = await BoundForwarder.start({ host: '127.0.0.1', port }, '127.0.0.4');
  try {
    const [host, forwardPort] = forwarder.address.split(':') as [string, string];
    expect(host).toBe('127.0.0.1');
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host, port: Number(forwardPort) }, () => socket.write('ping'));
      socket.once('data', (data) => {
        resolve(data.toString());
        socket.destroy();
      });
      socket.once('error', reject);
    });
    expect(reply).toBe('ping');
    expect(peers).toEqual(['127.0.0.4']);
  } finally {
    forwarder.close();
    echo.close();
  }
});

test('gRPC URLs give the host and port to forward to; the tip floor is bound only on an engine origin', () => {
  expect(grpcHostPort('https://ny.mainnet.block-engine.jito.wtf:443')).toEqual({
    host: 'ny.mainnet.block-engine.jito.wtf',
    port: 443,
  });
  expect(grpcHostPort('https://ny.mainnet.block-engine.jito.wtf')).toEqual({
    host: 'ny.mainnet.block-engine.jito.wtf',
    port: 443,
  });
  expect(grpcHostPort('http://127.0.0.1:9004')).toEqual({ host: '127.0.0.1', port: 9004 });
  expect(grpcHostPort('http://[::1]:9004')).toEqual({ host: '::1', port: 9004 });
  const engines = ['http://127.0.0.1:9003', 'http://127.0.0.1:9010'];
  expect(servedByEngine('http://127.0.0.1:9003/api/v1/bundles/tip_floor', engines)).toBe(true);
  expect(servedByEngine('http://127.0.0.1:8899/tip_floor', engines)).toBe(false);
  expect(
    servedByEngine('https://bundles.jito.wtf/api/v1/bundles/tip_floor', [
      'https://ny.mainnet.block-engine.jito.wtf',
    ]),
  ).toBe(false);
});
