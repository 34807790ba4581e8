import {
  CONTENTION_CLASSES,
  LandingTally,
  UNKNOWN_REGION,
  UNPRICED,
  type LandingRoute,
} from '@solrelay/core';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one sidecar. A registry per instance, so tests and embedded sidecars never collide. */
export class Metrics {
  readonly registry = new Registry();
  readonly enqueues = new Counter({
    name: 'relay_enqueues_total',
    help: 'Enqueue requests by result (accepted, repeat, or the refusing error code)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly transitions = new Counter({
    name: 'relay_tx_transitions_total',
    help: 'Transaction state changes by target state',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly attemptOutcomes = new Counter({
    name: 'relay_attempt_outcomes_total',
    help: 'Attempts that ended without landing, by outcome class',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly attempts = new Counter({
    name: 'relay_attempts_total',
    help: 'Attempts (bundles) built, by decision source',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly transportErrors = new Counter({
    name: 'relay_transport_errors_total',
    help: 'Block engine sends that failed in transport (resent with the same bytes; not attempts)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  readonly sendFailures = new Counter({
    name: 'relay_send_failures_total',
    help: 'Sends that failed for a reason other than the store or the engine (a fault of relay; logged at error level, retried with back-off)',
    registers: [this.registry],
  });
  readonly fencedWrites = new Counter({
    name: 'relay_fleet_fenced_writes_total',
    help: 'Writes a fleet host was refused because the work is not its own (owned_elsewhere: another host adopted or runs it; session_not_live: the database says this host session lapsed)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly adopted = new Counter({
    name: 'relay_fleet_adopted_total',
    help: 'Live transactions this host adopted from a host whose session ended or lapsed (the takeover sweep)',
    registers: [this.registry],
  });
  readonly repeatedSends = new Counter({
    name: 'relay_repeated_sends_total',
    help: 'Sends of journaled bytes another send of the same attempt had already recorded (same bundle id, same tip)',
    registers: [this.registry],
  });
  readonly sendCapacity = new Gauge({
    name: 'relay_send_capacity_per_second',
    help: 'Bundles relay can send a second: regional block engines x BUNDLE_ENGINE_RPS (what admission counts on)',
    registers: [this.registry],
  });
  readonly expectedQueueWait = new Gauge({
    name: 'relay_expected_queue_wait_seconds',
    help: 'How long the transactions waiting to be sent take to go out at the send capacity',
    registers: [this.registry],
  });
  readonly tipsRefreshed = new Counter({
    name: 'relay_tips_refreshed_total',
    help: 'Tip transactions signed again on a fresh blockhash before their first send (they aged while queued for the engines budget)',
    registers: [this.registry],
  });
  readonly packedBundles = new Counter({
    name: 'relay_packed_bundles_total',
    help: 'Bundles that carried other waiting transactions besides their own (packing, BUNDLE_PACK_MAX > 1)',
    registers: [this.registry],
  });
  readonly packedPassengers = new Counter({
    name: 'relay_packed_passengers_total',
    help: 'Transactions that rode in another transaction’s bundle (packing)',
    registers: [this.registry],
  });
  readonly packTipsRaised = new Counter({
    name: 'relay_pack_tips_raised_total',
    help: 'Packed bundles whose tip was raised (and signed again before the first send) so that every member keeps its rank per CU',
    registers: [this.registry],
  });
  readonly engineRequests = new Counter({
    name: 'relay_engine_requests_total',
    help: 'sendBundle requests per regional block engine, by answer: accepted (an id), rejected (a verdict on the bundle), transport (429, 5xx, timeouts)',
    labelNames: ['region', 'result'] as const,
    registers: [this.registry],
  });
  readonly tipsPaid = new Counter({
    name: 'relay_tips_paid_lamports_total',
    help: 'Lamports tipped by bundles that landed, counted once confirmed (a processed block can still be orphaned), by the regional engine that took the bundle and the contention class its tip was priced for (unpriced: not priced per CU)',
    labelNames: ['region', 'contention'] as const,
    registers: [this.registry],
  });
  readonly bundlesSubmitted = new Counter({
    name: 'relay_bundles_submitted_total',
    help: 'Bundles a regional block engine took (an id back), by that engine and the contention class their tip was priced for',
    labelNames: ['region', 'contention'] as const,
    registers: [this.registry],
  });
  readonly bundlesLanded = new Counter({
    name: 'relay_bundles_landed_total',
    help: 'Bundles that landed (counted once confirmed), by the regional engine that took them and their contention class',
    labelNames: ['region', 'contention'] as const,
    registers: [this.registry],
  });
  readonly bundlesLost = new Counter({
    name: 'relay_bundles_lost_total',
    help: 'Bundles an engine took that ended without landing, by that engine and their contention class',
    labelNames: ['region', 'contention'] as const,
    registers: [this.registry],
  });
  readonly bundlesFoundLanded = new Counter({
    name: 'relay_bundles_found_landed_total',
    help: 'Bundles counted in relay_bundles_lost_total that landed after all (their tip on chain once the window had passed, or a landing back after a fork): lost for good = lost - found landed',
    labelNames: ['region', 'contention'] as const,
    registers: [this.registry],
  });
  /** The same counts since start, for `GET /status`'s `landing` and the dashboard. */
  readonly landing = new LandingTally();
  readonly tipsLeaked = new Counter({
    name: 'relay_tips_leaked_lamports_total',
    help: 'Lamports of tip transactions that landed without their bundle (uncled blocks)',
    registers: [this.registry],
  });
  readonly sendsHeldForMigration = new Counter({
    name: 'relay_sends_held_for_migration_total',
    help: 'Bundles held back from the block engine while a TowerBFT -> Alpenglow migration window was open (each once per window; sent when it closes)',
    registers: [this.registry],
  });
  readonly consensusMode = new Gauge({
    name: 'relay_consensus_mode',
    help: "The cluster's consensus as relay detects it from the cluster itself: 1 for the detected mode (unknown, towerbft, alpenglow), 0 for the others",
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });
  readonly consensusMigrating = new Gauge({
    name: 'relay_consensus_migration_window_open',
    help: '1 while a consensus migration window is open (vote-only blocks; sends held, no expiry, no retry counted)',
    registers: [this.registry],
  });
  readonly lastRollbackSlot = new Gauge({
    name: 'relay_consensus_last_rollback_slot',
    help: 'The processed slot at which relay last saw blocks rolled back (a parent below a slot already processed; a migration deletes the blocks after its transition block), 0 if never',
    registers: [this.registry],
  });
  readonly deadSlots = new Counter({
    name: 'relay_dead_slots_total',
    help: 'Slots the stream reported dead (replay failures) while relay was watching',
    registers: [this.registry],
  });
  readonly bundleResultResubscribes = new Counter({
    name: 'relay_bundle_result_resubscribes_total',
    help: 'Times the block-engine bundle-result stream was opened again after it failed, ended or fell silent',
    registers: [this.registry],
  });
  readonly engineVerdictRechecks = new Counter({
    name: 'relay_engine_verdict_rechecks_total',
    help:
      "An engine's fatal verdict on user transactions re-checked on relay's own RPC, by result: reproduced (failed), " +
      "cleared (the engine's bank lagged; sent again), unavailable (no proof; sent again), unverifiable (the bytes are gone; kept)",
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly landedAfterTerminal = new Counter({
    name: 'relay_landed_after_terminal_total',
    help:
      'User signatures of a failed or expired transaction seen landed afterwards (a terminal state that was not ' +
      'proof). Impossible by construction; anything but 0 is a bug to report',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly orphanedLandings = new Counter({
    name: 'relay_orphaned_landings_total',
    help: 'Landings whose block left the chain without a dead-slot notice (an abandoned fork): back to pending',
    registers: [this.registry],
  });
  readonly evicted = new Counter({
    name: 'relay_evicted_total',
    help: 'Transactions that left the queue without landing, by reason',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly decisionLatency = new Histogram({
    name: 'relay_decision_latency_seconds',
    help: 'tx_enqueued to submit_requested for first attempts',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly enqueueLatency = new Histogram({
    name: 'relay_enqueue_latency_seconds',
    help: 'Time to accept an enqueue (validation, journal fsync)',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'relay_queue_depth',
    help: 'Non-terminal transactions',
    registers: [this.registry],
  });
  readonly sseClients = new Gauge({
    name: 'relay_sse_clients',
    help: 'Connected SSE clients on /internal/events',
    registers: [this.registry],
  });
  readonly sseDropped = new Gauge({
    name: 'relay_sse_slow_clients_dropped',
    help: 'SSE clients dropped because they stopped reading (cumulative)',
    registers: [this.registry],
  });
  readonly sseBuffered = new Gauge({
    name: 'relay_sse_buffered_bytes',
    help: 'Unsent SSE bytes held for connected clients (socket backlogs plus queues)',
    registers: [this.registry],
  });
  readonly sseBufferedPeak = new Gauge({
    name: 'relay_sse_buffered_bytes_peak',
    help: 'The most unsent SSE bytes held for all clients together since start (measured after each flush)',
    registers: [this.registry],
  });
  readonly sseClientBufferedPeak = new Gauge({
    name: 'relay_sse_client_buffered_bytes_peak',
    help: 'The most unsent SSE bytes held for one client since start (bounded by RELAY_SSE_BUFFER_BYTES)',
    registers: [this.registry],
  });
  readonly upstreamUp = new Gauge({
    name: 'relay_upstream_up',
    help: '1 when the upstream answered recently',
    labelNames: ['upstream'] as const,
    registers: [this.registry],
  });
  readonly slot = new Gauge({
    name: 'relay_slot',
    help: 'Highest processed slot seen',
    registers: [this.registry],
  });
  readonly timeToCommitment = new Histogram({
    name: 'relay_time_to_commitment_seconds',
    help: 'From enqueue to the first time a transaction reached a commitment (processed, confirmed, finalized)',
    labelNames: ['commitment'] as const,
    buckets: [0.5, 1, 2, 3, 5, 8, 13, 20, 30, 45, 60, 90, 120, 300],
    registers: [this.registry],
  });
  readonly tipperBalance = new Gauge({
    name: 'relay_tipper_balance_lamports',
    help: "Each tipper account's balance at its last read (label tipper: its address; one per KEYPAIR_PATH file)",
    labelNames: ['tipper'] as const,
    registers: [this.registry],
  });
  readonly tipperReserved = new Gauge({
    name: 'relay_tipper_reserved_lamports',
    help: "Tips and fees of each tipper's attempts that may still take from it after its last balance read",
    labelNames: ['tipper'] as const,
    registers: [this.registry],
  });
  readonly tipperShortfall = new Gauge({
    name: 'relay_tipper_shortfall_lamports',
    help: 'What each tipper lacked for the tip that last waited on it (0 once it can pay it)',
    labelNames: ['tipper'] as const,
    registers: [this.registry],
  });
  readonly tipperTipFailures = new Counter({
    name: 'relay_tipper_tip_failures_total',
    help: "Attempts that did not land because relay's own tip transaction could not execute (the engine named it, or the tipper's balance could not pay it), by tipper: an operator fault, no retry counted",
    labelNames: ['tipper'] as const,
    registers: [this.registry],
  });
  readonly tipperUnderfunded = new Counter({
    name: 'relay_tipper_underfunded_total',
    help: 'Submits refused because no tipper could pay the tip besides its tips in flight (the transaction waits), by the closest tipper',
    labelNames: ['tipper'] as const,
    registers: [this.registry],
  });
  readonly spendWindow = new Gauge({
    name: 'relay_spend_window_lamports',
    help: 'Tips and fees reserved or paid in the rolling hour (against relay_spend_limit_lamports)',
    registers: [this.registry],
  });
  readonly spendLimit = new Gauge({
    name: 'relay_spend_limit_lamports',
    help: 'The policy spend-limit per rolling hour (0 = no limit)',
    registers: [this.registry],
  });
  readonly webhookDeliveries = new Counter({
    name: 'relay_webhook_deliveries_total',
    help: 'Webhook deliveries by endpoint and result: delivered, failed (a try, retried later), expired (given up: retry window passed or the endpoint owed too much)',
    labelNames: ['endpoint', 'result'] as const,
    registers: [this.registry],
  });
  readonly webhookOldestPending = new Gauge({
    name: 'relay_webhook_oldest_pending_seconds',
    help: 'Age of the oldest event a webhook endpoint is owed (0 when none)',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });
  readonly webhookOutboxWriteFailures = new Counter({
    name: 'relay_webhook_outbox_write_failures_total',
    help: 'Webhook outbox journal writes refused (events not durable until the next start backfills them)',
    registers: [this.registry],
  });
  readonly webhookOutboxPending = new Gauge({
    name: 'relay_webhook_outbox_pending',
    help: 'Webhook deliveries owed, per endpoint (queued or being retried)',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });
  readonly webhookDeliveryLag = new Histogram({
    name: 'relay_webhook_delivery_lag_seconds',
    help: 'From an event to its successful webhook delivery',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'relay_process_' });
  }

  /** A regional engine took a bundle (an id back). Once per bundle. */
  bundleSubmitted(route: LandingRoute): void {
    this.landing.submitted(route);
    this.bundlesSubmitted.inc(landingLabels(route));
  }

  /** A bundle landed (confirmed) with its tip. Once per bundle. */
  bundleLanded(route: LandingRoute, tipLamports: number): void {
    this.landing.landed(route, tipLamports);
    const labels = landingLabels(route);
    this.bundlesLanded.inc(labels);
    this.tipsPaid.inc(labels, tipLamports);
  }

  /** A bundle counted lost landed after all (then counted landed too). */
  bundleFoundLanded(route: LandingRoute): void {
    this.landing.notLost(route);
    this.bundlesFoundLanded.inc(landingLabels(route));
  }

  /**
   * Every landing series at 0 for the configured regions and each contention class, so a dashboard's `increase()`
   * sees the first bundle of each (a labelled counter has no series until its first increment).
   */
  initLandingSeries(regions: readonly string[]): void {
    for (const region of regions)
      for (const contention of [...CONTENTION_CLASSES, UNPRICED])
        for (const counter of [
          this.tipsPaid,
          this.bundlesSubmitted,
          this.bundlesLanded,
          this.bundlesLost,
          this.bundlesFoundLanded,
        ])
          counter.inc({ region, contention }, 0);
  }

  /** A bundle an engine took ended without landing. Once per bundle. */
  bundleLost(route: LandingRoute): void {
    this.landing.lost(route);
    this.bundlesLost.inc(landingLabels(route));
  }
}

function landingLabels(route: LandingRoute): { region: string; contention: string } {
  return { region: route.region ?? UNKNOWN_REGION, contention: route.contention ?? UNPRICED };
}
