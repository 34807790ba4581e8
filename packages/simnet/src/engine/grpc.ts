import {
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
} from '@grpc/grpc-js';
import type { BundleResult } from 'jito-ts/dist/gen/block-engine/bundle.js';
import {
  SearcherServiceService,
  type ConnectedLeadersRegionedRequest,
  type ConnectedLeadersRegionedResponse,
  type ConnectedLeadersRequest,
  type ConnectedLeadersResponse,
  type GetRegionsRequest,
  type GetRegionsResponse,
  type GetTipAccountsRequest,
  type GetTipAccountsResponse,
  type NextScheduledLeaderRequest,
  type NextScheduledLeaderResponse,
  type SearcherServiceServer,
  type SendBundleRequest,
  type SendBundleResponse,
  type SubscribeBundleResultsRequest,
} from 'jito-ts/dist/gen/block-engine/searcher.js';
import type { BlockEngine } from './engine';
import { TEST_ONLY_TLS_CERT_PEM, TEST_ONLY_TLS_KEY_PEM, writeCaCertFile } from './tls';

export interface TlsMaterial {
  /** PEM certificate (chain) the server presents. */
  cert: string;
  /** PEM private key. */
  key: string;
}

export interface GrpcEngineOptions {
  engine: BlockEngine;
  /** The regional engine this server is (default: the engine's first region). */
  region?: string;
  host?: string;
  port?: number;
  /** true = the committed test-only certificate; an object = your own; false / absent = insecure. */
  tls?: boolean | TlsMaterial;
  /** Concurrent SubscribeBundleResults streams allowed per peer IP (jito-ts#54); 0 = unlimited. */
  maxResultStreamsPerIp?: number;
}

export interface StartedGrpcEngine {
  port: number;
  /** `host:port` as jito-ts takes it (no scheme). */
  address: string;
  /** `http://127.0.0.1:PORT` (insecure) or `https://localhost:PORT` (TLS). */
  url: string;
  tls: boolean;
  /** PEM file of the certificate to trust (for GRPC_DEFAULT_SSL_ROOTS_FILE_PATH); null when insecure. */
  caCertPath: string | null;
  close(): Promise<void>;
}

export const TOO_MANY_RESULT_STREAMS =
  'exceeded maximum concurrent bundle result connections limit. too many open connections';

function peerIp(peer: string): string {
  // grpc-js peers look like "127.0.0.1:54321", "ipv4:127.0.0.1:54321" or "[::1]:54321".
  const bare = peer.replace(/^ipv[46]:/, '');
  const bracket = /^\[([^\]]+)\]/.exec(bare);
  if (bracket) return bracket[1] as string;
  const lastColon = bare.lastIndexOf(':');
  return lastColon > 0 ? bare.slice(0, lastColon) : bare;
}

function errorFor(code: status, details: string) {
  return Object.assign(new Error(details), { code, details });
}

/**
 * The SearcherService of the block engine, served with jito-ts's own generated service definition so that jito-ts's
 * `SearcherClient` talks to it unchanged. Errors carry the texts of the JSON-RPC face; rate limits are
 * RESOURCE_EXHAUSTED; the injected 5xx fault is UNAVAILABLE. Only SendBundle spends rate-limit tokens: leader and
 * tip-account queries are free, so a client polling leaders does not starve its own sends.
 */
