import bs58 from 'bs58';
import type { Cluster } from '../chain/types';
import {
  decodeWire,
  deriveBundleId,
  firstInvalidSignature,
  parseTransaction,
  type ParsedTransaction,
  type WireEncoding,
} from './wire';

/** Jito's limit on transactions per bundle. */
export const MAX_BUNDLE_TRANSACTIONS = 5;
/** Solana's per-transaction account lock limit. */
export const MAX_TX_ACCOUNT_LOCKS = 64;

/**
 * The rejection strings the block engine answers with (jito.md §1.8). The engine is closed source; these are the
 * texts users have logged, which is what clients match on.
 */
export const BundleErrors = {
  tooMany: (count: number) =>
    `bundle contains ${count} transactions: exceeded maximum number of transactions (${MAX_BUNDLE_TRANSACTIONS})`,
  empty: 'bundle contains no transactions',
  undecodable: (index: number) => `transaction #${index} could not be decoded`,
  invalidSignature: (signature: string) => `transaction ${signature} is invalid`,
  duplicate: 'bundles must not contain any duplicate transactions and every transaction must be signed',
  noTipAccount: 'Bundles must write lock at least one tip account to be eligible for the auction.',
  tooManyLocks: 'transaction has too many account locks',
  invalidBlockhash: 'bundle contains an invalid blockhash',
  expiredBlockhash: 'bundle contains an expired blockhash',
  alreadyProcessed: 'bundle contains an already processed transaction',
  /**
   * jito-docs documents the rule (below) but not its error text; this wording is the simnet's (an assumption: match
   * on "jitodontfront", not on the whole sentence).
   */
  dontFront:
    'bundle contains a transaction with a jitodontfront account that is not at the front of the bundle',
} as const;

/**
 * Jito's sandwich-mitigation marker: any account key starting with this (jito-labs/jito-docs
 * `docs/source/lowlatencytxnsend.md` @ b5ef793, "Sandwich Mitigation", rules clarified in c4739e9).
 */
export const DONT_FRONT_PREFIX = 'jitodontfront';

/** Whether a transaction carries the `jitodontfront` marker among its static account keys. */
export function carriesDontFront(
  tx: Pick<ParsedTransaction, 'writableStaticKeys' | 'readonlyStaticKeys'>,
): boolean {
  return (
    tx.readonlyStaticKeys.some((key) => key.startsWith(DONT_FRONT_PREFIX)) ||
    tx.writableStaticKeys.some((key) => key.startsWith(DONT_FRONT_PREFIX))
  );
}

/**
 * The block engine's `jitodontfront` rule (lowlatencytxnsend.md, "Sandwich Mitigation"): a bundle with a marked
 * transaction is rejected unless that transaction is at index 0. Several marked transactions are allowed when they
 * are all contiguous at the front and each shares at least one signer with the first. Transactions without the
 * marker are unaffected. Only static keys are read: the docs say markers in address lookup tables count too, which
 * this model does not resolve (a stated gap).
 */
export function violatesDontFront(
  transactions: ReadonlyArray<
    Pick<ParsedTransaction, 'writableStaticKeys' | 'readonlyStaticKeys' | 'signers'>
  >,
): boolean {
  const marked = transactions.map(carriesDontFront);
  if (!marked.includes(true)) return false;
  if (!marked[0]) return true;
  const front = marked.indexOf(false) === -1 ? marked.length : marked.indexOf(false);
  if (marked.slice(front).includes(true)) return true;
  const firstSigners = new Set(transactions[0]?.signers ?? []);
  return transactions.slice(1, front).some((tx) => !tx.signers.some((signer) => firstSigners.has(signer)));
}

/** A refused bundle: the JSON-RPC error code and message (HTTP 400; gRPC INVALID_ARGUMENT). */
export interface BundleRejection {
  code: number;
  message: string;
}

export interface ValidBundle {
  bundleId: string;
  transactions: ParsedTransaction[];
  /** Lamports paid to tip accounts by top-level SystemProgram transfers: the bundle's bid. */
  tipLamports: number;
  /** Recent blockhashes the bundle depends on (durable-nonce transactions excluded). */
  blockhashes: string[];
}

export type ValidationResult = { ok: true; bundle: ValidBundle } | { ok: false; error: BundleRejection };

const INVALID_PARAMS = -32602;
const INTERNAL = -32603;

function reject(message: string, code = INVALID_PARAMS): ValidationResult {
  return { ok: false, error: { code, message } };
}

/**
 * The block engine's admission pipeline, in Jito's order: count, decode, signatures, duplicates, tip-account write
 * lock, account locks, the `jitodontfront` rule, blockhash, already processed. A bundle that passes gets its Jito bundle id. A low tip is not an
 * admission error: it is accepted and loses the auction.
 */
export function validateBundle(
  encoded: ReadonlyArray<string | Uint8Array>,
  encoding: WireEncoding,
  cluster: Cluster,
  tipAccounts: ReadonlySet<string>,
): ValidationResult {
  if (encoded.length === 0) return reject(BundleErrors.empty);
  if (encoded.length > MAX_BUNDLE_TRANSACTIONS) return reject(BundleErrors.tooMany(encoded.length));

  const transactions: ParsedTransaction[] = [];
  for (let i = 0; i < encoded.length; i++) {
    const item = encoded[i] as string | Uint8Array;
    const wire = typeof item === 'string' ? decodeWire(item, encoding) : item;
    if (!wire) return reject(BundleErrors.undecodable(i));
    try {
      transactions.push(parseTransaction(wire, tipAccounts));
    } catch {
      return reject(BundleErrors.undecodable(i));
    }
  }

  for (const tx of transactions) {
    const bad = firstInvalidSignature(tx);
    if (bad >= 0)
      return reject(BundleErrors.invalidSignature(bs58.encode(tx.signatureBytes[bad] as Uint8Array)));
  }

  const firstSignatures = transactions.map((tx) => tx.signatures[0] as string);
  if (new Set(firstSignatures).size !== firstSignatures.length) return reject(BundleErrors.duplicate);

  if (!transactions.some((tx) => tx.writableStaticKeys.some((key) => tipAccounts.has(key)))) {
    return reject(BundleErrors.noTipAccount);
  }

  if (transactions.some((tx) => tx.accountLockCount > MAX_TX_ACCOUNT_LOCKS)) {
    return reject(BundleErrors.tooManyLocks, INTERNAL);
  }

  // Where Jito checks it in its pipeline is not documented: here, once the bundle is well formed.
  if (violatesDontFront(transactions)) return reject(BundleErrors.dontFront);

  const blockhashes: string[] = [];
  for (const tx of transactions) {
    if (tx.usesDurableNonce) continue;
    if (!cluster.blockhashInfo(tx.recentBlockhash)) return reject(BundleErrors.invalidBlockhash);
    if (!cluster.isBlockhashValid(tx.recentBlockhash)) return reject(BundleErrors.expiredBlockhash);
    blockhashes.push(tx.recentBlockhash);
  }

  if (transactions.some((tx) => cluster.signatureStatus(tx.signatures[0] as string) !== null)) {
    return reject(BundleErrors.alreadyProcessed);
  }

  const tipLamports = transactions.reduce(
    (sum, tx) => sum + tx.tipTransfers.reduce((inner, transfer) => inner + transfer.lamports, 0),
    0,
  );
  return {
    ok: true,
    bundle: { bundleId: deriveBundleId(firstSignatures), transactions, tipLamports, blockhashes },
  };
}
