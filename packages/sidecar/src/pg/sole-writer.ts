import { RelayError } from '@solrelay/core';
import pg from 'pg';
import { lockConnectionConfig } from './connect';
import { advisoryLockHolder } from './lock-holder';
import type { DatabaseUrl } from './url';

/**
 * The advisory lock that makes one sidecar the only writer of its database (`PgTxStore`'s `sole` mode, one host per
 * database until the fleet; DESIGN §10). A session-level advisory lock (PostgreSQL docs §13.3.5) held on a
 * connection of its own for the store's life: the server releases it when that session ends, so a process that dies
 * frees it at once (its socket closes), while a process that is only paused keeps it and a second sidecar is refused
 * rather than writing beside a zombie.
 */
const SOLE_WRITER_KEY = '8243113858876796780'; // 0x72656c6179736f6c, "relaysol"

/** How long a start waits for the lock (a killed predecessor's session takes a moment to end on the server). */
export const SOLE_WRITER_WAIT_MS = 5_000;

export class SoleWriterLock {
  private lost = false;

  private constructor(
    private readonly client: pg.Client,
    private readonly onLost: () => void,
  ) {
    const gone = () => {
      if (this.lost) return;
      this.lost = true;
      this.onLost();
    };
    client.on('error', gone);
    client.on('end', gone);
  }

  /** Whether the lock is still held (its connection alive). */
  get held(): boolean {
    return !this.lost;
  }

  /**
   * Take the lock on a new connection, waiting up to `waitMs` for a predecessor's session to end; then wait for any
   * transaction a dead predecessor left committing (a backend of relay's still holding a transaction id: its COMMIT
   * may be in its WAL flush or a synchronous standby's wait, invisible until it ends), so what the store loads next is
   * what that commit left. Refuses with `RELAY_E_DB_IN_USE`, naming the holder, when another sidecar holds the lock.
   *
   * `shared` (a host of a fleet, `RELAY_FLEET`): the same key taken shared (`pg_try_advisory_lock_shared`), which every
   * fleet host holds at once and a one-host sidecar's exclusive hold excludes, both ways: a sidecar started without
   * `RELAY_FLEET` on a fleet's database, or with it on a one-host sidecar's, is refused rather than adopting work
   * live hosts own. A fleet host waits for no predecessor's commit (its fence and the host-id lock order its writes).
   */
  static async acquire(
    config: pg.ClientConfig,
    target: DatabaseUrl,
    onLost: () => void,
    waitMs = SOLE_WRITER_WAIT_MS,
    shared = false,
  ): Promise<SoleWriterLock> {
    const client = new pg.Client(lockConnectionConfig(config, 'lock'));
    client.on('error', () => undefined);
    await client.connect();
    try {
      const deadline = performance.now() + waitMs;
      for (;;) {
        const { rows } = await client.query<{ got: boolean }>(
          shared
            ? 'SELECT pg_try_advisory_lock_shared($1::bigint) AS got'
            : 'SELECT pg_try_advisory_lock($1::bigint) AS got',
          [SOLE_WRITER_KEY],
        );
        if (rows[0]?.got) break;
        if (performance.now() > deadline) {
          const holder = await holderOf(client);
          throw new RelayError('RELAY_E_DB_IN_USE', {
            url: target.redacted,
            holder: shared
              ? `a sidecar that is not one of a fleet (${holder}): start every sidecar on this database with RELAY_FLEET=1`
              : holder,
          });
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      for (; !shared;) {
        const { rows } = await client.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL
             AND application_name = $1`,
          [config.application_name ?? 'relay'],
        );
        if (rows.length === 0) break;
        if (performance.now() > deadline) {
          throw new RelayError('RELAY_E_DB_IN_USE', {
            url: target.redacted,
            holder: `a transaction of a previous relay still running (PostgreSQL session pid ${rows.map((r) => r.pid).join(', ')})`,
          });
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return new SoleWriterLock(client, onLost);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
  }

  async release(): Promise<void> {
    this.lost = true;
    await this.client.end().catch(() => undefined);
  }
}

/** Who holds the lock (its single-bigint key shows as `classid` and `objid`, high and low halves). */
function holderOf(client: pg.Client): Promise<string> {
  return advisoryLockHolder(client, '((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint', [
    SOLE_WRITER_KEY,
  ]);
}
