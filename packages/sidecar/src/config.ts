import { BlockList, isIP } from 'node:net';
import { homedir, hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { RelayError } from '@solrelay/core';
import { HOST_LEASE_MS } from './pg/host-session';
import { parseDatabaseUrl } from './pg/url';

/**
 * The sidecar's configuration: the spec's environment table plus DESIGN §3's additions, validated once at start-up.
 * Only the composition roots (apps/, the CLI entry) read `process.env`; they hand it to `configFromEnv`.
 */
export interface SidecarConfig {
  streamEndpoint: string;
  streamXToken: string | undefined;
  rpcUrl: string;
  /** Regional block engines' JSON-RPC base URLs (one per region; a single address is a one-region list). */
  bundleEngineUrls: string[];
  bundleEngineUuid: string | undefined;
  bundleEngineTransport: 'jsonrpc' | 'grpc';
  /** Their gRPC addresses, paired by position (or one address serving leader data for all). */
  bundleEngineGrpcUrls: string[];
  /** Send budget per region, requests per second. */
  bundleEngineRps: number;
  /**
   * `RELAY_ENGINE_LOCAL_ADDRESS`: the IP literal every connection to a block engine goes out from (JSON-RPC and
   * gRPC; the engine's budget is per source IP, jito.md §1.7); undefined (the default) leaves it to the system.
   * Whether this machine has it is proved at start (`probeLocalAddress`), not here.
   */
  engineLocalAddress: string | undefined;
  /** Most user transactions per bundle when packing waiting transactions together (1: no packing). */
  bundlePackMax: number;
  tipFloorUrl: string;
  /** The tipper pool: `KEYPAIR_PATH`'s files (comma-separated), resolved, in order; at least one. */
  keypairPaths: string[];
  /** The first of `keypairPaths` (what a single-keypair caller, such as `relay smoke`, uses). */
  keypairPath: string;
  apiHost: string;
  apiPort: number;
  apiToken: string | undefined;
  /**
   * Host names accepted besides loopback ones while the API is bound to loopback (DNS-rebinding guard);
   * `['*']` accepts any Host.
   */
  allowedHosts: string[];
  /** Unsent bytes an SSE client may hold before it is dropped as a slow reader. */
  sseBufferBytes: number;
  decisionMode: 'cortex' | 'reflex';
  bypass: boolean;
  bypassTipLamports: number;
  agentDir: string;
  webDir: string;
  policyFile: string;
  lifecyclePath: string;
  dataDir: string;
  agentGraceSeconds: number;
  /** Worker threads for enqueue signature checks; 0 checks on the event loop. */
  verifyThreads: number;
  /** The journal compacts once its live file passes this many bytes; 0 never compacts. */
  journalCompactBytes: number;
  /** Endpoints every `tx_status_changed` and `bundle_settled` is POSTed to (empty: no webhooks). */
  webhookUrls: string[];
  /** The Standard Webhooks signing secret (`whsec_` + base64); set whenever `webhookUrls` is. */
  webhookSecret: string | undefined;
  /**
   * `RELAY_DATABASE_URL` (DESIGN §10), checked; undefined (the default) keeps the local journal, set it selects the
   * PostgreSQL store.
   */
  databaseUrl: string | undefined;
  /**
   * `RELAY_HOST_ID` (DESIGN §10): this sidecar's name in the database (its host session, the rows it owns, its
   * events and leases); default `<hostname>:<API_PORT>`. A second live sidecar with the same id is refused at start.
   */
  hostId: string;
  /** `RELAY_LEASE_MS` (DESIGN §10): how long a host session lives without a heartbeat (one every lease / 5). */
  leaseMs: number;
  /**
   * `RELAY_FLEET` (README "Running a fleet"): this sidecar is one of several on `RELAY_DATABASE_URL`. Off (the
   * default), the sidecar is its database's only writer (a second one is refused with RELAY_E_DB_IN_USE).
   */
  fleet: boolean;
}

/** Jito's regional mainnet block engines (jito.md §1.1); each gives an IP its own budget. */
const JITO_REGIONS = ['amsterdam', 'dublin', 'frankfurt', 'london', 'ny', 'slc', 'singapore', 'tokyo'];

export const DEFAULTS = {
  bundleEngineUrls: JITO_REGIONS.map((region) => `https://${region}.mainnet.block-engine.jito.wtf`).join(','),
  bundleEngineGrpcUrls: JITO_REGIONS.map(
    (region) => `https://${region}.mainnet.block-engine.jito.wtf:443`,
  ).join(','),
  tipFloorUrl: 'https://bundles.jito.wtf/api/v1/bundles/tip_floor',
  apiHost: '127.0.0.1',
  apiPort: 7777,
  bypassTipLamports: 10_000,
  agentDir: '../agents',
  webDir: '../web',
  policyFile: './relay.policy.json',
  lifecyclePath: './lifecycle.jsonl',
  dataDir: './.relay',
  agentGraceSeconds: 10,
  sseBufferBytes: 4 * 1024 * 1024,
  bundleEngineRps: 1,
  bundlePackMax: 4,
  verifyThreads: 1,
  journalCompactBytes: 64 * 1024 * 1024,
  leaseMs: HOST_LEASE_MS,
} as const;

type Env = Record<string, string | undefined>;

function value(env: Env, name: string): string | undefined {
  const raw = env[name];
  if (raw === undefined) return undefined;
  const trimmed = raw.trim();
  return trimmed === '' ? undefined : trimmed;
}

function required(env: Env, name: string): string {
  const v = value(env, name);
  if (v === undefined) throw new RelayError('RELAY_E_CONFIG_MISSING_ENV', { name });
  return v;
}

function url(env: Env, name: string, fallback?: string, protocols = ['http:', 'https:']): string {
  const v = fallback === undefined ? required(env, name) : (value(env, name) ?? fallback);
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', { name, reason: `"${v}" is not a URL` });
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason: `expected ${protocols.join(' or ')} but got ${parsed.protocol}`,
    });
  }
  return v;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = value(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason: `expected a whole number from ${min} to ${max}, got "${v}"`,
    });
  }
  return Number(v);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = value(env, name);
  if (v === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(v)) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason: `expected one of ${allowed.join(', ')}, got "${v}"`,
    });
  }
  return v as T;
}

