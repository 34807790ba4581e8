// First: the test certificate becomes the gRPC clients' only root before anything loads @grpc/grpc-js.
import {
  ENGINE_TLS_NAME,
  TEST_ONLY_ENGINE_CERT_PEM,
  TEST_ONLY_ENGINE_KEY_PEM,
} from './helpers/engine-tls-roots';
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server as GrpcServer, ServerCredentials, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { isRelayError } from '@solrelay/core';
import {
  SearcherServiceService,
  type SearcherServiceServer,
} from 'jito-ts/dist/gen/block-engine/searcher.js';
import { configFromEnv } from '../src/config';
import { startSidecar } from '../src/service';
import { GrpcBlockEngine } from '../src/upstream/block-engine-grpc';
import {
  BoundForwarder,
  bindEngineTraffic,
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
/** Block engines on this machine (the simulated cluster's addresses), which a loopback source address reaches. */
const localEngines = {
  BUNDLE_ENGINE_URL: 'http://127.0.0.1:9003',
  BUNDLE_ENGINE_GRPC_URL: 'http://127.0.0.1:9004',
  TIP_FLOOR_URL: 'http://127.0.0.1:9003/api/v1/bundles/tip_floor',
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
    configFromEnv({ ...minimal, ...localEngines, RELAY_ENGINE_LOCAL_ADDRESS: ' 127.0.0.2 ' }, '/srv/relay')
      .engineLocalAddress,
  ).toBe('127.0.0.2');
  expect(
    configFromEnv({ ...minimal, ...localEngines, RELAY_ENGINE_LOCAL_ADDRESS: '::1' }, '/srv/relay')
      .engineLocalAddress,
  ).toBe('::1');
  // An address that is not loopback is the machine's to have (proved at start), whatever the engines.
  expect(
    configFromEnv({ ...minimal, RELAY_ENGINE_LOCAL_ADDRESS: '192.0.2.1' }, '/srv/relay').engineLocalAddress,
  ).toBe('192.0.2.1');
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

describe('a loopback address reaches only engines on this machine', () => {
  const jito = 'https://ny.mainnet.block-engine.jito.wtf';
  test.each([
    [
      'the default engines (Jito)',
      {},
      /BUNDLE_ENGINE_URL's https:\/\/amsterdam\.mainnet\.block-engine\.jito\.wtf/,
    ],
    [
      'a JSON-RPC engine elsewhere',
      { ...localEngines, BUNDLE_ENGINE_URL: jito },
      /BUNDLE_ENGINE_URL's https:\/\/ny\./,
    ],
    [
      'a gRPC engine elsewhere',
      { ...localEngines, BUNDLE_ENGINE_GRPC_URL: `${jito}:443` },
      /BUNDLE_ENGINE_GRPC_URL's https:\/\/ny\..*:443/,
    ],
    [
      'an engine by a host name other than localhost (not resolved)',
      { ...localEngines, BUNDLE_ENGINE_URL: 'http://engine.internal:9003' },
      /BUNDLE_ENGINE_URL's http:\/\/engine\.internal:9003/,
    ],
    [
      'over gRPC, a tip floor served by a JSON-RPC engine elsewhere',
      {
        BUNDLE_ENGINE_TRANSPORT: 'grpc',
        BUNDLE_ENGINE_URL: jito,
        BUNDLE_ENGINE_GRPC_URL: 'http://127.0.0.1:9004',
        TIP_FLOOR_URL: `${jito}/api/v1/bundles/tip_floor`,
      },
      /TIP_FLOOR_URL's https:\/\/ny\./,
    ],
  ])('refused with %s', async (_what, engines, culprit) => {
    const error = await codeOf(
      Promise.resolve().then(() =>
        configFromEnv({ ...minimal, ...engines, RELAY_ENGINE_LOCAL_ADDRESS: '127.0.0.2' }, '/srv/relay'),
      ),
    );
    expect(error.code).toBe('RELAY_E_CONFIG_INVALID_ENV');
    expect(error.message).toMatch(
      /RELAY_ENGINE_LOCAL_ADDRESS is invalid: 127\.0\.0\.2 is a loopback address, which cannot reach a block engine on another machine/,
    );
    expect(error.message).toMatch(culprit);
  });

  test.each([
    ['127.0.0.2', localEngines],
    [
      '127.0.0.2',
      { BUNDLE_ENGINE_URL: 'http://localhost:9003', BUNDLE_ENGINE_GRPC_URL: 'http://localhost:9004' },
    ],
    [
      '::1',
      { BUNDLE_ENGINE_URL: 'http://[::1]:9003', BUNDLE_ENGINE_GRPC_URL: 'https://engine.localhost:9004' },
    ],
    // Over gRPC the JSON-RPC addresses are not dialled (Jito's tip floor is not theirs: it keeps the default route).
    ['127.0.0.2', { BUNDLE_ENGINE_TRANSPORT: 'grpc', BUNDLE_ENGINE_GRPC_URL: 'https://localhost:9004' }],
  ])('%s with engines on loopback is accepted (%j)', (address, engines) => {
    expect(
      configFromEnv({ ...minimal, ...engines, RELAY_ENGINE_LOCAL_ADDRESS: address }, '/srv/relay')
        .engineLocalAddress,
    ).toBe(address);
  });
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

/** A private directory for sockets, removed after the test. */
async function inPrivateDir<T>(body: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-test-'));
  try {
    return await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Send `text` to the Unix socket at `path` and resolve with the first reply. */
function exchange(path: string, text: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect({ path }, () => socket.write(text));
    socket.once('data', (data) => {
      resolve(data.toString());
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** An echo server on 127.0.0.1 that notes each connection's remote address. */
async function echoServer(): Promise<{ port: number; peers: string[]; close(): void }> {
  const peers: string[] = [];
  const server = createServer((socket) => {
    peers.push(socket.remoteAddress ?? '');
    socket.pipe(socket);
  });
  const port = await listening(server);
  return { port, peers, close: () => server.close() };
}

/** The inodes of this process's listening TCP sockets (Linux's /proc: its fds, and the kernel's TCP tables). */
function listeningTcpSockets(): Set<string> {
  const mine = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`))?.[1];
      if (inode) mine.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  const found = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6'])
    for (const line of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // st 0A: LISTEN; the tenth field is the inode.
      if (fields[3] === '0A' && mine.has(fields[9] as string)) found.add(fields[9] as string);
    }
  return found;
}

test('the gRPC forwarder pipes both ways between its Unix socket and a TCP socket bound to the local address', async () => {
  const echo = await echoServer();
  await inPrivateDir(async (dir) => {
    const before = listeningTcpSockets();
    const forwarder = await BoundForwarder.start(
      { host: '127.0.0.1', port: echo.port },
      '127.0.0.4',
      join(dir, 'f.sock'),
    );
    try {
      expect(forwarder.target).toBe(`unix:${join(dir, 'f.sock')}`);
      // Not on the network: the forwarder opened no TCP listener, only a socket file, which only its user may use.
      expect([...listeningTcpSockets()].filter((inode) => !before.has(inode))).toEqual([]);
      const file = statSync(forwarder.path);
      expect(file.isSocket()).toBe(true);
      expect(file.mode & 0o777).toBe(0o600);
      expect(await exchange(forwarder.path, 'ping')).toBe('ping');
      expect(echo.peers).toEqual(['127.0.0.4']);
    } finally {
      forwarder.close();
      echo.close();
    }
    // Closing removes the socket file.
    expect(existsSync(join(dir, 'f.sock'))).toBe(false);
  });
});

test('a stale socket at the path (its process died) is replaced; a live one, or any other file, is refused and kept', async () => {
  const echo = await echoServer();
  try {
    await inPrivateDir(async (dir) => {
      const path = join(dir, 'f.sock');
      // A process that listens on the path and is killed: its socket file stays, nobody listening.
      const child = spawn(
        process.execPath,
        ['-e', "require('node:net').createServer().listen(process.argv[1], () => console.log('up'))", path],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
      expect(statSync(path).isSocket()).toBe(true);
      const forwarder = await BoundForwarder.start({ host: '127.0.0.1', port: echo.port }, '127.0.0.4', path);
      try {
        expect(await exchange(path, 'after a crash')).toBe('after a crash');
        // Now live: a second forwarder on the same path is refused, and the first one keeps working.
        await expect(
          BoundForwarder.start({ host: '127.0.0.1', port: echo.port }, '127.0.0.4', path),
        ).rejects.toThrow(/another process listens on this socket/);
        expect(await exchange(path, 'still here')).toBe('still here');
      } finally {
        forwarder.close();
      }

      const file = join(dir, 'notes.txt');
      writeFileSync(file, 'mine');
      await expect(
        BoundForwarder.start({ host: '127.0.0.1', port: echo.port }, '127.0.0.4', file),
      ).rejects.toThrow(/exists and is not a socket: not removed/);
      expect(readFileSync(file, 'utf8')).toBe('mine');

      // A path the system would cut short is refused before anything is bound.
      await expect(
        BoundForwarder.start(
          { host: '127.0.0.1', port: echo.port },
          '127.0.0.4',
          join(dir, `${'s'.repeat(120)}.sock`),
        ),
      ).rejects.toThrow(/too long for a Unix domain socket/);
    });
  } finally {
    echo.close();
  }
});

test('bindEngineTraffic: one forwarder per gRPC address, its socket in a 0700 directory of its own, all removed at close', async () => {
  const echo = await echoServer();
  const urls = [`http://127.0.0.1:${echo.port}`, `http://localhost:${echo.port}`];
  const bound = await bindEngineTraffic('127.0.0.5', [...urls, urls[0] as string]);
  const paths = urls.map((url) => bound.grpcVia(url).replace(/^unix:/, ''));
  const dir = join(paths[0] as string, '..');
  try {
    expect(urls.map((url) => bound.grpcVia(url))).toEqual(paths.map((path) => `unix:${path}`));
    expect(new Set(paths).size).toBe(2);
    expect(dir.startsWith(join(tmpdir(), 'relay-engine-'))).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['0.sock', '1.sock']);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const path of paths) expect(statSync(path).mode & 0o777).toBe(0o600);
    for (const path of paths) expect(await exchange(path, path)).toBe(path);
    expect(echo.peers).toEqual(['127.0.0.5', '127.0.0.5']);
    expect(() => bound.grpcVia('http://127.0.0.1:1')).toThrow(/no bound forwarder/);
  } finally {
    await bound.close();
    echo.close();
  }
  expect(existsSync(dir)).toBe(false);
});

describe('gRPC over TLS through the forwarder', () => {
  let server: GrpcServer;
  let port: number;
  const seen: { peer: string; authority: string }[] = [];

  beforeAll(async () => {
    server = new GrpcServer();
    const getRegions: SearcherServiceServer['getRegions'] = (call, callback) => {
      seen.push({ peer: call.getPeer(), authority: call.getHost() });
      callback(null, { currentRegion: 'test', availableRegions: ['test'] });
    };
    server.addService(SearcherServiceService, { getRegions } as UntypedServiceImplementation);
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        '127.0.0.1:0',
        ServerCredentials.createSsl(null, [
          {
            cert_chain: Buffer.from(TEST_ONLY_ENGINE_CERT_PEM),
            private_key: Buffer.from(TEST_ONLY_ENGINE_KEY_PEM),
          },
        ]),
        (error, bound) => (error ? reject(error) : resolve(bound)),
      ),
    );
  });

  afterAll(() => server.forceShutdown());

  test("the client verifies the engine's own name over the forwarder, from the local address", async () => {
    await inPrivateDir(async (dir) => {
      // The engine's URL names it by its certificate's name; the forwarder reaches it at 127.0.0.1 (no DNS for .test).
      const forwarder = await BoundForwarder.start(
        { host: '127.0.0.1', port },
        '127.0.0.6',
        join(dir, 'tls.sock'),
      );
      const engine = new GrpcBlockEngine(`https://${ENGINE_TLS_NAME}:${port}`, { via: forwarder.target });
      // The same certificate under another name: the handshake checks the name, so it fails.
      const impostor = new GrpcBlockEngine(`https://other.relay.test:${port}`, { via: forwarder.target });
      try {
        expect(await engine.getRegions()).toEqual({ currentRegion: 'test', availableRegions: ['test'] });
        expect(seen).toHaveLength(1);
        expect(seen[0]?.peer).toMatch(/^127\.0\.0\.6:\d+$/);
        expect(seen[0]?.authority).toBe(`${ENGINE_TLS_NAME}:${port}`);
        await expect(impostor.getRegions()).rejects.toThrow(/UNAVAILABLE.*other\.relay\.test.*altnames/s);
        expect(seen).toHaveLength(1);
      } finally {
        engine.close();
        impostor.close();
        forwarder.close();
      }
    });
  });
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
