import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Faults } from '../faults';
import { Rng } from '../rng';
import type { ChainRead, Cluster, Commitment, SlotEvent } from '../chain/types';
import { meetsCommitment, parseCommitment, RpcError, RpcMethods } from './methods';

export interface RpcServerOptions {
  cluster: Cluster;
  /** Honoured live: rpcDown, rpc5xxRate, rpcLatencyMs. */
  faults?: Faults;
  host?: string;
  /** HTTP port; the WebSocket listens on port + 1. 0 picks a free pair. */
  port?: number;
  /** Dice for rpc5xxRate. Default: a fixed seed. */
  rng?: Rng;
}

export interface RpcServerHandle {
  url: string;
  wsUrl: string;
  port: number;
  close(): Promise<void>;
}

interface JsonRpcRequest {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

const MAX_BODY_BYTES = 50 * 1024 * 1024;

function errorResponse(id: unknown, code: number, message: string, data?: unknown) {
  return {
    jsonrpc: '2.0',
    error: data === undefined ? { code, message } : { code, message, data },
    id: id ?? null,
  };
}

function handleOne(methods: RpcMethods, request: JsonRpcRequest, node: ChainRead): unknown {
  if (!request || typeof request !== 'object' || typeof request.method !== 'string') {
    return errorResponse(request?.id, -32600, 'Invalid request');
  }
  try {
    return {
      jsonrpc: '2.0',
      result: methods.call(request.method, request.params, node),
      id: request.id ?? null,
    };
  } catch (error) {
    if (error instanceof RpcError) return errorResponse(request.id, error.code, error.message, error.data);
    return errorResponse(request.id, -32603, `Internal error: ${(error as Error).message}`);
  }
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * Solana JSON-RPC over HTTP (POST, single or batch bodies) plus the PubSub WebSocket on port + 1, which is where
 * @solana/web3.js v1 looks for it. WebSocket methods: signatureSubscribe / slotSubscribe and their unsubscribes.
 */
export async function startRpcServer(options: RpcServerOptions): Promise<RpcServerHandle> {
  const { cluster, faults } = options;
  const host = options.host ?? '127.0.0.1';
  const rng = options.rng ?? new Rng(0x5eed).fork('rpc');
  const methods = new RpcMethods(cluster);

  const handleHttp = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const send = (status: number, body: unknown): void => {
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' });
      res.end(text);
    };
    const current = faults?.current;
    if (current?.rpcLatencyMs) await delay(current.rpcLatencyMs);
    if (current?.rpcDown) {
      faults?.count('rpcRefused');
      send(503, errorResponse(null, -32005, 'Node is unhealthy', { numSlotsBehind: null }));
      return;
    }
    if (current && rng.chance(current.rpc5xxRate)) {
      faults?.count('rpc5xx');
      send(rng.pick([500, 502, 503]), 'simnet: injected server error');
      return;
    }
    if (req.method === 'GET' && req.url === '/health') {
      send(200, 'ok');
      return;
    }
    if (req.method !== 'POST') {
      send(405, 'Used HTTP Method is not allowed. POST or OPTIONS is required');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) {
        send(413, 'payload too large');
        return;
      }
      chunks.push(chunk as Buffer);
    }
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      send(200, errorResponse(null, -32700, 'Parse error'));
      return;
    }
    // Behind a load balancer one request (a whole batch) goes to one node, which may be some slots behind.
    let node: ChainRead = cluster;
    if (current && current.rpcLagSlots > 0 && rng.chance(current.rpcLaggingShare)) {
      faults?.count('rpcLagged');
      node = cluster.behind(current.rpcLagSlots);
    }
    if (Array.isArray(body)) {
      if (body.length === 0) send(200, errorResponse(null, -32600, 'Invalid request'));
      else
        send(
          200,
          body.map((request) => handleOne(methods, request as JsonRpcRequest, node)),
        );
      return;
    }
    send(200, handleOne(methods, body as JsonRpcRequest, node));
  };

  // Pick a port whose neighbour (port + 1) is free too, since clients derive the WebSocket URL from it. Linux gives
  // bind(0) even ports and connect() odd ones, so on a machine with many outgoing connections port + 1 of an
  // OS-picked port is often taken: after a few tries, candidates come from below the ephemeral range instead.
  let http: Server | null = null;
  let wss: WebSocketServer | null = null;
  let wsHttp: Server | null = null;
  for (let attempt = 0; attempt < 100 && !wss; attempt++) {
    const wanted = options.port ?? (attempt < 5 ? 0 : 10_000 + Math.floor(Math.random() * 20_000));
    const candidate = createServer((req, res) => {
      handleHttp(req, res).catch((error: Error) => {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(error.message));
      });
    });
    // Idle connections stay open a minute, as RPC endpoints behind the usual load balancers keep them. The 1 s this
    // was before is under undici's keep-alive threshold (2 s: Node's fetch does not reuse a connection the server
    // may close sooner), so every JSON-RPC call of relay opened a new TCP connection: the sidecar's profile showed
    // the connects and undici's 'reset' errors, a cost a real endpoint does not impose. close() still ends every
    // connection at once (closeAllConnections below).
    candidate.keepAliveTimeout = 60_000;
    try {
      await listen(candidate, wanted, host);
    } catch (error) {
      if (options.port) throw error;
      continue;
    }
    const port = (candidate.address() as AddressInfo).port;
    try {
      // The WebSocket server on an HTTP server of its own, so that close() can end every connection it holds: a socket
      // whose upgrade never finished is no client of the WebSocket server's, and a peer that vanished (a host cut off
      // the network, then killed) never closes it; ws's close() leaves both open, and the process with them.
      const upgrades = createServer((_req, res) => {
        // A plain request to the WebSocket port, answered as ws's own server would.
        res.writeHead(426, { 'content-type': 'text/plain' });
        res.end('Upgrade Required');
      });
      await listen(upgrades, port + 1, host);
      wss = new WebSocketServer({ server: upgrades });
      wsHttp = upgrades;
      http = candidate;
    } catch (error) {
      await new Promise<void>((resolve) => candidate.close(() => resolve()));
      if (options.port) throw error;
    }
  }
  if (!http || !wss || !wsHttp)
    throw new Error('could not find a free pair of ports for JSON-RPC + WebSocket');
  const upgrades = wsHttp;
  const port = (http.address() as AddressInfo).port;
  const pubsub = new PubSub(cluster, wss, faults);

  return {
    url: `http://${host}:${port}`,
    wsUrl: `ws://${host}:${port + 1}`,
    port,
    close: async () => {
      pubsub.close();
      await new Promise<void>((resolve) => (wss as WebSocketServer).close(() => resolve()));
      upgrades.closeAllConnections();
      await new Promise<void>((resolve) => upgrades.close(() => resolve()));
      (http as Server).closeAllConnections();
      await new Promise<void>((resolve) => (http as Server).close(() => resolve()));
    },
  };
}

