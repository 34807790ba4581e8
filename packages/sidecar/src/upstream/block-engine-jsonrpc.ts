import {
  classifyRejection,
  parseRetryAfterMs,
  type BlockEngineTransport,
  type InflightBundleStatus,
  type InflightStatus,
  type SendBundleResult,
} from './block-engine';

export interface JsonRpcBlockEngineOptions {
  /** Base URL of the block engine, e.g. `https://mainnet.block-engine.jito.wtf`. */
  baseUrl: string;
  /** Optional UUID for higher rate limits; sent as `x-jito-auth`. */
  uuid?: string | undefined;
  /** Per-request deadline. Default 5 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

interface JsonRpcResponse<T> {
  result?: T;
  error?: { code: number; message: string; data?: unknown };
}

/** Jito's JSON-RPC API (`/api/v1/bundles`), bundles sent base64 (base58 is deprecated and slow). */
export class JsonRpcBlockEngine implements BlockEngineTransport {
  readonly kind = 'jsonrpc' as const;
  private readonly endpoint: string;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private nextId = 1;

  constructor(private readonly options: JsonRpcBlockEngineOptions) {
    this.endpoint = `${options.baseUrl.replace(/\/+$/, '')}/api/v1/bundles`;
    this.fetchImpl = options.fetch ?? fetch;
    this.timeoutMs = options.timeoutMs ?? 5000;
  }

  async sendBundle(transactions: Uint8Array[]): Promise<SendBundleResult> {
    const encoded = transactions.map((tx) => Buffer.from(tx).toString('base64'));
    const answer = await this.call<string>('sendBundle', [encoded, { encoding: 'base64' }]);
    if (answer.kind === 'transport') return { ok: false, ...answer };
    if (answer.kind === 'error') {
      return {
        ok: false,
        kind: 'rejected',
        rejection: classifyRejection(answer.message),
        message: answer.message,
      };
    }
    if (typeof answer.result !== 'string') {
      return {
        ok: false,
        kind: 'transport',
        message: 'sendBundle answered without a bundle id',
        retryAfterMs: null,
        status: null,
      };
    }
    return { ok: true, bundleId: answer.result };
  }

  async getTipAccounts(): Promise<string[]> {
    const answer = await this.call<string[]>('getTipAccounts', []);
    if (answer.kind !== 'ok' || !Array.isArray(answer.result)) {
      throw new Error(`getTipAccounts failed: ${answer.kind === 'ok' ? 'bad result' : answer.message}`);
    }
    return answer.result;
  }

  /** Up to 5 ids per call (Jito's limit); unknown ids come back `Invalid`. */
  async getInflightBundleStatuses(bundleIds: string[]): Promise<InflightBundleStatus[]> {
    const answer = await this.call<{
      value: Array<{ bundle_id: string; status: InflightStatus; landed_slot: number | null } | null>;
    }>('getInflightBundleStatuses', [bundleIds]);
    if (answer.kind !== 'ok') throw new Error(`getInflightBundleStatuses failed: ${answer.message}`);
    const out: InflightBundleStatus[] = [];
    for (const entry of answer.result?.value ?? []) {
      if (entry)
        out.push({ bundleId: entry.bundle_id, status: entry.status, landedSlot: entry.landed_slot ?? null });
    }
    return out;
  }

  close(): void {
    /* stateless */
  }

  private async call<T>(
    method: string,
    params: unknown[],
  ): Promise<
    | { kind: 'ok'; result: T | undefined }
    | { kind: 'error'; message: string; code: number }
    | { kind: 'transport'; message: string; retryAfterMs: number | null; status: number | string | null }
  > {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.options.uuid) headers['x-jito-auth'] = this.options.uuid;
    let response: Response;
    try {
      response = await this.fetchImpl(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const name = (error as Error).name;
      const message =
        name === 'TimeoutError' ? `no answer within ${this.timeoutMs} ms` : (error as Error).message;
      return {
        kind: 'transport',
        message: `${method}: ${message}`,
        retryAfterMs: null,
        status: name === 'TimeoutError' ? 'timeout' : 'network',
      };
    }
    let body: JsonRpcResponse<T> | null;
    try {
      body = (await response.json()) as JsonRpcResponse<T>;
    } catch {
      body = null;
    }
    const message = body?.error?.message ?? `HTTP ${response.status}`;
    if (response.status === 429 || body?.error?.code === -32097) {
      return {
        kind: 'transport',
        message: `${method}: rate limited: ${message}`,
        retryAfterMs: parseRetryAfterMs(message, response.headers.get('retry-after')),
        status: 429,
      };
    }
    if (response.status >= 500 || (!body && !response.ok)) {
      return {
        kind: 'transport',
        message: `${method}: ${message}`,
        retryAfterMs: null,
        status: response.status,
      };
    }
    if (body?.error) return { kind: 'error', message: body.error.message, code: body.error.code };
    if (!body)
      return {
        kind: 'transport',
        message: `${method}: unreadable answer`,
        retryAfterMs: null,
        status: response.status,
      };
    return { kind: 'ok', result: body.result };
  }
}
