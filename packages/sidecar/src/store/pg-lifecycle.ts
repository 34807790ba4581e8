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

  async recent(n: number): Promise<LifecycleEntry[]> {
    const { rows } = await this.query<{ entry: LifecycleEntry }>(
      `WITH b AS (
         SELECT bundle_id, min(seq) AS first, max(seq) AS latest FROM lifecycle_entries
         GROUP BY bundle_id ORDER BY first DESC LIMIT $1
       )
       SELECT l.entry FROM b JOIN lifecycle_entries l ON l.seq = b.latest ORDER BY b.first`,
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
