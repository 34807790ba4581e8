import type { Express } from 'express';
import type { LifecycleEntry, ReadyResponse, StatusResponse } from '@solrelay/core';
import type { Logger } from 'pino';
import type { EventHub } from '../events/hub';
import type { LifecycleReader } from '../lifecycle/log';
import type { Metrics } from '../metrics';
import type { PolicyStore } from '../policy/policy-store';
import type { Relay } from '../relay';

/** Everything the HTTP layer uses. Each middleware and route group takes the `Pick<AppDeps, …>` it needs. */
export interface AppDeps {
  relay: Relay;
  hub: EventHub;
  /** The lifecycle log the API reads: LIFECYCLE_PATH's, or on PostgreSQL the fleet's (`lifecycle_entries`). */
  lifecycle: LifecycleReader<LifecycleEntry>;
  policy: PolicyStore;
  metrics: Metrics;
  log: Logger;
  apiToken: string | undefined;
  status: () => Promise<StatusResponse>;
  ready: () => ReadyResponse;
  tip: () => unknown;
  /** Built dashboard files served at `/`, when present. */
  webDist?: string | undefined;
  /** The address the API is bound to: on a loopback address, Host headers are checked (DNS rebinding). */
  apiHost?: string | undefined;
  /** Host names accepted besides loopback ones; `*` turns the Host check off. */
  allowedHosts?: readonly string[] | undefined;
  /** The service's clock (event timestamps); the system's when absent. */
  now?: () => number;
  /**
   * Several sidecars on one database: this host's `RELAY_HOST_ID`. The agent's stream then carries only what this
   * host's own commits wrote (its transactions, and what it adopted) and this host's own news: another host's agent
   * decides the rest.
   */
  fleetHostId?: string | undefined;
}

/** What a route group registers its routes on: the app itself (see `createApp` for why not a sub-router). */
export type Routes = Pick<Express, 'get' | 'post'>;
