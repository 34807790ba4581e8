import type { AttemptOutcome } from './outcomes';
import type { PolicyKey, PolicyProblem } from './policy';
import type { TxState } from './states';
import type { TxEncoding } from './vocabulary';

/**
 * relay's one error type. Every cause has a stable string code `RELAY_E_<AREA>_<REASON>`, one HTTP
 * status, one message template and one details type ({@link RelayErrorContext}). Codes are never renamed,
 * reused or removed: clients branch on them, and they are written to journals and lifecycle logs.
 *
 * Message templates use `$name` placeholders filled from `details`. Details go on the wire as they are
 * (`{"error":{code,message,details}}`), so their keys, and the placeholders, are the wire's snake_case.
 */

/** The details of a policy refusal: the key at fault (`max_tip` is the caller's cap, `tip` an included tip). */
export type PolicyViolationDetails = {
  key: PolicyKey | 'max_tip' | 'tip';
  limit: number;
  actual: number;
  /** The transaction refused, when there is one (a submit; an enqueue has no id yet). */
  tx_id?: string;
};

/** A code with no details. */
type NoDetails = Record<string, never>;

/**
 * The details each code carries, by code (the model is @solana/kit's `errors/src/context.ts`). Every
 * `$placeholder` of a code's message is a required key here, so a message built through {@link RelayError}
 * cannot ship unfilled; `test/errors.test.ts` holds both at compile time and at run time.
 */
export interface RelayErrorContext {
  RELAY_E_REQUEST_MALFORMED_JSON: { reason: string };
  RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE: { content_type: string };
  RELAY_E_REQUEST_BODY_TOO_LARGE: { limit_bytes: number };
  RELAY_E_REQUEST_INVALID_FIELD: {
    /** The first field at fault, dotted path. */
    field: string;
    reason: string;
    /** Every field at fault. */
    issues?: Array<{ field: string; message: string }>;
  };
  RELAY_E_REQUEST_UNKNOWN_ROUTE: { method: string; path: string };
  RELAY_E_REQUEST_MALFORMED_HTTP: { reason: string };
  RELAY_E_REQUEST_HEADERS_TOO_LARGE: NoDetails;

  RELAY_E_AUTH_MISSING_TOKEN: NoDetails;
  RELAY_E_AUTH_INVALID_TOKEN: NoDetails;
  RELAY_E_AUTH_FORBIDDEN_ORIGIN: { origin: string };
  RELAY_E_AUTH_FORBIDDEN_HOST: { host: string };

  RELAY_E_TX_BAD_ENCODING: { index: number; encoding: TxEncoding };
  RELAY_E_TX_UNDECODABLE: { index: number; reason: string };
  /** `signer`: the index of the missing signature in the transaction. */
  RELAY_E_TX_UNSIGNED: { index: number; signer: number };
  /** `signer`: the index of the signature that does not verify. */
  RELAY_E_TX_BAD_SIGNATURE: { index: number; signer: number };
  RELAY_E_TX_TOO_MANY_TRANSACTIONS: { count: number; field: string };
  RELAY_E_TX_DUPLICATE_TRANSACTION: { index: number; signature: string };
  RELAY_E_TX_SIGNATURE_CONFLICT: { signature: string; tx_id: string };
  RELAY_E_TX_BLOCKHASH_EXPIRED: { index: number; blockhash: string };
  RELAY_E_TX_NOT_FOUND: { tx_id: string };
  /** `state`: the state, or a description of it (`pending (attempts stopped)`). */
  RELAY_E_TX_WRONG_STATE: { tx_id: string; state: string; expected: string };
  /**
   * Several sidecars share one database (DESIGN §10) and another host of the fleet runs this transaction: only its
   * owner decides, sends and changes it. `owner_host` is that host's `RELAY_HOST_ID`.
   */
  RELAY_E_TX_OWNED_ELSEWHERE: { tx_id: string; owner_host: string };
  RELAY_E_TX_TIP_NOT_RAISABLE: PolicyViolationDetails;
  RELAY_E_TX_ILLEGAL_TRANSITION: { from: TxState; to: TxState };

  RELAY_E_BUNDLE_NOT_FOUND: { bundle_id: string };

