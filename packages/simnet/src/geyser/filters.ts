import bs58 from 'bs58';
import type { Commitment, TransactionEvent } from '../chain/types';

/** A filter the client sent that the server refuses: INVALID_ARGUMENT "failed to create filter: ...". */
export class FilterError extends Error {}

export interface SlotFilter {
  filterByCommitment: boolean;
  interslotUpdates: boolean;
}

export interface TransactionFilter {
  vote?: boolean;
  failed?: boolean;
  signature?: string;
  include: Set<string>;
  exclude: Set<string>;
  required: string[];
}

export interface StreamFilters {
  commitment: Commitment;
  slots: Map<string, SlotFilter>;
  transactions: Map<string, TransactionFilter>;
  blocksMeta: Set<string>;
}

/** A SubscribeRequest as proto-loader renders it (camelCase, enums as names, uint64 as strings). */
export interface SubscribeRequestObject {
  slots?: Record<string, { filterByCommitment?: boolean; interslotUpdates?: boolean }>;
  transactionsStatus?: Record<
    string,
    {
      vote?: boolean;
      failed?: boolean;
      signature?: string;
      accountInclude?: string[];
      accountExclude?: string[];
      accountRequired?: string[];
    }
  >;
  blocksMeta?: Record<string, unknown>;
  commitment?: string | number;
  ping?: { id?: number };
  fromSlot?: string;
}

export function parseCommitmentLevel(value: string | number | undefined): Commitment {
  switch (value) {
    case undefined:
    case 'PROCESSED':
    case 0:
      return 'processed';
    case 'CONFIRMED':
    case 1:
      return 'confirmed';
    case 'FINALIZED':
    case 2:
      return 'finalized';
    default:
      throw new FilterError(`failed to create filter: invalid commitment level ${String(value)}`);
  }
}

function pubkeys(list: string[] | undefined, what: string): string[] {
  const keys = list ?? [];
  for (const key of keys) {
    let bytes: Uint8Array;
    try {
      bytes = bs58.decode(key);
    } catch {
      throw new FilterError(`failed to create filter: invalid ${what} pubkey ${key}`);
    }
    if (bytes.length !== 32) throw new FilterError(`failed to create filter: invalid ${what} pubkey ${key}`);
  }
  return keys;
}

/** Build the filter set a (non-ping) SubscribeRequest asks for; it replaces the stream's previous set whole. */
export function parseFilters(request: SubscribeRequestObject): StreamFilters {
  const slots = new Map<string, SlotFilter>();
  for (const [name, filter] of Object.entries(request.slots ?? {})) {
    slots.set(name, {
      filterByCommitment: filter?.filterByCommitment === true,
      interslotUpdates: filter?.interslotUpdates === true,
    });
  }
  const transactions = new Map<string, TransactionFilter>();
  for (const [name, filter] of Object.entries(request.transactionsStatus ?? {})) {
    if (filter?.signature !== undefined) {
      let bytes: Uint8Array;
      try {
        bytes = bs58.decode(filter.signature);
      } catch {
        throw new FilterError(`failed to create filter: invalid signature ${filter.signature}`);
      }
      if (bytes.length !== 64)
        throw new FilterError(`failed to create filter: invalid signature ${filter.signature}`);
    }
    transactions.set(name, {
      vote: filter?.vote,
      failed: filter?.failed,
      signature: filter?.signature,
      include: new Set(pubkeys(filter?.accountInclude, 'account_include')),
      exclude: new Set(pubkeys(filter?.accountExclude, 'account_exclude')),
      required: pubkeys(filter?.accountRequired, 'account_required'),
    });
  }
  return {
    commitment: parseCommitmentLevel(request.commitment),
    slots,
    transactions,
    blocksMeta: new Set(Object.keys(request.blocksMeta ?? {})),
  };
}

/**
 * Yellowstone's transaction filter: the set fields AND together, items of one list OR. `vote`/`failed` keep only
 * transactions whose flag equals the given value; unset means both.
 */
export function matchesTransaction(filter: TransactionFilter, tx: TransactionEvent): boolean {
  if (filter.vote !== undefined && tx.isVote !== filter.vote) return false;
  if (filter.failed !== undefined && (tx.err !== null) !== filter.failed) return false;
  if (filter.signature !== undefined && tx.signature !== filter.signature) return false;
  if (filter.include.size > 0 && !tx.accountKeys.some((key) => filter.include.has(key))) return false;
  if (filter.exclude.size > 0 && tx.accountKeys.some((key) => filter.exclude.has(key))) return false;
  if (filter.required.length > 0 && !filter.required.every((key) => tx.accountKeys.includes(key)))
    return false;
  return true;
}
