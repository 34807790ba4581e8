import { rmSync } from 'node:fs';
import { chmod, lstat, mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, isIP, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RelayError } from '@solrelay/core';
import { Agent, fetch as undiciFetch } from 'undici';

/**
 * `RELAY_ENGINE_LOCAL_ADDRESS`: the block engine's budget is per source IP and region (jito.md §1.7), so sidecars
 * that share a machine each send their engine traffic from an address of their own. Everything here is about
 * connections to the block engines only: Solana RPC and Yellowstone are not metered per IP and keep the default
 * route.
 */
const NAME = 'RELAY_ENGINE_LOCAL_ADDRESS';

/**
 * Prove that `address` can be bound on this machine (a TCP listener on port 0 of it, closed at once), or throw
 * `RELAY_E_CONFIG_INVALID_ENV` naming the variable, the address and the system's code (EADDRNOTAVAIL: no interface
 * has it). Run at start, before anything else is opened, so a typo stops start-up instead of every send.
 */
export async function probeLocalAddress(address: string): Promise<void> {
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: address, port: 0 }, () => resolve());
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name: NAME,
      reason:
        code === 'EADDRNOTAVAIL'
          ? `${address} is not an address of this machine (EADDRNOTAVAIL): give one of its own (on Linux every 127.0.0.0/8 address is bindable on loopback)`
          : `${address} cannot be bound on this machine (${code}: ${(error as Error).message})`,
    });
  } finally {
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** The address family of an IP literal (4 or 6), for the DNS lookup of a host the bound socket connects to. */
function familyOf(address: string): 4 | 6 {
  return isIP(address) === 6 ? 6 : 4;
}

/**
 * A `fetch` whose every connection goes out from `localAddress`: undici's own fetch over an undici `Agent` with
 * `localAddress` (undici 7's Client option; `connect: { localAddress }` is overridden by it, unset, and does not
 * bind). Both come from one undici package, not Node's bundled fetch with a dispatcher of another undici version.
 * Host names resolve to the local address's family only (an IPv4 source cannot reach an IPv6 peer).
 */
export function boundFetch(localAddress: string): { fetch: typeof fetch; close(): Promise<void> } {
  const agent = new Agent({ localAddress, connect: { family: familyOf(localAddress) } });
  const bound = (input: Parameters<typeof fetch>[0], init?: RequestInit) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], {
      ...(init as Parameters<typeof undiciFetch>[1]),
      dispatcher: agent,
    });
  // Closed at shutdown without waiting for requests in flight (a send's answer is of no use then).
  return { fetch: bound as unknown as typeof fetch, close: () => agent.destroy() };
}

/** The host (brackets stripped) and port a gRPC URL dials: the URL's port, else 443 (grpc-js's default port). */
export function grpcHostPort(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: parsed.port === '' ? 443 : Number(parsed.port),
  };
}

/**
 * The longest Unix domain socket path, in bytes: `sun_path` holds 108 bytes on Linux and 104 on macOS, the NUL
 * included. Node does not refuse a longer one: it binds the path cut short, where nobody would look for it.
 */
const MAX_SOCKET_PATH = 103;

/**
 * Make `path` free for a new socket: nothing there, or a socket nobody listens on any more (a process that died
 * without closing its own), which is removed. A socket someone still listens on, or any other kind of file, stays and
 * is refused: it is not ours to take.
 */
async function clearStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (!isSocket) throw new Error(`${path} exists and is not a socket: not removed`);
  const live = await new Promise<boolean>((resolve) => {
    const probe = connect({ path });
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    // ECONNREFUSED: nobody listens (or ENOENT: gone meanwhile).
    probe.once('error', () => resolve(false));
  });
  if (live) throw new Error(`${path}: another process listens on this socket`);
  await rm(path, { force: true });
}

/**
 * A local forwarder: each connection accepted on the Unix domain socket `path` is piped, byte for byte, to
 * `host:port` over a TCP socket bound to `localAddress`. It exists because @grpc/grpc-js has no way to choose a
 * client's local address: its transport dials with `net.connect(address)`, the subchannel's host and port only
 * (`Http2SubchannelConnector.tcpConnect` in src/transport.ts, 1.14.7 and grpc-node's master alike), and no channel
 * option carries one (the package README lists them). The gRPC client dials `unix:<path>` instead (grpc-js's `unix`
 * resolver), its authority and TLS name set to the engine's own (`GrpcBlockEngine`'s `via`), so TLS and HTTP/2 still
 * run end to end with the engine.
 *
 * A Unix socket rather than a loopback port: a port on 127.0.0.1 takes any local user's connection, who could then
 * spend this host's engine budget from its address. The socket is not on the network at all, its file is 0600, and
 * the caller keeps it in a directory of its own (`bindEngineTraffic`: a 0700 temp directory), so only this user
 * reaches it. A stale socket left at `path` by a process that died is removed at start; the path is removed at close.
 */