  /**
   * An attempt (one bundle) ended without landing; journaled as the transaction's `last_error`. Journals written
   * before this code have `RELAY_E_UPSTREAM_INVALID_RESPONSE` with the same `outcome` and `bundle_id`.
   */
  RELAY_E_ATTEMPT_LOST: { outcome: AttemptOutcome; bundle_id: string; reason: string };

  RELAY_E_POLICY_MAX_TIP_EXCEEDED: PolicyViolationDetails;
  RELAY_E_POLICY_MIN_TIP_NOT_MET: PolicyViolationDetails;
  RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED: PolicyViolationDetails;
  RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP: PolicyViolationDetails;
  RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED: PolicyViolationDetails;
  RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED: PolicyViolationDetails;
  RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED: PolicyViolationDetails;
  RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED: PolicyViolationDetails;
  RELAY_E_POLICY_INVALID_FILE: { reason: string; problems: PolicyProblem[] };
  /** `value`: what was given for the key, as given. */
  RELAY_E_POLICY_INVALID_VALUE: { key: PolicyKey; reason: string; value: unknown };
  RELAY_E_POLICY_UNKNOWN_KEY: { key: string };

  RELAY_E_QUEUE_FULL: { limit: number; retry_after_s: number };
  RELAY_E_RATE_LIMITED: { limit: number; retry_after_s: number };
  /**
   * `ahead`: transactions waiting to be sent before it; `send_rate_per_s`: transactions relay can send a second
   * (regions × BUNDLE_ENGINE_RPS × pacing × the transactions a bundle recently carried with packing, 1 without);
   * `expected_wait_s`: when its turn would come; `deadline_s`: time it has before attempts stop.
   */
  RELAY_E_CAPACITY_EXCEEDED: {
    ahead: number;
    send_rate_per_s: number;
    expected_wait_s: number;
    deadline_s: number;
    retry_after_s: number;
    /**
     * Blocks the transaction's blockhash had left (its block height, from the stream's block meta, plus 150), when
     * that and not `expiry-slots` set the deadline: a `finalized` blockhash is about 32 blocks into its life already.
     */
    blockhash_blocks_left?: number;
  };

  /** `reasons`: each reason on its own, when there are several (`reason` joins them). */
  RELAY_E_NOT_READY: { reason: string; reasons?: string[] };
  /**
   * No tipper of the pool can pay this tip now besides the tips and fees it has in flight and the rent-exempt
   * minimum it must keep. `tipper` is the one closest to paying it, `balance_lamports` its last read,
   * `reserved_lamports` what its tips in flight may still take, `needed_lamports` this tip and its fee,
   * `shortfall_lamports` what it lacks. The transaction waits (nothing is failed); journaled as its `last_error`.
   */
  RELAY_E_TIPPER_UNDERFUNDED: {
    reason: string;
    tipper: string;
    balance_lamports: number;
    reserved_lamports: number;
    needed_lamports: number;
    shortfall_lamports: number;
  };
  RELAY_E_AGENT_NOT_CONNECTED: NoDetails;
  /** `value`: the given mode, bounded text (see {@link previewValue}). */
  RELAY_E_MODE_INVALID: { value: string; field: string };

  /** `status`: how the upstream failed, when known (an HTTP status, a gRPC code name, `timeout`, `network`). */
  RELAY_E_UPSTREAM_UNREACHABLE: { upstream: string; reason: string; status?: number | string | null };
  RELAY_E_UPSTREAM_INVALID_RESPONSE: { upstream: string; reason: string };
  RELAY_E_TIP_INVALID_AMOUNT: { value: string };

  RELAY_E_CONFIG_MISSING_ENV: { name: string };
  RELAY_E_CONFIG_INVALID_ENV: { name: string; reason: string };
  RELAY_E_CONFIG_UNREADABLE_KEYPAIR: { path: string; reason: string };
  RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP: { tip: number; max_tip: number };
  RELAY_E_CONFIG_DATA_DIR_IN_USE: { data_dir: string; pid: number };

