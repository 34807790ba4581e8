import type { TipResponse } from '@solrelay/client';
import { keyValueTable, lamports, yesNo, type CliContext, type CommandResult } from '../../output';
import { withSidecar } from '../../sidecar-api';

/** `relay tip`: the tip floor in lamports, boxed; `--json` prints `GET /tip` as is. */
export async function tip(ctx: CliContext): Promise<CommandResult> {
  const data = await withSidecar(ctx, (client) => client.tip());
  return { data, text: renderTip(data, ctx.color) };
}

export function renderTip(t: TipResponse, color: boolean): string {
  return keyValueTable(
    [
      ['p25 (lamports)', lamports(t.p25)],
      ['p50 (lamports)', lamports(t.p50)],
      ['p75 (lamports)', lamports(t.p75)],
      ['p95 (lamports)', lamports(t.p95)],
      ['p99 (lamports)', lamports(t.p99)],
      ['ema (lamports)', lamports(t.ema)],
      ['stale', yesNo(t.stale)],
    ],
    color,
  );
}