/** A comma-separated variable's items, trimmed, empty ones dropped ([] when unset). */
function commaList(env: Env, name: string): string[] {
  return (value(env, name) ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

/** A comma-separated list of host names (no ports, no schemes), lower-cased; `*` alone means any host. */
function hostList(env: Env, name: string): string[] {
  const hosts = commaList(env, name).map((h) => h.toLowerCase());
  for (const host of hosts) {
    if (host !== '*' && !/^[a-z0-9._-]+$|^\[[0-9a-f:.]+\]$/.test(host)) {
      throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
        name,
        reason: `"${host}" is not a host name (give names like relay.internal, comma-separated, or *)`,
      });
    }
  }
  return hosts;
}

/** Comma-separated http(s) URLs, each at most once; `fallback` when unset. */
function urlList(env: Env, name: string, fallback?: string): string[] {
  const urls = commaList(value(env, name) === undefined && fallback ? { [name]: fallback } : env, name);
  for (const u of urls) url({ [name]: u }, name);
  if (new Set(urls).size !== urls.length) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', { name, reason: 'an address is listed twice' });
  }
  return urls;
}

/** `RELAY_WEBHOOK_URL`: comma-separated http(s) URLs without credentials, each at most once. */
function webhookUrlList(env: Env, name: string): string[] {
  const urls = urlList(env, name);
  for (const u of urls) {
    const parsed = new URL(u);
    // fetch refuses such URLs, and a credential would show wherever the endpoint is named.
    if (parsed.username || parsed.password) {
      throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
        name,
        reason: `${parsed.protocol}//…@${parsed.host}: credentials in the URL are not supported (deliveries are signed with RELAY_WEBHOOK_SECRET; put a token in the path or query if the receiver needs one)`,
      });
    }
  }
  return urls;
}

/**
 * The regional block engines: `BUNDLE_ENGINE_URL` and `BUNDLE_ENGINE_GRPC_URL`, comma-separated. The list bundles go
 * to (JSON-RPC, or gRPC with BUNDLE_ENGINE_TRANSPORT=grpc) sets the regions; the gRPC list pairs with the JSON-RPC
 * one by position, or is one address that answers for every region's leaders.
 */
