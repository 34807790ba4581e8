import {
  Connection,
  PublicKey,
  SolanaJSONRPCError,
  VersionedTransaction,
  type Commitment,
  type SignatureStatus,
} from '@solana/web3.js';

/** Solana's getSignatureStatuses takes at most this many signatures per call. */
export const MAX_SIGNATURES_PER_STATUS_CALL = 256;

export interface SolanaRpcOptions {
  url: string;
  /** Per-request deadline. Default 5 s. */
  timeoutMs?: number;
  /** Cached confirmed blockhash is refreshed when older than this. Default 2 s (DESIGN §2). */
  blockhashMaxAgeMs?: number;
  now?: () => number;
}

export interface UpstreamHealth {
  ok: boolean;
  lastOkAt: number | null;
  lastError: string | null;
  consecutiveFailures: number;
}

export interface RecentBlockhash {
  blockhash: string;
  lastValidBlockHeight: number;
  fetchedAt: number;
}

/**
 * The Solana JSON-RPC calls relay makes, through @solana/web3.js v1, with a deadline on every request and a health
 * record the readiness check reads. web3.js's own 429 retry loop is off: a caller that needs to retry decides
 * when, so an RPC outage never stalls the event loop's work behind hidden sleeps.
 */
export class SolanaRpc {
  readonly connection: Connection;
  readonly health: UpstreamHealth = { ok: false, lastOkAt: null, lastError: null, consecutiveFailures: 0 };
  private blockhash: RecentBlockhash | null = null;
  private blockhashInFlight: Promise<RecentBlockhash> | null = null;
  private readonly now: () => number;

