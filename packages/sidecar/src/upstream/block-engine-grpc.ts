import { credentials, status as grpcStatus } from '@grpc/grpc-js';
import { VersionedTransaction } from '@solana/web3.js';
import { SearcherServiceClient } from 'jito-ts/dist/gen/block-engine/searcher.js';
import { SearcherClient } from 'jito-ts/dist/sdk/block-engine/searcher.js';
import { Bundle } from 'jito-ts/dist/sdk/block-engine/types.js';
import {
  classifyRejection,
  parseRetryAfterMs,
  type BlockEngineTransport,
  type BundleResultMessage,
  type SendBundleResult,
} from './block-engine';
import { grpcHostPort } from './local-address';

/** gRPC status codes that say nothing about the bundle: resend the same bytes later. */
const TRANSPORT_CODES = new Set<number>([
  grpcStatus.RESOURCE_EXHAUSTED,
  grpcStatus.UNAVAILABLE,
  grpcStatus.DEADLINE_EXCEEDED,
  grpcStatus.INTERNAL,
  grpcStatus.UNKNOWN,
  grpcStatus.CANCELLED,
  grpcStatus.ABORTED,
]);

export interface LeaderSchedule {
  /** Bundle-engine validator identity -> its leader slots (this epoch). */
  connectedLeaders: Record<string, number[]>;
}

export interface NextScheduledLeader {
  currentSlot: number;
  nextLeaderSlot: number;
  nextLeaderIdentity: string;
}

/**
 * How long after an accepted bundle the result stream may stay silent before it is taken for dead: the engine
 * reports `accepted` when it forwards a bundle to a leader, within seconds while bundle-engine leaders are ahead.
 */
export const BUNDLE_RESULT_SILENCE_MS = 20_000;

/** A `SendBundle` unanswered this long (ms) is a transport failure (the JSON-RPC transport's timeout too). */
export const SEND_BUNDLE_TIMEOUT_MS = 5_000;

/**
 * Jito's SearcherService through jito-ts. `http://host:port` connects without TLS (the simulated cluster and
 * private deployments); anything else uses TLS exactly as jito-ts's `searcherClient()` factory builds it (roots
 * overridable with GRPC_DEFAULT_SSL_ROOTS_FILE_PATH). The generated client is kept so the bundle-result stream can
 * be watched for its end. No auth keypair: Jito no longer requires one.
 */
export class GrpcBlockEngine implements BlockEngineTransport {
  readonly kind = 'grpc' as const;
  private readonly client: SearcherClient;
  private readonly raw: SearcherServiceClient;
  /**
   * When the engine accepted the first bundle that no stream message has followed yet: a result stream silent long
   * after that is dead (later sends do not move it, so steady traffic cannot hide a dead stream).
   */
  private unansweredSince: number | null = null;

  constructor(
    url: string,
    private readonly options: {
      silenceMs?: number;
      now?: () => number;
      /**
       * The gRPC target to dial instead of the engine (`unix:<path>`): a local forwarder that connects to it from
       * RELAY_ENGINE_LOCAL_ADDRESS (`BoundForwarder`; grpc-js cannot bind a local address itself). The engine's
       * own `host:port` stays the HTTP/2 authority and its host the TLS name (verified against its certificate),
       * so only the path to it changes.
       */
      via?: string;
      /**
       * How long a `SendBundle` may go unanswered before it counts as a transport failure (the same bytes go again):
       * jito-ts sets no deadline, and a call the engine never answers would hold its region's turn (`SendQueue`) for
       * good. Default {@link SEND_BUNDLE_TIMEOUT_MS}, as the JSON-RPC transport's.
       */
      sendTimeoutMs?: number;
    } = {},
  ) {
    const insecure = /^http:\/\//i.test(url);
    const address = url.replace(/^https?:\/\//i, '').replace(/\/+$/, '');
    const via = options.via;
    this.raw = new SearcherServiceClient(
      via ?? address,
      insecure ? credentials.createInsecure() : credentials.createSsl(),
      via === undefined
        ? {}
        : {
            'grpc.default_authority': address,
            ...(insecure ? {} : { 'grpc.ssl_target_name_override': grpcHostPort(url).host }),
          },
    );
    this.client = new SearcherClient(this.raw);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  async sendBundle(transactions: Uint8Array[]): Promise<SendBundleResult> {
    const bundle = new Bundle(
      transactions.map((wire) => VersionedTransaction.deserialize(wire)),
      transactions.length,
    );
    let result;
    const timeoutMs = this.options.sendTimeoutMs ?? SEND_BUNDLE_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
      timer.unref();
    });
    try {
      result = await Promise.race([this.client.sendBundle(bundle), timedOut]);
    } catch (error) {
      return {
        ok: false,
        kind: 'transport',
        message: (error as Error).message,
        retryAfterMs: null,
        status: 'error',
      };
    } finally {
      clearTimeout(timer);
    }
    // The call is left to finish on its own (jito-ts gives no handle to cancel it); a late answer is dropped.
    if (result === 'timeout')
      return {
        ok: false,
        kind: 'transport',
        message: `no answer within ${timeoutMs} ms`,
        retryAfterMs: null,
        status: 'timeout',
      };
    if (result.ok) {
      this.unansweredSince ??= this.now();
      return { ok: true, bundleId: result.value };
    }
    const { code, details, message } = result.error;
    if (TRANSPORT_CODES.has(code)) {
      return {
        ok: false,
        kind: 'transport',
        message,
        retryAfterMs: parseRetryAfterMs(details, null),
        status: grpcStatus[code] ?? code,
      };
    }
    return { ok: false, kind: 'rejected', rejection: classifyRejection(details || message), message };
  }