function engineAddresses(
  env: Env,
  transport: 'jsonrpc' | 'grpc',
): { bundleEngineUrls: string[]; bundleEngineGrpcUrls: string[] } {
  // One list given alone names the regions for both: Jito serves each region's JSON-RPC (https) and gRPC (:443) on
  // the same host. Plain-http addresses (a local engine) have no such pairing: both lists must then be given.
  const json = value(env, 'BUNDLE_ENGINE_URL') === undefined ? null : urlList(env, 'BUNDLE_ENGINE_URL');
  const grpc =
    value(env, 'BUNDLE_ENGINE_GRPC_URL') === undefined ? null : urlList(env, 'BUNDLE_ENGINE_GRPC_URL');
  const bundleEngineUrls =
    json ??
    (grpc
      ? pairedAddresses(grpc, 'BUNDLE_ENGINE_GRPC_URL', 'BUNDLE_ENGINE_URL', '')
      : urlList({}, 'BUNDLE_ENGINE_URL', DEFAULTS.bundleEngineUrls));
  const bundleEngineGrpcUrls =
    grpc ??
    (json
      ? pairedAddresses(json, 'BUNDLE_ENGINE_URL', 'BUNDLE_ENGINE_GRPC_URL', ':443')
      : urlList({}, 'BUNDLE_ENGINE_GRPC_URL', DEFAULTS.bundleEngineGrpcUrls));
  if (
    transport === 'jsonrpc' &&
    bundleEngineGrpcUrls.length !== 1 &&
    bundleEngineGrpcUrls.length !== bundleEngineUrls.length
  ) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name: 'BUNDLE_ENGINE_GRPC_URL',
      reason: `lists ${bundleEngineGrpcUrls.length} addresses for BUNDLE_ENGINE_URL's ${bundleEngineUrls.length}: give one per region in the same order, or a single one`,
    });
  }
  return { bundleEngineUrls, bundleEngineGrpcUrls };
}

/** `https://host[:port]` addresses of `urls`' hosts (the list `from`), as the list `to` (`port`: '' or ':443'). */
function pairedAddresses(urls: readonly string[], from: string, to: string, port: string): string[] {
  const paired = urls.map((u) => {
    const parsed = new URL(u);
    if (parsed.protocol !== 'https:') {
      throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
        name: to,
        reason: `is needed with ${from}=${u}: only https addresses (Jito's) give the other address on the same host`,
      });
    }
    return `https://${parsed.hostname}${port}`;
  });
  // Checked as a given list would be (two addresses on one host pair to one).
  return urlList({ [to]: paired.join(',') }, to);
}

/**
 * `RELAY_WEBHOOK_SECRET`, required with webhook URLs: deliveries are always signed, so a receiver can tell relay's
 * requests from anyone else's. Checked here (the signing library takes it apart the same way) so a typo stops
 * start-up instead of the first delivery.
 */
function webhookSecret(env: Env, urls: string[]): string | undefined {
  const name = 'RELAY_WEBHOOK_SECRET';
  const v = value(env, name);
  if (urls.length === 0) return v;
  if (v === undefined) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason:
        'RELAY_WEBHOOK_URL is set: give the signing secret too (whsec_ followed by base64, 24 bytes or more)',
    });
  }
  const key = v.startsWith('whsec_') ? v.slice('whsec_'.length) : '';
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key) || Buffer.from(key, 'base64').length < 24) {
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason:
        'expected whsec_ followed by base64 of 24 bytes or more (e.g. whsec_$(openssl rand -base64 32))',
    });
  }
  return v;
}

/**
 * `KEYPAIR_PATH`: one keypair file, or several comma-separated (the tipper pool), resolved against `cwd`; the
 * Solana CLI's default keypair when unset. A file listed twice is refused (whether each file is a keypair is
 * checked when it is read, at start).
 */
function keypairList(env: Env, cwd: string, fallback: string): string[] {
  const name = 'KEYPAIR_PATH';
  const listed = commaList(env, name);
  const paths = (listed.length > 0 ? listed : [fallback]).map((path) => resolve(cwd, path));
  const twice = paths.find((path, i) => paths.indexOf(path) !== i);
  if (twice !== undefined)
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', { name, reason: `${twice} is listed twice` });
  return paths;
}

/**
 * `RELAY_DATABASE_URL`: unset keeps the local journal; set, a postgres:// URL naming a user, host and database
 * (`RELAY_E_DB_INVALID_URL` otherwise, the URL shown with its password redacted).
 */
function databaseUrl(env: Env): string | undefined {
  const v = value(env, 'RELAY_DATABASE_URL');
  return v === undefined ? undefined : parseDatabaseUrl(v).url;
}

/**
 * `RELAY_HOST_ID`: 1-128 printable ASCII characters without spaces (it is shown in logs, /status and the database's
 * rows); default `<hostname>:<API_PORT>`, which is unique per machine and port.
 */
