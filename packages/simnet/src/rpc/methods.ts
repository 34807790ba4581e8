import bs58 from 'bs58';
import { describeTransactionError, transactionErrorName } from '../chain/errors';
import { BLOCKHASH_VALID_BLOCKS } from '../chain/cluster';
import { decodeMessageBytes, feeDetails } from '../chain/message';
import type {
  AddressSignature,
  ChainRead,
  Cluster,
  Commitment,
  SignatureStatus,
  TransactionErrorJson,
  TransactionRecord,
} from '../chain/types';

/** The solana-core version the simnet claims (getVersion, context.apiVersion). */
export const SOLANA_CORE_VERSION = '2.2.16';
const FEATURE_SET = 3_294_202_862;
const MAX_SIGNATURE_STATUSES = 256;
const MAX_SLOT_LEADERS = 5_000;
/** Agave rpc_request MAX_MULTIPLE_ACCOUNTS. */
const MAX_MULTIPLE_ACCOUNTS = 100;
/** Agave MAX_GET_CONFIRMED_SIGNATURES_FOR_ADDRESS2_LIMIT. */
const MAX_SIGNATURES_FOR_ADDRESS = 1_000;
/** Agave MAX_TX_ACCOUNT_LOCKS: getRecentPrioritizationFees takes at most this many accounts. */
const MAX_PRIORITIZATION_FEE_ACCOUNTS = 128;
/** Agave's prioritization-fee cache keeps MAX_NUM_RECENT_BLOCKS (150) blocks. */
const PRIORITIZATION_FEE_BLOCKS = 150;
/** Agave's blockhash queue (MAX_RECENT_BLOCKHASHES): getFeeForMessage answers for blockhashes this many blocks back. */
const BLOCKHASH_QUEUE_BLOCKS = 300;

/** A JSON-RPC error the dispatcher turns into `{error: {code, message, data}}`. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

const invalidParams = (message: string): RpcError => new RpcError(-32602, message);

interface Config {
  commitment?: string;
  minContextSlot?: number;
  encoding?: string;
  skipPreflight?: boolean;
  preflightCommitment?: string;
  sigVerify?: boolean;
  replaceRecentBlockhash?: boolean;
  searchTransactionHistory?: boolean;
  identity?: string;
  transactionDetails?: string;
  rewards?: boolean;
  maxSupportedTransactionVersion?: number;
  limit?: number;
  before?: string;
  until?: string;
}

/** Map Solana's commitment names, including the deprecated aliases, onto the three levels. Default: finalized (Agave). */
export function parseCommitment(value: unknown, fallback: Commitment = 'finalized'): Commitment {
  switch (value) {
    case undefined:
    case null:
      return fallback;
    case 'processed':
    case 'recent':
      return 'processed';
    case 'confirmed':
    case 'single':
    case 'singleGossip':
      return 'confirmed';
    case 'finalized':
    case 'max':
    case 'root':
      return 'finalized';
    default:
      throw invalidParams(`Invalid commitment: ${String(value)}`);
  }
}

const COMMITMENT_RANK: Record<Commitment, number> = { processed: 0, confirmed: 1, finalized: 2 };

export function meetsCommitment(status: Commitment, wanted: Commitment): boolean {
  return COMMITMENT_RANK[status] >= COMMITMENT_RANK[wanted];
}

function configAt(params: unknown[], index: number): Config {
  const value = params[index];
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value))
    throw invalidParams(`Invalid params: expected a config object`);
  return value as Config;
}

function stringParam(params: unknown[], index: number, what: string): string {
  const value = params[index];
  if (typeof value !== 'string') throw invalidParams(`Invalid params: ${what} must be a string`);
  return value;
}

/**
 * A base58 key of `size` bytes (a pubkey or a signature), refused with Agave's messages: its `verify_pubkey` /
 * `verify_signature` answer "Invalid param: {ParseError:?}", i.e. `Invalid` or `WrongSize`.
 */
function base58Param(value: unknown, size: 32 | 64, what: string): string {
  if (typeof value !== 'string') throw invalidParams(`Invalid params: ${what} must be a string`);
  let bytes: Uint8Array;
  try {
    bytes = bs58.decode(value);
  } catch {
    throw invalidParams('Invalid param: Invalid');
  }
  if (bytes.length !== size) throw invalidParams('Invalid param: WrongSize');
  return value;
}

