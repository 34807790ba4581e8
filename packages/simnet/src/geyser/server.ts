import {
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type Metadata,
  type sendUnaryData,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { encodeTransactionError } from '../chain/errors';
import type { Cluster, Commitment, SlotEvent, TransactionEvent } from '../chain/types';
import type { Faults } from '../faults';
import {
  FilterError,
  matchesTransaction,
  parseCommitmentLevel,
  parseFilters,
  type StreamFilters,
  type SubscribeRequestObject,
} from './filters';
import { loadGeyserService } from './proto';

export interface GeyserServerOptions {
  cluster: Cluster;
  /**
   * Honoured live: `cutStreams` and `streamCutIntervalMs` (end every Subscribe with UNAVAILABLE), and rpcLatencyMs
   * on unary calls.
   */
  faults?: Faults;
  host?: string;
  port?: number;
  /** When set, every call must carry metadata `x-token` with this value (UNAUTHENTICATED otherwise). */
  xToken?: string;
  /** Server -> client keepalive pings on each Subscribe stream. Default 10 s, like Yellowstone. */
  pingIntervalMs?: number;
  /** How many recent slots `from_slot` can replay. Default 150 (Yellowstone's replay_stored_slots); 0 disables. */
  replaySlots?: number;
  /** Path of geyser.proto; found by walking up to `protos/` by default. */
  protoPath?: string;
}

export interface GeyserServerHandle {
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

/** The version string GetVersion returns (JSON, as Yellowstone's does). */
const VERSION_JSON = JSON.stringify({
  version: { package: 'solrelay-simnet-geyser', version: '0.1.0', proto: '12.4.0-subset', solana: '2.2.16' },
  extra: { hostname: 'simnet' },
});
/** Yellowstone's unary GetLatestBlockhash uses MAX_RECENT_BLOCKHASHES (300), not JSON-RPC's 150. */
const UNARY_BLOCKHASH_VALID_BLOCKS = 300;

const SLOT_STATUS_NAMES: Record<SlotEvent['status'], string> = {
  processed: 'SLOT_PROCESSED',
  confirmed: 'SLOT_CONFIRMED',
  finalized: 'SLOT_FINALIZED',
  dead: 'SLOT_DEAD',
};

interface BlockMeta {
  slot: number;
  blockhash: string;
  blockHeight: number | null;
  parentSlot: number;
  parentBlockhash: string;
  transactionCount: number;
}

type LogEntry =
  | { kind: 'transaction'; slot: number; tx: TransactionEvent }
  | { kind: 'slot'; slot: number; event: SlotEvent; meta: BlockMeta | null };

function createdAt() {
  const now = Date.now();
  return { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1_000_000 };
}

function slotUpdate(
  filters: string[],
  slot: number,
  parent: number | null,
  status: string,
  deadError?: string,
  bankId?: number,
) {
  return {
    filters,
    slot: {
      slot: String(slot),
      ...(parent === null ? {} : { parent: String(parent) }),
      status,
      ...(deadError === undefined ? {} : { deadError }),
      // Yellowstone: FIRST_SHRED_RECEIVED and COMPLETED belong to no bank.
      ...(bankId === undefined || status === 'SLOT_FIRST_SHRED_RECEIVED' || status === 'SLOT_COMPLETED'
        ? {}
        : { bankId: String(bankId) }),
    },
    createdAt: createdAt(),
  };
}

/** One Subscribe call: its current filter set and how cluster history is delivered to it. */
class SubscribeStream {
  filters: StreamFilters | null = null;
  private readonly pingTimer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly call: ServerDuplexStream<SubscribeRequestObject, unknown>,
    pingIntervalMs: number,
    private readonly slotData: (slot: number) => { txs: TransactionEvent[]; meta: BlockMeta | null },
    private readonly onClose: (stream: SubscribeStream) => void,
  ) {
    this.pingTimer = setInterval(
      () => this.write({ filters: [], ping: {}, createdAt: createdAt() }),
      pingIntervalMs,
    );
    call.on('cancelled', () => this.cleanup());
    call.on('close', () => this.cleanup());
    call.on('error', () => this.cleanup());
  }

  write(update: unknown): void {
    if (!this.closed) this.call.write(update);
  }

  /** End the stream with a status, as a load balancer or a failing server would. */
  fail(code: GrpcStatus, details: string): void {
    if (this.closed) return;
    // emit('error') makes grpc-js send the status; destroy() would leave some clients without one.
    this.call.emit('error', { code, details, metadata: undefined });
    this.cleanup();
  }

  end(): void {
    if (this.closed) return;
    this.call.end();
    this.cleanup();
  }

  cleanup(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.pingTimer);
    this.onClose(this);
  }

  deliver(entry: LogEntry): void {
    const filters = this.filters;
    if (!filters || this.closed) return;
    if (entry.kind === 'transaction') {
      if (filters.commitment === 'processed') this.sendTransaction(entry.tx);
      return;
    }
    const { event, meta } = entry;
    if (event.status === filters.commitment) {
      // At confirmed / finalized, a slot's messages are released when the slot reaches that level.
      if (filters.commitment !== 'processed') {
        const data = this.slotData(event.slot);
        for (const tx of data.txs) this.sendTransaction(tx);
        if (data.meta) this.sendBlockMeta(data.meta);
      } else if (meta) {
        this.sendBlockMeta(meta);
      }
    }
    this.sendSlot(event);
  }

  private sendTransaction(tx: TransactionEvent): void {
    const names: string[] = [];
    for (const [name, filter] of (this.filters as StreamFilters).transactions) {
      if (matchesTransaction(filter, tx)) names.push(name);
    }
    if (names.length === 0) return;
    this.write({
      filters: names,
      transactionStatus: {
        slot: String(tx.slot),
        signature: Buffer.from(tx.signatureBytes),
        isVote: tx.isVote,
        index: String(tx.index),
        ...(tx.err === null ? {} : { err: { err: Buffer.from(encodeTransactionError(tx.err)) } }),
      },
      createdAt: createdAt(),
    });
  }

  private sendBlockMeta(meta: BlockMeta): void {
    const names = [...(this.filters as StreamFilters).blocksMeta];
    if (names.length === 0) return;
    this.write({
      filters: names,
      blockMeta: {
        slot: String(meta.slot),
        blockhash: meta.blockhash,
        ...(meta.blockHeight === null ? {} : { blockHeight: { blockHeight: String(meta.blockHeight) } }),
        parentSlot: String(meta.parentSlot),
        parentBlockhash: meta.parentBlockhash,
        executedTransactionCount: String(meta.transactionCount),
        entriesCount: '1',
      },
      createdAt: createdAt(),
    });
  }

  private sendSlot(event: SlotEvent): void {
    const filters = this.filters as StreamFilters;
    const statuses: string[] =
      event.status === 'processed'
        ? ['SLOT_FIRST_SHRED_RECEIVED', 'SLOT_CREATED_BANK', 'SLOT_COMPLETED', 'SLOT_PROCESSED']
        : [SLOT_STATUS_NAMES[event.status]];
    const wanted = SLOT_STATUS_NAMES[filters.commitment];
    for (const status of statuses) {
      const interslot =
        status !== 'SLOT_PROCESSED' && status !== 'SLOT_CONFIRMED' && status !== 'SLOT_FINALIZED';
      const names: string[] = [];
      for (const [name, filter] of filters.slots) {
        if (interslot && !filter.interslotUpdates) continue;
        if (filter.filterByCommitment && status !== wanted) continue;
        names.push(name);
      }
      if (names.length > 0)
        this.write(slotUpdate(names, event.slot, event.parent, status, event.deadError, event.bankId));
    }
  }
}

