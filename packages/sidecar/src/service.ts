import { randomBytes } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { STATUS_CODES, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Keypair } from '@solana/web3.js';
import {
  LeaderBuffer,
  RelayError,
  TipOracle,
  parseJitoTipFloorResponse,
  type LifecycleEntry,
  type ReadyResponse,
  type StatusResponse,
} from '@solrelay/core';
import pino, { type Logger } from 'pino';
import type { SidecarConfig } from './config';
import { EventHub } from './events/hub';
import { createRequestListener } from './http/app';
import { SignatureVerifier } from './wire/signature-verifier';
import { Journal } from './journal/journal';
import { LifecycleLog } from './lifecycle/log';
import { Metrics } from './metrics';
import { PolicyStore } from './policy/policy-store';
import { Relay, type CrashPointName } from './relay';
import { storeCodec } from './store/records';
import type { BlockEngineTransport } from './upstream/block-engine';
import { GrpcBlockEngine } from './upstream/block-engine-grpc';
import { JsonRpcBlockEngine } from './upstream/block-engine-jsonrpc';
import { GeyserStream } from './upstream/geyser-stream';
import { SolanaRpc } from './upstream/solana-rpc';

export interface SidecarOptions {
  logger?: Logger;
  /** Called at named crash points (crash tests kill the process there); inert unless given. */
  crashPoint?: (name: string) => void;
  /** Built dashboard files to serve at `/`. */
  webDist?: string;
  /** Poll intervals (tests shorten them). */
  intervals?: Partial<{
    tipFloorMs: number;
    balanceMs: number;
    leadersMs: number;
    rpcSlotMs: number;
    blockHeightMs: number;
    /** No new slot for this long: slots have stalled (default 10 s). */
    slotStallMs: number;
  }>;
  /** Terminal transactions kept in memory and the journal snapshot. Default 20,000. */
  retainTerminal?: number;
  /** SSE ring buffer size. Default 10,000. */
  eventRingSize?: number;
  /** Journal compaction threshold in bytes (default: the config's `RELAY_JOURNAL_COMPACT_BYTES`). */
  compactAtBytes?: number;
}

export interface Sidecar {
  url: string;
  port: number;
  relay: Relay;
  hub: EventHub;
  policy: PolicyStore;
  config: SidecarConfig;
  /** What recovery found in the journal at start-up. */
  recovery: { replayed: number; resent: number; tracked: number; warnings: string[] };
  close(): Promise<void>;
}

/** A tip-floor sample whose own `time` is older than this is frozen upstream data (Jito's REST answer is live). */
const TIP_FLOOR_MAX_AGE_MS = 120_000;

/** The `time` of the newest sample of a Jito tip-floor answer, or null when it carries none. */
function tipFloorSampleTime(json: unknown): number | null {
  const list: unknown[] = Array.isArray(json) ? json : [json];
  const last = list[list.length - 1] as { time?: unknown } | null | undefined;
  if (!last || typeof last.time !== 'string') return null;
  const at = Date.parse(last.time);
  return Number.isFinite(at) ? at : null;
}

interface Health {
  ok: boolean;
  detail: string | null;
  last_ok_at: number | null;
}

/** Read the tipper keypair (a Solana CLI keypair file: a JSON array of 64 bytes). */
export async function loadKeypair(path: string, log?: Logger): Promise<Keypair> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: (error as NodeJS.ErrnoException).code ?? 'unreadable',
    });
  }
  let bytes: unknown;
  try {
    bytes = JSON.parse(text);
  } catch {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: 'not JSON (expected an array of 64 numbers)',
    });
  }
  if (
    !Array.isArray(bytes) ||
    bytes.length !== 64 ||
    !bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)
  ) {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: 'expected a JSON array of 64 numbers from 0 to 255',
    });
  }
  let keypair: Keypair;
  try {
    keypair = Keypair.fromSecretKey(Uint8Array.from(bytes as number[]));
  } catch {
    throw new RelayError('RELAY_E_CONFIG_UNREADABLE_KEYPAIR', {
      path,
      reason: 'the 64 bytes are not a valid ed25519 keypair',
    });
  }
  try {
    const mode = (await stat(path)).mode;
    if (mode & 0o077)
      log?.warn(
        { path, mode: (mode & 0o777).toString(8) },
        'keypair file is readable by other users; chmod 600 it',
      );
  } catch {
    /* checked above */
  }
  return keypair;
}

