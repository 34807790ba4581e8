import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { LeaderBuffer, RelayError, TipOracle, type LifecycleEntry } from '@solrelay/core';
import pino, { type Logger } from 'pino';
import { startConsensusPoller } from './inputs/consensus-poller';
import { startChainPollers } from './inputs/pollers';
import { startSlotFeed } from './inputs/slot-feed';
import { pollTipFloor } from './inputs/tip-floor-poller';
import type { SidecarConfig } from './config';
import { EventHub } from './events/hub';
import { readinessOf, statusOf, type StatusSources } from './health/status';
import { UpstreamHealth } from './health/upstream-health';
import { createRequestListener } from './http/app';
import { answerClientError } from './http/client-error';
import { Journal } from './journal/journal';
import { LifecycleLog } from './lifecycle/log';
import { Metrics } from './metrics';
import { redactDatabaseUrl } from './pg/url';
import { lockDataDir } from './runtime/data-dir-lock';
import { PolicyStore } from './policy/policy-store';
import { Relay, type CrashPointName } from './relay';
import { systemClock, type Clock } from './runtime/clock';
import { loadKeypair, loadKeypairs } from './runtime/keypair';
import { Periodic } from './runtime/periodic';
import { storeCodec } from './store/records';
import { EventFollower } from './store/pg-events';
import { PgTxStore, lostConnection } from './store/pg-store';
import { JournalTxStore, isDatabaseOutage, type TxStore } from './store/store';
import { EngineRegions } from './upstream/engine-regions';
import { followBundleResults } from './upstream/bundle-results';
import { bindEngineTraffic, probeLocalAddress, servedByEngine } from './upstream/local-address';
import { SolanaRpc } from './upstream/solana-rpc';
import { WebhookDispatcher, type WebhookDispatcherOptions } from './webhooks/dispatcher';
import { outboxCodec, type OutboxOp, type OutboxState } from './webhooks/outbox';
import { PgWebhookOutbox } from './webhooks/pg-outbox';
import { SignatureVerifier } from './wire/signature-verifier';

export { loadKeypair, loadKeypairs };

export interface SidecarOptions {
  logger?: Logger;
  /** The one wall clock of the whole service (default: the system's). */
  clock?: Clock;
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
    /** Agave 4.3's consensus facts (migration slot, Alpenglow genesis) are read this often (default 5 s). */
    consensusMs: number;
    /** No new slot for this long: slots have stalled (default 10 s). */
    slotStallMs: number;
  }>;
  /** Terminal transactions kept in memory and the journal snapshot. Default 20,000. */
  retainTerminal?: number;
  /** SSE ring buffer size. Default 10,000. */
  eventRingSize?: number;
  /** Journal compaction threshold in bytes (default: the config's `RELAY_JOURNAL_COMPACT_BYTES`). */
  compactAtBytes?: number;
  /** Webhook delivery timing (tests shorten the backoff). */
  webhooks?: Partial<
    Pick<
      WebhookDispatcherOptions,
      'retryBaseMs' | 'retryCapMs' | 'retryWindowMs' | 'tickMs' | 'timeoutMs' | 'concurrency'
    >
  >;
}

export interface Sidecar {
  url: string;
  port: number;
  relay: Relay;
  hub: EventHub;
  policy: PolicyStore;
  config: SidecarConfig;
  /** The store of record (the local journal, or PostgreSQL with `RELAY_DATABASE_URL`). */
  store: TxStore;
  /** What recovery found in the journal at start-up. */
  recovery: { replayed: number; resent: number; tracked: number; warnings: string[] };
  close(): Promise<void>;
}