function addressParam(params: unknown[], index: number): string {
  return base58Param(params[index], 32, 'pubkey');
}

function signatureParam(value: unknown, what = 'signature'): string {
  return base58Param(value, 64, what);
}

/** A list of base58 addresses, at most `max` (Agave: "Too many inputs provided; max N"). */
function addressListParam(value: unknown, max: number): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw invalidParams('Invalid params: expected an array of base58 addresses');
  if (value.length > max) throw invalidParams(`Too many inputs provided; max ${max}`);
  return value.map((_, i) => addressParam(value, i));
}

/** Agave refuses getTransaction / getBlock / getSignaturesForAddress below `confirmed`. */
function confirmedCommitment(config: Config): Commitment {
  const commitment = parseCommitment(config.commitment);
  if (commitment === 'processed') throw invalidParams('Method does not support commitment below `confirmed`');
  return commitment;
}

const TRANSACTION_ENCODINGS = ['json', 'base64', 'base58'];

/** Agave's -32015 when a v0 transaction meets a request without maxSupportedTransactionVersion (or below 0). */
function checkVersion(record: TransactionRecord, maxSupported: number | undefined): void {
  const version = record.message.version;
  if (version === 'legacy') return;
  if (maxSupported === undefined || maxSupported < version) {
    throw new RpcError(
      -32015,
      `Transaction version (${version}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${version}`,
    );
  }
}

function maxSupportedVersion(config: Config): number | undefined {
  const value = config.maxSupportedTransactionVersion;
  if (value === undefined || value === null) return undefined;
  if (value !== 0)
    throw invalidParams(`Invalid params: unsupported maxSupportedTransactionVersion ${String(value)}`);
  return value;
}

/** `transaction` as Agave encodes it: json (UiTransaction with a raw message), or [bytes, "base64" | "base58"]. */
function encodeTransaction(record: TransactionRecord, encoding: string): unknown {
  if (encoding === 'base64') return [Buffer.from(record.wire).toString('base64'), 'base64'];
  if (encoding === 'base58') return [bs58.encode(record.wire), 'base58'];
  const { message } = record;
  return {
    signatures: record.signatures,
    message: {
      header: message.header,
      accountKeys: message.accountKeys,
      recentBlockhash: message.recentBlockhash,
      instructions: message.instructions.map((ix) => ({
        programIdIndex: ix.programIdIndex,
        accounts: ix.accounts,
        data: bs58.encode(ix.data),
        stackHeight: null,
      })),
      ...(message.version === 0 ? { addressTableLookups: message.addressTableLookups } : {}),
    },
  };
}

/** Agave's UiTransactionStatusMeta for json / binary encodings. */
function transactionMeta(record: TransactionRecord) {
  return {
    err: record.err,
    status: record.err === null ? { Ok: null } : { Err: record.err },
    fee: record.fee,
    preBalances: record.preBalances,
    postBalances: record.postBalances,
    // Not recorded by the simnet: inner instructions (null, as a node without them answers), token balances.
    innerInstructions: null,
    logMessages: record.logMessages,
    preTokenBalances: [],
    postTokenBalances: [],
    rewards: [],
    loadedAddresses: record.loadedAddresses,
    computeUnitsConsumed: record.computeUnitsConsumed,
  };
}

/** transactionDetails "accounts": signatures and annotated account keys, and the meta without logs. */
function accountsOnly(record: TransactionRecord) {
  const { header, accountKeys } = record.message;
  const keys = accountKeys.map((pubkey, i) => ({
    pubkey,
    writable:
      i < header.numRequiredSignatures
        ? i < header.numRequiredSignatures - header.numReadonlySignedAccounts
        : i < accountKeys.length - header.numReadonlyUnsignedAccounts,
    signer: i < header.numRequiredSignatures,
    source: 'transaction',
  }));
  for (const pubkey of record.loadedAddresses.writable)
    keys.push({ pubkey, writable: true, signer: false, source: 'lookupTable' });
  for (const pubkey of record.loadedAddresses.readonly)
    keys.push({ pubkey, writable: false, signer: false, source: 'lookupTable' });
  const meta = transactionMeta(record);
  return {
    transaction: { signatures: record.signatures, accountKeys: keys },
    meta: {
      err: meta.err,
      status: meta.status,
      fee: meta.fee,
      preBalances: meta.preBalances,
      postBalances: meta.postBalances,
      preTokenBalances: meta.preTokenBalances,
      postTokenBalances: meta.postTokenBalances,
    },
  };
}