  /**
   * PostgreSQL (`RELAY_DATABASE_URL`, DESIGN §10). `url` is always the URL with its password replaced by `***`:
   * no message, detail or log line carries the password.
   */
  RELAY_E_DB_INVALID_URL: { url: string; reason: string };
  RELAY_E_DB_UNREACHABLE: { url: string; reason: string };
  RELAY_E_DB_AUTH_FAILED: { url: string; user: string; reason: string };
  RELAY_E_DB_NOT_FOUND: { url: string; database: string };
  /** `pending`: the migrations not applied yet (`NNN_name`), oldest first. */
  RELAY_E_DB_SCHEMA_BEHIND: { current: number; latest: number; pending: string[] };
  RELAY_E_DB_SCHEMA_AHEAD: { current: number; latest: number };
  RELAY_E_DB_MIGRATION_FAILED: { version: number; name: string; reason: string };
  /**
   * The connection was lost while a store write was committing: it may or may not have committed. The caller
   * re-reads the record and never sends on the strength of the write (the write-ahead rule).
   */
  RELAY_E_DB_COMMIT_UNKNOWN: { tx_id: string; operation: string; reason: string; retry_after_s?: number };
  /**
   * A running sidecar's database is unavailable (stopped, restarting, unreachable): the statement failed before any
   * COMMIT, so nothing was written. Answered with `Retry-After`; the same request later is safe (enqueue dedupes by
   * first signature).
   */
  RELAY_E_DB_UNAVAILABLE: { url: string; reason: string; retry_after_s: number };
  /** Another sidecar is this database's only writer (one host per database until the fleet; DESIGN §10). */
  RELAY_E_DB_IN_USE: { url: string; holder: string };
  /**
   * Another live sidecar holds this host id on the shared database (`RELAY_HOST_ID`; DESIGN §10): two processes under
   * one id would fence each other's transactions. `holder` names the PostgreSQL session that holds the id.
   */
  RELAY_E_HOST_ID_IN_USE: { host_id: string; url: string; holder: string };

  RELAY_E_INTERNAL_ERROR: { reason: string };
}

