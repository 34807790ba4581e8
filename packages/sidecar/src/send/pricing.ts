import {
  classifyContention,
  requestedComputeUnits,
  type ContentionSignal,
  type TipPercentile,
} from '@solrelay/core';
import type { SolanaRpc } from '../upstream/solana-rpc';
import { isWritableIndex, parseTransaction, type ParsedTransaction } from '../wire/transaction';

/**
 * Jito's sandwich-mitigation marker: a transaction carrying an account key that starts with this must be first in its
 * bundle (jito-labs/jito-docs `docs/source/lowlatencytxnsend.md`, "Sandwich Mitigation"), so it never rides.
 */
export const DONT_FRONT_PREFIX = 'jitodontfront';

/** getRecentPrioritizationFees takes at most this many accounts (Agave MAX_TX_ACCOUNT_LOCKS). */
const MAX_FEE_ACCOUNTS = 128;
/** A write set's contention reading is reused for this long (about five slots). */
const CONTENTION_TTL_MS = 2_000;
const CONTENTION_MEMORY = 4_096;

/** What pricing and packing read from a list of transactions (base64 wires). */
export interface BundleFacts {
  /** Requested CU of these transactions (without relay's tip transaction). */
  computeUnits: number;
  /** Accounts they write-lock that no signer owns: the shared state whose contention prices the tip. */
  contendedWriteSet: string[];
  /** Whether one of them carries the `jitodontfront` marker. */
  dontFront: boolean;
}

function instructionsOf(parsed: ParsedTransaction) {
  return parsed.instructions.map((ix) => ({
    program: parsed.accountKeys[ix.programIdIndex] ?? '',
    data: ix.data,
  }));
}

/** Requested CU of one wire (base64 or bytes), as Agave reserves it (see core `requestedComputeUnits`). */
export function wireComputeUnits(wire: string | Uint8Array): number {
  const bytes = typeof wire === 'string' ? Buffer.from(wire, 'base64') : wire;
  return requestedComputeUnits(instructionsOf(parseTransaction(bytes)));
}

/** The facts of `wires`; null when one does not parse. */
export function bundleFacts(wires: readonly string[]): BundleFacts | null {
  try {
    let computeUnits = 0;
    let dontFront = false;
    const writes = new Set<string>();
    const signers = new Set<string>();
    for (const wire of wires) {
      const parsed = parseTransaction(Buffer.from(wire, 'base64'));
      computeUnits += requestedComputeUnits(instructionsOf(parsed));
      parsed.accountKeys.forEach((key, index) => {
        if (key.startsWith(DONT_FRONT_PREFIX)) dontFront = true;
        if (index < parsed.numRequiredSignatures) signers.add(key);
        else if (isWritableIndex(parsed, index)) writes.add(key);
      });
    }
    return { computeUnits, contendedWriteSet: [...writes].filter((key) => !signers.has(key)), dontFront };
  } catch {
    return null;
  }
}

/**
 * Contention of write sets, from `getRecentPrioritizationFees` on the accounts (what mainnet serves: per recent slot,
 * the lowest price paid by the transactions that write-locked each account, raised to the block's lowest). Signers
 * are left out of the set asked: a wallet's own account is written by its owner's transactions only, and a wallet
 * that pays priority fees would read as contended by itself (an assumption). An empty set is uncontended without a
 * call. A failed call reads as `unknown` (priced as contended). Readings are cached per set for about five slots.
 */
export class ContentionReader {
  private readonly cache = new Map<string, { at: number; readings: number[] | null }>();

  constructor(
    private readonly d: { rpc: Pick<SolanaRpc, 'getRecentPrioritizationFees'>; now: () => number },
  ) {}

  async read(writeSet: readonly string[], percentile: TipPercentile): Promise<ContentionSignal> {
    if (writeSet.length === 0) return { class: 'uncontended', write_price_micro_lamports: 0, slots: 0 };
    const accounts = [...writeSet].sort().slice(0, MAX_FEE_ACCOUNTS);
    const key = accounts.join(',');
    const now = this.d.now();
    let hit = this.cache.get(key);
    if (!hit || now - hit.at > CONTENTION_TTL_MS) {
      const readings = await this.d.rpc.getRecentPrioritizationFees(accounts).catch(() => null);
      hit = { at: now, readings };
      this.cache.delete(key);
      this.cache.set(key, hit);
      if (this.cache.size > CONTENTION_MEMORY) this.cache.delete(this.cache.keys().next().value as string);
    }
    return classifyContention(hit.readings, percentile);
  }
}