/** Where a signature sits in the chain's order: (slot, position in block). */
function isOlder(entry: { slot: number; index: number }, than: { slot: number; index: number }): boolean {
  return entry.slot < than.slot || (entry.slot === than.slot && entry.index < than.index);
}

function decodeTransaction(params: unknown[], config: Config): Uint8Array {
  const data = stringParam(params, 0, 'transaction');
  const encoding = config.encoding ?? 'base58';
  try {
    if (encoding === 'base64') return new Uint8Array(Buffer.from(data, 'base64'));
    if (encoding === 'base58') return bs58.decode(data);
  } catch {
    throw invalidParams(`invalid transaction: failed to decode ${encoding} string`);
  }
  throw invalidParams(`Invalid params: unsupported encoding ${encoding}`);
}

function statusJson(status: SignatureStatus | null) {
  if (!status) return null;
  return {
    slot: status.slot,
    confirmations: status.confirmations,
    err: status.err,
    status: status.err === null ? { Ok: null } : { Err: status.err },
    confirmationStatus: status.confirmationStatus,
  };
}

function preflightError(err: TransactionErrorJson, logs: string[], unitsConsumed: number): RpcError {
  if (transactionErrorName(err) === 'SignatureFailure') {
    return new RpcError(-32003, 'Transaction signature verification failure');
  }
  return new RpcError(-32002, `Transaction simulation failed: ${describeTransactionError(err)}`, {
    err,
    logs,
    accounts: null,
    unitsConsumed,
    returnData: null,
    innerInstructions: null,
  });
}

/**
 * Solana JSON-RPC methods over a `Cluster`, in the shapes Agave returns and @solana/web3.js v1 validates
 * (stream-rpc.md §4). Balances, accounts and simulations are the bank's current (processed) state at every commitment:
 * the simnet keeps one bank, not one per commitment level. A lagging node (`Cluster.behind`) answers them from the
 * state as it was at its own bank's slot for the commitment asked.
 */
export class RpcMethods {
  /**
   * What the node answering the current call sees: the cluster, or a view some slots behind (a lagging node behind a
   * load balancer). Set for the duration of one `call`; handlers run synchronously.
   */
  private read: ChainRead;

  constructor(private readonly cluster: Cluster) {
    this.read = cluster;
  }

  call(method: string, rawParams: unknown, node: ChainRead = this.cluster): unknown {
    const params = rawParams === undefined || rawParams === null ? [] : rawParams;
    if (!Array.isArray(params)) throw invalidParams('Invalid params: expected an array');
    const handler = this.handlers[method] ?? this.consensusHandler(method);
    if (!handler) throw new RpcError(-32601, 'Method not found');
    this.read = node;
    try {
      return handler(params);
    } finally {
      this.read = this.cluster;
    }
  }

  private context(commitment: Commitment, config: Config) {
    const slot = this.read.slotAt(commitment);
    if (typeof config.minContextSlot === 'number' && config.minContextSlot > slot) {
      throw new RpcError(-32016, 'Minimum context slot has not been reached', { contextSlot: slot });
    }
    return { slot, apiVersion: SOLANA_CORE_VERSION };
  }

  private withContext(params: unknown[], configIndex: number, value: (commitment: Commitment) => unknown) {
    const config = configAt(params, configIndex);
    const commitment = parseCommitment(config.commitment);
    return { context: this.context(commitment, config), value: value(commitment) };
  }

  private plain(params: unknown[], configIndex: number, value: (commitment: Commitment) => unknown) {
    const config = configAt(params, configIndex);
    const commitment = parseCommitment(config.commitment);
    this.context(commitment, config);
    return value(commitment);
  }

