import type { Keypair } from '@solana/web3.js';
import { SimCluster, fundedKeypair, type ConsensusMode, type MigrationOptions } from './chain';
import { Faults } from './faults';
import { Rng } from './rng';
import { startRpcServer } from './rpc/server';
import { startGeyserServer } from './geyser/server';
import { BlockEngine, type BlockEngineOptions } from './engine/engine';
import { engineJsonRpcRoutes } from './engine/json-rpc';
import { startGrpcEngine, type TlsMaterial } from './engine/grpc';
import { regionNames } from './engine/regions';
import type { RateLimitOptions } from './engine/rate-limit';
import { SimLlm } from './llm/llm';
import { adminRoutes } from './admin';
import { startHttpServer } from './http';

export interface SimnetPorts {
  /** Solana JSON-RPC over HTTP; its WebSocket listens on this + 1. */
  rpc?: number;
  /** Yellowstone gRPC. */
  geyser?: number;
  /** The first region's block engine HTTP: JSON-RPC, tip floor, Anthropic Messages and /admin. */
  engine?: number;
  /** The first region's block engine gRPC SearcherService. */
  engineGrpc?: number;
}

export interface SimnetOptions {
  /** Seed of every random choice (leaders, blockhashes, clearing tips, regimes, fault dice). Default 1. */
  seed?: number;
  /** Slot period of the automatic clock, ms (default 400). */
  slotMs?: number;
  /** 'manual' leaves the clock stopped: drive it with `cluster.advance(n)`. Default 'auto'. */
  clock?: 'auto' | 'manual';
  slotsPerEpoch?: number;
  validatorCount?: number;
  bundleEngineShare?: number;
  /** The consensus the cluster runs: 'towerbft' (default), 'alpenglow' or 'migration' (README: Consensus modes). */
  consensus?: ConsensusMode;
  /** Alpenglow: ms from processed to the finalization certificate (default 120). */
  finalizationDelayMs?: number;
  /** The 'migration' mode's slots. */
  migration?: MigrationOptions;
  /** Loopback address to bind (default 127.0.0.1). */
  host?: string;
  /**
   * Consecutive ports from here: rpc, rpc WebSocket, geyser, then engine HTTP and engine gRPC of each region in turn.
   * 0 / absent = free ports.
   */
  portBase?: number;
  /** Individual ports (override portBase); 0 picks a free one. */
  ports?: SimnetPorts;
  /** Serve the gRPC SearcherService over TLS: true = the committed test-only certificate, or your own PEMs. */
  tls?: boolean | TlsMaterial;
  /** Require this x-token on the geyser stream. */
  xToken?: string;
  /**
   * Regional block engines, each on its own HTTP and gRPC port with its own rate limit and connected leaders: a count
   * (the first N of Jito's amsterdam, dublin, frankfurt, london, ny, slc, singapore, tokyo) or names. Default 8.
   */
  regions?: number | readonly string[];
  /** false turns the block engine's per-IP rate limit off; an object tunes it. Default: 1 req/s per IP per region. */
  rateLimit?: boolean | RateLimitOptions;
  /** Only this Anthropic key is accepted (default: any non-empty key). */
  llmApiKey?: string;
  /** Extra block-engine settings (lookahead, lookbacks, auction regimes). */
  engine?: Partial<Omit<BlockEngineOptions, 'cluster' | 'faults' | 'rng'>>;
}

export interface RegionEndpoints {
  region: string;
  /** Block engine base URL of the region (the JSON-RPC lives under /api/v1). */
  engineUrl: string;
  engineGrpcUrl: string;
  engineGrpcAddress: string;
}

export interface SimnetEndpoints {
  rpcUrl: string;
  rpcWsUrl: string;
  geyserEndpoint: string;
  /** Every regional engine, the first one also under `engineUrl` / `engineGrpcUrl` / `engineGrpcAddress`. */
  regions: RegionEndpoints[];
  /** The first region's block engine base URL (the JSON-RPC lives under /api/v1). */
  engineUrl: string;
  /** `http://127.0.0.1:PORT` (insecure) or `https://localhost:PORT` (TLS). */
  engineGrpcUrl: string;
  /** `host:port` without scheme, as jito-ts's `searcherClient()` and `SearcherServiceClient` take it. */
  engineGrpcAddress: string;
  tipFloorUrl: string;
  anthropicBaseUrl: string;
  adminUrl: string;
  /** PEM to trust for the TLS gRPC port, or null when insecure. */
  caCertPath: string | null;
}

