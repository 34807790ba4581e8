import { Writable } from 'node:stream';
import {
  get,
  post,
  startPostgres,
  waitUntil,
  type HttpAnswer,
  type PgServer,
  type Stack,
} from '@solrelay/testkit';
import pg from 'pg';
import pino from 'pino';
import { loadMigrations, migrate } from '../../src/pg';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * The sidecar on PostgreSQL survives the database going away (issue #28): under a steady load of enqueues from a
 * client that retries what it is refused (as a client told `Retry-After` would, with the same bytes), PostgreSQL is
 * stopped (`pg_ctl stop -m immediate`, then `-m fast`) for 2 s and for 20 s, and started again on the same data
 * directory and port. Meanwhile:
 *
 * - every enqueue is answered 202/200 or, while the database is away, 503 with a database code and `Retry-After`;
 *   no request of the whole run is ever answered 500;
 * - `/readyz` is 503 naming the database while it is away, 200 again after; `/healthz` stays 200;
 * - the log says the database went away and came back once per outage, and nothing else complains of it;
 * - no promise is left rejected unhandled (a pool or idle-connection error would crash the process).
 *
 * - the routes that read the database (`/lifecycle`, `/bundle/<id>`) answer 503 with `Retry-After`, and those that
 *   answer from what the store holds (`/status`, `/queue`) answer 200 or, when they must read it, the same 503.
 *
 * Afterwards every acknowledged transaction is finalized, on chain as in relay's records, each with exactly one tip
 * landed, and the tipper paid exactly the tips and fees relay recorded (no second tip). And nothing was sent that was
 * not committed: every bundle the simnet's block engine received (its own record, accepted or refused, landed or
 * not) is an attempt in the database with that bundle id and that tip signature, whose write committed before the
 * engine got it (the server's commit timestamps, `track_commit_timestamp`).
 *
 * One sidecar and one database serve the four outages in turn (slots of 400 ms: a user blockhash lives ~60 s, longer
 * than the longest outage and the catching up after it).
 */
const TIP = 50_000;
const FEE = 5_000;
/** A new transaction every this many ms. */
const LOAD_EVERY_MS = 250;
/** A transfer refused with nothing written is not sent again once this old (see `Load`). */
const ABANDON_AFTER_MS = 8_000;

let server: PgServer;
let databaseUrl: string;
let stack: Stack<Sidecar>;
let url: string;
let tipperBefore: number;
const logLines: Array<{ level: number; msg: string; [key: string]: unknown }> = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
/** Every answer of the run, to any request. */
const answers: Array<{ path: string; status: number }> = [];
/** Every transaction acknowledged (2xx), across the four outages. */
const acknowledged = new Map<string, { txId: string; signature: string }>();

/** One bundle as the simnet's block engine received it (`GET /admin/engine/received`). */
interface ReceivedBundle {
  seq: number;
  receivedMs: number;
  signatures: Array<string | null>;
  bundleId: string | null;
  refused: string | null;
}

/** Every bundle the block engine has received so far, and how many it received in all. */
async function engineReceived(): Promise<{ bundles: ReceivedBundle[]; total: number }> {
  const answer = await get(stack.simnet.endpoints.adminUrl, '/engine/received');
  expect(answer.status).toBe(200);
  return answer.body as { bundles: ReceivedBundle[]; total: number };
}

/**
 * While the database is away, the operator's views: those that read it (`/lifecycle`, `/bundle/<id>`) answer 503
 * with a database code and `Retry-After`; `/status` and `/queue` answer from the records the store holds (one host),
 * or the same 503 when it holds one it must re-read first. Never a 500.
 */
async function expectViewsDuringOutage(): Promise<void> {
  const known = (await engineReceived()).bundles.at(-1)?.bundleId ?? 'f'.repeat(64);
  const refusedForDatabase = (answer: HttpAnswer, path: string) => {
    expect({ path, status: answer.status }).toEqual({ path, status: 503 });
    expect(['RELAY_E_DB_UNAVAILABLE', 'RELAY_E_DB_COMMIT_UNKNOWN']).toContain(answer.body?.error?.code);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  };
  for (const path of ['/lifecycle?last=1', `/bundle/${known}`])
    refusedForDatabase(await call('GET', path), path);
  for (const path of ['/status', '/queue']) {
    const answer = await call('GET', path);
    if (answer.status !== 200) refusedForDatabase(answer, path);
  }
}

/** A request whose answer is recorded (a refused connection is not an answer: it would fail the test). */
async function call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<HttpAnswer> {
  const answer = method === 'GET' ? await get(url, path) : await post(url, path, body);
  answers.push({ path, status: answer.status });
  return answer;
}

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  // Commit timestamps: when the transaction that gave an attempt its bundle id committed (see the last test).
  server = await startPostgres({ settings: { track_commit_timestamp: 'on' } });
  databaseUrl = await server.createDatabase();
  const pool = new pg.Pool({ connectionString: databaseUrl });
  try {
    await migrate(pool, loadMigrations());
    // Test-only: each transaction that writes an attempt's bundle id (its insert, or a re-signed tip's update) notes
    // its own transaction id beside it, in the same transaction; with track_commit_timestamp the server then says
    // when that transaction committed (pg_xact_commit_timestamp). An attempt row's xmin would not do: settling it
    // later rewrites the row.
    await pool.query(`
      CREATE TABLE test_bundle_writes (bundle_id text NOT NULL, xid xid8 NOT NULL);
      CREATE FUNCTION test_note_bundle_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO test_bundle_writes VALUES (NEW.bundle_id, pg_current_xact_id());
        RETURN NULL;
      END $$;
      CREATE TRIGGER test_note_bundle_insert AFTER INSERT ON attempts
        FOR EACH ROW EXECUTE FUNCTION test_note_bundle_write();
      CREATE TRIGGER test_note_bundle_update AFTER UPDATE OF bundle_id ON attempts
        FOR EACH ROW WHEN (OLD.bundle_id IS DISTINCT FROM NEW.bundle_id) EXECUTE FUNCTION test_note_bundle_write();`);
  } finally {
    await pool.end();
  }
  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(line));
      done();
    },
  });
  stack = await startRelayStack({
    simnet: { slotMs: 400 },
    // One bundle per transaction (no packing): the run checks each transaction's own tip (TIP) on chain; its
    // transfers share a fee payer and would otherwise ride together under raised tips.
    env: {
      BYPASS_AGENT: '1',
      BYPASS_TIP_LAMPORTS: String(TIP),
      RELAY_DATABASE_URL: databaseUrl,
      BUNDLE_PACK_MAX: '1',
    },
    policy: { 'rate-limit': 100_000, 'max-queue': 10_000 },
    sidecar: { logger: pino({ level: 'info' }, logs) },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/readyz')).status === 200, 30_000, 'ready');
  tipperBefore = await stack.connection().getBalance(stack.tipper.publicKey, 'confirmed');
}, 90_000);

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await stack?.close();
  await server?.stop();
});