/** Every relay error code, with its HTTP status and message template. */
export const RELAY_ERRORS = {
  // Request shape (HTTP layer)
  RELAY_E_REQUEST_MALFORMED_JSON: { status: 400, message: 'The request body is not valid JSON: $reason' },
  RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    message: 'Content-Type must be application/json (got $content_type)',
  },
  RELAY_E_REQUEST_BODY_TOO_LARGE: { status: 413, message: 'The request body exceeds $limit_bytes bytes' },
  RELAY_E_REQUEST_INVALID_FIELD: { status: 400, message: 'Invalid field `$field`: $reason' },
  RELAY_E_REQUEST_UNKNOWN_ROUTE: { status: 404, message: 'No route $method $path' },
  RELAY_E_REQUEST_MALFORMED_HTTP: { status: 400, message: 'The request is not valid HTTP: $reason' },
  RELAY_E_REQUEST_HEADERS_TOO_LARGE: { status: 431, message: 'The request headers exceed the server limit' },

  // Caller authentication
  RELAY_E_AUTH_MISSING_TOKEN: {
    status: 401,
    message: 'Missing bearer token (Authorization: Bearer <token>)',
  },
  RELAY_E_AUTH_INVALID_TOKEN: { status: 401, message: 'The bearer token is not valid' },
  RELAY_E_AUTH_FORBIDDEN_ORIGIN: {
    status: 403,
    message: 'Cross-origin request refused (from $origin): relay answers browsers on its own origin only',
  },
  RELAY_E_AUTH_FORBIDDEN_HOST: {
    status: 403,
    message: 'Host $host is not a loopback name; refused against DNS rebinding (see RELAY_ALLOWED_HOSTS)',
  },

  // User transactions at enqueue
  RELAY_E_TX_BAD_ENCODING: {
    status: 400,
    message: 'Transaction #$index is not valid $encoding',
  },
  RELAY_E_TX_UNDECODABLE: {
    status: 400,
    message: 'Transaction #$index does not decode as a Solana transaction: $reason',
  },
  RELAY_E_TX_UNSIGNED: { status: 400, message: 'Transaction #$index is missing a signature' },
  RELAY_E_TX_BAD_SIGNATURE: {
    status: 400,
    message: 'Transaction #$index has a signature that does not verify',
  },
  RELAY_E_TX_TOO_MANY_TRANSACTIONS: {
    status: 400,
    message: 'A request carries 1 to 4 transactions (got $count)',
  },
  RELAY_E_TX_DUPLICATE_TRANSACTION: {
    status: 400,
    message: 'Transaction #$index appears more than once in the request',
  },
  RELAY_E_TX_SIGNATURE_CONFLICT: {
    status: 409,
    message: 'Signature $signature already belongs to $tx_id with different transactions',
  },
  RELAY_E_TX_BLOCKHASH_EXPIRED: {
    status: 422,
    message: 'Transaction #$index uses a blockhash that is no longer valid',
  },
  RELAY_E_TX_NOT_FOUND: { status: 404, message: 'Unknown transaction $tx_id' },
  RELAY_E_TX_WRONG_STATE: { status: 409, message: 'Transaction $tx_id is $state; this needs $expected' },
  RELAY_E_TX_OWNED_ELSEWHERE: {
    status: 409,
    message: 'Transaction $tx_id is run by host $owner_host of this fleet; send this request to that host',
  },
  RELAY_E_TX_TIP_NOT_RAISABLE: {
    status: 422,
    message: 'The transaction carries its own tip ("tip":"included"); tip_lamports must be 0 (got $actual)',
  },
  RELAY_E_TX_ILLEGAL_TRANSITION: { status: 500, message: 'Illegal state move $from -> $to' },

  // Bundles
  RELAY_E_BUNDLE_NOT_FOUND: { status: 404, message: 'Unknown bundle $bundle_id' },

  // Attempts (journal and `last_error` only; the status only matters if one ever reaches HTTP)
  RELAY_E_ATTEMPT_LOST: {
    status: 502,
    message: 'Bundle $bundle_id did not land ($outcome): $reason',
  },

  // Policy enforcement: one code per key, each with details.key
  RELAY_E_POLICY_MAX_TIP_EXCEEDED: { status: 422, message: 'Tip $actual exceeds max-tip $limit' },
  RELAY_E_POLICY_MIN_TIP_NOT_MET: { status: 422, message: 'Tip $actual is below min-tip $limit' },
  RELAY_E_POLICY_CALLER_MAX_TIP_EXCEEDED: {
    status: 422,
    message: "Tip $actual exceeds the caller's max_tip $limit",
  },
  RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP: {
    status: 422,
    message: 'max_tip $actual is below min-tip $limit',
  },
  RELAY_E_POLICY_ESCALATION_STEP_EXCEEDED: {
    status: 422,
    message: 'Tip $actual rises above the previous tip by more than escalation-step (limit $limit)',
  },
  RELAY_E_POLICY_MAX_RETRIES_EXHAUSTED: {
    status: 422,
    message: 'Retry $actual exceeds max-retries $limit',
  },
  RELAY_E_POLICY_EXPIRY_SLOTS_EXCEEDED: {
    status: 422,
    message: 'Slot $actual is past the transaction expiry slot $limit (expiry-slots)',
  },
  RELAY_E_POLICY_SPEND_LIMIT_EXCEEDED: {
    status: 422,
    message: 'Reserving $actual lamports would pass spend-limit $limit for the rolling hour',
  },
  RELAY_E_POLICY_INVALID_FILE: { status: 422, message: 'The policy file is invalid: $reason' },
  RELAY_E_POLICY_INVALID_VALUE: { status: 400, message: 'Invalid value for policy key $key: $reason' },
  RELAY_E_POLICY_UNKNOWN_KEY: { status: 400, message: 'Unknown policy key $key' },

  // Admission
  RELAY_E_QUEUE_FULL: {
    status: 429,
    message: 'The queue holds $limit non-terminal transactions (max-queue)',
  },
  RELAY_E_RATE_LIMITED: {
    status: 429,
    message: 'More than $limit enqueues in the last 60 s (rate-limit)',
  },
  RELAY_E_CAPACITY_EXCEEDED: {
    status: 429,
    message:
      'relay cannot send this transaction before it expires: $ahead ahead at $send_rate_per_s bundles/s (about $expected_wait_s s) against $deadline_s s left',
  },

  // Readiness and decision layer
  RELAY_E_NOT_READY: { status: 503, message: 'relay is not ready: $reason' },
  RELAY_E_TIPPER_UNDERFUNDED: { status: 503, message: 'No tipper can pay this tip now: $reason' },
  RELAY_E_AGENT_NOT_CONNECTED: { status: 404, message: 'No decision agent is connected' },
  RELAY_E_MODE_INVALID: {
    status: 400,
    message: 'decision_mode must be "cortex" or "reflex" (got $value)',
  },

  // Upstreams
  RELAY_E_UPSTREAM_UNREACHABLE: { status: 502, message: 'Upstream $upstream is unreachable: $reason' },
  RELAY_E_UPSTREAM_INVALID_RESPONSE: {
    status: 502,
    message: 'Upstream $upstream sent an invalid response: $reason',
  },
  RELAY_E_TIP_INVALID_AMOUNT: { status: 400, message: 'Not a tip amount: $value' },

  // Configuration (start-up; the status only matters if one ever reaches HTTP)
  RELAY_E_CONFIG_MISSING_ENV: { status: 500, message: 'Environment variable $name is required' },
  RELAY_E_CONFIG_INVALID_ENV: { status: 500, message: 'Environment variable $name is invalid: $reason' },
  RELAY_E_CONFIG_UNREADABLE_KEYPAIR: { status: 500, message: 'Cannot read the keypair at $path: $reason' },
  RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP: {
    status: 500,
    message: 'The bypass tip $tip is above max-tip $max_tip',
  },
  RELAY_E_CONFIG_DATA_DIR_IN_USE: {
    status: 500,
    message:
      'The data directory $data_dir is in use by another relay sidecar (pid $pid); stop it or use another RELAY_DATA_DIR',
  },

  // PostgreSQL store (start-up, `relay db`); the URL in each is redacted
  RELAY_E_DB_INVALID_URL: { status: 500, message: 'The database URL $url is invalid: $reason' },
  RELAY_E_DB_UNREACHABLE: { status: 503, message: 'Cannot reach PostgreSQL at $url: $reason' },
  RELAY_E_DB_AUTH_FAILED: { status: 500, message: 'PostgreSQL at $url refused user $user: $reason' },
  RELAY_E_DB_NOT_FOUND: { status: 500, message: 'The database $database does not exist (at $url)' },
  RELAY_E_DB_SCHEMA_BEHIND: {
    status: 500,
    message:
      'The database schema is at version $current; this relay needs version $latest (run `relay db migrate`)',
  },
  RELAY_E_DB_SCHEMA_AHEAD: {
    status: 500,
    message:
      'The database schema is at version $current, newer than the $latest this relay knows (upgrade relay, or use another database)',
  },
  RELAY_E_DB_MIGRATION_FAILED: {
    status: 500,
    message: 'Migration $version ($name) failed and was rolled back: $reason',
  },
  RELAY_E_DB_COMMIT_UNKNOWN: {
    status: 503,
    message:
      'The database connection was lost while committing $operation of $tx_id; whether it committed is unknown (re-read it): $reason',
  },
  RELAY_E_DB_UNAVAILABLE: {
    status: 503,
    message: 'PostgreSQL at $url is unavailable; nothing was written (retry in $retry_after_s s): $reason',
  },
  RELAY_E_DB_IN_USE: {
    status: 500,
    message:
      'Another relay sidecar writes to the database at $url ($holder); run one sidecar per database, or stop that one first',
  },
  RELAY_E_HOST_ID_IN_USE: {
    status: 500,
    message:
      'Another live relay sidecar runs as host $host_id on the database at $url ($holder); give each sidecar its own RELAY_HOST_ID, or stop that one first',
  },

  // A bug
  RELAY_E_INTERNAL_ERROR: { status: 500, message: 'Internal error: $reason' },
} as const satisfies { [C in keyof RelayErrorContext]: { status: number; message: string } };

