/** Small text helpers for the agent's log lines (one event per line, plain text). */

/** A bundle id cut to its first 12 characters: enough to find it in the lifecycle log. */
export function shortBundleId(bundleId: string): string {
  return bundleId.slice(0, 12);
}

/** Text folded onto one line, so a model's rationale or an error message cannot break the line format. */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** The message of anything thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