/**
 * A client sending a new transfer every LOAD_EVERY_MS until stopped; each is sent again (the same bytes) after the
 * `Retry-After` of a 503 until it is acknowledged. A transfer refused `RELAY_E_DB_UNAVAILABLE` (nothing written) is
 * given up once it is ABANDON_AFTER_MS old, as a client would re-sign rather than send a dying blockhash; one
 * answered `RELAY_E_DB_COMMIT_UNKNOWN` is sent again until the answer is known (it may be accepted). Every answer is
 * checked as it comes.
 */
class Load {
  private stopped = false;
  private readonly loops: Promise<void>[] = [];
  private timer: NodeJS.Timeout | null = null;
  private serial = 0;
  readonly problems: string[] = [];
  /** 503s with a database code and Retry-After, by code. */
  readonly refused = new Map<string, number>();
  readonly ids: string[] = [];

  constructor(private readonly base: number) {}

  start(): void {
    this.timer = setInterval(() => {
      if (!this.stopped) this.loops.push(this.client(this.base + this.serial++));
    }, LOAD_EVERY_MS);
  }

  /** Stop making new transactions; resolves once every one made is acknowledged. */
  async finish(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await Promise.all(this.loops);
  }

  private async client(lamports: number): Promise<void> {
    const wire = stack.transfer(lamports);
    const made = Date.now();
    for (;;) {
      const answer = await call('POST', '/tx/enqueue', { transaction: wire });
      if (answer.status === 202 || answer.status === 200) {
        const { tx_id: txId, signatures } = answer.body as { tx_id: string; signatures: string[] };
        acknowledged.set(txId, { txId, signature: signatures[0] as string });
        this.ids.push(txId);
        return;
      }
      const code = answer.body?.error?.code as string | undefined;
      const retryAfter = Number(answer.headers.get('retry-after'));
      if (
        answer.status !== 503 ||
        (code !== 'RELAY_E_DB_UNAVAILABLE' && code !== 'RELAY_E_DB_COMMIT_UNKNOWN') ||
        !(retryAfter >= 1)
      ) {
        this.problems.push(`enqueue answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
        return;
      }
      this.refused.set(code, (this.refused.get(code) ?? 0) + 1);
      if (code === 'RELAY_E_DB_UNAVAILABLE' && Date.now() - made > ABANDON_AFTER_MS) return;
      await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    }
  }
}

/**
 * Wait until every one of `ids` is in one of `states` (asking again only for those that are not yet); by default
 * finalized.
 */
async function waitFinalized(
  ids: readonly string[],
  ms: number,
  states: readonly string[] = ['finalized'],
): Promise<void> {
  const left = new Set(ids);
  await waitUntil(
    async () => {
      for (const id of [...left])
        if (states.includes((await call('GET', `/tx/${id}`)).body.state as string)) left.delete(id);
      return left.size === 0;
    },
    ms,
    `${ids.length} transactions ${states.join(' or ')}`,
  ).catch(async (error: Error) => {
    const sample = [...left].slice(0, 3);
    const records = await Promise.all(sample.map(async (id) => (await get(url, `/tx/${id}`)).body));
    throw new Error(`${error.message}; ${left.size} not: ${JSON.stringify(records).slice(0, 4000)}`);
  });
}

const cases = [
  { mode: 'immediate', seconds: 2 },
  { mode: 'fast', seconds: 2 },
  { mode: 'immediate', seconds: 20 },
  { mode: 'fast', seconds: 20 },
] as const;

test.each(cases)(
  'PostgreSQL stopped -m $mode for $seconds s under load: refused with 503 + Retry-After meanwhile, nothing lost',
  async ({ mode, seconds }) => {
    const downsBefore = logLines.filter((l) => l.msg.startsWith('database unavailable')).length;
    const load = new Load(1_000 + 1_000 * cases.findIndex((c) => c.mode === mode && c.seconds === seconds));
    load.start();
    // Some transactions accepted and in flight before the database goes.
    await waitUntil(() => load.ids.length >= 6, 20_000, 'enqueues before the outage');

    await server.shutDown(mode);
    const down = await waitUntil(
      async () => {
        const ready = await call('GET', '/readyz');
        return ready.status === 503 ? ready : null;
      },
      15_000,
      '/readyz to say the database is away',
    );
    expect(down.body.error.code).toBe('RELAY_E_NOT_READY');
    expect(down.body.error.details.reasons).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^database: PostgreSQL at postgres:\/\/relay:\*\*\*@127\.0\.0\.1:/),
      ]),
    );
    expect((await call('GET', '/healthz')).status).toBe(200);
    // Metrics are still scraped (the store's figures keep their last values).
    expect((await call('GET', '/metrics')).status).toBe(200);
    // An enqueue now is refused with the database's code and Retry-After (the load's client checks each answer).
    const refusedBefore = load.refused.get('RELAY_E_DB_UNAVAILABLE') ?? 0;
    await waitUntil(
      () => (load.refused.get('RELAY_E_DB_UNAVAILABLE') ?? 0) > refusedBefore,
      15_000,
      'an enqueue refused with RELAY_E_DB_UNAVAILABLE',
    );
    // The other writing route too: an attempt asked for now is refused alike.
    const submit = await call('POST', '/internal/submit', {
      tx_id: load.ids[0],
      tip_lamports: TIP,
      reason: 'during the outage',
    });
    expect(submit.status).toBe(503);
    expect(submit.body.error.code).toBe('RELAY_E_DB_UNAVAILABLE');
    expect(Number(submit.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await expectViewsDuringOutage();

    // The outage lasts its length (not a timing assertion: how long the database stays away).
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    expect((await call('GET', '/readyz')).status).toBe(503);
    await expectViewsDuringOutage();
    await server.startAgain();

    let ready: HttpAnswer | null = null;
    await waitUntil(
      async () => (ready = await call('GET', '/readyz')).status === 200,
      90_000,
      '/readyz 200 again',
    ).catch((error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(ready?.body)}`);
    });
    // A few more after, then every transaction the client made is acknowledged.
    const after = load.ids.length;
    await waitUntil(() => load.ids.length >= after + 4, 20_000, 'enqueues after the outage');
    await load.finish();
    expect(load.problems).toEqual([]);

    // Recovered: every one of them confirmed (their finalization, ~13 s more at these slots, overlaps the next case;
    // the across-the-run test below waits for every acknowledged transaction to be finalized).
    await waitFinalized(load.ids, 90_000, ['confirmed', 'finalized']);
    // Said once each way in the log.
    const downs = logLines.filter((l) => l.msg.startsWith('database unavailable'));
    expect(downs.length - downsBefore).toBe(1);
    expect(downs[downs.length - 1]?.database).toMatch(/^postgres:\/\/relay:\*\*\*@/);
    expect(logLines.filter((l) => l.msg === 'database back')).toHaveLength(downs.length);
    // The server restarted on its own data (synchronous_commit on): it holds every tip relay had sent, so no new tip
    // waited on a tip's blockhash to die (recovery/outage.ts).
    const reread = logLines.filter((l) => l.msg.startsWith('database back:'));
    expect(reread).toHaveLength(downs.length);
    expect(reread.every((l) => l.not_in_database === 0)).toBe(true);
  },
  300_000,
);