export interface Simnet {
  cluster: SimCluster;
  faults: Faults;
  /** The block engine: `engine.auction.setFixedClearingTip(n)`, `engine.auction.setRegime('spike')`, ... */
  engine: BlockEngine;
  /** The simulated Messages endpoint: `llm.script(...)`, `llm.setLatency(ms)`, `llm.requests`. */
  llm: SimLlm;
  endpoints: SimnetEndpoints;
  /** Environment for a sidecar (and agent) pointed at this simnet. */
  env(): Record<string, string>;
  /** A fresh keypair credited by the faucet (e.g. the sidecar's tipper). */
  fundedKeypair(lamports: number): Keypair;
  stop(): Promise<void>;
}

function portFor(options: SimnetOptions, key: keyof SimnetPorts, offset: number): number {
  const explicit = options.ports?.[key];
  if (explicit !== undefined) return explicit;
  return options.portBase ? options.portBase + offset : 0;
}

/** Region `index` (≥ 1): HTTP at portBase + 5 + 2(index − 1), gRPC one above; free ports without a base. */
function regionalPort(options: SimnetOptions, index: number, which: 0 | 1): number {
  return options.portBase ? options.portBase + 5 + 2 * (index - 1) + which : 0;
}

/**
 * Start a whole cluster on loopback: the chain (slot clock, leaders, bank), Solana JSON-RPC + WebSocket, Yellowstone
 * gRPC, the Jito block engine (HTTP JSON-RPC + tip floor, gRPC SearcherService) and, on the engine's HTTP port, the
 * Anthropic-compatible Messages endpoint and the /admin control routes.
 */
