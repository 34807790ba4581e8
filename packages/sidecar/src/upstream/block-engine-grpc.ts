import { credentials, status as grpcStatus } from '@grpc/grpc-js';
import { VersionedTransaction } from '@solana/web3.js';
import { SearcherServiceClient } from 'jito-ts/dist/gen/block-engine/searcher';
import { SearcherClient, searcherClient } from 'jito-ts/dist/sdk/block-engine/searcher';
import { Bundle } from 'jito-ts/dist/sdk/block-engine/types';
import {
  classifyRejection,
  parseRetryAfterMs,
  type BlockEngineTransport,
  type BundleResultMessage,
  type SendBundleResult,
} from './block-engine';

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
 * Jito's SearcherService through jito-ts. `http://host:port` connects without TLS (the simulated cluster and
 * private deployments); anything else goes through jito-ts's own `searcherClient()` factory, which always uses
 * TLS (roots overridable with GRPC_DEFAULT_SSL_ROOTS_FILE_PATH). No auth keypair: Jito no longer requires one.
 */
export class GrpcBlockEngine implements BlockEngineTransport {
  readonly kind = 'grpc' as const;
  private readonly client: SearcherClient;
  private readonly raw: SearcherServiceClient | null;

  constructor(url: string) {
    const insecure = /^http:\/\//i.exec(url);
    if (insecure) {
      this.raw = new SearcherServiceClient(
        url.replace(/^http:\/\//i, '').replace(/\/+$/, ''),
        credentials.createInsecure(),
      );
      this.client = new SearcherClient(this.raw);
    } else {
      this.raw = null;
      this.client = searcherClient(url.replace(/^https:\/\//i, '').replace(/\/+$/, ''));
    }
  }

  async sendBundle(transactions: Uint8Array[]): Promise<SendBundleResult> {
    const bundle = new Bundle(
      transactions.map((wire) => VersionedTransaction.deserialize(wire)),
      transactions.length,
    );
    let result;
    try {
      result = await this.client.sendBundle(bundle);
    } catch (error) {
      return {
        ok: false,
        kind: 'transport',
        message: (error as Error).message,
        retryAfterMs: null,
        status: 'error',
      };
    }
    if (result.ok) return { ok: true, bundleId: result.value };
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

  async getNextScheduledLeader(): Promise<NextScheduledLeader> {
    const result = await this.client.getNextScheduledLeader();
    if (!result.ok) throw result.error;
    return {
      currentSlot: Number(result.value.currentSlot),
      nextLeaderSlot: Number(result.value.nextLeaderSlot),
      nextLeaderIdentity: result.value.nextLeaderIdentity,
    };
  }

  subscribeBundleResults(
    onResult: (result: BundleResultMessage) => void,
    onError: (error: Error) => void,
  ): () => void {
    return this.client.onBundleResult(
      (result) => onResult(result as unknown as BundleResultMessage),
      onError,
    );
  }

  close(): void {
    this.raw?.close();
  }
}
