import type { RelayEventMap } from './events';

/**
 * Status webhooks: which events are pushed, what a delivery's body is, and when a failed delivery is tried again.
 * Pure: the sidecar's dispatcher supplies the clock and the randomness.
 */

/** The events POSTed to webhook endpoints (the same JSON as on the SSE streams). */
export const WEBHOOK_EVENT_TYPES = ['tx_status_changed', 'bundle_settled'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The body of every delivery (Standard Webhooks' recommended shape). */
export interface WebhookPayload<T extends WebhookEventType = WebhookEventType> {
  type: T;
  /** When the event happened, ISO 8601. */
  timestamp: string;
  data: RelayEventMap[T];
}

export function webhookPayload<T extends WebhookEventType>(
  type: T,
  data: RelayEventMap[T],
  eventTs: number,
): WebhookPayload<T> {
  return { type, timestamp: new Date(eventTs).toISOString(), data };
}

/** A delivery is retried for this long after its event was queued, then given up (and counted). */
export const WEBHOOK_RETRY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** The first retry comes after about this long; each further failure doubles it, up to the cap. */
export const WEBHOOK_RETRY_BASE_MS = 1_000;
export const WEBHOOK_RETRY_CAP_MS = 5 * 60 * 1000;

/**
 * How long to wait after the `failures`-th failure in a row (1 for the first): exponential from the base, capped,
 * with jitter taking each wait to between half and all of it, so endpoints that failed together do not all come
 * back in the same instant. `random` is in [0, 1).
 */
export function webhookRetryDelayMs(
  failures: number,
  random: number,
  base: number = WEBHOOK_RETRY_BASE_MS,
  cap: number = WEBHOOK_RETRY_CAP_MS,
): number {
  const exponent = Math.max(0, Math.min(failures - 1, 30));
  const full = Math.min(cap, base * 2 ** exponent);
  return Math.round(full / 2 + (full / 2) * random);
}

/** One endpoint's delivery state, in `GET /status`. */
export interface WebhookEndpointStatus {
  /** The endpoint's URL with any user info and query string removed. */
  url: string;
  /** Deliveries owed to this endpoint (queued or being retried). */
  pending: number;
  /** Age of the oldest owed delivery's event, ms; null when nothing is owed. */
  oldest_pending_ms: number | null;
  delivered: number;
  /** Failed tries (each one retried later unless the retry window passed). */
  failed_attempts: number;
  /** Deliveries given up after the retry window. */
  expired: number;
  /** Failures in a row since the last success (0 when healthy). */
  consecutive_failures: number;
  last_error: string | null;
  /** Wall time of the last successful delivery, ms; null before the first. */
  last_success_at: number | null;
}

/**
 * An endpoint URL as shown in status, logs and metric labels: scheme, host, port and path, without credentials or
 * query, and with long path segments cut to their first 4 characters (services such as Slack put the secret in
 * the path).
 */
export function displayWebhookUrl(url: string): string {
  const parsed = new URL(url);
  const path = parsed.pathname
    .split('/')
    .map((segment) => (segment.length >= 16 ? `${segment.slice(0, 4)}…` : segment))
    .join('/');
  return `${parsed.protocol}//${parsed.host}${path}`;
}

/**
 * The `webhook-id` of an event, derived from what it is rather than drawn at random: the same for a live event
 * and for the same event added again from the transaction's record after a crash, so receivers can dedupe both.
 * A transaction's n-th status change (its n-th history entry, from 0), or a bundle's settlement as one transaction
 * saw it. The settlement's id names the transaction too: the transactions of one packed bundle each publish their
 * own `bundle_settled` (same bundle and stage, each with its `tx_id`), and receivers dedupe on the id, so an id per
 * bundle alone would have them drop all but the first.
 */
export function webhookMessageId(
  of:
    | { kind: 'status'; txId: string; index: number }
    | { kind: 'settled'; txId: string; bundleId: string; stage: string },
): string {
  return of.kind === 'status' ? `msg_${of.txId}_s${of.index}` : `msg_${of.txId}_${of.bundleId}_${of.stage}`;
}

/**
 * The `webhook-id` of each event one change of a transaction causes, in order; null for an event that is not a
 * webhook's. The change's status events are the last entries of the record's history after it (one entry each), so
 * the k-th of n status events is history entry `historyLength - n + k`: the id a live event gets on any store.
 */
export function webhookIdsOfChange(
  txId: string,
  historyLength: number,
  events: ReadonlyArray<{ kind: string; data?: unknown }>,
): Array<string | null> {
  const statuses = events.filter((e) => e.kind === 'tx_status_changed').length;
  let index = historyLength - statuses;
  return events.map((e) => {
    if (e.kind === 'tx_status_changed') return webhookMessageId({ kind: 'status', txId, index: index++ });
    if (e.kind === 'bundle_settled') {
      const { bundle_id, stage } = e.data as RelayEventMap['bundle_settled'];
      return webhookMessageId({ kind: 'settled', txId, bundleId: bundle_id, stage });
    }
    return null;
  });
}
