import { EventSource, type FetchLike } from 'eventsource';
import { reconnectDelay, RelayError } from '@solrelay/client';
import { DECISION_MODES, type DecisionMode } from '@solrelay/core';
import type { IntervalTimers, PresenceChannel, PresenceHandlers } from './ports';
import { globalIntervalTimers } from './ports';
import { isTokenRefusal } from './sidecar-errors';

export interface SsePresenceOptions {
  /** The sidecar's address (the same as the client's). */
  baseUrl: string;
  /** `RELAY_API_TOKEN`, sent as `Authorization: Bearer`. */
  token?: string;
  model: string;
  provider: string;
  fetch?: typeof globalThis.fetch;
  timers?: IntervalTimers;
}

/**
 * The agent's registration: `GET /internal/agent/presence?model=&provider=` held open. The sidecar answers with a
 * `registered` event carrying the current decision mode, then `mode_changed` events on the same stream; the agent
 * is present while connected. On a drop it reconnects on the client's schedule (`reconnectDelay`: 500 ms doubling
 * to 30 s, reset once registered) and registers again. eventsource's own fixed 3 s retry is never used. A 401 (no
 * or a wrong token) is not retried: the channel stops and reports `unauthorized`, as the client's event stream does.
 *
 * The client has no presence call, so this is built from its public pieces (`reconnectDelay`, `RelayError`) and
 * the same `eventsource` library it uses.
 */
export class SsePresence implements PresenceChannel {
  private source: EventSource | null = null;
  private timer: unknown = null;
  private attempt = 0;
  private closed = false;
  private readonly timers: IntervalTimers;

  constructor(private readonly options: SsePresenceOptions) {
    this.timers = options.timers ?? globalIntervalTimers;
  }

  open(handlers: PresenceHandlers): void {
    this.closed = false;
    this.connect(handlers);
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.source?.close();
    this.source = null;
  }

  private connect(handlers: PresenceHandlers): void {
    this.timer = null;
    if (this.closed) return;
    const url = new URL('/internal/agent/presence', this.options.baseUrl);
    url.searchParams.set('model', this.options.model);
    url.searchParams.set('provider', this.options.provider);
    let refusal: RelayError | null = null;
    const baseFetch = this.options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    const fetchWithAuth: FetchLike = async (input, init) => {
      const response = await baseFetch(input, {
        ...init,
        headers: {
          ...init.headers,
          ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
        },
      } as RequestInit);
      if (response.status !== 200) refusal = await refusalOf(response);
      return response;
    };
    const source = new EventSource(url.toString(), { fetch: fetchWithAuth });
    this.source = source;
    let ended = false;

    source.addEventListener('registered', (event) => {
      const data = parse((event as unknown as { data: string }).data);
      const mode = modeOf(data?.decision_mode);
      if (!data || !mode) return;
      this.attempt = 0;
      handlers.registered({
        decision_mode: mode,
        model: String(data.model ?? this.options.model),
        provider: String(data.provider ?? this.options.provider),
      });
    });
    source.addEventListener('mode_changed', (event) => {
      const mode = modeOf(parse((event as unknown as { data: string }).data)?.decision_mode);
      if (mode) handlers.modeChanged(mode);
    });
    source.addEventListener('error', (event) => {
      if (ended || this.closed) return;
      ended = true;
      // eventsource arms its own retry right after dispatching `error`; closing on the next microtask clears it.
      queueMicrotask(() => source.close());
      if (this.source === source) this.source = null;
      if (isTokenRefusal(refusal)) {
        // A missing or wrong token does not heal by retrying (the client's event stream stops the same way).
        this.closed = true;
        handlers.unauthorized?.(refusal);
        return;
      }
      this.attempt += 1;
      const delay = reconnectDelay(this.attempt);
      const message = (event as unknown as { message?: string }).message;
      handlers.lost({
        attempt: this.attempt,
        delay_ms: delay,
        error:
          refusal ??
          new RelayError('RELAY_E_UPSTREAM_UNREACHABLE', {
            upstream: 'sidecar',
            reason: message ?? 'presence stream ended',
          }),
      });
      this.timer = this.timers.setTimeout(() => this.connect(handlers), delay);
    });
  }
}

function parse(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function modeOf(value: unknown): DecisionMode | null {
  return (DECISION_MODES as readonly unknown[]).includes(value) ? (value as DecisionMode) : null;
}

async function refusalOf(response: Response): Promise<RelayError> {
  if (response.status === 401) {
    // Keep the sidecar's own code (missing or invalid token): the app prints it.
    const code = await errorCodeOf(response);
    return new RelayError(
      code === 'RELAY_E_AUTH_MISSING_TOKEN' ? 'RELAY_E_AUTH_MISSING_TOKEN' : 'RELAY_E_AUTH_INVALID_TOKEN',
    );
  }
  try {
    const body = (await response.clone().json()) as { error?: { code?: string; message?: string } };
    return new RelayError('RELAY_E_UPSTREAM_INVALID_RESPONSE', {
      upstream: 'sidecar',
      reason:
        `presence refused: HTTP ${response.status} ${body.error?.code ?? ''} ${body.error?.message ?? ''}`.trim(),
    });
  } catch {
    return new RelayError('RELAY_E_UPSTREAM_INVALID_RESPONSE', {
      upstream: 'sidecar',
      reason: `presence refused: HTTP ${response.status}`,
    });
  }
}

async function errorCodeOf(response: Response): Promise<string | null> {
  try {
    const body = (await response.clone().json()) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : null;
  } catch {
    return null;
  }
}
