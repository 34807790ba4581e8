import type pg from 'pg';

/**
 * Who holds an advisory lock, in words for a refusal: the PostgreSQL session from pg_locks and pg_stat_activity (the
 * role may see only its own sessions' details). `match` narrows pg_locks (alias `l`) to the lock, with `values` as
 * its parameters.
 */
export async function advisoryLockHolder(
  client: pg.Client,
  match: string,
  values: unknown[],
): Promise<string> {
  const { rows } = await client.query<{
    pid: number;
    client_addr: string | null;
    application_name: string | null;
    backend_start: Date | null;
  }>(
    `SELECT l.pid, a.client_addr::text AS client_addr, a.application_name, a.backend_start
     FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND ${match}`,
    values,
  );
  const r = rows[0];
  if (!r) return 'a session that has just ended; start again';
  return `PostgreSQL session pid ${r.pid}${r.client_addr ? ` from ${r.client_addr}` : ''}, application ${r.application_name ?? 'unknown'}${r.backend_start ? `, since ${r.backend_start.toISOString()}` : ''}`;
}
