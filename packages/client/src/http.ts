import { RelayError, relayErrorFromBody } from '@solrelay/core/wire';
import { ClientClosedError } from './errors';

/** The `fetch` the client uses: the global one by default, or the caller's (browsers add headers this way). */
export type FetchFunction = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** What the client logs; pino and console-like loggers fit. Every method is optional. */
export interface RelayClientLogger {
  debug?(obj: object, msg?: string): void;
  info?(obj: object, msg?: string): void;
  warn?(obj: object, msg?: string): void;
  error?(obj: object, msg?: string): void;
}

export interface HttpOptions {
  baseUrl: string;
  token: string | undefined;
  fetch: FetchFunction;
  /** True once the client is closed; every request made after that rejects with `ClientClosedError`. */
  isClosed?: () => boolean;
}

/**
 * JSON over HTTP to the sidecar. Every non-2xx answer becomes the RelayError the server sent (by its code); a
 * network failure becomes `RELAY_E_UPSTREAM_UNREACHABLE` so callers only ever handle RelayErrors.
 */
export class HttpTransport {
  readonly baseUrl: string;

  constructor(private readonly options: HttpOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
  }

  url(path: string): string {
    return this.baseUrl + path;
  }

  /** Headers every request carries; the bearer token only when one is configured. */
  authHeaders(): Record<string, string> {
    return this.options.token ? { Authorization: `Bearer ${this.options.token}` } : {};
  }

  get fetch(): FetchFunction {
    return this.options.fetch;
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return (await this.request<T>('GET', path, undefined, signal)).body;
  }

  async post<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    return (await this.request<T>('POST', path, body, signal)).body;
  }

  /** A request whose 2xx status matters to the caller (enqueue: 202 new, 200 repeat). */
  async request<T>(
    method: string,
    path: string,
    body: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: T }> {
    if (this.options.isClosed?.()) throw new ClientClosedError();
    if (signal?.aborted) throw signal.reason;
    let response: Response;
    try {
      const pending = this.options.fetch(this.url(path), {
        method,
        headers: {
          Accept: 'application/json',
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
          ...this.authHeaders(),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal ? { signal } : {}),
      });
      response = await untilAborted(pending, signal);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw unreachable(error);
    }
    if (!response.ok) {
      const error = await errorFromResponse(response, signal);
      throw signal?.aborted ? signal.reason : error;
    }
    try {
      return { status: response.status, body: (await untilAborted(response.json(), signal)) as T };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw new RelayError(
        'RELAY_E_UPSTREAM_INVALID_RESPONSE',
        { upstream: 'relay', reason: `${method} ${path} answered ${response.status} without JSON` },
        { cause: error },
      );
    }
  }
}

/**
 * `promise`, or a rejection with the signal's reason as soon as the signal aborts. A caller-supplied fetch may
 * ignore `signal` (and a body may stall after the headers), so the transport does not count on it to stop waiting.
 */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Seconds from a `Retry-After` header: delta-seconds or an HTTP date; undefined when the header is absent or
 * unreadable (a missing header must not read as "retry now").
 */
export function retryAfterSeconds(header: string | null, nowMs: number = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value);
  const dateMs = Date.parse(value);
  return Number.isNaN(dateMs) ? undefined : Math.max(0, Math.ceil((dateMs - nowMs) / 1000));
}

/** The RelayError of a non-2xx answer; a 429's `Retry-After` lands in `details.retry_after_s` if the body lacks it. */
export async function errorFromResponse(response: Response, signal?: AbortSignal): Promise<RelayError> {
  let body: unknown = null;
  try {
    body = await untilAborted(response.json(), signal);
  } catch {
    /* not JSON (or aborted while reading): relayErrorFromBody reports the status */
  }
  const error = relayErrorFromBody(body, response.status);
  const retryAfter = retryAfterSeconds(response.headers.get('retry-after'));
  if (response.status === 429 && retryAfter !== undefined && error.details.retry_after_s === undefined) {
    // Rebuilt as it came from the wire: the details are the sidecar's, plus the header's wait.
    return relayErrorFromBody({
      error: {
        code: error.code,
        message: error.message,
        details: { ...error.details, retry_after_s: retryAfter },
      },
    });
  }
  return error;
}

/** The sidecar could not be reached at all. */
export function unreachable(cause: unknown): RelayError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new RelayError('RELAY_E_UPSTREAM_UNREACHABLE', { upstream: 'relay', reason }, { cause });
}