export async function startSimnet(options: SimnetOptions = {}): Promise<Simnet> {
  const host = options.host ?? '127.0.0.1';
  const rng = new Rng(options.seed ?? 1);
  const faults = new Faults();
  const cluster = new SimCluster({
    rng: rng.fork('cluster'),
    faults,
    ...(options.slotMs !== undefined ? { slotMs: options.slotMs } : {}),
    ...(options.slotsPerEpoch !== undefined ? { slotsPerEpoch: options.slotsPerEpoch } : {}),
    ...(options.validatorCount !== undefined ? { validatorCount: options.validatorCount } : {}),
    ...(options.bundleEngineShare !== undefined ? { bundleEngineShare: options.bundleEngineShare } : {}),
    ...(options.consensus !== undefined ? { consensus: options.consensus } : {}),
    ...(options.finalizationDelayMs !== undefined
      ? { finalizationDelayMs: options.finalizationDelayMs }
      : {}),
    ...(options.migration !== undefined ? { migration: options.migration } : {}),
  });
  const rateLimit: RateLimitOptions =
    options.rateLimit === false
      ? { enabled: false }
      : options.rateLimit === true || options.rateLimit === undefined
        ? {}
        : options.rateLimit;
  const regions = regionNames(options.regions);
  const engine = new BlockEngine({
    regions,
    // A stopped clock has no milliseconds to forward in: a manual-clock test sees no forwarding delay unless asked.
    ...(options.clock === 'manual' ? { crossRegionDelayMs: 0 } : {}),
    ...options.engine,
    cluster,
    faults,
    rng: rng.fork('engine'),
    rateLimit,
  }).attach();
  const llm = new SimLlm(options.llmApiKey !== undefined ? { apiKey: options.llmApiKey } : {});

  const closers: Array<() => Promise<void>> = [];
  const stop = async () => {
    cluster.stop();
    llm.releaseHanging();
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    engine.detach();
    cluster.close();
  };
  try {
    const rpc = await startRpcServer({
      cluster,
      faults,
      host,
      port: portFor(options, 'rpc', 0),
      rng: rng.fork('rpc'),
    });
    closers.push(() => rpc.close());
    const geyser = await startGeyserServer({
      cluster,
      faults,
      host,
      port: portFor(options, 'geyser', 2),
      ...(options.xToken ? { xToken: options.xToken } : {}),
    });
    closers.push(() => geyser.close());
    const regionEndpoints: RegionEndpoints[] = [];
    let caCertPath: string | null = null;
    let homeHttpUrl = '';
    for (const [index, region] of regions.entries()) {
      const home = index === 0;
      // The first region also serves the LLM and the admin routes; later regions take ports after the first five.
      const http = await startHttpServer(
        home
          ? [engineJsonRpcRoutes(engine, region), llm.routes(), adminRoutes({ cluster, faults, engine, llm })]
          : [engineJsonRpcRoutes(engine, region)],
        { host, port: home ? portFor(options, 'engine', 3) : regionalPort(options, index, 0) },
      );
      closers.push(() => http.close());
      const grpc = await startGrpcEngine({
        engine,
        region,
        host,
        port: home ? portFor(options, 'engineGrpc', 4) : regionalPort(options, index, 1),
        ...(options.tls ? { tls: options.tls } : {}),
      });
      closers.push(() => grpc.close());
      if (home) {
        homeHttpUrl = http.url;
        caCertPath = grpc.caCertPath;
      }
      regionEndpoints.push({
        region,
        engineUrl: http.url,
        engineGrpcUrl: grpc.url,
        engineGrpcAddress: grpc.address,
      });
    }
    const home = regionEndpoints[0] as RegionEndpoints;

    const endpoints: SimnetEndpoints = {
      rpcUrl: rpc.url,
      rpcWsUrl: rpc.wsUrl,
      geyserEndpoint: geyser.endpoint,
      regions: regionEndpoints,
      engineUrl: home.engineUrl,
      engineGrpcUrl: home.engineGrpcUrl,
      engineGrpcAddress: home.engineGrpcAddress,
      tipFloorUrl: `${homeHttpUrl}/api/v1/bundles/tip_floor`,
      anthropicBaseUrl: homeHttpUrl,
      adminUrl: `${homeHttpUrl}/admin`,
      caCertPath,
    };
    if (options.clock !== 'manual') cluster.start();

    return {
      cluster,
      faults,
      engine,
      llm,
      endpoints,
      env: () => ({
        STREAM_ENDPOINT: endpoints.geyserEndpoint,
        ...(options.xToken ? { STREAM_X_TOKEN: options.xToken } : {}),
        RPC_URL: endpoints.rpcUrl,
        // Every regional engine, comma-separated, as a sidecar sending to several regions takes them.
        BUNDLE_ENGINE_URL: endpoints.regions.map((r) => r.engineUrl).join(','),
        BUNDLE_ENGINE_GRPC_URL: endpoints.regions.map((r) => r.engineGrpcUrl).join(','),
        TIP_FLOOR_URL: endpoints.tipFloorUrl,
        ANTHROPIC_BASE_URL: endpoints.anthropicBaseUrl,
        // A placeholder key: the simnet takes any key, and a real one should never be sent to it.
        ANTHROPIC_API_KEY: options.llmApiKey ?? 'simnet-local-key',
        ...(endpoints.caCertPath ? { GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: endpoints.caCertPath } : {}),
      }),
      fundedKeypair: (lamports: number) => fundedKeypair(cluster, lamports).toWeb3(),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** `# ...` lines naming every endpoint (what the bin and `relay sim` print above the env lines). */
export function endpointLines(e: SimnetEndpoints): string[] {
  return [
    `# solana rpc         ${e.rpcUrl}  (ws ${e.rpcWsUrl})`,
    `# yellowstone grpc   ${e.geyserEndpoint}`,
    ...e.regions.map(
      (r) => `# block engine ${r.region.padEnd(10)} ${r.engineUrl}/api/v1/bundles  grpc ${r.engineGrpcUrl}`,
    ),
    ...(e.caCertPath ? [`# block engine grpc uses TLS with the test-only certificate ${e.caCertPath}`] : []),
    `# tip floor          ${e.tipFloorUrl}`,
    `# anthropic messages ${e.anthropicBaseUrl}/v1/messages (simulated)`,
    `# admin              ${e.adminUrl}/state`,
  ];
}

/** `NAME=value` lines of an env map, in order (what the bin prints). */
export function formatEnvLines(env: Record<string, string>): string[] {
  return Object.entries(env).map(([name, value]) => `${name}=${value}`);
}