/** A relay error code. */
export type RelayErrorCode = keyof typeof RELAY_ERRORS;

/** Every relay error code, in table order. */
export const RELAY_ERROR_CODES = Object.keys(RELAY_ERRORS) as RelayErrorCode[];

/** The pattern every code matches. */
export const RELAY_ERROR_CODE_PATTERN = /^RELAY_E_[A-Z0-9]+(?:_[A-Z0-9]+)+$/;

/**
 * Details as carried on the wire and in journals: any JSON object. What relay itself builds is typed by code
 * ({@link RelayErrorContext}); what it reads back (an HTTP body, an old journal record) is this.
 */
export type RelayErrorDetails = Readonly<Record<string, unknown>>;

/** The details of an error with code `TCode`: its typed context, still readable by any key. */
export type RelayErrorDetailsOf<TCode extends RelayErrorCode> = Readonly<RelayErrorContext[TCode]> &
  RelayErrorDetails;

/** Options of a {@link RelayError}: its cause, and a message that replaces the template's. */
export interface RelayErrorOptions {
  cause?: unknown;
  message?: string;
}

/**
 * The arguments after the code: the code's details (optional only for a code without details), then options.
 * Distributes over a union of codes, so `new RelayError(cond ? A : B, details)` takes the details of A or B.
 */