/** Start a sidecar: recover the journal, connect the upstreams, serve the API. */
export async function startSidecar(config: SidecarConfig, options: SidecarOptions = {}): Promise<Sidecar> {
  const log = options.logger ?? pino({ name: 'relay', level: 'info' });
  const clock = options.clock ?? systemClock;
  const intervals = {
    tipFloorMs: 2000,
    balanceMs: 2000,
    leadersMs: 15_000,
    rpcSlotMs: 400,
    blockHeightMs: 1000,
    consensusMs: 5000,
    slotStallMs: 10_000,
    ...options.intervals,
  };
  // RELAY_ENGINE_LOCAL_ADDRESS must be this machine's before anything is opened (RELAY_E_CONFIG_INVALID_ENV naming it).
  if (config.engineLocalAddress !== undefined) await probeLocalAddress(config.engineLocalAddress);
  // The tipper pool: every file of KEYPAIR_PATH, in order (a bad one stops start-up, naming its path).
  const tippers = await loadKeypairs(config.keypairPaths, log);
  const crashPoint = options.crashPoint;

  const metrics = new Metrics();
  const bootId = randomBytes(6).toString('hex');
  const hub = new EventHub({
    bootId,
    ringSize: options.eventRingSize ?? 10_000,
    clientBufferLimitBytes: config.sseBufferBytes,
    now: () => clock.now(),
  });

  const policy = new PolicyStore(config.policyFile, (change) => {
    hub.publish('policy_changed', { ...change, ts: clock.now() });
    if (!change.ok)
      log.warn({ problems: change.problems }, 'policy file refused; the last good policy stays in force');
  });
  await policy.start({ watch: true });
  if (config.bypass && config.bypassTipLamports > policy.current['max-tip']) {
    policy.stop();
    throw new RelayError('RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP', {
      tip: config.bypassTipLamports,
      max_tip: policy.current['max-tip'],
    });
  }

  // One sidecar per data directory (a second one would replay the same journal and send everything twice).
  let dataDirLock: Awaited<ReturnType<typeof lockDataDir>>;
  try {
    dataDirLock = await lockDataDir(config.dataDir);
  } catch (error) {
    policy.stop();
    throw error;
  }
  // The store of record: PostgreSQL when RELAY_DATABASE_URL is set (refused at once, with its coded error, if the
  // database cannot be reached or its schema is not this relay's), else the local journal (the default).
  const opened = await openStore(config, options, log).catch(async (error: unknown) => {
    policy.stop();
    await dataDirLock.release();
    throw error;
  });
  const { store, recovery } = opened;
  for (const warning of recovery.warnings) log.warn(warning);
  // On PostgreSQL, SSE follows the events table from its end (a client resuming reads what it missed from there).
  const follower =
    store instanceof PgTxStore
      ? await followEventLog(store, hub, clock, log).catch(async (error: unknown) => {
          policy.stop();
          await store.close();
          await dataDirLock.release();
          throw error;
        })
      : null;

  // Webhooks listen before anything can publish: every event from here on reaches the outbox, and what a crash
  // kept out of it is added from the store's records first.
  let webhooks: { dispatcher: WebhookDispatcher; close: () => Promise<void> } | null = null;
  if (config.webhookUrls.length > 0 && config.webhookSecret && store instanceof PgTxStore) {
    try {
      webhooks = await deliverFromTable(store, config, config.webhookSecret, {
        metrics,
        log,
        clock,
        options,
      });
    } catch (error) {
      await follower?.close();
      policy.stop();
      await store.close();
      await dataDirLock.release();
      throw error;
    }
  } else if (config.webhookUrls.length > 0 && config.webhookSecret) {
    let journal: Journal<OutboxState, OutboxOp> | null = null;
    try {
      const { journal: outbox, recovery: outboxRecovery } = await Journal.open(
        join(config.dataDir, 'webhooks'),
        outboxCodec,
        { compactAtBytes: 8 * 1024 * 1024 },
      );
      for (const warning of outboxRecovery.warnings) log.warn(`webhook outbox: ${warning}`);
      journal = outbox;
      const dispatcher = new WebhookDispatcher({
        urls: config.webhookUrls,
        secret: config.webhookSecret,
        journal: outbox,
        metrics,
        log,
        clock,
        ...options.webhooks,
        ...(crashPoint ? { crashPoint } : {}),
      });
      webhooks = { dispatcher, close: () => outbox.close() };
      const found = await dispatcher.recover(await store.all());
      hub.onEvent(dispatcher.onEvent);
      log.info(
        { endpoints: config.webhookUrls.length, owed: outbox.state.messages.size, ...found },
        'webhooks: delivering',
      );
    } catch (error) {
      webhooks?.dispatcher.close();
      await journal?.close().catch(() => undefined);
      policy.stop();
      await store.close();
      await dataDirLock.release();
      throw error;
    }
  }
  const { log: lifecycle, recovery: lifecycleRecovery } = await LifecycleLog.open<LifecycleEntry>(
    config.lifecyclePath,
    {
      ...(crashPoint ? { crashPoint } : {}),
    },
  );
  for (const warning of lifecycleRecovery.warnings) log.warn(warning);

  const rpc = new SolanaRpc({ url: config.rpcUrl });
  // Every block-engine connection from RELAY_ENGINE_LOCAL_ADDRESS when set (the engine meters its budget per source
  // IP, jito.md §1.7); RPC and the stream keep the default route.
  const bound =
    config.engineLocalAddress === undefined
      ? null
      : await bindEngineTraffic(config.engineLocalAddress, config.bundleEngineGrpcUrls);
  if (bound)
    log.info({ local_address: bound.localAddress }, 'block engine traffic goes out from the local address');
  const engine = EngineRegions.fromConfig(config, bound ?? undefined);
  // Region names before the first send, so metrics and /status name regions as the engines do from the start (an
  // engine that does not answer in 2 s keeps its host name until the leader poll asks again).
  await Promise.race([engine.resolveNames(), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  metrics.initLandingSeries(engine.regions.map((r) => r.name));
  const oracle = new TipOracle();
  const leaders = new LeaderBuffer();

  const health = new UpstreamHealth(clock, metrics, intervals.slotStallMs);

  const verifier = config.verifyThreads > 0 ? new SignatureVerifier(config.verifyThreads) : null;
  const r = new Relay({
    store,
    lifecycle,
    hub,
    rpc,
    engine,
    tippers,
    oracle,
    leaders,
    policy: () => policy.current,
    metrics,
    log,
    bypass: { enabled: config.bypass, tipLamports: config.bypassTipLamports },
    initialMode: config.decisionMode,
    now: () => clock.now(),
    agentGraceMs: config.agentGraceSeconds * 1000,
    bundleEngineRps: config.bundleEngineRps,
    packMaxTransactions: config.bundlePackMax,
    ...(crashPoint ? { crashPoint: (name: CrashPointName) => crashPoint(name) } : {}),
    ...(verifier ? { verifier } : {}),
  });

  // The database going away and coming back (PostgreSQL only): said once each way in the log, and the relay holds new
  // tips from the first failure until it is back and holds every tip relay sent (recovery/outage.ts).
  if (store instanceof PgTxStore) {
    store.onFenced = (reason) => metrics.fencedWrites.inc({ reason });
    store.onMaintenanceError = (error) =>
      log.warn(
        { err: error },
        'database upkeep failed (retention, event partitions); retried at the next run',
      );
    store.watchAvailability((change) => {
      if (change.kind === 'down')
        log.error(
          { database: change.url, reason: change.reason },
          'database unavailable: writes are refused (503 RELAY_E_DB_UNAVAILABLE) and new tips held until it is back',
        );
      else log.warn({ database: change.url, down_ms: change.downMs }, 'database back');
      r.onDatabaseAvailability(change);
    });
  }

  // A fleet: what the takeover sweep adopts from a host whose session ended is resumed as a restart resumes its own.
  const lifetime = { closed: false };
  if (store instanceof PgTxStore && config.fleet)
    store.watchAdoptions(({ txs, from }) => {
      metrics.adopted.inc(txs.length);
      const previous = [...new Set([...from.values()].map((f) => `${f.hostId}#${f.epoch}`))];
      log.warn(
        { adopted: txs.length, from: previous },
        'fleet: adopted the live work of a host whose session ended',
      );
      // Until it succeeds: adopted work nobody resumes would wait, its attempt journaled and never sent, until it
      // expired (the rows are this host's now; no other host would take them).
      const ids = txs.map((t) => t.tx_id);
      const resume = (delayMs: number): void => {
        r.resumeAdopted(ids).then(
          (resumed) => log.info(resumed, 'fleet: resumed adopted work'),
          (error: unknown) => {
            if (lifetime.closed) return;
            log.warn(
              { err: error, retry_in_ms: delayMs },
              'fleet: resuming adopted work failed; trying again',
            );
            setTimeout(() => resume(Math.min(delayMs * 2, 5_000)), delayMs).unref();
          },
        );
      };
      resume(250);
    });

  // What a restart left in flight is adopted before any input arrives: packed riders are held again before a slot
  // tick, a bypass sweep or a tracking pass could send one alone beside its pack.
  const resumed = await r.resumeAfterRestart();
  if (resumed.resent + resumed.tracked + resumed.relogged > 0)
    log.info(resumed, `resumed in-flight work from the ${opened.name}`);
  if (resumed.relogged > 0)
    log.warn({ relogged: resumed.relogged }, 'lifecycle log: wrote again entries a crash lost');
  // Its own work resumed first; then the fleet's orphans (a restarted host re-adopted its own at open).
  if (store instanceof PgTxStore && config.fleet) store.startSweeping();

  const periodic = new Periodic(log);
  const tipFloorFetch =
    bound && servedByEngine(config.tipFloorUrl, config.bundleEngineUrls) ? { fetch: bound.fetch } : {};
  periodic.every(intervals.tipFloorMs, () =>
    pollTipFloor({ url: config.tipFloorUrl, oracle, health, hub, clock, ...tipFloorFetch }),
  );
  startChainPollers({ periodic, relay: r, rpc, engine, leaders, health, intervals });
  startConsensusPoller({ periodic, rpc, relay: r, everyMs: intervals.consensusMs });
  const stream = startSlotFeed({
    endpoint: config.streamEndpoint,
    xToken: config.streamXToken,
    tippers: r.tipperKeys,
    relay: r,
    rpc,
    health,
    periodic,
    rpcSlotMs: intervals.rpcSlotMs,
    log,
  });
  // A fleet: an adopted attempt signed by another host's tipper is watched at once, not at the stream's next refresh.
  if (store instanceof PgTxStore && config.fleet)
    store.watchAdoptions(() => {
      void r
        .streamAccounts()
        .then((accounts) => stream.setWatchedAccounts(accounts))
        .catch((error: unknown) => log.debug({ err: error }, 'watched accounts read failed'));
    });
  // Each region reports the bundles sent to it on its own stream; each stream is followed on its own.
  const bundleResults = engine.regions.map((region) =>
    followBundleResults(
      region.transport,
      (result) =>
        void r
          .onBundleResult(result)
          .catch((error: unknown) =>
            log[isDatabaseOutage(error) ? 'debug' : 'warn'](
              { err: error, bundle_id: result.bundleId },
              'bundle result failed',
            ),
          ),
      log.child({ region: region.url }),
      () => metrics.bundleResultResubscribes.inc(),
    ),
  );

  const sources: StatusSources = {
    relay: r,
    leaders,
    oracle,
    health,
    policy,
    store,
    storeName: opened.name,
    clock,
    webhooks: () => webhooks?.dispatcher.status() ?? [],
    ...(store instanceof PgTxStore && store.hostSession ? { fleet: () => store.fleetStatus() } : {}),
  };
  const listener = createRequestListener({
    relay: r,
    hub,
    // LIFECYCLE_PATH is this host's own log; on PostgreSQL the API reads the fleet's (DESIGN §10).
    lifecycle: store instanceof PgTxStore ? store.lifecycleEntries : lifecycle,
    policy,
    metrics,
    log,
    apiToken: config.apiToken,
    apiHost: config.apiHost,
    allowedHosts: config.allowedHosts,
    status: () => statusOf(sources),
    ready: () => readinessOf(sources),
    tip: () => oracle.view(clock.now()),
    now: () => clock.now(),
    webDist: options.webDist,
    ...(config.fleet ? { fleetHostId: config.hostId } : {}),
  });
  const server: Server = createServer(listener);
  server.keepAliveTimeout = 65_000;
  server.on('clientError', answerClientError);
  let closed = false;
  let listening = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    lifetime.closed = true;
    periodic.stop();
    for (const results of bundleResults) results.stop();
    stream.stop();
    policy.stop();
    r.close();
    webhooks?.dispatcher.close();
    await follower?.close();
    hub.dispose();
    if (listening) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    engine.close();
    await bound?.close();
    // The outbox first: on PostgreSQL it releases its leases through the store's pool.
    await webhooks?.close();
    await store.close();
    await lifecycle.close();
    await verifier?.close();
    await dataDirLock.release();
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
    { url, tippers: r.tipperKeys, bypass: config.bypass, mode: config.decisionMode },
    'relay sidecar listening',
  );

  return {
    url,
    port,
    relay: r,
    hub,
    policy,
    config,
    store,
    recovery: {
      replayed: recovery.operationsReplayed,
      resent: resumed.resent,
      tracked: resumed.tracked,
      warnings: [...recovery.warnings, ...lifecycleRecovery.warnings],
    },
    close,
  };
}

/**
 * Webhooks on PostgreSQL: the outbox is the `webhook_outbox` rows each change inserted with its events, leased and
 * delivered from there (woken by each local commit that owes a delivery, polled as a fallback).
 */
async function deliverFromTable(
  store: PgTxStore,
  config: SidecarConfig,
  secret: string,
  d: { metrics: Metrics; log: Logger; clock: Clock; options: SidecarOptions },
): Promise<{ dispatcher: WebhookDispatcher; close: () => Promise<void> }> {
  const outbox = new PgWebhookOutbox(store.database, {
    endpoints: config.webhookUrls,
    hostId: config.hostId,
    epoch: store.hostSession?.epoch ?? Date.now(),
    onError: (error) => d.log.warn({ err: error }, 'webhooks: the outbox table could not be read or written'),
  });
  const dispatcher = new WebhookDispatcher({
    urls: config.webhookUrls,
    secret,
    outbox,
    metrics: d.metrics,
    log: d.log,
    clock: d.clock,
    ...d.options.webhooks,
  });
  try {
    const unconfigured = await outbox.start((entries) => dispatcher.take(entries));
    if (unconfigured > 0) {
      d.log.warn(
        { dropped: unconfigured },
        'webhooks: deliveries owed to endpoints no longer in RELAY_WEBHOOK_URL were dropped',
      );
    }
  } catch (error) {
    dispatcher.close();
    await outbox.close();
    throw error;
  }
  const owing = new Set(['tx_status_changed', 'bundle_settled']);
  store.changes.subscribe((change) => {
    if (change.events.some((e) => owing.has(e.kind))) outbox.wake();
  });
  d.log.info({ endpoints: config.webhookUrls.length, owed: outbox.messages.size }, 'webhooks: delivering');
  return { dispatcher, close: () => outbox.close() };
}

/**
 * The hub fed by the event log's follower: woken by each local commit (the change feed), polled as a fallback. A
 * live status event's `ts` is when it was told, as on the local stores (decision latency is measured from it).
 */
async function followEventLog(
  store: PgTxStore,
  hub: EventHub,
  clock: Clock,
  log: Logger,
): Promise<EventFollower> {
  let failing = false;
  const follower = new EventFollower(store.eventLog, {
    deliver: (events) => {
      failing = false;
      hub.publishStored(
        events.map((e) =>
          e.name === 'bundle_settled'
            ? e
            : {
                cursor: e.cursor,
                host: e.host,
                name: e.name,
                data: { ...(e.data as object), ts: clock.now() },
              },
        ),
      );
    },
    onError: (error) => {
      // The database being away is said once, by the store; anything else once per failing streak.
      const level = lostConnection(error) || !store.healthy ? 'debug' : 'warn';
      if (!failing) log[level]({ err: error }, 'events: reading the event log failed; trying again');
      failing = true;
    },
    // Other hosts' commits wake it too, where hosts tell each other (notifyEvents, the fleet's): on one host no one
    // NOTIFYs, and a LISTEN would only hold a connection.
    listen: store.notifiesEvents,
  });
  const start = await follower.start().catch(async (error: unknown) => {
    await follower.close(); // its connection of its own
    throw error;
  });
  hub.followStore(store.eventLog, start);
  store.changes.subscribe(() => follower.wake());
  return follower;
}

/** The store a sidecar runs on, and what opening it found. */
interface OpenedStore {
  store: TxStore;
  /** What readiness and logs call it. */
  name: 'journal' | 'database';
  recovery: { operationsReplayed: number; warnings: string[] };
}

/**
 * PostgreSQL when `RELAY_DATABASE_URL` is set: connected and its schema checked first (`PgTxStore.open`: a bad URL,
 * an unreachable server, wrong credentials, a missing database or an unmigrated or newer schema refuse to start with
 * their coded error). Otherwise the local journal in `RELAY_DATA_DIR`, replayed.
 */
async function openStore(config: SidecarConfig, options: SidecarOptions, log: Logger): Promise<OpenedStore> {
  const retainTerminal = options.retainTerminal ?? 20_000;
  if (config.databaseUrl !== undefined) {
    const store = await PgTxStore.open(config.databaseUrl, {
      retainTerminal,
      hostId: config.hostId,
      session: { hostId: config.hostId, leaseMs: config.leaseMs },
      // A fleet (RELAY_FLEET): several writers, each holding its own work; commits with events NOTIFY the others.
      sole: !config.fleet,
      notifyEvents: config.fleet,
      webhookEndpoints: config.webhookSecret ? config.webhookUrls : [],
    });
    log.info({ database: redactDatabaseUrl(config.databaseUrl) }, 'store: PostgreSQL');
    return { store, name: 'database', recovery: { operationsReplayed: 0, warnings: [] } };
  }
  const { journal, recovery } = await Journal.open(
    join(config.dataDir, 'journal'),
    storeCodec(retainTerminal),
    {
      compactAtBytes: options.compactAtBytes ?? config.journalCompactBytes,
      ...(options.crashPoint ? { crashPoint: options.crashPoint } : {}),
    },
  );
  return { store: new JournalTxStore(journal), name: 'journal', recovery };
}
