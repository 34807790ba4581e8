import { RelayError, relayErrorFromBody } from '@solrelay/core';

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
    let response: Response;
    try {
      response = await this.options.fetch(this.url(path), {
        method,
        headers: {
          Accept: 'application/json',
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
          ...this.authHeaders(),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw unreachable(error);
    }
    if (!response.ok) throw await errorFromResponse(response);
    try {
      return { status: response.status, body: (await response.json()) as T };
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

/** The RelayError of a non-2xx answer; a 429's `Retry-After` lands in `details.retry_after_s` if the body lacks it. */
export async function errorFromResponse(response: Response): Promise<RelayError> {
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    /* not JSON: relayErrorFromBody reports the status */
  }
  const error = relayErrorFromBody(body, response.status);
  const retryAfter = Number(response.headers.get('retry-after'));
  if (response.status === 429 && Number.isFinite(retryAfter) && error.details.retry_after_s === undefined) {
    return new RelayError(
      error.code,
      { ...error.details, retry_after_s: retryAfter },
      { message: error.message },
    );
  }
  return error;
}

/** The sidecar could not be reached at all. */
export function unreachable(cause: unknown): RelayError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new RelayError('RELAY_E_UPSTREAM_UNREACHABLE', { upstream: 'relay', reason }, { cause });
}