/** Start a sidecar: recover the journal, connect the upstreams, serve the API. */
export async function startSidecar(config: SidecarConfig, options: SidecarOptions = {}): Promise<Sidecar> {
  const log = options.logger ?? pino({ name: 'relay', level: 'info' });
  const intervals = {
    tipFloorMs: 2000,
    balanceMs: 2000,
    leadersMs: 15_000,
    rpcSlotMs: 400,
    blockHeightMs: 1000,
    slotStallMs: 10_000,
    ...options.intervals,
  };
  const tipper = await loadKeypair(config.keypairPath, log);
  const crashPoint = options.crashPoint;

  const metrics = new Metrics();
  const bootId = randomBytes(6).toString('hex');
  const hub = new EventHub({
    bootId,
    ringSize: options.eventRingSize ?? 10_000,
    clientBufferLimitBytes: config.sseBufferBytes,
  });

  const policy = new PolicyStore(config.policyFile, (change) => {
    hub.publish('policy_changed', { ...change, ts: Date.now() });
    if (!change.ok)
      log.warn({ problems: change.problems }, 'policy file refused; the last good policy stays in force');
  });
  await policy.start({ watch: true });
  if (config.bypass && config.bypassTipLamports > policy.current['max-tip']) {
    policy.stop();
    throw new RelayError('RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP', {
      tip: config.bypassTipLamports,
      maxTip: policy.current['max-tip'],
    });
  }

  const { journal, recovery } = await Journal.open(
    join(config.dataDir, 'journal'),
    storeCodec(options.retainTerminal ?? 20_000),
    {
      compactAtBytes: options.compactAtBytes ?? config.journalCompactBytes,
      ...(crashPoint ? { crashPoint } : {}),
    },
  );
  for (const warning of recovery.warnings) log.warn(warning);
  const { log: lifecycle, recovery: lifecycleRecovery } = await LifecycleLog.open<LifecycleEntry>(
    config.lifecyclePath,
    {
      ...(crashPoint ? { crashPoint } : {}),
    },
  );
  for (const warning of lifecycleRecovery.warnings) log.warn(warning);

  const rpc = new SolanaRpc({ url: config.rpcUrl });
  const leaderSource = new GrpcBlockEngine(config.bundleEngineGrpcUrl);
  const engine: BlockEngineTransport =
    config.bundleEngineTransport === 'grpc'
      ? leaderSource
      : new JsonRpcBlockEngine({ baseUrl: config.bundleEngineUrl, uuid: config.bundleEngineUuid });
  const oracle = new TipOracle();
  const leaders = new LeaderBuffer();

  const health: Record<'stream' | 'rpc' | 'block_engine' | 'tip_floor', Health> = {
    stream: { ok: false, detail: 'connecting', last_ok_at: null },
    rpc: { ok: false, detail: 'not contacted yet', last_ok_at: null },
    block_engine: { ok: false, detail: 'not contacted yet', last_ok_at: null },
    tip_floor: { ok: false, detail: 'not fetched yet', last_ok_at: null },
  };
  const mark = (name: keyof typeof health, ok: boolean, detail: string | null) => {
    health[name] = { ok, detail, last_ok_at: ok ? Date.now() : health[name].last_ok_at };
    metrics.upstreamUp.set({ upstream: name }, ok ? 1 : 0);
  };

  const verifier = config.verifyThreads > 0 ? new SignatureVerifier(config.verifyThreads) : null;
  const r = new Relay({
    journal,
    lifecycle,
    hub,
    rpc,
    engine,
    tipper,
    oracle,
    leaders,
    policy: () => policy.current,
    metrics,
    log,
    bypass: { enabled: config.bypass, tipLamports: config.bypassTipLamports },
    initialMode: config.decisionMode,
    agentGraceMs: config.agentGraceSeconds * 1000,
    bundleEngineRps: config.bundleEngineRps,
    ...(crashPoint ? { crashPoint: (name: CrashPointName) => crashPoint(name) } : {}),
    ...(verifier ? { verifier } : {}),
  });

  const timers: NodeJS.Timeout[] = [];
  const every = (ms: number, work: () => Promise<void> | void) => {
    const run = () => {
      Promise.resolve()
        .then(work)
        .catch((error: unknown) => log.debug({ err: error }, 'periodic task failed'));
    };
    run();
    const t = setInterval(run, ms);
    t.unref();
    timers.push(t);
  };

  // Tip accounts, fetched until known (then cached by the relay).
  every(1000, async () => {
    await r.ensureTipAccounts();
  });

  // Tip floor.
  every(intervals.tipFloorMs, async () => {
    try {
      const response = await fetch(config.tipFloorUrl, { signal: AbortSignal.timeout(5000) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const json: unknown = await response.json();
      const floor = parseJitoTipFloorResponse(json);
      const sampledAt = tipFloorSampleTime(json);
      if (sampledAt !== null && Date.now() - sampledAt > TIP_FLOOR_MAX_AGE_MS) {
        // Frozen upstream data is not taken in: the floor relay holds ages out into `stale` (unless the tips relay
        // sees land keep it fresh), and /status names the upstream.
        const age = Math.round((Date.now() - sampledAt) / 1000);
        mark(
          'tip_floor',
          false,
          `stale: the newest sample is ${age} s old (${new Date(sampledAt).toISOString()})`,
        );
        return;
      }
      oracle.ingestTipFloor(floor, Date.now());
      mark('tip_floor', true, null);
      hub.publish('tip_update', { ...oracle.view(Date.now()), ts: Date.now() });
    } catch (error) {
      mark('tip_floor', false, (error as Error).message);
    }
  });

  // Tipper balance (pauses submission when underfunded) and block height (tip blockhash expiry).
  every(intervals.balanceMs, async () => {
    try {
      r.setTipperBalance(await rpc.getBalance(tipper.publicKey.toBase58()));
      mark('rpc', true, null);
    } catch (error) {
      mark('rpc', false, (error as Error).message);
    }
  });
  every(intervals.blockHeightMs, async () => {
    r.setBlockHeight(await rpc.getBlockHeight('processed'));
  });
  // Keep the tip transactions' blockhash fresh ahead of need, so a submit never waits on RPC for it.
  every(1000, async () => {
    await rpc.refreshBlockhash();
  });

  // Leader schedule from RPC (rolling window, next epoch included) and bundle-engine validators from the engine.
  let scheduledUntil = 0;
  const refreshSchedule = async () => {
    const slot = r.slot || (await rpc.getSlot());
    if (scheduledUntil - slot > 256) return;
    let limit = 1024;
    while (limit >= 16) {
      try {
        const ids = await rpc.getSlotLeaders(slot, limit);
        leaders.advance(slot);
        leaders.ingestSlotLeaders(slot, ids);
        scheduledUntil = slot + ids.length;
        return;
      } catch {
        limit = Math.floor(limit / 2); // the schedule may not reach that far yet
      }
    }
  };
  every(intervals.leadersMs / 5, refreshSchedule);
  every(intervals.leadersMs, async () => {
    try {
      const { connectedLeaders } = await leaderSource.getConnectedLeaders();
      leaders.setBundleEngineValidators(Object.keys(connectedLeaders));
      mark('block_engine', true, null);
    } catch (error) {
      // Unknown bundle-engine leaders: reflex submits without holding (DESIGN §8).
      leaders.setBundleEngineValidators(null);
      mark('block_engine', false, `leader data: ${(error as Error).message}`);
    }
  });

  // When slots last moved (from any source), and when the stream last brought one: a stream can stay connected
  // and say nothing, and a whole cluster can stall.
  let lastSlotAt = Date.now();
  let lastStreamSlotAt = Date.now();
  const onNewSlot = (slot: number, fromStream: boolean) => {
    if (fromStream) lastStreamSlotAt = Date.now();
    if (slot > r.slot) lastSlotAt = Date.now();
    r.onSlot(slot);
  };
  const silentFor = (since: number) => {
    const ms = Date.now() - since;
    return ms > intervals.slotStallMs ? ms : 0;
  };
  const streamHealth = (): Health => {
    const silent = silentFor(lastStreamSlotAt);
    return health.stream.ok && silent
      ? {
          ...health.stream,
          ok: false,
          detail: `connected, but no new slot for ${Math.round(silent / 1000)} s`,
        }
      : health.stream;
  };

  // Slots from RPC while the stream is down or silent, so tracking and expiry never stop.
  every(intervals.rpcSlotMs, async () => {
    if (streamHealth().ok) return;
    const slot = await rpc.getSlot('processed');
    if (slot > r.slot) {
      onNewSlot(slot, false);
      void r.track();
    }
  });

  const stream = new GeyserStream({
    endpoint: config.streamEndpoint,
    xToken: config.streamXToken,
    staticAccounts: [tipper.publicKey.toBase58()],
    onSlot: (update) => {
      if (update.status === 'processed') {
        onNewSlot(update.slot, true);
        void r.track();
        if (update.slot % 8 === 0) stream.setPayerAccounts(r.includedPayers());
      } else if (update.status === 'dead') {
        void r.onDeadSlot(update.slot);
      } else if (update.status === 'finalized') {
        r.onFinalizedSlot(update.slot);
      }
    },
    onTransactionStatus: (status) => r.onStreamTransaction(status.signature),
    onState: (state, detail) => {
      mark('stream', state !== 'disconnected', state === 'disconnected' ? detail : null);
      if (state === 'disconnected') log.warn({ detail }, 'stream disconnected; reconnecting');
      if (state === 'reconnected') {
        log.info('stream reconnected; reconciling in-flight signatures over RPC');
        void r.track('full');
      }
    },
  });
  stream.start();
  r.watchStreamWith(() => streamHealth().ok);

  let stopResults: (() => void) | null = null;
  let resubscribe: NodeJS.Timeout | null = null;
  let stopping = false;
  if (engine.subscribeBundleResults) {
    const retry = () => {
      if (stopping) return;
      resubscribe = setTimeout(subscribe, 1000);
      resubscribe.unref();
    };
    const subscribe = () => {
      if (stopping) return;
      try {
        stopResults = engine.subscribeBundleResults!(
          (result) => void r.onBundleResult(result),
          (error) => {
            if (stopping) return;
            log.warn({ err: error.message }, 'bundle result stream failed; resubscribing');
            retry();
          },
        );
      } catch (error) {
        log.warn({ err: (error as Error).message }, 'cannot open the bundle result stream; retrying');
        retry();
      }
    };
    subscribe();
  }

  const resumed = r.resumeAfterRestart();
  if (resumed.resent + resumed.tracked + resumed.relogged > 0)
    log.info(resumed, 'resumed in-flight work from the journal');
  if (resumed.relogged > 0)
    log.warn({ relogged: resumed.relogged }, 'lifecycle log: wrote again entries a crash lost');

  const status = (): StatusResponse => {
    const view = leaders.leaderView(r.slot);
    const floor = oracle.view(Date.now());
    const agent = r.agent;
    return {
      slot: r.slot,
      leader: view.leader,
      bundle_engine_leader: view.bundle_engine[0] ?? null,
      next_bundle_engine_leader_slot: leaders.nextBundleEngineSlot(r.slot, 64),
      tip: { p50: floor.p50, p75: floor.p75 },
      stale: floor.stale,
      decision_mode: r.decisionMode,
      bypass: r.bypass,
      queue: r.state.active,
      agent: { connected: agent !== null, model: agent?.model ?? null, provider: agent?.provider ?? null },
      upstream: {
        stream: { ...streamHealth() },
        rpc: { ...health.rpc },
        block_engine: {
          ...health.block_engine,
          ...(r.lastErrors.engine ? { ok: false, detail: r.lastErrors.engine } : {}),
        },
        tip_floor: { ...health.tip_floor },
      },
      tipper: { pubkey: tipper.publicKey.toBase58(), balance_lamports: r.balance },
      spend: { window_lamports: r.spentThisHour, limit_lamports: policy.current['spend-limit'] },
      paused_reason: r.paused,
    };
  };
  const ready = (): ReadyResponse => {
    const reasons: string[] = [];
    const stream = streamHealth();
    if (!stream.ok) reasons.push(`stream: ${stream.detail ?? 'down'}`);
    const stalled = silentFor(lastSlotAt);
    if (stalled) reasons.push(`slots: no new slot for ${Math.round(stalled / 1000)} s (stream and RPC)`);
    if (!health.rpc.ok) reasons.push(`rpc: ${health.rpc.detail ?? 'down'}`);
    const tip = oracle.view(Date.now());
    if (tip.source === 'none') reasons.push('tip data: none yet');
    else if (tip.stale)
      reasons.push(
        `tip data: stale (${Math.round((tip.age_ms ?? 0) / 1000)} s old; tip floor: ${health.tip_floor.detail ?? 'ok'})`,
      );
    if (r.lastErrors.engine) reasons.push(`block engine: ${r.lastErrors.engine}`);
    if (r.paused) reasons.push(r.paused);
    if (!journal.healthy) reasons.push('journal: writes failing');
    if (!r.bypass && !r.agent && !r.fallbackActive)
      reasons.push('no decider: no agent connected (and the fallback grace period has not passed)');
    return { ready: reasons.length === 0, reasons };
  };

  const listener = createRequestListener({
    relay: r,
    hub,
    lifecycle,
    policy,
    metrics,
    log,
    apiToken: config.apiToken,
    apiHost: config.apiHost,
    allowedHosts: config.allowedHosts,
    status,
    ready,
    tip: () => oracle.view(Date.now()),
    webDist: options.webDist,
  });
  const server: Server = createServer(listener);
  server.keepAliveTimeout = 65_000;
  // Requests node's HTTP parser refuses (bad framing, raw bytes in the URL, oversize headers) never reach a route:
  // answer them with a relay error body too, instead of node's bare 400.
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const relayError =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? new RelayError('RELAY_E_REQUEST_HEADERS_TOO_LARGE', {})
        : new RelayError('RELAY_E_REQUEST_MALFORMED_HTTP', {
            reason: String(error.code ?? error.message).slice(0, 80),
          });
    const body = JSON.stringify(relayError.toBody());
    socket.end(
      `HTTP/1.1 ${relayError.status} ${STATUS_CODES[relayError.status] ?? 'Error'}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `connection: close\r\n\r\n${body}`,
    );
  });
  let closed = false;
  let listening = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    stopping = true;
    if (resubscribe) clearTimeout(resubscribe);
    for (const t of timers) clearInterval(t);
    stopResults?.();
    stream.stop();
    policy.stop();
    r.close();
    hub.dispose();
    if (listening) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    engine.close();
    if (leaderSource !== engine) leaderSource.close();
    await journal.close();
    await lifecycle.close();
    await verifier?.close();
  };
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.apiPort, config.apiHost, () => resolve());
    });
    listening = true;
  } catch (error) {
    // Release everything already started (stream, timers, journal) so a failed start leaves nothing running.
    await close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      const reason =
        code === 'EADDRINUSE'
          ? `${config.apiHost}:${config.apiPort} is already in use (another relay?)`
          : code === 'EACCES'
            ? `not allowed to listen on ${config.apiHost}:${config.apiPort}`
            : `${config.apiHost} is not an address of this machine`;
      throw new RelayError('RELAY_E_CONFIG_INVALID_ENV', {
        name: code === 'EADDRNOTAVAIL' ? 'API_HOST' : 'API_PORT',
        reason,
      });
    }
    throw error;
  }
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.apiHost.includes(':') ? `[${config.apiHost}]` : config.apiHost}:${port}`;
  log.info(
    { url, tipper: tipper.publicKey.toBase58(), bypass: config.bypass, mode: config.decisionMode },
    'relay sidecar listening',
  );

  return {
    url,
    port,
    relay: r,
    hub,
    policy,
    config,
    recovery: {
      replayed: recovery.operationsReplayed,
      resent: resumed.resent,
      tracked: resumed.tracked,
      warnings: [...recovery.warnings, ...lifecycleRecovery.warnings],
    },
    close,
  };
}
