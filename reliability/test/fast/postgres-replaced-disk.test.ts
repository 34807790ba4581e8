import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabasePool, parseDatabaseUrl } from '@solrelay/sidecar/pg';
import {
  get,
  post,
  spawnSidecar,
  startStack,
  waitUntil,
  type RunningSidecar,
  type Stack,
} from '@solrelay/testkit';
import { SIDECAR_MAIN } from '../../src/crash-trial';
import { useMigratedPostgres } from '../../src/store';

/**
 * A host's disk replaced (issue #28): the real sidecar process (apps/sidecar's build, a dependency of this package) on
 * PostgreSQL is SIGKILLed under
 * a load of enqueues, then started again on an EMPTY data directory and lifecycle path with the same
 * RELAY_DATABASE_URL. It carries on from the database alone: every acknowledged transaction (and every one whose
 * enqueue the kill cut off, sent again byte for byte as a client would) reaches its true terminal state, relay ==
 * chain signature by signature, each with one tip landed, and the tipper paid exactly the tips relay recorded.
 */
const MAIN = SIDECAR_MAIN;
const TIP = 50_000;
const FEE = 5_000;
const COUNT = 40;

/** A server for this file; `fresh()` databases have relay's migrations applied. */
const postgres = useMigratedPostgres();

interface ChildSidecar {
  url: string;
  running: RunningSidecar;
  close(): Promise<void>;
}

let stack: Stack<ChildSidecar>;
let databaseUrl: string;

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: build the workspace first (pnpm build)`);
  databaseUrl = await postgres.fresh();
  stack = await startStack<ChildSidecar>({
    simnet: { slotMs: 200 },
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(TIP), RELAY_DATABASE_URL: databaseUrl },
    policy: { 'rate-limit': 100_000, 'max-queue': 10_000 },
    start: async (env) => {
      const running = await spawnSidecar(MAIN, env, 60_000);
      return { url: running.url, running, close: () => running.stop() };
    },
  });
  await waitUntil(async () => (await get(stack.sidecar.url, '/readyz')).status === 200, 60_000, 'ready');
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

test('SIGKILLed under load and started on an empty data directory: every transaction carries on from the database', async () => {
  const tipperBefore = await stack.connection().getBalance(stack.tipper.publicKey, 'confirmed');
  const wires = Array.from({ length: COUNT }, (_, i) => stack.transfer(10_000 + i));
  const acknowledged = new Map<number, string>();
  const problems: string[] = [];
  /** Send enqueue `i` to `url`; a cut connection leaves it unacknowledged (sent again to the next process). */
  const enqueue = async (url: string, i: number) => {
    try {
      const answer = await post(url, '/tx/enqueue', { transaction: wires[i] });
      if (answer.status === 202 || answer.status === 200) acknowledged.set(i, answer.body.tx_id as string);
      else problems.push(`enqueue ${i}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
    } catch {
      // the process died under it
    }
  };

  // Load: a new enqueue every 50 ms; the kill comes once half are acknowledged, with the rest still coming.
  const first = stack.sidecar;
  const sending: Promise<void>[] = [];
  const load = (async () => {
    for (let i = 0; i < COUNT; i++) {
      sending.push(enqueue(first.url, i));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  await waitUntil(() => acknowledged.size >= COUNT / 2, 30_000, 'half the load acknowledged');
  first.running.child.kill('SIGKILL');
  expect(await first.running.exited).toBe('SIGKILL');
  await load;
  await Promise.all(sending);

  // What the killed process left unfinished, as the database has it: the next one must carry it on.
  const db = createDatabasePool(parseDatabaseUrl(databaseUrl), { poolMax: 1 });
  const { rows: unfinished } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM transactions WHERE terminal_at IS NULL',
  );
  expect(unfinished[0]?.n).toBeGreaterThan(0);

  // A new disk: empty data directory, no lifecycle file; the same database.
  const disk = await mkdtemp(join(tmpdir(), 'relay-new-disk-'));
  const second = await stack.restart({
    RELAY_DATA_DIR: join(disk, 'data'),
    LIFECYCLE_PATH: join(disk, 'lifecycle.jsonl'),
  });
  // What the kill cut off is sent again, byte for byte (found: 200; never journaled: 202).
  for (let i = 0; i < COUNT; i++) if (!acknowledged.has(i)) await enqueue(second.url, i);
  expect(problems).toEqual([]);
  expect(acknowledged.size).toBe(COUNT);

  const ids = [...acknowledged.values()];
  const left = new Set(ids);
  await waitUntil(
    async () => {
      for (const id of [...left]) {
        const state = (await get(second.url, `/tx/${id}`)).body.state as string;
        if (state === 'finalized' || state === 'failed' || state === 'expired') left.delete(id);
      }
      return left.size === 0;
    },
    120_000,
    'every transaction terminal',
  );

  // relay == chain, signature by signature; one tip landed per transaction; the tipper paid exactly those.
  const chain = stack.simnet.cluster;
  const mismatches: unknown[] = [];
  let paid = 0;
  try {
    for (const id of ids) {
      const record = (await get(second.url, `/tx/${id}`)).body;
      const statuses = (record.tx_signatures as string[]).map((s) => chain.signatureStatus(s));
      const onChain = statuses.every((s) => s?.confirmationStatus === 'finalized' && s.err === null);
      const { rows } = await db.query<{ tip_signature: string | null; stage: string; tip_lamports: string }>(
        'SELECT tip_signature, stage, tip_lamports FROM attempts WHERE tx_id = $1 ORDER BY attempt',
        [id],
      );
      const landed = rows.filter((a) => a.tip_signature && chain.signatureStatus(a.tip_signature) !== null);
      const truth = record.state === 'finalized' ? onChain : !statuses.some((s) => s !== null);
      if (
        !truth ||
        record.state !== 'finalized' ||
        landed.length !== 1 ||
        landed[0]?.stage !== 'finalized' ||
        Number(landed[0].tip_lamports) !== TIP
      )
        mismatches.push({ id, state: record.state, statuses, attempts: rows });
      paid += landed.reduce((sum, a) => sum + Number(a.tip_lamports) + FEE, 0);
    }
  } finally {
    await db.end();
  }
  expect(mismatches).toEqual([]);
  // It ran from the database alone: nothing of a journal on the new disk.
  expect(existsSync(join(disk, 'data', 'journal'))).toBe(false);
  await waitUntil(
    async () =>
      tipperBefore - (await stack.connection().getBalance(stack.tipper.publicKey, 'confirmed')) === paid,
    20_000,
    `the tipper to have paid exactly ${paid} lamports (the tips relay recorded, and their fees)`,
  );
}, 300_000);