function hostId(env: Env, apiPort: number): string {
  const v = value(env, 'RELAY_HOST_ID');
  // The default is never refused: a machine name outside that set (spaces, non-ASCII) has those characters replaced.
  if (v === undefined)
    return `${
      hostname()
        .replace(/[^\x21-\x7e]/g, '-')
        .slice(0, 120) || 'relay'
    }:${apiPort}`;
  if (!/^[\x21-\x7e]{1,128}$/.test(v))
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name: 'RELAY_HOST_ID',
      reason: `expected 1 to 128 printable ASCII characters without spaces, got ${JSON.stringify(v)}`,
    });
  return v;
}

/**
 * `RELAY_ENGINE_LOCAL_ADDRESS`: an IPv4 or IPv6 literal (no brackets, no host name: a name could resolve to an address
 * of another machine), not a wildcard (binding 0.0.0.0 or :: chooses nothing).
 */
function localAddress(env: Env): string | undefined {
  const name = 'RELAY_ENGINE_LOCAL_ADDRESS';
  const v = value(env, name);
  if (v === undefined) return undefined;
  const bare = /^\[(.*)\]$/.exec(v)?.[1];
  if (bare !== undefined && isIP(bare) === 6)
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason: `give the IPv6 address without brackets (${bare})`,
    });
  if (isIP(v) === 0)
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason: `expected an IPv4 or IPv6 address of this machine (such as 127.0.0.2 or 2001:db8::2), got ${JSON.stringify(v)}`,
    });
  if (/^0+(\.0+){3}$/.test(v) || /^[0:]+$/.test(v))
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name,
      reason: `${v} is the wildcard address, which leaves the source to the system: give one address of this machine`,
    });
  return v;
}

/** 127.0.0.0/8 and ::1 (IPv4-mapped ones too: BlockList checks them against the IPv4 rule). */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * Whether a URL's host is this machine's loopback by its spelling: a loopback IP literal, or `localhost` (and
 * `*.localhost`, RFC 6761 §6.3). Any other name counts as another machine's: it is not resolved here.
 */
function loopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  const family = isIP(host);
  if (family !== 0) return LOOPBACK.check(host, family === 6 ? 'ipv6' : 'ipv4');
  return /^(.+\.)?localhost\.?$/i.test(host);
}

/**
 * A loopback `RELAY_ENGINE_LOCAL_ADDRESS` reaches only this machine, so every block engine it connects to must be on
 * loopback too (the simulated cluster), or every send fails: the JSON-RPC addresses when bundles go over JSON-RPC,
 * the gRPC ones (always dialled: leaders, regions, results), and the tip floor when a JSON-RPC engine's origin serves
 * it (`servedByEngine`). An engine on a host name other than `localhost` is refused with it: give a loopback
 * engine by its address.
 */
function checkEngineReach(config: SidecarConfig): void {
  const local = config.engineLocalAddress;
  if (local === undefined || !loopbackHost(local)) return;
  const tipFloorOrigin = new URL(config.tipFloorUrl).origin;
  const dialled: (readonly [string, string])[] = [
    ...(config.bundleEngineTransport === 'jsonrpc'
      ? config.bundleEngineUrls.map((u) => ['BUNDLE_ENGINE_URL', u] as const)
      : []),
    ...config.bundleEngineGrpcUrls.map((u) => ['BUNDLE_ENGINE_GRPC_URL', u] as const),
    ...(config.bundleEngineUrls.some((u) => new URL(u).origin === tipFloorOrigin)
      ? [['TIP_FLOOR_URL', config.tipFloorUrl] as const]
      : []),
  ];
  const away = dialled.find(([, u]) => !loopbackHost(new URL(u).hostname));
  if (away)
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name: 'RELAY_ENGINE_LOCAL_ADDRESS',
      reason: `${local} is a loopback address, which cannot reach a block engine on another machine: ${away[0]}'s ${away[1]} is not on loopback (give an address of an interface that reaches the engines, or leave RELAY_ENGINE_LOCAL_ADDRESS unset; an engine on this machine is named by a loopback address or localhost)`,
    });
}

function flag(env: Env, name: string): boolean {
  return oneOf(env, name, ['0', '1', 'true', 'false'] as const, '0') === '1' || value(env, name) === 'true';
}

/**
 * Validate the environment. Throws a RelayError naming the first variable that is missing or wrong, so start-up
 * stops with one clear message. Relative paths resolve against `cwd`.
 */
