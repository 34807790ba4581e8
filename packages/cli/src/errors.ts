/**
 * How a command ends when it does not succeed. Commands never call `process.exit`: they throw an
 * `ExitError` with the code to exit with, and the entry point (`bin.ts`) prints it and exits.
 */

/** The `relay` binary's exit codes. */
export const EXIT_CODES = {
  ok: 0,
  /** The command ran and failed (a policy contradiction, a bundle that did not finalize, an API error). */
  failure: 1,
  /** The command line itself is wrong (unknown command or flag, a bad value, a missing argument). */
  usage: 2,
  /** The sidecar could not be reached at all. */
  unreachable: 3,
} as const;

export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** An expected failure with a chosen exit code, a one-line message and an optional hint on what to do. */
export class ExitError extends Error {
  override readonly name = 'ExitError';
  readonly code: ExitCode;
  readonly hint: string | undefined;
  /** Extra lines printed under the message (every problem of a policy file, say). */
  readonly details: string[];

  constructor(
    code: ExitCode,
    message: string,
    options: { hint?: string; details?: string[]; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.hint = options.hint;
    this.details = options.details ?? [];
  }
}

/** A wrong command line: exit 2. */
export function usageError(message: string, hint = 'Run `relay --help` for usage.'): ExitError {
  return new ExitError(EXIT_CODES.usage, message, { hint });
}

/** Checks `name`, not `instanceof`, so it holds across duplicated package copies. */
export function isExitError(e: unknown): e is ExitError {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'ExitError';
}
