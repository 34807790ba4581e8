import { EventSource, type FetchLike } from 'eventsource';
import type { RelayError } from '@solrelay/core';
import { errorFromResponse, unreachable, type HttpTransport, type RelayClientLogger } from './http';

/** Why one SSE connection ended. */
export interface SseDrop {
  /** The HTTP status when the server answered but not with a stream (401, 503, ...), else null. */
  status: number | null;
  /** The server's error for a non-200 answer, or a `RELAY_E_UPSTREAM_UNREACHABLE` for a network failure or cut. */
  error: RelayError;
}

export interface SseHandlers {
  onOpen(): void;
  onEvent(name: string, data: unknown, id: string | null): void;
  onDrop(drop: SseDrop): void;
}

export interface SseConnection {
  close(): void;
}

/**
 * One SSE connection through `eventsource` with the client's auth header and (when given) a `Last-Event-ID`.
 * eventsource's own reconnect (a fixed 3 s, no backoff) is never used: at the first error this connection is
 * closed and `onDrop` fires once, and the caller decides when to open the next one.
 */
export function openSse(
  http: HttpTransport,
  path: string,
  eventNames: readonly string[],
  lastEventId: string | null,
  handlers: SseHandlers,
  logger: RelayClientLogger | undefined,
): SseConnection {
  let serverError: RelayError | null = null;
  let ended = false;
  const fetchWithHeaders: FetchLike = async (url, init) => {
    const response = await http.fetch(url, {
      ...init,
      headers: {
        ...init.headers,
        ...http.authHeaders(),
        ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
      },
    } as RequestInit);
    // eventsource only reports the status of a refused stream; read the body here so the server's code survives.
    if (response.status !== 200) serverError = await errorFromResponse(response);
    return response;
  };
  const source = new EventSource(http.url(path), { fetch: fetchWithHeaders });

  const end = (drop: SseDrop) => {
    if (ended) return;
    ended = true;
    // eventsource arms its own 3 s retry timer right after dispatching `error`; closing on the next microtask
    // (after it is armed) clears it instead of leaving a stray timer behind.
    queueMicrotask(() => source.close());
    handlers.onDrop(drop);
  };

  source.addEventListener('open', () => {
    if (!ended) handlers.onOpen();
  });
  source.addEventListener('error', (event) => {
    const { code, message } = event as unknown as { code?: number; message?: string };
    const status = typeof code === 'number' ? code : null;
    end({ status, error: serverError ?? unreachable(new Error(message ?? 'event stream ended')) });
  });
  for (const name of eventNames) {
    source.addEventListener(name, (event) => {
      if (ended) return;
      const message = event as unknown as { data: string; lastEventId: string };
      let data: unknown;
      try {
        data = JSON.parse(message.data);
      } catch {
        logger?.warn?.({ event: name, path }, 'relay client: skipped an SSE message whose data is not JSON');
        return;
      }
      handlers.onEvent(name, data, message.lastEventId ? message.lastEventId : null);
    });
  }
  return {
    close() {
      ended = true;
      source.close();
    },
  };
}
