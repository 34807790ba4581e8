import {
  classifyContention,
  requestedComputeUnits,
  type ContentionSignal,
  type TipPercentile,
} from '@solrelay/core';
import { TIP_TX_MAX_COMPUTE_UNITS } from '../engine/tip-tx';
import type { StoredTx } from '../store/records';
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
/** Warm-up reads (`ContentionReader.warm`) in flight at once; more are skipped, never queued. */
const CONTENTION_WARMUPS = 4;

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

/** What reflex prices a transaction's next bundle on (DESIGN §11), before the contention is read. */
export interface BundleToPrice {
  /** The user transactions' requested CU plus the most a tip transaction of relay's requests. */
  computeUnits: number;
  /** The write set whose contention prices the tip (signers left out). */
  writeSet: string[];
}

/**
 * The bundle reflex prices for `tx`: its user transactions' requested CU plus the most a tip transaction of relay's
 * requests, and its write set. Null for a caller-included tip or bytes that do not parse (reflex then bids the flat
 * percentile). The fallback decider prices on it, and the events that hand the transaction to the agent
 * (`tx_enqueued`, `bundle_settled`) carry it, so both tiers price the same bundle.
 */
export function bundleToPrice(tx: Pick<StoredTx, 'tip' | 'wires'>): BundleToPrice | null {
  if (tx.tip === 'included' || !tx.wires) return null;
  const facts = bundleFacts(tx.wires);
  if (!facts) return null;
  return { computeUnits: facts.computeUnits + TIP_TX_MAX_COMPUTE_UNITS, writeSet: facts.contendedWriteSet };
}

/** The pricing facts an event hands the agent (DESIGN §11): both optional, older agents ignore them. */
export interface AnnouncedPricing {
  compute_units?: number;
  contention?: ContentionSignal;
}

/**
 * What `tx_enqueued` / `bundle_settled` tell the agent about the bundle it will price (`bundleToPrice`'s): the
 * requested CU (counted from the bytes, no I/O) and, when the sidecar holds a reading of the write set from the last
 * ~5 slots, its contention. Never an RPC call: the events are built on the enqueue and settle paths. Nothing for a
 * transaction reflex does not price per CU.
 */
export function announcedPricing(
  bundle: BundleToPrice | null,
  percentile: TipPercentile,
  contention: Pick<ContentionReader, 'peek'>,
): AnnouncedPricing {
  if (!bundle) return {};
  const signal = contention.peek(bundle.writeSet, percentile);
  return { compute_units: bundle.computeUnits, ...(signal ? { contention: signal } : {}) };
}

/** An empty write set: uncontended, without a call. */
function uncontended(): ContentionSignal {
  return { class: 'uncontended', write_price_micro_lamports: 0, slots: 0 };
}

/** The accounts asked for a write set (sorted, at most MAX_FEE_ACCOUNTS). */
function accountsOf(writeSet: readonly string[]): string[] {
  return [...writeSet].sort().slice(0, MAX_FEE_ACCOUNTS);
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
  private warming = 0;

  constructor(
    private readonly d: { rpc: Pick<SolanaRpc, 'getRecentPrioritizationFees'>; now: () => number },
  ) {}

  async read(writeSet: readonly string[], percentile: TipPercentile): Promise<ContentionSignal> {
    if (writeSet.length === 0) return uncontended();
    const accounts = accountsOf(writeSet);
    const key = accounts.join(',');
    const now = this.d.now();
    let hit = this.fresh(key, now);
    if (!hit) {
      const readings = await this.d.rpc.getRecentPrioritizationFees(accounts).catch(() => null);
      hit = { at: now, readings };
      this.cache.delete(key);
      this.cache.set(key, hit);
      if (this.cache.size > CONTENTION_MEMORY) this.cache.delete(this.cache.keys().next().value as string);
    }
    return classifyContention(hit.readings, percentile);
  }

  /** The contention of `writeSet` from a fresh cached reading only (no RPC call); null without one. */
  peek(writeSet: readonly string[], percentile: TipPercentile): ContentionSignal | null {
    if (writeSet.length === 0) return uncontended();
    const hit = this.fresh(accountsOf(writeSet).join(','), this.d.now());
    return hit ? classifyContention(hit.readings, percentile) : null;
  }

  /**
   * Read `writeSet` in the background so that a later {@link peek} finds it: never awaited by the caller, at most
   * CONTENTION_WARMUPS at once (more are skipped), nothing when a fresh reading is cached. Failures are the reading.
   */
  warm(writeSet: readonly string[]): void {
    if (writeSet.length === 0 || this.warming >= CONTENTION_WARMUPS) return;
    if (this.fresh(accountsOf(writeSet).join(','), this.d.now())) return;
    this.warming++;
    void this.read(writeSet, 'p50')
      .catch(() => undefined)
      .finally(() => this.warming--);
  }

  private fresh(key: string, now: number): { at: number; readings: number[] | null } | null {
    const hit = this.cache.get(key);
    return hit && now - hit.at <= CONTENTION_TTL_MS ? hit : null;
  }
}