  async getTipAccounts(): Promise<string[]> {
    const result = await this.client.getTipAccounts();
    if (!result.ok) throw result.error;
    return result.value;
  }

  async getConnectedLeaders(): Promise<LeaderSchedule> {
    const result = await this.client.getConnectedLeaders();
    if (!result.ok) throw result.error;
    const connectedLeaders: Record<string, number[]> = {};
    for (const [identity, list] of Object.entries(result.value)) {
      connectedLeaders[identity] = list.slots.map(Number);
    }
    return { connectedLeaders };
  }

  /** `GetRegions`: the region this address serves and every region online (free of the send budget). */
  getRegions(): Promise<{ currentRegion: string; availableRegions: string[] }> {
    return new Promise((resolve, reject) => {
      this.raw.getRegions({}, (error, response) =>
        error
          ? reject(error)
          : resolve({
              currentRegion: response.currentRegion,
              availableRegions: [...response.availableRegions],
            }),
      );
    });
  }

  /**
   * `GetConnectedLeadersRegioned` for `regions` (none: this address's own): region -> validator identity -> its
   * leader slots. `GetConnectedLeaders` answers for one region only (searcher.proto), so relay asks this.
   */
  getConnectedLeadersRegioned(regions: readonly string[]): Promise<Record<string, Record<string, number[]>>> {
    return new Promise((resolve, reject) => {
      this.raw.getConnectedLeadersRegioned({ regions: [...regions] }, (error, response) => {
        if (error) return reject(error);
        const out: Record<string, Record<string, number[]>> = {};
        for (const [region, leaders] of Object.entries(response.connectedValidators)) {
          const byIdentity: Record<string, number[]> = {};
          for (const [identity, list] of Object.entries(leaders.connectedValidators))
            byIdentity[identity] = list.slots.map(Number);
          out[region] = byIdentity;
        }
        resolve(out);
      });
    });
  }

  async getNextScheduledLeader(): Promise<NextScheduledLeader> {
    const result = await this.client.getNextScheduledLeader();
    if (!result.ok) throw result.error;
    return {
      currentSlot: Number(result.value.currentSlot),
      nextLeaderSlot: Number(result.value.nextLeaderSlot),
      nextLeaderIdentity: result.value.nextLeaderIdentity,
    };
  }

  /**
   * The bundle-result stream, read from the generated client rather than jito-ts's `onBundleResult`: that one calls
   * neither callback when the stream ends cleanly, and the stream is then dead without a word. Here an end, an error,
   * or silence for `silenceMs` after an accepted bundle each cancel the stream and report once through `onError`
   * (the caller subscribes again).
   */
  subscribeBundleResults(
    onResult: (result: BundleResultMessage) => void,
    onError: (error: Error) => void,
  ): () => void {
    const silenceMs = this.options.silenceMs ?? BUNDLE_RESULT_SILENCE_MS;
    const stream = this.raw.subscribeBundleResults({});
    let done = false;
    // A new stream gets the full silence allowance for what is still unanswered.
    if (this.unansweredSince !== null) this.unansweredSince = this.now();
    const close = () => {
      done = true;
      clearInterval(watch);
      stream.cancel();
    };
    const fail = (error: Error) => {
      if (done) return;
      close();
      onError(error);
    };
    stream.on('data', (result: unknown) => {
      this.unansweredSince = null;
      onResult(result as BundleResultMessage);
    });
    stream.on('error', (error: Error) => fail(new Error(`bundle result stream: ${error.message}`)));
    stream.on('end', () => fail(new Error('bundle result stream ended')));
    const watch = setInterval(
      () => {
        const since = this.unansweredSince;
        if (since !== null && this.now() - since > silenceMs)
          fail(
            new Error(
              `bundle result stream silent ${Math.round(silenceMs / 1000)} s after an accepted bundle`,
            ),
          );
      },
      Math.min(1_000, silenceMs),
    );
    watch.unref();
    return () => {
      if (!done) close();
    };
  }

  close(): void {
    this.raw.close();
  }
}