export async function startGrpcEngine(options: GrpcEngineOptions): Promise<StartedGrpcEngine> {
  const { engine } = options;
  const region = options.region ?? engine.homeRegion;
  if (!engine.regions.includes(region)) throw new Error(`unknown region "${region}"`);
  /** Regions a request names, known ones only; none named means this server's own (searcher.proto). */
  const askedRegions = (regions: readonly string[]) =>
    regions.length === 0 ? [region] : regions.filter((name) => engine.regions.includes(name));
  const maxStreams = options.maxResultStreamsPerIp ?? 32;
  const streams = new Set<ServerWritableStream<SubscribeBundleResultsRequest, BundleResult>>();
  const streamsPerIp = new Map<string, number>();

  const onResult = (result: BundleResult, sentTo: string) => {
    if (sentTo !== region || engine.faults.current.bundleResultsSilent) return;
    for (const call of streams) {
      if (!call.cancelled && !call.destroyed) call.write(result);
    }
  };
  engine.on('result', onResult);
  // A stream that ends cleanly (status OK, no error), as the block engine's can.
  const onEndStreams = () => {
    for (const call of [...streams]) {
      if (call.cancelled || call.destroyed) continue;
      engine.faults.count('bundleResultStreamsEnded');
      call.end();
    }
  };
  engine.faults.on('endBundleResultStreams', onEndStreams);

  /** Common gate of unary calls: latency fault, 5xx fault (and, for sends, the rate limit). */
  async function gate(call: ServerUnaryCall<unknown, unknown>, spendsToken: boolean) {
    await engine.delay();
    const auth = call.metadata.get('authorization')[0] ?? call.metadata.get('x-jito-auth')[0];
    const decision = engine.admit(
      peerIp(call.getPeer()),
      auth ? String(auth) : undefined,
      spendsToken,
      region,
    );
    if (decision.ok) return null;
    return decision.kind === 'unavailable'
      ? errorFor(status.UNAVAILABLE, decision.message)
      : errorFor(status.RESOURCE_EXHAUSTED, decision.message);
  }

  function unary<Req, Res>(
    spendsToken: boolean,
    answer: (request: Req) => Res | Error,
  ): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
    return (call, callback) => {
      void gate(call as ServerUnaryCall<unknown, unknown>, spendsToken).then((blocked) => {
        if (blocked) return callback(blocked);
        const out = answer(call.request);
        if (out instanceof Error) callback(out);
        else callback(null, out);
      });
    };
  }

  const service: SearcherServiceServer = {
    subscribeBundleResults(call) {
      const ip = peerIp(call.getPeer());
      const open = streamsPerIp.get(ip) ?? 0;
      if (maxStreams > 0 && open >= maxStreams) {
        call.destroy(errorFor(status.RESOURCE_EXHAUSTED, TOO_MANY_RESULT_STREAMS));
        return;
      }
      streamsPerIp.set(ip, open + 1);
      streams.add(call);
      let closed = false;
      const release = () => {
        if (closed) return;
        closed = true;
        streams.delete(call);
        streamsPerIp.set(ip, (streamsPerIp.get(ip) ?? 1) - 1);
      };
      call.on('cancelled', release);
      call.on('close', release);
      call.on('error', release);
    },
    sendBundle: unary<SendBundleRequest, SendBundleResponse>(true, (request) => {
      const packets = request.bundle?.packets ?? [];
      const outcome = engine.submitBundle(
        packets.map((packet) => packet.data),
        'base58',
        region,
      );
      if (!outcome.ok) return errorFor(status.INVALID_ARGUMENT, outcome.error.message);
      return { uuid: outcome.bundleId };
    }),
    getNextScheduledLeader: unary<NextScheduledLeaderRequest, NextScheduledLeaderResponse>(
      false,
      (request) => {
        const next = engine.nextScheduledLeader(askedRegions(request.regions ?? []));
        if (!next) return errorFor(status.NOT_FOUND, 'no connected leader scheduled');
        return next;
      },
    ),
    getConnectedLeaders: unary<ConnectedLeadersRequest, ConnectedLeadersResponse>(false, () => ({
      connectedValidators: engine.connectedLeaders(region),
    })),
    getConnectedLeadersRegioned: unary<ConnectedLeadersRegionedRequest, ConnectedLeadersRegionedResponse>(
      false,
      (request) => ({
        connectedValidators: Object.fromEntries(
          askedRegions(request.regions ?? []).map((name) => [
            name,
            { connectedValidators: engine.connectedLeaders(name) },
          ]),
        ),
      }),
    ),
    getTipAccounts: unary<GetTipAccountsRequest, GetTipAccountsResponse>(false, () => ({
      accounts: [...engine.tipAccounts],
    })),
    getRegions: unary<GetRegionsRequest, GetRegionsResponse>(false, () => ({
      currentRegion: region,
      availableRegions: [...engine.regions],
    })),
  };

  const server = new Server();
  server.addService(SearcherServiceService, service);

  const tlsMaterial: TlsMaterial | null =
    options.tls === true
      ? { cert: TEST_ONLY_TLS_CERT_PEM, key: TEST_ONLY_TLS_KEY_PEM }
      : options.tls
        ? options.tls
        : null;
  const credentials = tlsMaterial
    ? ServerCredentials.createSsl(null, [
        { cert_chain: Buffer.from(tlsMaterial.cert), private_key: Buffer.from(tlsMaterial.key) },
      ])
    : ServerCredentials.createInsecure();
  const host = options.host ?? '127.0.0.1';
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${options.port ?? 0}`, credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  const caCertPath = tlsMaterial ? writeCaCertFile(tlsMaterial.cert) : null;

  return {
    port,
    address: tlsMaterial ? `localhost:${port}` : `${host}:${port}`,
    url: tlsMaterial ? `https://localhost:${port}` : `http://${host}:${port}`,
    tls: tlsMaterial !== null,
    caCertPath,
    close: () =>
      new Promise<void>((resolve) => {
        engine.off('result', onResult);
        engine.faults.off('endBundleResultStreams', onEndStreams);
        for (const call of streams) call.end();
        streams.clear();
        server.tryShutdown(() => resolve());
        // Streams a client never closes would hold tryShutdown forever.
        setTimeout(() => server.forceShutdown(), 500).unref();
      }),
  };
}