test('an enqueue whose COMMIT goes unanswered is not acknowledged (503 RELAY_E_DB_COMMIT_UNKNOWN, Retry-After); the same bytes again are', async () => {
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const holder = await db.connect();
  try {
    // A deferred trigger runs at commit and waits on an advisory lock this test holds: the enqueue's statement (its
    // own transaction, in autocommit) is committing, sent and unanswered, when its connection is cut.
    await db.query(`
      CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(4343); RETURN NULL; END $$;
      CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON transactions
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_hold_commit();`);
    await holder.query('SELECT pg_advisory_lock(4343)');
    const wire = stack.transfer(777);
    const answering = call('POST', '/tx/enqueue', { transaction: wire });
    const pid = await waitUntil(
      async () =>
        (
          await db.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE '%INSERT INTO transactions%'
               AND wait_event_type = 'Lock'`,
          )
        ).rows[0]?.pid,
      15_000,
      "the enqueue's commit waiting",
    );
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    const refused = await answering;
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('RELAY_E_DB_COMMIT_UNKNOWN');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await db.query('DROP TRIGGER hold_commit ON transactions; DROP FUNCTION test_hold_commit()');
    await holder.query('SELECT pg_advisory_unlock_all()');

    // The client sends the same bytes again: here the COMMIT never finished, so it is accepted now; once more, it is
    // the same transaction (dedupe by first signature).
    const accepted = await waitUntil(
      async () => {
        const answer = await call('POST', '/tx/enqueue', { transaction: wire });
        if (answer.status === 503) return null;
        return answer;
      },
      30_000,
      'the retried enqueue answered',
    );
    expect(accepted.status).toBe(202);
    const repeat = await call('POST', '/tx/enqueue', { transaction: wire });
    expect(repeat.status).toBe(200);
    expect(repeat.body.tx_id).toBe(accepted.body.tx_id);
    acknowledged.set(accepted.body.tx_id, {
      txId: accepted.body.tx_id,
      signature: accepted.body.signatures[0],
    });
    await waitUntil(async () => (await call('GET', '/readyz')).status === 200, 90_000, '/readyz 200 again');
    await waitFinalized([accepted.body.tx_id], 90_000, ['confirmed', 'finalized']);
  } finally {
    holder.release();
    await db.end();
  }
}, 240_000);

test('across the run: no 500, relay == chain, one tip per transaction, the tipper paid exactly that', async () => {
  await waitFinalized([...acknowledged.keys()], 90_000);
  expect(answers.filter((a) => a.status >= 500 && a.status !== 503)).toEqual([]);
  expect(unhandled).toEqual([]);
  // Nothing else in the log complained of the database: the outage was said once, not per attempt.
  const complaints = logLines.filter(
    (l) =>
      l.level >= 40 &&
      !l.msg.startsWith('database unavailable') &&
      l.msg !== 'database back' &&
      /RELAY_E_DB|DatabaseError|ECONNREFUSED|terminat|Connection|57P0/i.test(JSON.stringify(l)),
  );
  expect(complaints).toEqual([]);

  const chain = stack.simnet.cluster;
  const mismatches: unknown[] = [];
  let paid = 0;
  for (const { txId, signature } of acknowledged.values()) {
    const record = await stack.sidecar.relay.stored(txId);
    const status = chain.signatureStatus(signature);
    // Every attempt's tip, as the chain has it (relay's record names each tip's signature): exactly one landed, the
    // one relay recorded as landed.
    const landed = (record?.attempts ?? [])
      .filter((a) => a.tip_signature !== null && chain.signatureStatus(a.tip_signature) !== null)
      .map((a) => ({ stage: a.stage, tip: a.tip_lamports }));
    const ok =
      record?.state === 'finalized' &&
      status?.confirmationStatus === 'finalized' &&
      status.err === null &&
      landed.length === 1 &&
      landed[0]?.stage === 'finalized' &&
      landed[0].tip === TIP;
    if (!ok) mismatches.push({ record, chain: status, landed });
    paid += landed.reduce((sum, a) => sum + a.tip + FEE, 0);
  }
  expect(mismatches).toEqual([]);
  expect(acknowledged.size).toBeGreaterThan(40);
  const tipperAfter = await stack.connection().getBalance(stack.tipper.publicKey, 'confirmed');
  expect(tipperBefore - tipperAfter).toBe(paid);
}, 120_000);

test('across the run: every bundle the engine received is an attempt with that id and tip, committed before it arrived', async () => {
  // What the engine received, in full (it keeps the last 50,000; this run sends far fewer).
  const { bundles, total } = await engineReceived();
  expect(bundles).toHaveLength(total);
  expect(bundles.length).toBeGreaterThanOrEqual(acknowledged.size);
  const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    // The commit time of the transaction that wrote each bundle id (the first, if it was ever written twice). A
    // transaction whose commit time is unknown (aborted, or not committed) gives null: that bundle fails below.
    const { rows } = await db.query<{
      bundle_id: string;
      tip_signature: string | null;
      committed_ms: number | null;
    }>(
      `SELECT a.bundle_id, a.tip_signature,
         (SELECT min(extract(epoch FROM pg_xact_commit_timestamp(w.xid::text::xid)) * 1000)::float8
          FROM test_bundle_writes w WHERE w.bundle_id = a.bundle_id) AS committed_ms
       FROM attempts a`,
    );
    const attempts = new Map(rows.map((r) => [r.bundle_id, r]));
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.committed_ms !== null)).toBe(true);
    // A bundle id is the hash of the bundle's first signatures, the tip's last: an attempt row with that id and that
    // tip signature is exactly these bytes (a tip re-signed before its first send replaces its bundle id, so the old
    // bytes, had they gone out, would match no attempt). Its write committed before the engine had it: the server
    // stamps a commit before it acknowledges it, and relay sends only after the acknowledgement (whole ms: the
    // engine's clock reads whole ms).
    const unrecorded = bundles.flatMap((b) => {
      const attempt = b.bundleId === null ? undefined : attempts.get(b.bundleId);
      const ok =
        attempt !== undefined &&
        attempt.tip_signature === b.signatures.at(-1) &&
        attempt.committed_ms !== null &&
        Math.floor(attempt.committed_ms) <= b.receivedMs;
      return ok ? [] : [{ received: b, attempt: attempt ?? null }];
    });
    expect(unrecorded).toEqual([]);
  } finally {
    await db.end();
  }
});