type Subscription =
  | { kind: 'signature'; socket: WebSocket; signature: string; commitment: Commitment }
  | { kind: 'slot'; socket: WebSocket };

/** Solana PubSub over one WebSocket server: subscription ids are numbers, unique across sockets. */
class PubSub {
  private nextId = 0;
  private readonly subscriptions = new Map<number, Subscription>();
  private readonly onSlot = (event: SlotEvent): void => this.slotChanged(event);

  constructor(
    private readonly cluster: Cluster,
    private readonly wss: WebSocketServer,
    private readonly faults: Faults | undefined,
  ) {
    cluster.on('slot', this.onSlot);
    wss.on('connection', (socket) => {
      if (this.faults?.current.rpcDown) {
        this.faults?.count('rpcRefused');
        socket.close(1013, 'node is unhealthy');
        return;
      }
      socket.on('message', (data) => this.onMessage(socket, String(data)));
      socket.on('close', () => {
        for (const [id, sub] of this.subscriptions) if (sub.socket === socket) this.subscriptions.delete(id);
      });
    });
  }

  close(): void {
    this.cluster.off('slot', this.onSlot);
    for (const socket of this.wss.clients) socket.terminate();
    this.subscriptions.clear();
  }

  private onMessage(socket: WebSocket, text: string): void {
    let request: JsonRpcRequest;
    try {
      request = JSON.parse(text) as JsonRpcRequest;
    } catch {
      socket.send(JSON.stringify(errorResponse(null, -32700, 'Parse error')));
      return;
    }
    // rpc-websockets sends keepalive notifications ({"method":"ping"} without an id): nothing to answer.
    if (!request || typeof request !== 'object' || request.id === undefined || request.id === null) return;
    const reply = (result: unknown): void =>
      socket.send(JSON.stringify({ jsonrpc: '2.0', result, id: request.id }));
    const params = Array.isArray(request.params) ? request.params : [];
    try {
      switch (request.method) {
        case 'signatureSubscribe': {
          const signature = params[0];
          if (typeof signature !== 'string')
            throw new RpcError(-32602, 'Invalid params: signature must be a string');
          const config = (params[1] ?? {}) as { commitment?: string };
          const id = ++this.nextId;
          this.subscriptions.set(id, {
            kind: 'signature',
            socket,
            signature,
            commitment: parseCommitment(config.commitment),
          });
          reply(id);
          // The status may already be there (web3.js also asks getSignatureStatuses after the ack).
          setImmediate(() => this.checkSignatures());
          return;
        }
        case 'slotSubscribe': {
          const id = ++this.nextId;
          this.subscriptions.set(id, { kind: 'slot', socket });
          reply(id);
          return;
        }
        case 'signatureUnsubscribe':
        case 'slotUnsubscribe': {
          const id = params[0];
          const sub = typeof id === 'number' ? this.subscriptions.get(id) : undefined;
          const kind = request.method === 'slotUnsubscribe' ? 'slot' : 'signature';
          if (!sub || sub.kind !== kind || sub.socket !== socket) {
            throw new RpcError(-32602, 'Invalid subscription id.');
          }
          this.subscriptions.delete(id as number);
          reply(true);
          return;
        }
        default:
          throw new RpcError(-32601, 'Method not found');
      }
    } catch (error) {
      const e = error instanceof RpcError ? error : new RpcError(-32603, String((error as Error).message));
      socket.send(JSON.stringify(errorResponse(request.id, e.code, e.message)));
    }
  }

  private slotChanged(event: SlotEvent): void {
    if (event.status === 'processed') {
      const root = this.cluster.slotAt('finalized');
      for (const [id, sub] of this.subscriptions) {
        if (sub.kind !== 'slot') continue;
        this.notify(sub.socket, 'slotNotification', id, {
          parent: event.parent ?? 0,
          root,
          slot: event.slot,
        });
      }
    }
    if (event.status !== 'dead') this.checkSignatures();
  }

  private checkSignatures(): void {
    for (const [id, sub] of this.subscriptions) {
      if (sub.kind !== 'signature') continue;
      const status = this.cluster.signatureStatus(sub.signature);
      if (!status || !meetsCommitment(status.confirmationStatus, sub.commitment)) continue;
      // Agave drops a signature subscription after its one notification.
      this.subscriptions.delete(id);
      this.notify(sub.socket, 'signatureNotification', id, {
        context: { slot: this.cluster.slotAt(sub.commitment) },
        value: { err: status.err },
      });
    }
  }

  private notify(socket: WebSocket, method: string, subscription: number, result: unknown): void {
    if (socket.readyState !== socket.OPEN) return;
    socket.send(JSON.stringify({ jsonrpc: '2.0', method, params: { result, subscription } }));
  }
}
