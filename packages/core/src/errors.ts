/**
 * relay's one error type. Every cause has a stable string code `RELAY_E_<AREA>_<REASON>`, one HTTP
 * status and one message template. Codes are never renamed, reused or removed: clients branch on
 * them, and they are written to journals and lifecycle logs.
 *
 * Message templates use `$name` placeholders filled from `details`.
 */

/** Every relay error code, with its HTTP status and message template. */
export const RELAY_ERRORS = {
  // Request shape (HTTP layer)
  RELAY_E_REQUEST_MALFORMED_JSON: { status: 400, message: 'The request body is not valid JSON: $reason' },
  RELAY_E_REQUEST_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    message: 'Content-Type must be application/json (got $contentType)',
  },
  RELAY_E_REQUEST_BODY_TOO_LARGE: { status: 413, message: 'The request body exceeds $limitBytes bytes' },
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
    message: 'Signature $signature already belongs to $txId with different transactions',
  },
  RELAY_E_TX_BLOCKHASH_EXPIRED: {
    status: 422,
    message: 'Transaction #$index uses a blockhash that is no longer valid',
  },
  RELAY_E_TX_NOT_FOUND: { status: 404, message: 'Unknown transaction $txId' },
  RELAY_E_TX_WRONG_STATE: { status: 409, message: 'Transaction $txId is $state; this needs $expected' },
  RELAY_E_TX_TIP_NOT_RAISABLE: {
    status: 422,
    message: 'Transaction $txId carries its own tip ("tip":"included"); tip_lamports must be 0',
  },
  RELAY_E_TX_ILLEGAL_TRANSITION: { status: 500, message: 'Illegal state move $from -> $to' },

  // Bundles
  RELAY_E_BUNDLE_NOT_FOUND: { status: 404, message: 'Unknown bundle $bundleId' },

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

  // Readiness and decision layer
  RELAY_E_NOT_READY: { status: 503, message: 'relay is not ready: $reason' },
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
    message: 'The bypass tip $tip is above max-tip $maxTip',
  },

  // A bug
  RELAY_E_INTERNAL_ERROR: { status: 500, message: 'Internal error: $reason' },
} as const satisfies Record<string, { status: number; message: string }>;

/** A relay error code. */
export type RelayErrorCode = keyof typeof RELAY_ERRORS;

/** Every relay error code, in table order. */
export const RELAY_ERROR_CODES = Object.keys(RELAY_ERRORS) as RelayErrorCode[];

/** The pattern every code matches. */
export const RELAY_ERROR_CODE_PATTERN = /^RELAY_E_[A-Z0-9]+(?:_[A-Z0-9]+)+$/;

/** Free-form context carried by an error; keys used in the message template should be present. */
export type RelayErrorDetails = Readonly<Record<string, unknown>>;

const ERROR_NAME = 'RelayError';

/** The HTTP status for a code. */
export function httpStatusOf(code: RelayErrorCode): number {
  return RELAY_ERRORS[code].status;
}

/** Fills `$name` placeholders from `details`; unknown placeholders stay visible rather than vanish. */
export function formatRelayErrorMessage(code: RelayErrorCode, details: RelayErrorDetails = {}): string {
  return RELAY_ERRORS[code].message.replace(/\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name: string) => {
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
 * relay's error. `code` is the stable identity; `message` is for humans and may change.
 *
 * @example
 * throw new RelayError('RELAY_E_TX_NOT_FOUND', { txId: 'tx_01J…' });
 */
export class RelayError<TCode extends RelayErrorCode = RelayErrorCode> extends Error {
  override readonly name = ERROR_NAME;
  readonly code: TCode;
  readonly status: number;
  readonly details: RelayErrorDetails;

  constructor(
    code: TCode,
    details: RelayErrorDetails = {},
    options: { cause?: unknown; message?: string } = {},
  ) {
    super(options.message ?? formatRelayErrorMessage(code, details), { cause: options.cause });
    this.code = code;
    this.status = RELAY_ERRORS[code].status;
    this.details = Object.freeze({ ...details });
  }

  /** The HTTP error body `{"error":{code,message,details}}`. */
  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message, details: { ...this.details } } };
  }

  toJSON(): ErrorBody['error'] {
    return this.toBody().error;
  }
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
 * shapes become `RELAY_E_UPSTREAM_INVALID_RESPONSE` so callers always get a RelayError.
 */
export function relayErrorFromBody(body: unknown, httpStatus?: number): RelayError {
  const error = (body as { error?: unknown } | null)?.error as
    { code?: unknown; message?: unknown; details?: unknown } | undefined;
  if (error && isRelayErrorCode(error.code)) {
    const details =
      typeof error.details === 'object' && error.details !== null
        ? (error.details as Record<string, unknown>)
        : {};
    const message = typeof error.message === 'string' ? error.message : undefined;
    return new RelayError(error.code, details, message === undefined ? {} : { message });
  }
  return new RelayError('RELAY_E_UPSTREAM_INVALID_RESPONSE', {
    upstream: 'relay',
    reason: `unrecognised error body${httpStatus === undefined ? '' : ` (HTTP ${httpStatus})`}`,
  });
}
