import type { LifecycleEntry } from '@solrelay/core';
import type pg from 'pg';
import type { LifecycleReader } from '../lifecycle/log';

/** A plain query (one statement, no transaction), as the store runs it: its errors already coded. */
export type PgQuery = <R extends pg.QueryResultRow>(
  text: string,
  values?: unknown[],
) => Promise<pg.QueryResult<R>>;

/**
 * The fleet's lifecycle log on PostgreSQL (`lifecycle_entries`, written by each change with its events): what
 * `GET /lifecycle`, `GET /bundle/:id` and so `relay lifecycle` read there. `LIFECYCLE_PATH` stays this host's own
 * file (DESIGN §10). A bundle's entry is its latest row; "most recent" is by each bundle's first row (submission),
 * as the file's index orders them.
 */
export class PgLifecycleEntries implements LifecycleReader<LifecycleEntry> {
  /** `query`: the store's own, so a database that is away answers the API's coded 503, never a 500. */
  constructor(private readonly query: PgQuery) {}

  /**
   * The latest entry of each of the `n` bundles seen most recently (by their first row, oldest of them first). Walks
   * the log backwards from its newest row and stops at the `n`th bundle's first row (each row's "is it its bundle's
   * first?" one probe of `lifecycle_entries_bundle`), so a call costs about `n` × rows per bundle, not a scan of the
   * retained days.
   */
  async recent(n: number): Promise<LifecycleEntry[]> {
    const { rows } = await this.query<{ entry: LifecycleEntry }>(
      `WITH b AS (
         SELECT l.bundle_id, l.seq AS first FROM lifecycle_entries l
         WHERE NOT EXISTS (SELECT 1 FROM lifecycle_entries o WHERE o.bundle_id = l.bundle_id AND o.seq < l.seq)
         ORDER BY l.seq DESC LIMIT $1
       )
       SELECT x.entry FROM b CROSS JOIN LATERAL (
         SELECT entry FROM lifecycle_entries WHERE bundle_id = b.bundle_id ORDER BY seq DESC LIMIT 1
       ) x
       ORDER BY b.first`,
      [n],
    );
    return rows.map((r) => r.entry);
  }

  async find(bundleId: string): Promise<LifecycleEntry | undefined> {
    const { rows } = await this.query<{ entry: LifecycleEntry }>(
      `SELECT entry FROM lifecycle_entries WHERE bundle_id = $1 ORDER BY seq DESC LIMIT 1`,
      [bundleId],
    );
    return rows[0]?.entry;
  }
}
