import { RelayClient, isRelayError } from '@solrelay/client';
import { apiBaseUrl, apiToken } from './env';
import { EXIT_CODES, ExitError } from './errors';
import type { CliContext } from './output';

/**
 * Runs one request against the running sidecar and turns its failures into exit codes: unreachable is 3 with the
 * address tried and a hint; an API error is 1 with the server's code and message.
 */
export async function withSidecar<T>(
  ctx: CliContext,
  request: (client: RelayClient) => Promise<T>,
): Promise<T> {
  const baseUrl = apiBaseUrl(ctx.env);
  const token = apiToken(ctx.env);
  const client = new RelayClient({ baseUrl, ...(token ? { token } : {}) });
  try {
    return await request(client);
  } catch (error) {
    throw sidecarExitError(error, baseUrl);
  } finally {
    client.close();
  }
}

export function sidecarExitError(error: unknown, baseUrl: string): unknown {
  if (!isRelayError(error)) return error;
  if (error.code === 'RELAY_E_UPSTREAM_UNREACHABLE') {
    return new ExitError(
      EXIT_CODES.unreachable,
      `cannot reach the sidecar at ${baseUrl} (${networkReason(error)})`,
      {
        hint: 'Is it running? Start one with `relay up` or `relay start`, or point API_PORT (or RELAY_URL) at it.',
        cause: error,
      },
    );
  }
  const hint =
    error.code === 'RELAY_E_AUTH_MISSING_TOKEN' || error.code === 'RELAY_E_AUTH_INVALID_TOKEN'
      ? 'Set RELAY_API_TOKEN to the sidecar’s token.'
      : undefined;
  return new ExitError(EXIT_CODES.failure, `${error.code}: ${error.message}`, {
    ...(hint ? { hint } : {}),
    cause: error,
  });
}

/**
 * fetch says only "fetch failed"; the error under it says why: a system error's code (ECONNREFUSED, ENOTFOUND), or,
 * when fetch refuses before connecting (the "bad port" list: 1, 6000, ...), the innermost cause's message.
 */
function networkReason(error: { details: Record<string, unknown>; cause?: unknown }): string {
  let innermost: string | null = null;
  let cause: unknown = error.cause;
  for (let depth = 0; cause && depth < 5; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const message = (cause as { message?: unknown }).message;
    if (typeof message === 'string' && message !== '') innermost = message;
    cause = (cause as { cause?: unknown }).cause;
  }
  return innermost ?? String(error.details.reason);
}
