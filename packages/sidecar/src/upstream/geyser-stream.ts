import { statSync } from 'node:fs';
import { encodeBase58 } from '@solrelay/core';
import { dirname, join } from 'node:path';
import {
  credentials,
  loadPackageDefinition,
  Metadata,
  status as grpcStatus,
  type ClientDuplexStream,
  type ServiceError,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

/**
 * The Yellowstone (geyser) gRPC stream: slot updates and transaction statuses for the accounts relay watches.
 *
 * One static transaction-status filter on the tipper account catches every attempt's tip transaction; another
 * watches the payers of `"tip":"included"` transactions (which carry no relay tip transaction) and a fleet's other
 * tippers. Each Subscribe request replaces the whole filter set, so every change re-sends all filters. The client answers the
 * server's pings and pings itself (load balancers kill silent duplex streams), and on a cut reconnects with
 * backoff and `from_slot` — without it if the server refuses — then reports `reconnected` so the caller can
 * reconcile in-flight signatures over RPC.
 */

export type GeyserSlotStatus = 'processed' | 'confirmed' | 'finalized' | 'dead' | 'other';

export interface GeyserSlotUpdate {
  slot: number;
  parent: number | null;
  status: GeyserSlotStatus;
  deadError: string | null;
}

export interface GeyserTransactionStatus {
  slot: number;
  signature: string;
  /** True when the transaction executed with an error (it still landed and paid its fee). */
  failed: boolean;
  /** Raw bincode TransactionError bytes, when failed. */
  errBytes: Uint8Array | null;
}

/** A block the stream reported (Yellowstone block meta at the subscription's commitment, processed here). */
export interface GeyserBlockMeta {
  slot: number;
  blockhash: string;
  /** Null when the server sent none (upstream field 5 is optional on the wire). */
  blockHeight: number | null;
}

export interface GeyserStreamOptions {
  endpoint: string;
  xToken?: string | undefined;
  /** Accounts whose transactions are always watched (the tipper). */
  staticAccounts: string[];
  onSlot: (update: GeyserSlotUpdate) => void;
  onTransactionStatus: (status: GeyserTransactionStatus) => void;
  /** Each block's blockhash and height (subscribed to only when given). */
  onBlockMeta?: (meta: GeyserBlockMeta) => void;
  /** Connection state changes; `reconnected` follows every successful resubscribe after a cut. */
  onState?: (state: 'connected' | 'disconnected' | 'reconnected', detail: string) => void;
  /** Client ping interval. Default 10 s. */
  pingIntervalMs?: number;
  /** A stream silent for this long is considered dead and replaced. Default 35 s. */
  silenceTimeoutMs?: number;
  /** Replay this many slots before the last one seen when reconnecting. Default 2. */
  fromSlotMargin?: number;
  protoPath?: string;
}

interface SubscribeUpdateMessage {
  filters?: string[];
  updateOneof?: string;
  slot?: { slot: string; parent?: string | null; status: string; deadError?: string | null };
  transactionStatus?: {
    slot: string;
    signature: Buffer;
    isVote: boolean;
    index: string;
    err?: { err: Buffer } | null;
  };
  blockMeta?: { slot: string; blockhash: string; blockHeight?: { blockHeight: string } | null };
  ping?: object;
  pong?: { id: number };
}

type Duplex = ClientDuplexStream<Record<string, unknown>, SubscribeUpdateMessage>;

const SLOT_STATUS: Record<string, GeyserSlotStatus> = {
  SLOT_PROCESSED: 'processed',
  SLOT_CONFIRMED: 'confirmed',
  SLOT_FINALIZED: 'finalized',
  SLOT_DEAD: 'dead',
};

/** Find protos/geyser.proto: copied next to the built files, or at the repository root when run from source. */
export function findGeyserProto(start: string = __dirname): string {
  const candidates: string[] = [];
  let dir = start;
  for (let i = 0; i < 6; i++) {
    candidates.push(join(dir, 'protos', 'geyser.proto'));
    dir = dirname(dir);
  }
  const found = candidates.find((c) => {
    try {
      return statSync(c).isFile();
    } catch {
      return false;
    }
  });
  if (!found) throw new Error(`protos/geyser.proto not found (looked in ${candidates.join(', ')})`);
  return found;
}

export class GeyserStream {
  private client: { Subscribe(metadata: Metadata): Duplex; close(): void } | null = null;
  private stream: Duplex | null = null;
  private watchedAccounts = new Set<string>();
  private lastSlot: number | null = null;
  private useFromSlot = true;
  private attempt = 0;
  private everConnected = false;
  private stopped = false;
  private pingTimer: NodeJS.Timeout | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private pingId = 0;
  readonly stats = { reconnects: 0, updates: 0, lastMessageAt: 0 };
  connected = false;

  constructor(private readonly options: GeyserStreamOptions) {}

  start(): void {
    const protoPath = this.options.protoPath ?? findGeyserProto();
    const definition = loadSync(protoPath, {
      keepCase: false,
      longs: String,
      enums: String,
      defaults: false,
      oneofs: true,
      includeDirs: [dirname(protoPath)],
    });
    const pkg = loadPackageDefinition(definition) as unknown as {
      geyser: {
        Geyser: new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => never;
      };
    };
    const url = new URL(this.options.endpoint);
    const tls = url.protocol === 'https:';
    const address = `${url.hostname}:${url.port || (tls ? '443' : '80')}`;
    this.client = new pkg.geyser.Geyser(
      address,
      tls ? credentials.createSsl() : credentials.createInsecure(),
    );
    this.connect();
  }

  /**
   * Watch transactions of these accounts too, besides the static ones (payers of `"tip":"included"` transactions, a
   * fleet's other tippers). Re-sends all filters when the set changed.
   */
  setWatchedAccounts(accounts: Iterable<string>): void {
    const next = new Set(accounts);
    if (next.size === this.watchedAccounts.size && [...next].every((a) => this.watchedAccounts.has(a)))
      return;
    this.watchedAccounts = next;
    if (this.stream) this.stream.write(this.subscribeRequest(false));
  }

  stop(): void {
    this.stopped = true;
    this.clearTimers();
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.stream?.cancel();
    this.stream = null;
    this.client?.close();
  }

  private connect(): void {
    if (this.stopped || !this.client) return;
    const metadata = new Metadata();
    if (this.options.xToken) metadata.set('x-token', this.options.xToken);
    const stream = this.client.Subscribe(metadata);
    this.stream = stream;
    let confirmed = false;
    stream.on('data', (update: SubscribeUpdateMessage) => {
      if (this.stream !== stream) return;
      if (!confirmed) {
        confirmed = true;
        this.onConnected();
      }
      this.handle(update);
    });
    stream.on('error', (error: ServiceError) => {
      if (this.stream !== stream) return;
      // A replay the server cannot serve: drop from_slot and reconcile over RPC instead.
      if (error.code === grpcStatus.OUT_OF_RANGE || /from_slot/i.test(error.details ?? ''))
        this.useFromSlot = false;
      this.onCut(`${grpcStatus[error.code] ?? error.code}: ${error.details || error.message}`);
    });
    stream.on('end', () => {
      if (this.stream === stream) this.onCut('stream ended by the server');
    });
    stream.write(this.subscribeRequest(this.useFromSlot && this.lastSlot !== null));
    this.armTimers();
  }

  private onConnected(): void {
    this.attempt = 0;
    this.connected = true;
    this.useFromSlot = true;
    const wasConnected = this.everConnected;
    this.everConnected = true;
    this.options.onState?.(wasConnected ? 'reconnected' : 'connected', this.options.endpoint);
  }

  private onCut(reason: string): void {
    const stream = this.stream;
    this.stream = null;
    this.connected = false;
    this.clearTimers();
    stream?.cancel();
    if (this.stopped) return;
    this.options.onState?.('disconnected', reason);
    // Same schedule as the client SDK: 500 ms doubling, capped at 30 s.
    const delay = Math.min(30_000, 500 * 2 ** this.attempt);
    this.attempt++;
    this.stats.reconnects++;
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
    this.reconnectTimer.unref();
  }

  private handle(update: SubscribeUpdateMessage): void {
    this.stats.updates++;
    this.stats.lastMessageAt = Date.now();
    this.armSilenceTimer();
    if (update.ping) {
      // Answer server pings so proxies see client traffic.
      this.stream?.write({ ping: { id: ++this.pingId } });
      return;
    }
    if (update.slot) {
      const slot = Number(update.slot.slot);
      const status = SLOT_STATUS[update.slot.status] ?? 'other';
      if (status === 'processed' && (this.lastSlot === null || slot > this.lastSlot)) this.lastSlot = slot;
      this.options.onSlot({
        slot,
        parent: update.slot.parent == null ? null : Number(update.slot.parent),
        status,
        deadError: update.slot.deadError ?? null,
      });
      return;
    }
    if (update.blockMeta) {
      const meta = update.blockMeta;
      this.options.onBlockMeta?.({
        slot: Number(meta.slot),
        blockhash: meta.blockhash,
        blockHeight: meta.blockHeight ? Number(meta.blockHeight.blockHeight) : null,
      });
      return;
    }
    if (update.transactionStatus) {
      const ts = update.transactionStatus;
      const errBytes = ts.err?.err && ts.err.err.length > 0 ? new Uint8Array(ts.err.err) : null;
      this.options.onTransactionStatus({
        slot: Number(ts.slot),
        signature: encodeBase58(ts.signature),
        failed: errBytes !== null,
        errBytes,
      });
    }
  }

  private subscribeRequest(withFromSlot: boolean): Record<string, unknown> {
    const transactionsStatus: Record<string, unknown> = {
      relay_static: {
        vote: false,
        accountInclude: this.options.staticAccounts,
        accountExclude: [],
        accountRequired: [],
      },
    };
    if (this.watchedAccounts.size > 0) {
      transactionsStatus.relay_watched = {
        vote: false,
        accountInclude: [...this.watchedAccounts],
        accountExclude: [],
        accountRequired: [],
      };
    }
    const request: Record<string, unknown> = {
      slots: { relay_slots: { filterByCommitment: false, interslotUpdates: true } },
      transactionsStatus,
      // Each block's blockhash and height: how many blocks a caller's blockhash has left (admission).
      ...(this.options.onBlockMeta ? { blocksMeta: { relay_blocks: {} } } : {}),
      commitment: 'PROCESSED',
    };
    if (withFromSlot && this.lastSlot !== null) {
      request.fromSlot = String(Math.max(0, this.lastSlot - (this.options.fromSlotMargin ?? 2)));
    }
    return request;
  }

  private armTimers(): void {
    this.clearTimers();
    const every = this.options.pingIntervalMs ?? 10_000;
    this.pingTimer = setInterval(() => this.stream?.write({ ping: { id: ++this.pingId } }), every);
    this.pingTimer.unref();
    this.armSilenceTimer();
  }

  private armSilenceTimer(): void {
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    this.silenceTimer = setTimeout(
      () => this.onCut('no message from the stream (server pings stopped)'),
      this.options.silenceTimeoutMs ?? 35_000,
    );
    this.silenceTimer.unref();
  }

  private clearTimers(): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    this.pingTimer = null;
    this.silenceTimer = null;
  }
}
