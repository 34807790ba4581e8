/**
 * What relay needs from a Jito block engine, whichever transport carries it, and how answers are classified.
 *
 * The distinction that matters (DESIGN §2): a *transport* failure (429 / -32097 / RESOURCE_EXHAUSTED, 5xx,
 * UNAVAILABLE, timeouts, network errors) says nothing about the bundle — the identical bytes are sent again
 * with backoff and no retry is counted. A *rejection* is the engine's verdict on the bundle itself.
 */

export type BundleRejection =
  /** A user transaction already executed: resolve by reading signature statuses. */
  | 'already_processed'
  /** A transaction's blockhash is unknown or too old. */
  | 'blockhash_expired'
  /** Malformed: bad or missing signature, no tip account, too many transactions, undecodable, too many locks. */
  | 'invalid_bundle'
  /** Any other refusal (no leader up soon, an engine-side condition): the attempt did not land; retry. */
  | 'dropped';

export type SendBundleResult =
  | { ok: true; bundleId: string }
  | {
      ok: false;
      kind: 'transport';
      message: string;
      retryAfterMs: number | null;
      status: number | string | null;
    }
  | { ok: false; kind: 'rejected'; rejection: BundleRejection; message: string };

/** What a send came to: an id back, a verdict on the bundle, or a transport failure. */
export function sendAnswer(result: SendBundleResult): 'accepted' | 'rejected' | 'transport' {
  return result.ok ? 'accepted' : result.kind;
}

export type InflightStatus = 'Invalid' | 'Pending' | 'Failed' | 'Landed';

export interface InflightBundleStatus {
  bundleId: string;
  status: InflightStatus;
  landedSlot: number | null;
}

/** A gRPC bundle result, as jito-ts delivers it (camelCase oneofs). */
export interface BundleResultMessage {
  bundleId: string;
  accepted?: { slot: number; validatorIdentity: string } | undefined;
  rejected?:
    | {
        stateAuctionBidRejected?:
          { auctionId: string; simulatedBidLamports: number; msg?: string } | undefined;
        winningBatchBidRejected?:
          { auctionId: string; simulatedBidLamports: number; msg?: string } | undefined;
        simulationFailure?: { txSignature: string; msg?: string } | undefined;
        internalError?: { msg: string } | undefined;
        droppedBundle?: { msg: string } | undefined;
      }
    | undefined;
  finalized?: object | undefined;
  processed?: { validatorIdentity: string; slot: number; bundleIndex: number } | undefined;
  dropped?: { reason: number | string } | undefined;
}

export interface BlockEngineTransport {
  readonly kind: 'jsonrpc' | 'grpc';
  /** Send wire transactions as one bundle. Never throws: every failure is classified. */
  sendBundle(transactions: Uint8Array[]): Promise<SendBundleResult>;
  getTipAccounts(): Promise<string[]>;
  /** Push results (gRPC only). Returns a stop function, or null when the transport has no push channel. */
  subscribeBundleResults?(
    onResult: (result: BundleResultMessage) => void,
    onError: (error: Error) => void,
  ): () => void;
  close(): void;
}

const REJECTION_PATTERNS: Array<[RegExp, BundleRejection]> = [
  [/already processed/i, 'already_processed'],
  [/expired blockhash|invalid blockhash|blockhash not found|blockhashnotfound/i, 'blockhash_expired'],
  // Only what is provably wrong with the bundle itself fails the user's transaction (jito.md §1.8).
  [
    /tip account|could not be decoded|exceeded maximum number of transactions|exceeds max transaction|transaction \S+ is invalid|duplicate transactions|must be signed|signature|too many account locks|bundle does not lock/i,
    'invalid_bundle',
  ],
];

/** Classify the text of an engine refusal that is not a transport failure; unknown refusals are `dropped`. */
export function classifyRejection(message: string): BundleRejection {
  for (const [pattern, rejection] of REJECTION_PATTERNS) if (pattern.test(message)) return rejection;
  return 'dropped';
}

/** `Retry after 1606ms` (Jito's rate-limit text) or a `retry-after` header in seconds. */
export function parseRetryAfterMs(message: string | null, header: string | null): number | null {
  const inText = message ? /retry after (\d+)\s*ms/i.exec(message) : null;
  if (inText) return Number(inText[1]);
  if (header) {
    const seconds = Number(header);
    if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  }
  return null;
}