export type RelayErrorArgs<TCode extends RelayErrorCode> = TCode extends RelayErrorCode
  ? Record<never, never> extends RelayErrorContext[TCode]
    ? [details?: RelayErrorContext[TCode], options?: RelayErrorOptions]
    : [details: RelayErrorContext[TCode], options?: RelayErrorOptions]
  : never;

type IdentifierChar =
  | 'a'
  | 'b'
  | 'c'
  | 'd'
  | 'e'
  | 'f'
  | 'g'
  | 'h'
  | 'i'
  | 'j'
  | 'k'
  | 'l'
  | 'm'
  | 'n'
  | 'o'
  | 'p'
  | 'q'
  | 'r'
  | 's'
  | 't'
  | 'u'
  | 'v'
  | 'w'
  | 'x'
  | 'y'
  | 'z'
  | Uppercase<'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g' | 'h' | 'i' | 'j' | 'k' | 'l' | 'm'>
  | Uppercase<'n' | 'o' | 'p' | 'q' | 'r' | 's' | 't' | 'u' | 'v' | 'w' | 'x' | 'y' | 'z'>
  | '0'
  | '1'
  | '2'
  | '3'
  | '4'
  | '5'
  | '6'
  | '7'
  | '8'
  | '9'
  | '_';

type LeadingIdentifier<S extends string, Taken extends string = ''> = S extends `${infer C}${infer Rest}`
  ? C extends IdentifierChar
    ? LeadingIdentifier<Rest, `${Taken}${C}`>
    : Taken
  : Taken;

/** The `$placeholder` names of a message template, as a union of string literals. */
export type MessagePlaceholders<S extends string> = S extends `${string}$${infer Rest}`
  ? Exclude<LeadingIdentifier<Rest>, ''> | MessagePlaceholders<Rest>
  : never;

type RequiredKeys<T> = { [K in keyof T]-?: Record<never, never> extends Pick<T, K> ? never : K }[keyof T];

/**
 * Per code, the placeholders of its message that its details do not require: `never` for every code, or a message
 * could ship with a `$placeholder` unfilled. `test/errors.test.ts` asserts it is `never`.
 */
export type UnfilledPlaceholders = {
  [C in RelayErrorCode]: Exclude<
    MessagePlaceholders<(typeof RELAY_ERRORS)[C]['message']>,
    RequiredKeys<RelayErrorContext[C]>
  > extends infer Missing
    ? [Missing] extends [never]
      ? never
      : { code: C; missing: Missing }
    : never;
}[RelayErrorCode];

const ERROR_NAME = 'RelayError';

/** The HTTP status for a code. */
export function httpStatusOf(code: RelayErrorCode): number {
  return RELAY_ERRORS[code].status;
}

/**
 * Fills `$name` placeholders from `details` (typed by code). Details read back from the wire are not checked, so
 * an unknown placeholder stays visible rather than vanishes.
 */
export function formatRelayErrorMessage<TCode extends RelayErrorCode>(
  code: TCode,
  ...[details]: RelayErrorArgs<TCode>
): string {
  return fillTemplate(RELAY_ERRORS[code].message, (details ?? {}) as RelayErrorDetails);
}

function fillTemplate(template: string, details: RelayErrorDetails): string {
  return template.replace(/\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name: string) => {
    if (!(name in details)) return whole;
    const value = details[name];
    if (typeof value === 'string') return value;
    try {
      return String(JSON.stringify(value));
    } catch {
      return previewValue(value); // a cycle or a nesting too deep to serialise: never let a message throw
    }
  });
}

/**
 * A caller's value made safe to echo in an error's details: a string cut to `maxLength`, anything else as JSON
 * text cut to `maxLength`. Never throws (a value nested too deeply to serialise becomes `[array]` / `[object]`),
 * so an error about a hostile value cannot itself fail, and an answer never carries a caller's whole payload back.
 */