  /** An account as getAccountInfo shows it, in the answering node's bank at `commitment`; null when it does not exist. */
  private accountJson(address: string, encoding: string, commitment: Commitment) {
    const account = this.read.getAccount?.(address, commitment) ?? null;
    if (!account) {
      const lamports = this.read.getBalance(address, commitment);
      return lamports > 0
        ? {
            lamports,
            owner: '11111111111111111111111111111111',
            data: ['', 'base64'],
            executable: false,
            rentEpoch: 0,
            space: 0,
          }
        : null;
    }
    const data =
      encoding === 'base64'
        ? [Buffer.from(account.data).toString('base64'), 'base64']
        : encoding === 'base58'
          ? bs58.encode(account.data)
          : [Buffer.from(account.data).toString('base64'), 'base64'];
    return {
      lamports: account.lamports,
      owner: account.owner,
      data,
      executable: account.executable,
      rentEpoch: account.rentEpoch,
      space: account.data.length,
    };
  }

  /**
   * Agave 4.3's consensus methods (anza-xyz/agave PR 12735, anza-xyz/kit PR 1703: `getAlpenglowMigrationSlot`, the
   * slot the cluster migrates at or null; Helius / Alchemy docs: `getAgGenesisCert`, the certificate over the first
   * Alpenglow block or null while TowerBFT runs). Answered only outside the default TowerBFT mode, which answers
   * -32601 as a node older than 4.3 does (and as the simnet always did).
   */
  private consensusHandler(method: string): ((params: unknown[]) => unknown) | undefined {
    const info = this.cluster.consensusInfo?.();
    if (!info) return undefined;
    if (method === 'getAlpenglowMigrationSlot') return () => info.migrationSlot;
    if (method === 'getAgGenesisCert')
      return () =>
        info.genesisSlot === null
          ? null
          : { block: { slot: info.genesisSlot, blockId: info.genesisBlockId } };
    return undefined;
  }