  constructor(private readonly options: SolanaRpcOptions) {
    const timeoutMs = options.timeoutMs ?? 5000;
    this.now = options.now ?? Date.now;
    this.connection = new Connection(options.url, {
      commitment: 'confirmed',
      disableRetryOnRateLimit: true,
      fetch: (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(timeoutMs) }),
    });
  }

  /** Statuses for any number of signatures, batched 256 per call, in input order. */
  async getSignatureStatuses(
    signatures: string[],
    options: { searchTransactionHistory?: boolean } = {},
  ): Promise<Array<SignatureStatus | null>> {
    return (await this.getSignatureStatusesWithContext(signatures, options)).statuses;
  }

  /**
   * Statuses with the slot they describe: the lowest `context.slot` of the calls (behind a load balancer, a node
   * some slots behind answers null for what it has not seen yet, and says so only there).
   */
  async getSignatureStatusesWithContext(
    signatures: string[],
    options: { searchTransactionHistory?: boolean } = {},
  ): Promise<{ contextSlot: number; statuses: Array<SignatureStatus | null> }> {
    const statuses: Array<SignatureStatus | null> = [];
    let contextSlot = Number.POSITIVE_INFINITY;
    for (let i = 0; i < signatures.length; i += MAX_SIGNATURES_PER_STATUS_CALL) {
      const chunk = signatures.slice(i, i + MAX_SIGNATURES_PER_STATUS_CALL);
      const config = { searchTransactionHistory: options.searchTransactionHistory ?? false };
      const raw = (this.connection as unknown as Partial<RawRpcConnection>)._rpcRequest;
      const read = await this.track(async () => {
        if (typeof raw !== 'function') {
          const { context, value } = await this.connection.getSignatureStatuses(chunk, config);
          return { slot: context.slot, value };
        }
        const response = await raw.call(this.connection, 'getSignatureStatuses', [chunk, config]);
        return { slot: statusContextSlot(response), value: parseSignatureStatuses(response, chunk.length) };
      });
      contextSlot = Math.min(contextSlot, read.slot);
      statuses.push(...read.value);
    }
    return { contextSlot: Number.isFinite(contextSlot) ? contextSlot : 0, statuses };
  }

  /**
   * A `confirmed` blockhash for tip transactions, at most `blockhashMaxAgeMs` old (fetches are shared). The
   * service also calls `refreshBlockhash()` every second, so a submit finds a fresh one and does not wait for RPC
   * (waiting in the submit path every 2 s was the decision-latency tail).
   */
  async recentBlockhash(): Promise<RecentBlockhash> {
    const maxAge = this.options.blockhashMaxAgeMs ?? 2000;
    if (this.blockhash && this.now() - this.blockhash.fetchedAt <= maxAge) return this.blockhash;
    return this.refreshBlockhash();
  }

  /** Drop the cached blockhash (the engine refused a tip built on it): the next caller fetches a new one. */
  forgetBlockhash(): void {
    this.blockhash = null;
  }

  /** Fetch a new blockhash now (shared with any fetch already running). */
  refreshBlockhash(): Promise<RecentBlockhash> {
    if (!this.blockhashInFlight) {
      this.blockhashInFlight = this.track(() => this.connection.getLatestBlockhash('confirmed'))
        .then((value) => {
          this.blockhash = { ...value, fetchedAt: this.now() };
          return this.blockhash;
        })
        .finally(() => {
          this.blockhashInFlight = null;
        });
    }
    return this.blockhashInFlight;
  }

  /**
   * Agave answers from the bank at `commitment`: a blockhash newer than that bank is invalid too, so `false` means
   * "dead" only from a node that is not behind. `minContextSlot` makes a node behind it refuse (-32016, thrown)
   * instead of answering from an old bank.
   */
  async isBlockhashValid(
    blockhash: string,
    commitment: Commitment = 'processed',
    minContextSlot?: number,
  ): Promise<boolean> {
    const { value } = await this.track(() =>
      this.connection.isBlockhashValid(blockhash, {
        commitment,
        ...(minContextSlot !== undefined && minContextSlot > 0 ? { minContextSlot } : {}),
      }),
    );
    return value;
  }

  /**
   * Simulate a signed transaction as it stands (no signature check, no blockhash swap); its error or null. With
   * `minContextSlot`, a node whose bank is older refuses (-32016, thrown) instead of answering from it.
   */
  async simulate(wire: Uint8Array, minContextSlot?: number): Promise<unknown> {
    const tx = VersionedTransaction.deserialize(wire);
    const { value } = await this.track(() =>
      this.connection.simulateTransaction(tx, {
        sigVerify: false,
        replaceRecentBlockhash: false,
        commitment: 'processed',
        ...(minContextSlot !== undefined && minContextSlot > 0 ? { minContextSlot } : {}),
      }),
    );
    return value.err;
  }

  /**
   * The signatures of a `confirmed` block, in block order (a bundle's transactions sit whole and contiguous in it).
   * Read only when statuses cannot tell which bundle landed: a block read is far heavier than a status read.
   * null when the node answers that it has no such confirmed block (not yet, skipped, cleaned up): an answer, so
   * the RPC stays healthy.
   */
  async getBlockSignatures(slot: number): Promise<string[] | null> {
    const raw = (this.connection as unknown as Partial<RawRpcConnection>)._rpcRequest;
    return this.track(async () => {
      if (typeof raw !== 'function') {
        try {
          return (await this.connection.getBlockSignatures(slot, 'confirmed')).signatures;
        } catch (error) {
          if (error instanceof SolanaJSONRPCError) return null;
          throw error;
        }
      }
      const config = { commitment: 'confirmed', transactionDetails: 'signatures', rewards: false };
      const response = (await raw.call(this.connection, 'getBlock', [slot, config])) as {
        error?: unknown;
        result?: { signatures?: unknown } | null;
      };
      // An error answer (-32004 not available, -32007 skipped, -32011 no transaction history) or a null block.
      if (response.error !== undefined && response.error !== null) return null;
      const signatures = response.result?.signatures;
      if (!Array.isArray(signatures) || signatures.some((s) => typeof s !== 'string')) return null;
      return signatures as string[];
    });
  }

  /**
   * A JSON-RPC call web3.js v1 has no method for (Agave 4.3's `getAlpenglowMigrationSlot`, `getAgGenesisCert`): the
   * whole answer, `{ result }` or `{ error }`, unchecked (the caller interprets it). An error answer is an answer (the
   * RPC stays healthy); only a transport failure throws. Undefined should a web3.js release drop `_rpcRequest`.
   */
  async rawRequest(method: string, params: unknown[] = []): Promise<unknown> {
    const raw = (this.connection as unknown as Partial<RawRpcConnection>)._rpcRequest;
    if (typeof raw !== 'function') return undefined;
    return this.track(() => raw.call(this.connection, method, params));
  }

  async getSlot(commitment: Commitment = 'processed'): Promise<number> {
    return this.track(() => this.connection.getSlot(commitment));
  }

  async getBlockHeight(commitment: Commitment = 'processed'): Promise<number> {
    return this.track(() => this.connection.getBlockHeight(commitment));
  }

  /**
   * A balance at `commitment` (default confirmed: what a tipper's funds are judged on). With `minContextSlot`, a node
   * whose bank is older refuses (-32016, thrown) instead of answering from it (Agave `RpcContextConfig`).
   */
  async getBalance(
    address: string,
    commitment: Commitment = 'confirmed',
    minContextSlot?: number,
  ): Promise<number> {
    return this.track(() =>
      this.connection.getBalance(new PublicKey(address), {
        commitment,
        ...(minContextSlot !== undefined && minContextSlot > 0 ? { minContextSlot } : {}),
      }),
    );
  }

  /** Epoch boundaries for the leader schedule. */
  async getEpochInfo(): Promise<{
    epoch: number;
    firstSlot: number;
    slotsInEpoch: number;
    absoluteSlot: number;
  }> {
    const info = await this.track(() => this.connection.getEpochInfo('processed'));
    return {
      epoch: info.epoch,
      firstSlot: info.absoluteSlot - info.slotIndex,
      slotsInEpoch: info.slotsInEpoch,
      absoluteSlot: info.absoluteSlot,
    };
  }

  /** Leaders of `limit` (<= 5000) consecutive slots from `startSlot`; works one epoch ahead, so it also prefetches. */
  async getSlotLeaders(startSlot: number, limit: number): Promise<string[]> {
    const leaders = await this.track(() => this.connection.getSlotLeaders(startSlot, limit));
    return leaders.map((key) => key.toBase58());
  }

  /**
   * `getRecentPrioritizationFees` on `accounts` (at most 128): one price per recent slot (micro-lamports per CU), the
   * higher of the block's lowest and each account's lowest among the transactions that write-locked it.
   */
  async getRecentPrioritizationFees(accounts: readonly string[]): Promise<number[]> {
    const fees = await this.track(() =>
      this.connection.getRecentPrioritizationFees({
        lockedWritableAccounts: accounts.map((account) => new PublicKey(account)),
      }),
    );
    return fees.map((fee) => fee.prioritizationFee);
  }

  /** The stored nonce of a durable-nonce account (bytes 40..72 of its data, base58), or null if absent. */
  async getNonceValue(nonceAccount: string): Promise<string | null> {
    const info = await this.track(() =>
      this.connection.getAccountInfo(new PublicKey(nonceAccount), 'confirmed'),
    );
    if (!info || info.data.length < 72) return null;
    return new PublicKey(info.data.subarray(40, 72)).toBase58();
  }

  private async track<T>(call: () => Promise<T>): Promise<T> {
    try {
      const value = await call();
      this.health.ok = true;
      this.health.lastOkAt = this.now();
      this.health.consecutiveFailures = 0;
      return value;
    } catch (error) {
      this.health.ok = false;
      this.health.lastError = (error as Error).message;
      this.health.consecutiveFailures++;
      throw error;
    }
  }
}

