import { DEFAULT_LIFECYCLE_LAST, LifecycleQuerySchema, RelayError, parseRequestBody } from '@solrelay/core';
import { isDatabaseOutage } from '../../store/store';
import type { AppDeps, Routes } from '../deps';

/** Rethrows anything but the store's database being away. */
function unlessOutage(error: unknown): void {
  if (!isDatabaseOutage(error)) throw error;
}

/** `GET /healthz`: liveness. Registered before the token check: probes carry no token. */
export function livenessRoute(app: Routes): void {
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
}

/** The operator's views: status, tip, queue, lifecycle and bundles, policy, readiness and metrics. */
export function operatorRoutes(
  app: Routes,
  deps: Pick<AppDeps, 'relay' | 'hub' | 'lifecycle' | 'policy' | 'metrics' | 'status' | 'ready' | 'tip'>,
): void {
  const { relay, hub } = deps;

  app.get('/status', async (_req, res) => {
    res.json(await deps.status());
  });

  app.get('/tip', (_req, res) => {
    res.json(deps.tip());
  });

  app.get('/queue', async (_req, res) => {
    res.json(await relay.queueView());
  });

  app.get('/lifecycle', async (req, res) => {
    const { last } = parseRequestBody(LifecycleQuerySchema, {
      last: req.query.last ?? DEFAULT_LIFECYCLE_LAST,
    });
    res.json({ entries: await deps.lifecycle.recent(last) });
  });

  app.get('/bundle/:bundleId', async (req, res) => {
    const bundleId = req.params.bundleId as string;
    if (!/^[0-9a-f]{64}$/.test(bundleId)) {
      throw new RelayError('RELAY_E_REQUEST_INVALID_FIELD', {
        field: 'bundle_id',
        reason: 'expected 64 lowercase hex characters',
      });
    }
    const entry = await deps.lifecycle.find(bundleId);
    if (!entry) throw new RelayError('RELAY_E_BUNDLE_NOT_FOUND', { bundle_id: bundleId });
    res.json(entry);
  });

  app.get('/policy', (_req, res) => {
    res.json(deps.policy.view());
  });

  app.get('/readyz', (_req, res) => {
    const ready = deps.ready();
    if (ready.ready) {
      res.json(ready);
      return;
    }
    const error = new RelayError('RELAY_E_NOT_READY', {
      reason: ready.reasons.join('; '),
      reasons: ready.reasons,
    });
    res.status(503).json(error.toBody());
  });

  app.get('/metrics', async (_req, res) => {
    deps.metrics.sseClients.set(hub.clientCount);
    deps.metrics.sseDropped.set(hub.counters.slowClientsDropped);
    deps.metrics.sseBuffered.set(hub.bufferedBytes);
    deps.metrics.sseBufferedPeak.set(hub.counters.peakBufferedBytes);
    deps.metrics.sseClientBufferedPeak.set(hub.counters.peakClientBufferedBytes);
    // The store's figures keep their last values while its database is away: the scrape itself still answers.
    await relay.counts().then((counts) => deps.metrics.queueDepth.set(counts.active), unlessOutage);
    for (const t of relay.tipperStatus()) {
      if (t.balance_lamports !== null)
        deps.metrics.tipperBalance.set({ tipper: t.pubkey }, t.balance_lamports);
      deps.metrics.tipperReserved.set({ tipper: t.pubkey }, t.reserved_lamports);
    }
    for (const t of relay.tipperShortfalls())
      deps.metrics.tipperShortfall.set({ tipper: t.pubkey }, t.lamports);
    await relay.spentThisHour().then((spent) => deps.metrics.spendWindow.set(spent), unlessOutage);
    deps.metrics.spendLimit.set(deps.policy.current['spend-limit']);
    const consensus = relay.consensus();
    for (const mode of ['unknown', 'towerbft', 'alpenglow'] as const)
      deps.metrics.consensusMode.set({ mode }, consensus.kind === mode ? 1 : 0);
    deps.metrics.consensusMigrating.set(consensus.migrating ? 1 : 0);
    deps.metrics.lastRollbackSlot.set(consensus.lastRollbackSlot ?? 0);
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
}
