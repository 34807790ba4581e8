import { waitUntil } from '@solrelay/testkit';
import type pg from 'pg';
import { type PgTxStore, type Adopted } from '../../src/store/pg-store';
import { usePgStoreTests } from '../helpers/migrated-postgres';
import { attempt, tx } from '../helpers/store-records';

// Several sidecars on one database (DESIGN §10): each store holds and writes only the work its host owns, another
// host's transaction is refused with a code naming its owner, and the takeover sweep moves the live work of a host
// whose session ended or lapsed to a live one, once, whatever the number of hosts sweeping at the same time.
const pgt = usePgStoreTests();
const { sql, lapse } = pgt;

function host(hostId: string, leaseMs = 60_000): Promise<PgTxStore> {
  return pgt.open({ sweepMs: 0, sole: false, notifyEvents: true, session: { hostId, leaseMs } });
}

async function owners(db: pg.Pool): Promise<Record<string, [string | null, boolean]>> {
  const { rows } = await db.query<{ tx_id: string; owner_host: string | null; inherited: boolean }>(
    'SELECT tx_id, owner_host, inherited FROM transactions ORDER BY tx_id',
  );
  return Object.fromEntries(rows.map((r) => [r.tx_id, [r.owner_host, r.inherited]]));
}

/** The database's clock says the host's lease passed: a pause or a partition, as every other host sees it. */

test('each host holds only its own work; another host answers dedupe and reads, and refuses writes naming the owner', async () => {
  const a = await host('host-a');
  const b = await host('host-b');
  await a.accept(tx('tx_a', 'sig-a'));
  await b.accept(tx('tx_b', 'sig-b'));

  expect((await a.live()).map((t) => t.tx_id)).toEqual(['tx_a']);
  expect((await b.live()).map((t) => t.tx_id)).toEqual(['tx_b']);
  // The fleet's dedupe: the same first signature sent to host B is host A's transaction, not a second one.
  const again = await b.accept(tx('tx_a_again', 'sig-a'));
  expect(again).toMatchObject({ created: false, tx: { tx_id: 'tx_a' } });
  expect((await b.live()).map((t) => t.tx_id)).toEqual(['tx_b']);
  expect((await b.get('tx_a'))?.tx_id).toBe('tx_a');
  expect((await b.byFirstSignature('sig-a'))?.tx_id).toBe('tx_a');
  expect((await b.counts()).active).toBe(2);
  // Waiting: the fleet's, and what this host sends (its own), which admission weighs against its own budget.
  expect(await b.counts()).toMatchObject({
    waiting: { high: 0, normal: 2, low: 0 },
    ownWaiting: { high: 0, normal: 1, low: 0 },
  });

  const fenced: string[] = [];
  b.onFenced = (reason) => fenced.push(reason);
  const refusal = { code: 'RELAY_E_TX_OWNED_ELSEWHERE', details: { tx_id: 'tx_a', owner_host: 'host-a' } };
  await expect(
    b.transition('tx_a', { state: 'pending' }, { set: { state: 'submitted' } }),
  ).rejects.toMatchObject(refusal);
  await expect(
    b.addAttempt('tx_a', attempt(1, 'b'.repeat(64)), { expect: { state: 'pending' } }),
  ).rejects.toMatchObject(refusal);
  expect(fenced).toEqual(['owned_elsewhere', 'owned_elsewhere']);
  // Nothing of host B's reached the row, and host B still holds none of it.
  const db = sql();
  expect(
    (
      await db.query(`SELECT state, version, (SELECT count(*)::int FROM attempts) AS attempts FROM transactions
      WHERE tx_id = 'tx_a'`)
    ).rows,
  ).toEqual([{ state: 'pending', version: '1', attempts: 0 }]);
  expect((await b.live()).map((t) => t.tx_id)).toEqual(['tx_b']);
});