/**
 * web3.js's own JSON-RPC call (`Connection#_rpcRequest`, the transport every Connection method uses), for
 * getSignatureStatuses. The tracker reads hundreds of statuses a second under load, and web3.js's superstruct check
 * of the answer (a union per field, building an error object for each branch that does not match) was ~11 % of the
 * sidecar's CPU at 200 transactions a second; `parseSignatureStatuses` checks the same shape directly. Should a
 * web3.js release drop the method, the public `getSignatureStatuses` is used instead.
 */
interface RawRpcConnection {
  _rpcRequest(method: string, args: unknown[]): Promise<unknown>;
}

const CONFIRMATION_STATUSES = new Set(['processed', 'confirmed', 'finalized']);

/** The `value` of a getSignatureStatuses answer, checked: `expected` entries, each null or a status. */
/** The `context.slot` of a getSignatureStatuses answer (0 when absent: then it proves nothing about recency). */
function statusContextSlot(response: unknown): number {
  const slot = (response as { result?: { context?: { slot?: unknown } } } | null)?.result?.context?.slot;
  return typeof slot === 'number' ? slot : 0;
}

export function parseSignatureStatuses(response: unknown, expected: number): Array<SignatureStatus | null> {
  const invalid = (why: string) => new Error(`failed to get signature status: invalid response (${why})`);
  if (typeof response !== 'object' || response === null) throw invalid('not an object');
  const { error, result } = response as { error?: { code?: unknown; message?: unknown }; result?: unknown };
  if (error !== undefined && error !== null) {
    throw new Error(`failed to get signature status: ${String(error.code)}: ${String(error.message)}`);
  }
  const value = (result as { value?: unknown } | null | undefined)?.value;
  if (!Array.isArray(value)) throw invalid('no value array');
  if (value.length !== expected) throw invalid(`${value.length} statuses for ${expected} signatures`);
  return value.map((entry: unknown, i) => {
    if (entry === null) return null;
    if (typeof entry !== 'object') throw invalid(`status ${i} is not an object`);
    const { slot, confirmations, err, confirmationStatus } = entry as Record<string, unknown>;
    if (typeof slot !== 'number') throw invalid(`status ${i} has no slot`);
    if (confirmations !== null && confirmations !== undefined && typeof confirmations !== 'number')
      throw invalid(`status ${i} has a bad confirmations count`);
    if (confirmationStatus !== undefined && !CONFIRMATION_STATUSES.has(confirmationStatus as string))
      throw invalid(`status ${i} has an unknown confirmationStatus`);
    return {
      slot,
      confirmations: (confirmations as number | null | undefined) ?? null,
      err: (err ?? null) as SignatureStatus['err'],
      ...(confirmationStatus === undefined
        ? {}
        : { confirmationStatus: confirmationStatus as SignatureStatus['confirmationStatus'] }),
    };
  });
}