export class BoundForwarder {
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;

  private constructor(
    target: { host: string; port: number },
    localAddress: string,
    /** The socket's path. */
    readonly path: string,
  ) {
    const family = familyOf(localAddress);
    this.server = createServer((inbound) => {
      const outbound = connect({ host: target.host, port: target.port, localAddress, family });
      outbound.setNoDelay(true);
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        // As grpc-js's own session: a connection alone keeps no process alive (grpc-js refs its side during calls).
        socket.unref();
        // Either side failing or closing ends both: grpc-js then sees its connection drop (UNAVAILABLE) and dials
        // again, as it would had the engine dropped it.
        socket.on('error', () => socket.destroy());
        socket.on('close', () => {
          this.sockets.delete(socket);
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
  }

  /** `unix:<path>`: the gRPC target the client dials instead of the engine. */
  get target(): string {
    return `unix:${this.path}`;
  }

  /** Listen on `path` (an absolute path in a directory only this user can enter), for connections to `target`. */
  static async start(
    target: { host: string; port: number },
    localAddress: string,
    path: string,
  ): Promise<BoundForwarder> {
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH)
      throw new Error(
        `${path} is too long for a Unix domain socket (at most ${MAX_SOCKET_PATH} bytes): set TMPDIR to a shorter directory`,
      );
    await clearStaleSocket(path);
    const forwarder = new BoundForwarder(target, localAddress, path);
    const { server } = forwarder;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ path }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.unref();
    try {
      // The file is created as the umask allows (0755 commonly); connecting takes write permission on it.
      await chmod(path, 0o600);
    } catch (error) {
      forwarder.close();
      throw error;
    }
    return forwarder;
  }

  close(): void {
    // Closing the listener unlinks its path (libuv); removed here too, whatever is left.
    this.server.close();
    rmSync(this.path, { force: true });
    for (const socket of this.sockets) socket.destroy();
  }
}

/** What the engine clients need to send from the local address (`EngineRegions.fromConfig`'s `binding`). */
export interface EngineBinding {
  /** The IP literal every block-engine connection goes out from. */
  localAddress: string;
  /** For the JSON-RPC engines (and a tip floor one of them serves). */
  fetch: typeof fetch;
  /** The gRPC target (`unix:<path>`, a `BoundForwarder`'s) a gRPC engine URL is dialled through. */
  grpcVia(url: string): string;
}

/**
 * Bind the block engines' traffic to `localAddress` (proved bindable first with `probeLocalAddress`): one fetch (an
 * undici Agent) for every JSON-RPC address, and one forwarder per gRPC address (`grpcUrls`, each at most once), their
 * sockets in a directory of their own (`relay-engine-*` in the temp directory: mkdtemp makes it 0700), removed at
 * close.
 */
export async function bindEngineTraffic(
  localAddress: string,
  grpcUrls: readonly string[],
): Promise<EngineBinding & { close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'relay-engine-'));
  const forwarders = new Map<string, BoundForwarder>();
  const closeForwarders = () => {
    for (const forwarder of forwarders.values()) forwarder.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const url of grpcUrls)
      if (!forwarders.has(url))
        forwarders.set(
          url,
          await BoundForwarder.start(grpcHostPort(url), localAddress, join(dir, `${forwarders.size}.sock`)),
        );
  } catch (error) {
    closeForwarders();
    throw error;
  }
  const http = boundFetch(localAddress);
  return {
    localAddress,
    fetch: http.fetch,
    grpcVia: (url) => {
      const forwarder = forwarders.get(url);
      if (!forwarder) throw new Error(`no bound forwarder for ${url}`);
      return forwarder.target;
    },
    close: async () => {
      closeForwarders();
      await http.close();
    },
  };
}

/**
 * Whether the tip floor is read from one of the JSON-RPC engines' own origins (the simulated cluster serves it there):
 * then it is the engine's traffic and goes out from the local address too. Jito's (`bundles.jito.wtf`) is not a
 * block engine's address and keeps the default route.
 */
export function servedByEngine(tipFloorUrl: string, engineUrls: readonly string[]): boolean {
  const origin = new URL(tipFloorUrl).origin;
  return engineUrls.some((url) => new URL(url).origin === origin);
}