test('the sweep leaves a live host alone and adopts the work of one whose lease lapsed, marked inherited, told once', async () => {
  const db = sql();
  const a = await host('host-a');
  const b = await host('host-b');
  await a.accept(tx('tx_live', 'sig-live'));
  await a.accept(tx('tx_done', 'sig-done'));
  await a.transition('tx_done', { state: 'pending' }, { set: { state: 'expired', stopped: true } });
  const told: Adopted[] = [];
  b.watchAdoptions((adopted) => told.push(adopted));

  expect(await b.sweep()).toBe(0);
  await lapse(db, 'host-a');
  expect(await b.sweep()).toBe(1);
  expect(await b.sweep()).toBe(0);

  // The live one moved; a terminal row is no one's work and stays where it ended.
  expect(await owners(db)).toEqual({ tx_done: ['host-a', false], tx_live: ['host-b', true] });
  expect(told).toHaveLength(1);
  expect(told[0]?.txs.map((t) => t.tx_id)).toEqual(['tx_live']);
  expect(told[0]?.from.get('tx_live')).toEqual({ hostId: 'host-a', epoch: a.hostSession?.epoch });
  expect((await b.live()).map((t) => t.tx_id)).toEqual(['tx_live']);
  // Every host's event stream tells it, from the same commit as the move.
  const { rows: told2 } = await db.query<{ name: string; host_id: string; payload: Record<string, unknown> }>(
    `SELECT name, host_id, payload FROM events WHERE name = 'tx_adopted'`,
  );
  expect(told2).toEqual([
    {
      name: 'tx_adopted',
      host_id: 'host-b',
      payload: {
        tx_id: 'tx_live',
        host_id: 'host-b',
        from_host_id: 'host-a',
        from_epoch: a.hostSession?.epoch,
        state: 'pending',
        priority: 'normal',
        enqueued_slot: expect.any(Number),
        expires_at_slot: expect.any(Number),
        max_tip: null,
        tip: 'auto',
        retries: 0,
        previous_attempt: null,
        ts: expect.any(Number),
      },
    },
  ]);
  expect((await b.transition('tx_live', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
});

test('a host whose work moved while it was paused is refused by the database, and learns who owns it now', async () => {
  const db = sql();
  const a = await host('host-a');
  const b = await host('host-b');
  await a.accept(tx('tx_a', 'sig-a'));
  // Host A's session ended as the database sees it (its lease passed during a pause) and host B swept; host A's own
  // heartbeat has not run yet, so its store still holds the record and still believes it owns it.
  await db.query(`UPDATE host_sessions SET ended_at = now() WHERE host_id = 'host-a'`);
  expect(await b.sweep()).toBe(1);
  expect(a.healthy).toBe(true);

  await expect(
    a.addAttempt('tx_a', attempt(1, 'a'.repeat(64)), { expect: { state: 'pending' } }),
  ).rejects.toMatchObject({ code: 'RELAY_E_TX_OWNED_ELSEWHERE', details: { owner_host: 'host-b' } });
  expect(
    (
      await db.query(`SELECT (SELECT count(*)::int FROM attempts) AS attempts,
      (SELECT count(*)::int FROM spend_reservations) AS reservations`)
    ).rows,
  ).toEqual([{ attempts: 0, reservations: 0 }]);
  // Host A no longer holds it: its tracker and send queue see nothing of it.
  expect(await a.live()).toEqual([]);
});

test('an adopted transaction records which attempts the earlier owner built; its own restart does not mark them', async () => {
  const db = sql();
  const a = await host('host-a');
  await a.accept(tx('tx_1', 'sig-1'));
  await a.addAttempt('tx_1', attempt(1, '1'.repeat(64)), { expect: { state: 'pending' } });
  await a.accept(tx('tx_2', 'sig-2'));
  await a.addAttempt('tx_2', attempt(1, '2'.repeat(64)), { expect: { state: 'pending' } });
  // tx_2's attempt lost its auction (host-a settled it): the adopter's decider reprices from it.
  await a.transition('tx_2', {}, { attempts: [{ n: 1, set: { stage: 'failed', outcome: 'fee_too_low' } }] });
  // host-a restarts: its own work, not inherited.
  await a.close();
  const a2 = await host('host-a');
  expect((await a2.get('tx_1'))?.inherited_attempts).toBeUndefined();
  const b = await host('host-b');
  await lapse(db, 'host-a');
  expect(await b.sweep()).toBe(2);
  expect((await b.get('tx_1'))?.inherited_attempts).toBe(1);
  expect((await b.live()).map((t) => t.inherited_attempts)).toEqual([1, 1]);
  const { rows: told } = await db.query<{ tx_id: string; previous: unknown }>(
    `SELECT tx_id, payload->'previous_attempt' AS previous FROM events WHERE name = 'tx_adopted' ORDER BY tx_id`,
  );
  expect(told).toEqual([
    { tx_id: 'tx_1', previous: null },
    { tx_id: 'tx_2', previous: { tip_lamports: 10_000, outcome: 'fee_too_low' } },
  ]);
  // An attempt host-b builds later is its own: the mark stays at what was inherited.
  await b.transition('tx_1', {}, { attempts: [{ n: 1, set: { stage: 'failed' } }] });
  await b.addAttempt('tx_1', attempt(2, '3'.repeat(64)), { expect: { state: 'pending' } });
  const { rows } = await db.query(`SELECT inherited_attempts FROM transactions WHERE tx_id = 'tx_1'`);
  expect(rows).toEqual([{ inherited_attempts: 1 }]);
});

test('a host back from a lapse keeps none of what another host adopted meanwhile, and takes back what no one did', async () => {
  const db = sql();
  const a = await host('host-a');
  const b = await host('host-b');
  await a.accept(tx('tx_taken', 'sig-taken'));
  await a.accept(tx('tx_kept', 'sig-kept'));
  await lapse(db, 'host-a');
  // Host B's sweep skips a row another transaction holds (SKIP LOCKED): tx_kept stays host-a's, and no one else's.
  const blocker = await db.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query(`SELECT 1 FROM transactions WHERE tx_id = 'tx_kept' FOR UPDATE`);
    expect(await b.sweep()).toBe(1);
    await blocker.query('COMMIT');
  } finally {
    blocker.release();
  }
  const session = a.hostSession;
  if (!session) throw new Error('no session');
  expect(await session.heartbeat()).toBe(false);
  await waitUntil(async () => a.healthy, 10_000, 'host A to register again');
  expect((await a.live()).map((t) => t.tx_id)).toEqual(['tx_kept']);
  expect([a.owns('tx_taken'), a.owns('tx_kept'), b.owns('tx_taken')]).toEqual([false, true, true]);
  await expect(
    a.transition('tx_taken', { state: 'pending' }, { set: { state: 'submitted' } }),
  ).rejects.toMatchObject({ code: 'RELAY_E_TX_OWNED_ELSEWHERE', details: { owner_host: 'host-b' } });
});

test('hosts sweeping at the same time: one takes a dead host’s work whole (one batch) and tells it once; none twice', async () => {
  const db = sql();
  const dead = await host('host-dead');
  const ids = Array.from({ length: 60 }, (_, i) => `tx_${String(i).padStart(2, '0')}`);
  for (const id of ids) await dead.accept(tx(id, `sig-${id}`));
  const sweepers = await Promise.all(['host-a', 'host-b', 'host-c'].map((id) => host(id)));
  const adopted = new Map<string, string[]>();
  for (const s of sweepers)
    s.watchAdoptions(({ txs }) =>
      adopted.set(s.hostSession?.hostId as string, [
        ...(adopted.get(s.hostSession?.hostId as string) ?? []),
        ...txs.map((t) => t.tx_id),
      ]),
    );
  await lapse(db, 'host-dead');

  const told: number[] = [];
  for (const s of sweepers) s.watchAdoptions(({ txs }) => told.push(txs.length));
  const counts = await Promise.all(sweepers.map((s) => s.sweep()));
  expect(counts.reduce((a, b) => a + b, 0)).toBe(ids.length);
  // The sweep lock: one host took all 60 in one batch (a pack's carrier and riders stay together), told once; the
  // others found it busy, or nothing left.
  expect([...counts].sort((x, y) => y - x)).toEqual([60, 0, 0]);
  expect(told).toEqual([60]);
  expect(adopted.size).toBe(1);
  const all = [...adopted.values()].flat().sort();
  expect(all).toEqual(ids);
  const rows = await owners(db);
  for (const [hostId, txIds] of adopted) for (const id of txIds) expect(rows[id]).toEqual([hostId, true]);
  // What each host holds is what it adopted, no more.
  for (const s of sweepers)
    expect((await s.live()).map((t) => t.tx_id).sort()).toEqual(
      (adopted.get(s.hostSession?.hostId as string) ?? []).sort(),
    );
});

test('in small batches, hosts sweeping at once may share a dead host’s work, but never adopt a transaction twice', async () => {
  const db = sql();
  const dead = await host('host-dead');
  const ids = Array.from({ length: 40 }, (_, i) => `tx_${String(i).padStart(2, '0')}`);
  for (const id of ids) await dead.accept(tx(id, `sig-${id}`));
  const sweepers = await Promise.all(['host-a', 'host-b', 'host-c'].map((id) => host(id)));
  const adopted: string[] = [];
  for (const s of sweepers) s.watchAdoptions(({ txs }) => adopted.push(...txs.map((t) => t.tx_id)));
  await lapse(db, 'host-dead');
  // Each sweeps until it finds the work gone (a sweep that found it busy tries again), in batches of 3.
  await Promise.all(
    sweepers.map(async (s) => {
      for (let i = 0; i < 40; i++) {
        await s.sweep(3);
        const { rows } = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM transactions WHERE owner_host = 'host-dead'`,
        );
        if (rows[0]?.n === 0) return;
      }
    }),
  );
  expect([...adopted].sort()).toEqual(ids);
});

test('a host that stops hands its work over at once; restarted under its id before anyone swept, it keeps it', async () => {
  const db = sql();
  const a = await host('host-a');
  const b = await host('host-b');
  await a.accept(tx('tx_1', 'sig-1'));
  await a.close(); // a clean stop ends the session: no lease to wait out
  expect(await b.sweep()).toBe(1);
  expect(await owners(db)).toEqual({ tx_1: ['host-b', true] });

  // Host B restarts and is back before any other host sweeps: its own work comes back under its new epoch.
  await b.accept(tx('tx_2', 'sig-2'));
  await b.close();
  const b2 = await host('host-b');
  expect((await b2.live()).map((t) => t.tx_id)).toEqual(['tx_1', 'tx_2']);
  const { rows } = await db.query<{ epoch: string }>(
    `SELECT DISTINCT owner_epoch AS epoch FROM transactions WHERE terminal_at IS NULL`,
  );
  expect(rows).toEqual([{ epoch: String(b2.hostSession?.epoch) }]);
  expect((await b2.transition('tx_2', { state: 'pending' }, { set: { state: 'submitted' } })).state).toBe(
    'submitted',
  );
});

test('once started, the sweep runs by itself every sweepMs', async () => {
  const db = sql();
  const a = await host('host-a');
  await a.accept(tx('tx_1', 'sig-1'));
  const b = await pgt.open({ sweepMs: 50, sole: false, session: { hostId: 'host-b', leaseMs: 60_000 } });
  const adopted = new Promise<Adopted>((resolve) => b.watchAdoptions(resolve));
  b.startSweeping();
  await lapse(db, 'host-a');
  expect((await adopted).txs.map((t) => t.tx_id)).toEqual(['tx_1']);
});

test('the tips other hosts’ attempts may still take are answered to each host (tipper reservations fleet-wide)', async () => {
  const [a, b] = await Promise.all([host('host-a'), host('host-b')]);
  await a.accept(tx('tx_a', 'sig-a'));
  await a.addAttempt('tx_a', attempt(1, 'a'.repeat(64), { tipper: 'shared-tipper' }), {
    expect: { state: 'pending' },
  });
  await b.accept(tx('tx_b', 'sig-b'));
  await b.addAttempt('tx_b', attempt(1, 'b'.repeat(64), { tipper: 'shared-tipper' }), {
    expect: { state: 'pending' },
  });

  expect((await b.otherHostsTips(0)).map((x) => [x.bundle_id, x.tipper, x.stage])).toEqual([
    ['a'.repeat(64), 'shared-tipper', 'journaled'],
  ]);
  expect((await a.otherHostsTips(0)).map((x) => x.bundle_id)).toEqual(['b'.repeat(64)]);
  // A failed attempt counts only while it is recent (its tip may still be live); an older one is left out.
  await a.transition('tx_a', {}, { attempts: [{ n: 1, set: { stage: 'failed' } }] });
  expect((await b.otherHostsTips(1000)).map((x) => x.stage)).toEqual(['failed']);
  expect(await b.otherHostsTips(5000)).toEqual([]);
});

describe('fleet-wide admission: checked where the row is inserted, one admission at a time across hosts', () => {
  const many = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) => tx(`${prefix}_${String(i).padStart(2, '0')}`, `sig-${prefix}-${i}`));

  async function race(limits: { maxQueue: number; rateLimit: number }) {
    const hosts = await Promise.all(['host-a', 'host-b', 'host-c'].map((id) => host(id)));
    const results = await Promise.allSettled(
      hosts.flatMap((h, i) => many(`h${i}`, 15).map((t) => h.accept(t, [], limits))),
    );
    const created = results.filter((r) => r.status === 'fulfilled' && r.value.created).length;
    const refusals = results.flatMap((r) =>
      r.status === 'rejected' ? [(r.reason as { code?: string }).code ?? String(r.reason)] : [],
    );
    return { hosts, created, refusals };
  }

  test('3 hosts racing at rate-limit admit exactly the limit; the rest are refused with RELAY_E_RATE_LIMITED', async () => {
    const { created, refusals } = await race({ maxQueue: 1000, rateLimit: 20 });
    expect(created).toBe(20);
    expect(refusals).toEqual(Array.from({ length: 25 }, () => 'RELAY_E_RATE_LIMITED'));
    const db = sql();
    expect((await db.query('SELECT count(*)::int AS n FROM transactions')).rows).toEqual([{ n: 20 }]);
    expect((await db.query('SELECT count(*)::int AS n FROM admissions')).rows).toEqual([{ n: 20 }]);
  });

  test('3 hosts racing at max-queue fill it exactly; a place freed by a terminal transaction admits one more', async () => {
    const { hosts, created, refusals } = await race({ maxQueue: 12, rateLimit: 1000 });
    expect(created).toBe(12);
    expect(refusals).toEqual(Array.from({ length: 33 }, () => 'RELAY_E_QUEUE_FULL'));
    const [a] = hosts;
    const live = (await a?.live()) ?? [];
    await a?.transition(
      live[0]?.tx_id as string,
      { state: 'pending' },
      { set: { state: 'expired', stopped: true } },
    );
    const more = await hosts[1]?.accept(tx('tx_more', 'sig-more'), [], { maxQueue: 12, rateLimit: 1000 });
    expect(more?.created).toBe(true);
    await expect(
      hosts[2]?.accept(tx('tx_over', 'sig-over'), [], { maxQueue: 12, rateLimit: 1000 }),
    ).rejects.toMatchObject({ code: 'RELAY_E_QUEUE_FULL', details: { limit: 12 } });
  });

  test('a rate-limit refusal says when the oldest admission leaves the window (Retry-After)', async () => {
    const a = await host('host-a');
    const limits = { maxQueue: 100, rateLimit: 2 };
    await a.accept(tx('tx_1', 'sig-1'), [], limits);
    await a.accept(tx('tx_2', 'sig-2'), [], limits);
    const refused = await a.accept(tx('tx_3', 'sig-3'), [], limits).catch((error: unknown) => error);
    // The oldest leaves the 60 s window in just under 60 s: asked to retry then, not in a second.
    expect(refused).toMatchObject({ code: 'RELAY_E_RATE_LIMITED', details: { limit: 2 } });
    const after = (refused as { details: { retry_after_s: number } }).details.retry_after_s;
    expect(after).toBeGreaterThan(50);
    expect(after).toBeLessThanOrEqual(60);
  });

  test('a database defaulting to REPEATABLE READ: relay still admits under READ COMMITTED; the limits refuse any other', async () => {
    const db = sql();
    const name = new URL(pgt.url).pathname.slice(1);
    await db.query(`ALTER DATABASE "${name}" SET default_transaction_isolation = 'repeatable read'`);
    const a = await host('host-a');
    expect((await a.accept(tx('tx_1', 'sig-1'), [], { maxQueue: 100, rateLimit: 100 })).created).toBe(true);
    // Without relay's session setting (a pooler that dropped it), the functions refuse rather than count blind.
    const other = sql();
    const client = await other.connect();
    try {
      await expect(client.query('SELECT relay_admit(100, 100)')).rejects.toMatchObject({ code: 'RLY05' });
      await expect(client.query('SELECT relay_spend_check(0, 100, 1)')).rejects.toMatchObject({
        code: 'RLY05',
      });
    } finally {
      client.release();
    }
  });

  test('the same first signature admitted by two hosts at once is one transaction and one admission', async () => {
    const [a, b] = await Promise.all([host('host-a'), host('host-b')]);
    const limits = { maxQueue: 100, rateLimit: 100 };
    const [one, two] = await Promise.all([
      a.accept(tx('tx_on_a', 'sig-same'), [], limits),
      b.accept(tx('tx_on_b', 'sig-same'), [], limits),
    ]);
    expect([one.created, two.created].sort()).toEqual([false, true]);
    expect(one.tx.tx_id).toBe(two.tx.tx_id);
    const db = sql();
    expect((await db.query('SELECT count(*)::int AS n FROM admissions')).rows).toEqual([{ n: 1 }]);
  });
});

test('a one-host sidecar and a fleet never write one database together: each is refused by the other', async () => {
  await host('host-a');
  const sole = await pgt
    .open({ session: { hostId: 'host-sole', leaseMs: 60_000 } })
    .catch((error: unknown) => error);
  expect(sole).toMatchObject({ code: 'RELAY_E_DB_IN_USE' });
  await pgt.closeStores();

  await pgt.open({ session: { hostId: 'host-sole', leaseMs: 60_000 } });
  const fleet = await host('host-b').catch((error: unknown) => error);
  expect(fleet).toMatchObject({
    code: 'RELAY_E_DB_IN_USE',
    details: { holder: expect.stringMatching(/not one of a fleet.*RELAY_FLEET=1/) },
  });
}, 30_000);

test('a session the database says lapsed inserts nothing, even before its own clock knows; it registers again and accepts', async () => {
  const db = sql();
  const a = await host('host-a');
  const fenced: string[] = [];
  a.onFenced = (reason) => fenced.push(reason);
  await lapse(db, 'host-a');
  // host-a's own lease check still passes (its heartbeat has not run): the database refuses the row itself.
  await expect(a.accept(tx('tx_late', 'sig-late'))).rejects.toMatchObject({
    code: 'RELAY_E_DB_UNAVAILABLE',
    details: { reason: expect.stringMatching(/host session host-a \(epoch \d+\) is not live/) },
  });
  expect(fenced).toEqual(['session_not_live']);
  expect((await db.query('SELECT count(*)::int AS n FROM transactions')).rows).toEqual([{ n: 0 }]);
  await waitUntil(async () => a.healthy, 10_000, 'host A to register again');
  expect((await a.accept(tx('tx_late', 'sig-late'))).created).toBe(true);
  expect((await db.query(`SELECT owner_epoch FROM transactions`)).rows).toEqual([
    { owner_epoch: String(a.hostSession?.epoch) },
  ]);
});

test('a sweep whose later batch fails still tells what its earlier batches adopted (it must be resumed)', async () => {
  const db = sql();
  const dead = await host('host-dead');
  await dead.accept(tx('tx_1', 'sig-1'));
  await dead.accept(tx('tx_2', 'sig-2'));
  const b = await host('host-b');
  const told: string[][] = [];
  b.watchAdoptions(({ txs }) => told.push(txs.map((t) => t.tx_id)));
  // The second batch's move fails in the database (a trigger the test adds for tx_2 alone).
  await db.query(`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.tx_id = 'tx_2' AND NEW.owner_host = 'host-b' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$`);
  await db.query(`CREATE TRIGGER boom BEFORE UPDATE ON transactions FOR EACH ROW EXECUTE FUNCTION boom()`);
  await lapse(db, 'host-dead');
  await expect(b.sweep(1)).rejects.toThrow(/boom/);
  expect(told).toEqual([['tx_1']]);
  expect((await b.live()).map((t) => t.tx_id)).toEqual(['tx_1']);
});

test('3 hosts racing at spend-limit reserve at most the limit; the others are refused with the window’s total', async () => {
  const hosts = await Promise.all(['host-a', 'host-b', 'host-c'].map((id) => host(id)));
  const limit = { limit: 100_000, since: 0 };
  const ids = hosts.flatMap((h, i) => Array.from({ length: 4 }, (_, k) => ({ h, id: `tx_${i}_${k}` })));
  for (const { h, id } of ids) await h.accept(tx(id, `sig-${id}`));
  // Twelve reservations of 15,000 against 100,000, from three hosts at once: six fit.
  const results = await Promise.allSettled(
    ids.map(({ h, id }, n) =>
      h.addAttempt(id, attempt(1, `b${String(n).padStart(63, '0')}`, { reserved_lamports: 15_000 }), {
        spendLimit: limit,
      }),
    ),
  );
  const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(6);
  expect(refused).toHaveLength(6);
  for (const reason of refused)
    expect(reason).toMatchObject({ name: 'SpendLimitReached', limit: 100_000, actual: 105_000 });
  const { rows } = await sql().query<{ n: number }>(
    'SELECT sum(lamports)::int AS n FROM spend_reservations WHERE released_at IS NULL',
  );
  expect(rows).toEqual([{ n: 90_000 }]);
});