/**
 * A Yellowstone-compatible gRPC server (protos/geyser.proto) over a `Cluster`: slot, transaction-status and
 * block-meta streams with Yellowstone's filter semantics, keepalive pings both ways, `from_slot` replay from a ring
 * buffer of recent slots, and the unary calls.
 */
export async function startGeyserServer(options: GeyserServerOptions): Promise<GeyserServerHandle> {
  const { cluster, faults, xToken } = options;
  const host = options.host ?? '127.0.0.1';
  const pingIntervalMs = options.pingIntervalMs ?? 10_000;
  const replaySlots = options.replaySlots ?? 150;
  const service = loadGeyserService(options.protoPath);

  const streams = new Set<SubscribeStream>();
  // Everything that happened, in order, for from_slot replay; trimmed to the last `replaySlots` slots.
  const log: LogEntry[] = [];
  // Per-slot transactions and block meta, kept until the slot is finalized so confirmed/finalized streams get them.
  const slots = new Map<number, { txs: TransactionEvent[]; meta: BlockMeta | null }>();
  const slotData = (slot: number) => slots.get(slot) ?? { txs: [], meta: null };

  const record = (entry: LogEntry): void => {
    if (replaySlots > 0) {
      log.push(entry);
      const oldest = entry.slot - replaySlots + 1;
      let drop = 0;
      while (drop < log.length && (log[drop] as LogEntry).slot < oldest) drop++;
      if (drop > 0) log.splice(0, drop);
    }
    for (const stream of streams) stream.deliver(entry);
  };

  // Block meta carries the parent's blockhash; remember recent ones.
  const blockhashBySlot = new Map<number, string>();
  const parentBlockhashOf = (event: SlotEvent): string =>
    (event.parent === null ? undefined : blockhashBySlot.get(event.parent)) ?? '';
  const onTransaction = (tx: TransactionEvent): void => {
    let data = slots.get(tx.slot);
    if (!data) slots.set(tx.slot, (data = { txs: [], meta: null }));
    data.txs.push(tx);
    record({ kind: 'transaction', slot: tx.slot, tx });
  };
  const onSlot = (event: SlotEvent): void => {
    let meta: BlockMeta | null = null;
    if (event.status === 'processed' && event.blockhash !== undefined) {
      let data = slots.get(event.slot);
      if (!data) slots.set(event.slot, (data = { txs: [], meta: null }));
      meta = {
        slot: event.slot,
        blockhash: event.blockhash,
        blockHeight: event.blockHeight ?? null,
        parentSlot: event.parent ?? 0,
        parentBlockhash: parentBlockhashOf(event),
        transactionCount: event.transactionCount ?? data.txs.length,
      };
      data.meta = meta;
      blockhashBySlot.set(event.slot, event.blockhash);
    }
    record({ kind: 'slot', slot: event.slot, event, meta });
    if (event.status === 'finalized' || event.status === 'dead') {
      // Confirmed/finalized streams have had what they need; keep only what replay may still use.
      for (const slot of slots.keys()) {
        if (slot <= event.slot - Math.max(replaySlots, 1) - 64) slots.delete(slot);
        else break;
      }
      for (const slot of blockhashBySlot.keys()) {
        if (slot < event.slot - 64) blockhashBySlot.delete(slot);
        else break;
      }
    }
  };
  cluster.on('transaction', onTransaction);
  cluster.on('slot', onSlot);

  const onCut = (): void => {
    for (const stream of [...streams]) {
      faults?.count('streamsCut');
      stream.fail(GrpcStatus.UNAVAILABLE, 'simnet: stream cut (fault injection)');
    }
  };
  faults?.on('cutStreams', onCut);
  // Periodic cuts (`streamCutIntervalMs`): re-armed whenever the setting changes.
  let cutTimer: NodeJS.Timeout | null = null;
  let cutEveryMs = 0;
  const onFaultsChanged = (settings: { streamCutIntervalMs: number }): void => {
    if (settings.streamCutIntervalMs === cutEveryMs) return;
    cutEveryMs = settings.streamCutIntervalMs;
    if (cutTimer) clearInterval(cutTimer);
    cutTimer = null;
    if (cutEveryMs > 0) {
      cutTimer = setInterval(onCut, cutEveryMs);
      cutTimer.unref();
    }
  };
  if (faults) {
    onFaultsChanged(faults.current);
    faults.on('changed', onFaultsChanged);
  }

  const authorized = (metadata: Metadata): boolean =>
    xToken === undefined || metadata.get('x-token').some((value) => String(value) === xToken);

  const unary =
    <Req, Res>(answer: (request: Req) => Res) =>
    (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      if (!authorized(call.metadata)) {
        callback({ code: GrpcStatus.UNAUTHENTICATED, details: 'No valid auth token' });
        return;
      }
      const reply = (): void => {
        try {
          callback(null, answer(call.request));
        } catch (error) {
          const code = error instanceof FilterError ? GrpcStatus.INVALID_ARGUMENT : GrpcStatus.INTERNAL;
          callback({ code, details: (error as Error).message });
        }
      };
      const latency = faults?.current.rpcLatencyMs ?? 0;
      if (latency > 0) setTimeout(reply, latency);
      else reply();
    };

  const firstAvailable = (): number => log[0]?.slot ?? cluster.slot + 1;

  const handlers: UntypedServiceImplementation = {
    Subscribe: (call: ServerDuplexStream<SubscribeRequestObject, unknown>) => {
      const stream = new SubscribeStream(call, pingIntervalMs, slotData, (s) => streams.delete(s));
      if (!authorized(call.metadata)) {
        stream.fail(GrpcStatus.UNAUTHENTICATED, 'No valid auth token');
        return;
      }
      streams.add(stream);
      call.on('data', (request: SubscribeRequestObject) => {
        // A ping only gets its pong; it never touches the filters.
        if (request.ping) {
          stream.write({ filters: [], pong: { id: request.ping.id ?? 0 }, createdAt: createdAt() });
          return;
        }
        let filters: StreamFilters;
        try {
          filters = parseFilters(request);
        } catch (error) {
          stream.fail(GrpcStatus.INVALID_ARGUMENT, (error as Error).message);
          return;
        }
        let replayFrom: number | null = null;
        if (request.fromSlot !== undefined) {
          const fromSlot = Number(request.fromSlot);
          if (replaySlots <= 0) {
            stream.fail(GrpcStatus.INTERNAL, 'from_slot is not supported');
            return;
          }
          const oldest = firstAvailable();
          if (fromSlot < oldest) {
            stream.fail(
              GrpcStatus.OUT_OF_RANGE,
              `broadcast from ${fromSlot} is not available, last available: ${oldest}`,
            );
            return;
          }
          replayFrom = fromSlot;
        }
        stream.filters = filters;
        if (replayFrom !== null) {
          for (const entry of log) if (entry.slot >= replayFrom) stream.deliver(entry);
        }
      });
      // Half-closing the request side keeps the stream open, as on Yellowstone; only cancellation ends it.
      call.on('end', () => undefined);
    },
    SubscribeReplayInfo: unary<unknown, { firstAvailable?: string }>(() =>
      replaySlots > 0 ? { firstAvailable: String(firstAvailable()) } : {},
    ),
    Ping: unary<{ count?: number }, { count: number }>((request) => ({ count: request.count ?? 0 })),
    GetLatestBlockhash: unary<{ commitment?: string }, unknown>((request) => {
      const commitment: Commitment = parseCommitmentLevel(request.commitment);
      const latest = cluster.latestBlockhash(commitment);
      return {
        slot: String(latest.slot),
        blockhash: latest.blockhash,
        lastValidBlockHeight: String(cluster.blockHeightAt(commitment) + UNARY_BLOCKHASH_VALID_BLOCKS),
      };
    }),
    GetBlockHeight: unary<{ commitment?: string }, unknown>((request) => ({
      blockHeight: String(cluster.blockHeightAt(parseCommitmentLevel(request.commitment))),
    })),
    GetSlot: unary<{ commitment?: string }, unknown>((request) => ({
      slot: String(cluster.slotAt(parseCommitmentLevel(request.commitment))),
    })),
    IsBlockhashValid: unary<{ blockhash?: string; commitment?: string }, unknown>((request) => ({
      slot: String(cluster.slotAt(parseCommitmentLevel(request.commitment))),
      valid: cluster.isBlockhashValid(request.blockhash ?? '', parseCommitmentLevel(request.commitment)),
    })),
    GetVersion: unary<unknown, unknown>(() => ({ version: VERSION_JSON })),
  };

  const server = new Server();
  server.addService(service, handlers);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${options.port ?? 0}`, ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });

  return {
    endpoint: `http://${host}:${port}`,
    port,
    close: async () => {
      cluster.off('transaction', onTransaction);
      cluster.off('slot', onSlot);
      faults?.off('cutStreams', onCut);
      faults?.off('changed', onFaultsChanged);
      if (cutTimer) clearInterval(cutTimer);
      for (const stream of [...streams]) stream.end();
      await new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        // Clients that never close their side would hold a graceful shutdown open.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 500).unref();
      });
    },
  };
}