  private readonly handlers: Record<string, (params: unknown[]) => unknown> = {
    getHealth: () => 'ok',
    getVersion: () => ({ 'solana-core': SOLANA_CORE_VERSION, 'feature-set': FEATURE_SET }),
    getSlot: (params) => this.plain(params, 0, (c) => this.read.slotAt(c)),
    getBlockHeight: (params) => this.plain(params, 0, (c) => this.read.blockHeightAt(c)),
    getTransactionCount: (params) => this.plain(params, 0, (c) => this.read.epochInfo(c).transactionCount),
    getEpochInfo: (params) =>
      this.plain(params, 0, (c) => {
        const info = this.read.epochInfo(c);
        return {
          absoluteSlot: info.absoluteSlot,
          blockHeight: info.blockHeight,
          epoch: info.epoch,
          slotIndex: info.slotIndex,
          slotsInEpoch: info.slotsInEpoch,
          transactionCount: info.transactionCount,
        };
      }),
    getEpochSchedule: () => ({
      slotsPerEpoch: this.cluster.slotsPerEpoch,
      leaderScheduleSlotOffset: this.cluster.slotsPerEpoch,
      warmup: false,
      firstNormalEpoch: 0,
      firstNormalSlot: 0,
    }),
    getLatestBlockhash: (params) =>
      this.withContext(params, 0, (c) => {
        const { blockhash, lastValidBlockHeight } = this.read.latestBlockhash(c);
        return { blockhash, lastValidBlockHeight };
      }),
    isBlockhashValid: (params) => {
      const blockhash = stringParam(params, 0, 'blockhash');
      return this.withContext(params, 1, (c) => this.read.isBlockhashValid(blockhash, c));
    },
    getBalance: (params) => {
      const address = addressParam(params, 0);
      return this.withContext(params, 1, (c) => this.read.getBalance(address, c));
    },
    getAccountInfo: (params) => {
      const address = addressParam(params, 0);
      const config = configAt(params, 1);
      const encoding = config.encoding ?? 'base58';
      return this.withContext(params, 1, (c) => this.accountJson(address, encoding, c));
    },
    getMultipleAccounts: (params) => {
      const addresses = addressListParam(params[0], MAX_MULTIPLE_ACCOUNTS);
      const config = configAt(params, 1);
      const encoding = config.encoding ?? 'base64';
      return this.withContext(params, 1, (c) =>
        addresses.map((address) => this.accountJson(address, encoding, c)),
      );
    },
    getTransaction: (params) => {
      const signature = signatureParam(params[0]);
      // The second parameter may be a bare encoding (Agave's RpcEncodingConfigWrapper::Deprecated).
      const config: Config = typeof params[1] === 'string' ? { encoding: params[1] } : configAt(params, 1);
      const commitment = confirmedCommitment(config);
      const encoding = config.encoding ?? 'json';
      if (!TRANSACTION_ENCODINGS.includes(encoding))
        throw invalidParams(
          `Invalid params: encoding ${encoding} is not served by the simnet; use json, base64 or base58`,
        );
      const maxSupported = maxSupportedVersion(config);
      const record = this.read.transaction(signature);
      if (!record || record.slot > this.read.slotAt(commitment)) return null;
      checkVersion(record, maxSupported);
      return {
        slot: record.slot,
        transaction: encodeTransaction(record, encoding),
        meta: transactionMeta(record),
        // Blocks carry no wall-clock stamp in the simnet (see getBlock).
        blockTime: null,
        ...(maxSupported === undefined ? {} : { version: record.message.version }),
      };
    },
    getSignaturesForAddress: (params) => {
      const address = addressParam(params, 0);
      const config = configAt(params, 1);
      const commitment = confirmedCommitment(config);
      const limit = config.limit ?? MAX_SIGNATURES_FOR_ADDRESS;
      if (!Number.isInteger(limit) || limit <= 0 || limit > MAX_SIGNATURES_FOR_ADDRESS)
        throw invalidParams(`Invalid limit; max ${MAX_SIGNATURES_FOR_ADDRESS}`);
      const before = config.before === undefined ? undefined : signatureParam(config.before, 'before');
      const until = config.until === undefined ? undefined : signatureParam(config.until, 'until');
      this.context(commitment, config);
      const entries = this.read.signaturesForAddress(address);
      const position = (signature: string) =>
        entries.find((e) => e.signature === signature) ?? this.read.transaction(signature);
      // Agave: an unknown `before` gives nothing; an unknown `until` no lower bound.
      const start = before === undefined ? undefined : position(before);
      if (before !== undefined && !start) return [];
      const stop = until === undefined ? undefined : position(until);
      const highest = this.read.slotAt(commitment);
      const finalized = this.read.slotAt('finalized');
      const result = [];
      for (let i = entries.length - 1; i >= 0 && result.length < limit; i--) {
        const entry = entries[i] as AddressSignature;
        if (entry.slot > highest) continue;
        if (start && !isOlder(entry, start)) continue;
        if (stop && !isOlder(stop, entry)) break;
        result.push({
          signature: entry.signature,
          slot: entry.slot,
          err: entry.err,
          memo: entry.memo,
          blockTime: null,
          confirmationStatus: entry.slot <= finalized ? 'finalized' : 'confirmed',
        });
      }
      return result;
    },
    getFeeForMessage: (params) => {
      const data = stringParam(params, 0, 'message');
      const bytes = Buffer.from(data, 'base64');
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data) || data.length % 4 === 1)
        throw invalidParams('invalid base64 encoding: InvalidByte');
      let message;
      try {
        message = decodeMessageBytes(new Uint8Array(bytes));
      } catch (error) {
        throw invalidParams(
          `failed to deserialize solana_message::versions::VersionedMessage: ${(error as Error).message}`,
        );
      }
      return this.withContext(params, 1, (c) => {
        // Agave's bank.get_fee_for_message: a fee for any blockhash still in the bank's queue (300 blocks), else null.
        const info = this.cluster.blockhashInfo(message.recentBlockhash);
        const bankHeight = this.read.blockHeightAt(c);
        if (!info) return null;
        const height = info.lastValidBlockHeight - BLOCKHASH_VALID_BLOCKS;
        if (height > bankHeight || bankHeight - height > BLOCKHASH_QUEUE_BLOCKS) return null;
        return feeDetails(message).fee;
      });
    },
    getRecentPrioritizationFees: (params) => {
      const accounts =
        params[0] === undefined || params[0] === null
          ? []
          : addressListParam(params[0], MAX_PRIORITIZATION_FEE_ACCOUNTS);
      const fees: Array<{ slot: number; prioritizationFee: number }> = [];
      const first = this.read.firstAvailableBlock();
      for (
        let slot = this.read.slotAt('processed');
        slot >= first && fees.length < PRIORITIZATION_FEE_BLOCKS;
        slot--
      ) {
        const block = this.read.block(slot);
        if (!block || block.status === 'dead' || !block.prioritizationFees) continue;
        const { min, writable } = block.prioritizationFees;
        let fee = min ?? 0;
        for (const account of accounts) fee = Math.max(fee, writable.get(account) ?? 0);
        fees.push({ slot, prioritizationFee: fee });
      }
      return fees.reverse();
    },
    getMinimumBalanceForRentExemption: (params) => {
      const length = params[0];
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0) {
        throw invalidParams('Invalid params: data length must be a non-negative integer');
      }
      // Rent: 3,480 lamports per byte-year, exempt at two years, counting 128 bytes of account overhead.
      return (length + 128) * 3_480 * 2;
    },
    getBlock: (params) => {
      const slot = params[0];
      if (typeof slot !== 'number' || !Number.isSafeInteger(slot) || slot < 0)
        throw invalidParams('Invalid params: slot must be a non-negative integer');
      const config = configAt(params, 1);
      const commitment = parseCommitment(config.commitment);
      // Agave serves blocks from the blockstore, which holds no block below `confirmed`.
      if (commitment === 'processed')
        throw invalidParams('Method does not support commitment below `confirmed`');
      const details = config.transactionDetails ?? 'full';
      if (!['full', 'accounts', 'signatures', 'none'].includes(details))
        throw invalidParams(`Invalid params: unknown transactionDetails ${String(details)}`);
      const encoding = config.encoding ?? 'json';
      if (details === 'full' && !TRANSACTION_ENCODINGS.includes(encoding))
        throw invalidParams(
          `Invalid params: encoding ${encoding} is not served by the simnet; use json, base64 or base58`,
        );
      const maxSupported = maxSupportedVersion(config);
      if (slot > this.read.slotAt(commitment))
        throw new RpcError(-32004, `Block not available for slot ${slot}`);
      const block = this.read.block(slot);
      if (!block || block.status === 'dead' || !meetsCommitment(block.status, commitment)) {
        const first = this.read.firstAvailableBlock();
        if (slot < first)
          throw new RpcError(
            -32001,
            `Block ${slot} cleaned up, does not exist on node. First available block: ${first}`,
          );
        // Agave calls a slot skipped only below the root; above it, a block off the confirmed fork (or none yet) is
        // "not available": the fork could still change.
        if (slot > this.read.slotAt('finalized'))
          throw new RpcError(-32004, `Block not available for slot ${slot}`);
        throw new RpcError(
          -32007,
          `Slot ${slot} was skipped, or missing due to ledger jump to recent snapshot`,
        );
      }
      return {
        blockHeight: block.blockHeight,
        // Blocks carry no wall-clock stamp in the simnet; Agave also answers null when it has none.
        blockTime: null,
        blockhash: block.blockhash,
        parentSlot: block.parentSlot ?? 0,
        previousBlockhash: block.parentBlockhash ?? block.blockhash,
        ...(details === 'signatures' ? { signatures: [...block.signatures] } : {}),
        ...(details === 'full' || details === 'accounts'
          ? {
              transactions: (block.transactions ?? []).map((record) => {
                checkVersion(record, maxSupported);
                const version = maxSupported === undefined ? {} : { version: record.message.version };
                return details === 'full'
                  ? {
                      transaction: encodeTransaction(record, encoding),
                      meta: transactionMeta(record),
                      ...version,
                    }
                  : { ...accountsOnly(record), ...version };
              }),
            }
          : {}),
        ...(config.rewards === false ? {} : { rewards: [] }),
      };
    },
    getSignatureStatuses: (params) => {
      const signatures = params[0];
      if (!Array.isArray(signatures) || signatures.some((s) => typeof s !== 'string')) {
        throw invalidParams('Invalid params: expected an array of signatures');
      }
      if (signatures.length > MAX_SIGNATURE_STATUSES) {
        throw invalidParams(`Too many inputs provided; max ${MAX_SIGNATURE_STATUSES}`);
      }
      const statusCacheOnly = configAt(params, 1).searchTransactionHistory !== true;
      return {
        context: { slot: this.read.slotAt('processed'), apiVersion: SOLANA_CORE_VERSION },
        value: (signatures as string[]).map((s) =>
          statusJson(this.read.signatureStatus(s, { statusCacheOnly })),
        ),
      };
    },
    getSlotLeaders: (params) => {
      const start = params[0];
      const limit = params[1];
      if (typeof start !== 'number' || !Number.isInteger(start) || start < 0)
        throw invalidParams('Invalid start slot');
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_SLOT_LEADERS) {
        throw invalidParams(`Invalid limit; max ${MAX_SLOT_LEADERS}`);
      }
      const leaders: string[] = [];
      for (let slot = start; slot < start + limit; slot++) {
        const leader = this.cluster.leaderAt(slot);
        if (!leader) {
          const epoch = Math.floor(slot / this.cluster.slotsPerEpoch);
          throw invalidParams(`Invalid slot range: leader schedule for epoch ${epoch} is unavailable`);
        }
        leaders.push(leader.identity);
      }
      return leaders;
    },
    getLeaderSchedule: (params) => {
      // [slot | null, config] or just [config].
      const first = params[0];
      const slotGiven = typeof first === 'number';
      const config = configAt(params, slotGiven || first === null ? 1 : 0);
      const commitment = parseCommitment(config.commitment);
      const slot = slotGiven ? first : this.read.slotAt(commitment);
      const schedule = this.cluster.leaderSchedule(slot);
      if (!schedule) return null;
      if (config.identity) {
        const slots = schedule[config.identity];
        return slots ? { [config.identity]: slots } : {};
      }
      return schedule;
    },
    requestAirdrop: (params) => {
      const address = addressParam(params, 0);
      const lamports = params[1];
      if (typeof lamports !== 'number' || !Number.isSafeInteger(lamports) || lamports <= 0) {
        throw invalidParams('Invalid params: lamports must be a positive integer');
      }
      return this.cluster.airdrop(address, lamports);
    },
    sendTransaction: (params) => {
      const config = configAt(params, 1);
      const wire = decodeTransaction(params, config);
      if (!config.skipPreflight) {
        // Agave preflights on the answering node's bank at `preflightCommitment` (and `minContextSlot`). Default here:
        // processed, as the simnet's reads (Agave's default is finalized).
        const commitment = parseCommitment(config.preflightCommitment, 'processed');
        this.context(commitment, config);
        const simulated = this.read.simulateTransaction(wire, { sigVerify: true }, commitment);
        if (transactionErrorName(simulated.err ?? '') === 'SanitizeFailure') {
          throw invalidParams('invalid transaction: failed to deserialize');
        }
        if (simulated.err !== null)
          throw preflightError(simulated.err, simulated.logs, simulated.unitsConsumed);
      }
      const result = this.cluster.submitTransaction(wire);
      if (result.ok) return result.signature;
      if (transactionErrorName(result.err) === 'SanitizeFailure') {
        throw invalidParams('invalid transaction: failed to deserialize');
      }
      // Without preflight Agave forwards the transaction and returns its id; the leader then drops it.
      if (config.skipPreflight) return result.signature;
      throw preflightError(result.err, [], 0);
    },
    simulateTransaction: (params) => {
      const config = configAt(params, 1);
      if (config.sigVerify && config.replaceRecentBlockhash) {
        throw invalidParams('sigVerify may not be used with replaceRecentBlockhash');
      }
      const wire = decodeTransaction(params, config);
      const commitment = parseCommitment(config.commitment);
      const context = this.context(commitment, config);
      // On the answering node's bank: a lagging node simulates on the state at its own slot.
      const simulated = this.read.simulateTransaction(
        wire,
        {
          sigVerify: config.sigVerify ?? false,
          replaceRecentBlockhash: config.replaceRecentBlockhash ?? false,
        },
        commitment,
      );
      if (transactionErrorName(simulated.err ?? '') === 'SanitizeFailure') {
        throw invalidParams('invalid transaction: failed to deserialize');
      }
      return {
        context,
        value: {
          err: simulated.err,
          logs: simulated.logs,
          accounts: null,
          unitsConsumed: simulated.unitsConsumed,
          returnData: null,
          innerInstructions: null,
          replacementBlockhash: null,
        },
      };
    },
  };
}