export function configFromEnv(env: Env, cwd: string = process.cwd()): SidecarConfig {
  const home = env.HOME ?? homedir();
  const webhookUrls = webhookUrlList(env, 'RELAY_WEBHOOK_URL');
  const bundleEngineTransport = oneOf(
    env,
    'BUNDLE_ENGINE_TRANSPORT',
    ['jsonrpc', 'grpc'] as const,
    'jsonrpc',
  );
  const keypairPaths = keypairList(env, cwd, join(home, '.config', 'solana', 'id.json'));
  const apiPort = integer(env, 'API_PORT', DEFAULTS.apiPort, 0, 65_535);
  const config: SidecarConfig = {
    streamEndpoint: url(env, 'STREAM_ENDPOINT'),
    streamXToken: value(env, 'STREAM_X_TOKEN'),
    rpcUrl: url(env, 'RPC_URL'),
    ...engineAddresses(env, bundleEngineTransport),
    bundleEngineUuid: value(env, 'BUNDLE_ENGINE_UUID'),
    bundleEngineTransport,
    bundleEngineRps: integer(env, 'BUNDLE_ENGINE_RPS', DEFAULTS.bundleEngineRps, 1, 10_000),
    engineLocalAddress: localAddress(env),
    bundlePackMax: integer(env, 'BUNDLE_PACK_MAX', DEFAULTS.bundlePackMax, 1, 4),
    verifyThreads: integer(env, 'RELAY_VERIFY_THREADS', DEFAULTS.verifyThreads, 0, 16),
    journalCompactBytes: integer(
      env,
      'RELAY_JOURNAL_COMPACT_BYTES',
      DEFAULTS.journalCompactBytes,
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    tipFloorUrl: url(env, 'TIP_FLOOR_URL', DEFAULTS.tipFloorUrl),
    keypairPaths,
    keypairPath: keypairPaths[0] as string,
    apiHost: value(env, 'API_HOST') ?? DEFAULTS.apiHost,
    apiPort,
    apiToken: value(env, 'RELAY_API_TOKEN'),
    allowedHosts: hostList(env, 'RELAY_ALLOWED_HOSTS'),
    sseBufferBytes: integer(env, 'RELAY_SSE_BUFFER_BYTES', DEFAULTS.sseBufferBytes, 16 * 1024, 1024 ** 3),
    decisionMode: oneOf(env, 'AGENT_DECISION_MODE', ['cortex', 'reflex'] as const, 'cortex'),
    bypass: flag(env, 'BYPASS_AGENT'),
    bypassTipLamports: integer(
      env,
      'BYPASS_TIP_LAMPORTS',
      DEFAULTS.bypassTipLamports,
      1000,
      Number.MAX_SAFE_INTEGER,
    ),
    agentDir: resolve(cwd, value(env, 'AGENT_DIR') ?? DEFAULTS.agentDir),
    webDir: resolve(cwd, value(env, 'WEB_DIR') ?? DEFAULTS.webDir),
    policyFile: resolve(cwd, value(env, 'RELAY_POLICY_FILE') ?? DEFAULTS.policyFile),
    lifecyclePath: resolve(cwd, value(env, 'LIFECYCLE_PATH') ?? DEFAULTS.lifecyclePath),
    dataDir: resolve(cwd, value(env, 'RELAY_DATA_DIR') ?? DEFAULTS.dataDir),
    agentGraceSeconds: integer(env, 'RELAY_AGENT_GRACE_S', DEFAULTS.agentGraceSeconds, 0, 86_400),
    webhookUrls,
    webhookSecret: webhookSecret(env, webhookUrls),
    databaseUrl: databaseUrl(env),
    hostId: hostId(env, apiPort),
    // At least 1 s (a heartbeat every 200 ms at most); at most 10 min (a dead host's work waits that long).
    leaseMs: integer(env, 'RELAY_LEASE_MS', DEFAULTS.leaseMs, 1_000, 600_000),
    fleet: fleet(env),
  };
  checkEngineReach(config);
  return config;
}

/** `RELAY_FLEET`: a flag, and only with `RELAY_DATABASE_URL` (hosts share nothing else). */
function fleet(env: Env): boolean {
  const on = flag(env, 'RELAY_FLEET');
  if (on && value(env, 'RELAY_DATABASE_URL') === undefined)
    throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
      name: 'RELAY_FLEET',
      reason: 'a fleet shares one PostgreSQL: set RELAY_DATABASE_URL too',
    });
  return on;
}