export function previewValue(value: unknown, maxLength = 100): string {
  let text: string;
  if (typeof value === 'string') {
    text = value;
  } else {
    try {
      text = String(JSON.stringify(value));
    } catch {
      text = Array.isArray(value)
        ? '[array]'
        : typeof value === 'object' && value !== null
          ? '[object]'
          : typeof value;
    }
  }
  return text.length > maxLength ? `${text.slice(0, maxLength)}…` : text;
}

/**
 * relay's error. `code` is the stable identity; `message` is for humans and may change. The details must be the
 * code's ({@link RelayErrorContext}), checked at compile time.
 *
 * @example
 * throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: 'tx_01J…' });
 */
export class RelayError<TCode extends RelayErrorCode = RelayErrorCode> extends Error {
  override readonly name = ERROR_NAME;
  readonly code: TCode;
  readonly status: number;
  readonly details: RelayErrorDetailsOf<TCode>;

  constructor(code: TCode, ...[details, options = {}]: RelayErrorArgs<TCode>) {
    const given = (details ?? {}) as RelayErrorDetails;
    super(options.message ?? fillTemplate(RELAY_ERRORS[code].message, given), { cause: options.cause });
    this.code = code;
    this.status = RELAY_ERRORS[code].status;
    this.details = Object.freeze({ ...given }) as RelayErrorDetailsOf<TCode>;
  }

  /** The HTTP error body `{"error":{code,message,details}}`. */
  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message, details: { ...this.details } } };
  }

  toJSON(): ErrorBody['error'] {
    return this.toBody().error;
  }
}

/**
 * The JSON form of an error (`{code, message, details}`, what `RelayError.toJSON()` gives) without building an
 * Error: for records that store one, such as a transaction's `last_error` in the journal.
 *
 * @example
 * const last_error = relayErrorJson('RELAY_E_ATTEMPT_LOST', { outcome: 'dropped', bundle_id, reason: 'window passed' });
 */
export function relayErrorJson<TCode extends RelayErrorCode>(
  code: TCode,
  ...[details, options = {}]: RelayErrorArgs<TCode>
): ErrorBody['error'] {
  const given = (details ?? {}) as RelayErrorDetails;
  return {
    code,
    message: options.message ?? fillTemplate(RELAY_ERRORS[code].message, given),
    details: { ...given },
  };
}

/** The JSON error body of every non-2xx API answer. */
export interface ErrorBody {
  error: { code: RelayErrorCode; message: string; details: Record<string, unknown> };
}

/** True for a known relay code. */
export function isRelayErrorCode(value: unknown): value is RelayErrorCode {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(RELAY_ERRORS, value);
}

/**
 * Type guard by `name` and code, not `instanceof`, so it holds across duplicated package copies and
 * for errors rebuilt from an HTTP body.
 */
export function isRelayError<TCode extends RelayErrorCode>(e: unknown, code?: TCode): e is RelayError<TCode> {
  if (typeof e !== 'object' || e === null) return false;
  const candidate = e as { name?: unknown; code?: unknown };
  if (candidate.name !== ERROR_NAME || !isRelayErrorCode(candidate.code)) return false;
  return code === undefined || candidate.code === code;
}

/**
 * Rebuilds a RelayError from an API error body (the client's side of `toBody()`). Unknown codes or
 * shapes become `RELAY_E_UPSTREAM_INVALID_RESPONSE` so callers always get a RelayError. The details are taken
 * as they come: an answer (or a record) from another version of relay may carry other keys than this one's
 * {@link RelayErrorContext}.
 */
export function relayErrorFromBody(body: unknown, httpStatus?: number): RelayError {
  const error = (body as { error?: unknown } | null)?.error as
    { code?: unknown; message?: unknown; details?: unknown } | undefined;
  if (error && isRelayErrorCode(error.code)) {
    const details =
      typeof error.details === 'object' && error.details !== null ? (error.details as RelayErrorDetails) : {};
    const message = typeof error.message === 'string' ? error.message : undefined;
    // Unchecked on purpose (see above): the one place details are not typed by their code.
    return new RelayError(error.code, details as never, message === undefined ? {} : { message });
  }
  return new RelayError('RELAY_E_UPSTREAM_INVALID_RESPONSE', {
    upstream: 'relay',
    reason: `unrecognised error body${httpStatus === undefined ? '' : ` (HTTP ${httpStatus})`}`,
  });
}
