import type { LandingStat, StatusResponse } from '@solrelay/client';
import { keyValueTable, lamports, yesNo, type CliContext, type CommandResult } from '../../output';
import { withSidecar } from '../../sidecar-api';

/** `relay status`: the spec's summary of a running sidecar, boxed; `--json` prints `GET /status` as is. */
export async function status(ctx: CliContext): Promise<CommandResult> {
  const data = await withSidecar(ctx, (client) => client.status());
  return { data, text: renderStatus(data, ctx.color) };
}

export function renderStatus(s: StatusResponse, color: boolean): string {
  const rows: Array<[string, string]> = [
    ['slot', String(s.slot)],
    ['leader', s.leader ?? 'unknown'],
    ['bundle-engine leader', yesNo(s.bundle_engine_leader)],
    ['tip p50 (lamports)', lamports(s.tip.p50)],
    ['tip p75 (lamports)', lamports(s.tip.p75)],
    ['stale', yesNo(s.stale)],
    ['decision mode', s.bypass ? `${s.decision_mode} (bypass on)` : s.decision_mode],
    ['queue', String(s.queue)],
    // Older sidecars do not report capacity.
    ...(s.capacity
      ? ([
          [
            'send capacity',
            `${s.capacity.send_rate_per_s} bundles/s` +
              (s.capacity.landed_share === undefined
                ? ''
                : `, ${Math.round(s.capacity.landed_share * 100)} % landing`) +
              `; ${s.capacity.waiting} waiting, about ${s.capacity.expected_wait_s} s; ${s.capacity.refused_total} refused`,
          ],
        ] as Array<[string, string]>)
      : []),
    ['agent', s.agent.connected ? `${s.agent.model ?? '?'} (${s.agent.provider ?? '?'})` : 'not connected'],
  ];
  // Older sidecars do not report spend.
  if (s.spend) {
    const { window_lamports: spent, limit_lamports: limit } = s.spend;
    rows.push([
      'spend, rolling hour (lamports)',
      limit > 0
        ? `${lamports(spent)} of ${lamports(limit)}${spent >= limit ? ' (limit reached)' : ''}`
        : `${lamports(spent)} (no limit)`,
    ]);
  }
  // Every tipper of the pool (older sidecars report one, as `tipper`).
  const tippers = s.tippers ?? [{ ...s.tipper, reserved_lamports: null, in_flight: null, held_reason: null }];
  for (const t of tippers) {
    const inFlight =
      t.reserved_lamports === null
        ? ''
        : ` (${lamports(t.reserved_lamports)} reserved, ${t.in_flight} in flight)`;
    const held = t.held_reason ? `; held: ${t.held_reason}` : '';
    rows.push([`tipper ${t.pubkey}`, `${lamports(t.balance_lamports)} lamports${inFlight}${held}`]);
  }
  if (s.paused_reason) rows.push(['paused', s.paused_reason]);
  // Older sidecars do not report regions.
  for (const r of s.block_engine_regions ?? []) {
    const cooling = r.cooling_ms > 0 ? `; cooling ${(r.cooling_ms / 1000).toFixed(1)} s` : '';
    const landing = s.landing?.by_region.find((l) => l.region === r.region);
    rows.push([
      `engine ${r.region}`,
      `${r.accepted} taken, ${r.rejected} refused, ${r.transport_errors} transport errors${cooling}` +
        (landing && landing.submitted > 0 ? `; ${landed(landing)}` : ''),
    ]);
  }
  // Older sidecars do not report landing.
  for (const c of s.landing?.by_contention ?? []) rows.push([`${c.contention} bundles`, landed(c)]);
  // Older sidecars do not report webhooks.
  for (const w of s.webhooks ?? []) {
    const backlog =
      w.pending > 0
        ? `${w.pending} owed, oldest ${Math.round((w.oldest_pending_ms ?? 0) / 1000)} s`
        : 'none owed';
    const failing =
      w.consecutive_failures > 0 ? `; failing (${w.consecutive_failures}× ${w.last_error ?? ''})` : '';
    rows.push([`webhook ${w.url}`, `${w.delivered} delivered, ${backlog}${failing}`]);
  }
  // PostgreSQL: this host's session and the database's (null on the journal; absent from older sidecars).
  if (s.fleet) {
    const f = s.fleet;
    rows.push([
      'host',
      `${f.host_id}, epoch ${f.epoch}${f.live ? '' : ' (session lapsed: registering again)'}; lease ${f.lease_ms} ms`,
    ]);
    if (f.hosts === null) rows.push(['fleet', 'the database could not be read']);
    for (const h of f.hosts ?? []) {
      const state = h.ended_at
        ? `ended ${h.ended_at}`
        : h.live
          ? `live, heartbeat ${(h.heartbeat_age_ms / 1000).toFixed(1)} s ago`
          : `lease lapsed ${(-h.lease_remaining_ms / 1000).toFixed(1)} s ago`;
      rows.push([`session ${h.host_id} #${h.epoch}`, `${state}; owns ${h.owned} live`]);
    }
  }
  return keyValueTable(rows, color);
}

/** What one region's or contention class's bundles came to: landed of settled, and the tip per landed bundle. */
function landed(l: LandingStat): string {
  if (l.landed_share === null) return `${l.submitted} in flight`;
  const cost =
    l.lamports_per_landed === null ? '' : `, ${lamports(l.lamports_per_landed)} lamports per landed`;
  return `${l.landed} landed of ${l.landed + l.lost} (${Math.round(l.landed_share * 100)} %)${cost}`;
}
