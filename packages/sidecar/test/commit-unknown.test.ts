import { randomBytes } from 'node:crypto';
import { Keypair } from '@solana/web3.js';
import { DEFAULT_POLICY, RelayError, isRelayError, type RelayErrorCode } from '@solrelay/core';
import bs58 from 'bs58';
import pino from 'pino';
import { AttemptBuilder } from '../src/attempts/builder';
import { ChainPosition } from '../src/chain/position';
import { TipSigner } from '../src/engine/tip-tx';
import { Metrics } from '../src/metrics';
import { OutageGate } from '../src/recovery/outage';
import { Sender } from '../src/send/sender';
import type { RegionTurn, SendJob, SendQueue } from '../src/send/queue';
import type { StoredAttempt, StoredTx } from '../src/store/records';
import { InMemoryTxStore } from '../src/store/store';
import { KeyedLock } from '../src/util/keyed-lock';
import { attempt, tx } from './helpers/store-records';

/** A turn on `region`'s wire that is always ready (these tests are about the store, not the engine's budget). */
function turnOn(region: number): RegionTurn {
  return { region, ready: () => Promise.resolve(), end: () => undefined };
}

/**
 * The write-ahead rule when a COMMIT's answer is lost (DESIGN §10, "No second tip" (1)): nothing is sent on the
 * strength of a write whose outcome is unknown. The worst case is played: the write did commit, and relay was told
 * `RELAY_E_DB_COMMIT_UNKNOWN`. The attempt builder queues nothing; the sender sends nothing then; what goes out later
 * is what the store holds, re-read (the same committed bytes). After the outage no new tip is built until the
 * in-flight work is re-read and the database holds every tip relay sent; one it lost (a failover) holds new tips
 * until it is landed or dead.
 */

const log = pino({ level: 'silent' });
const BLOCKHASH = Keypair.generate().publicKey.toBase58();
const TIP_ACCOUNT = Keypair.generate().publicKey.toBase58();
const tipper = Keypair.generate();
/** A first signature as the wire has them (a bundle id is derived from them). */
const signature = () => bs58.encode(randomBytes(64));

/** An in-memory store whose chosen write commits and then answers as a lost COMMIT does. */
class LostAnswerStore extends InMemoryTxStore {
  lose: 'addAttempt' | 'transition' | null = null;
  /**
   * A record whose lost write the server is still finishing (PgTxStore's `resolve`): every read of it, and every list,
   * answers RELAY_E_DB_COMMIT_UNKNOWN until it has ended.
   */
  unresolved: string | null = null;
  /** Reads of one record so far (the outage gate re-reads what it waits on). */
  gets = 0;

  override async get(txId: string): Promise<StoredTx | undefined> {
    this.gets++;
    if (txId === this.unresolved) throw lost(txId, 'transition');
    const tx = await super.get(txId);
    if (!tx || !this.lostRows) return tx;
    return { ...tx, attempts: tx.attempts.filter((a) => !this.lostTips.has(a.tip_signature ?? '')) };
  }

  /** Tips "the database" lost: kept in memory (what the process sent) but not held by `heldTips`. */
  readonly lostTips = new Set<string>();

  override async heldTips(...args: Parameters<InMemoryTxStore['heldTips']>): Promise<Set<string>> {
    if (this.unresolved !== null) throw lost(this.unresolved, 'transition');
    const held = await super.heldTips(...args);
    for (const key of [...held]) if (this.lostTips.has(key.split('#')[2] as string)) held.delete(key);
    return held;
  }

  /** With `lostRows`, reads answer as the new primary does: the attempts of lost tips are not there. */
  lostRows = false;

  /** Lists of the live records so far (the outage gate's re-read after the database is back). */
  lives = 0;

  override live(): Promise<StoredTx[]> {
    this.lives++;
    if (this.unresolved !== null) return Promise.reject(lost(this.unresolved, 'transition'));
    return super.live();
  }

  override async addAttempt(...args: Parameters<InMemoryTxStore['addAttempt']>): Promise<StoredTx> {
    const done = await super.addAttempt(...args);
    if (this.lose === 'addAttempt') throw lost(args[0], 'addAttempt');
    return done;
  }

  override async transition(...args: Parameters<InMemoryTxStore['transition']>): Promise<StoredTx> {
    const done = await super.transition(...args);
    if (this.lose === 'transition') throw lost(args[0], 'transition');
    return done;
  }
}

function lost(txId: string, operation: string): RelayError {
  return new RelayError('RELAY_E_DB_COMMIT_UNKNOWN', {
    tx_id: txId,
    operation,
    reason: 'Connection terminated unexpectedly',
    retry_after_s: 1,
  });
}

function rig() {
  const store = new LostAnswerStore();
  const chain = new ChainPosition();
  chain.advance(1_010, 1_000);
  const queued: Array<{ txId: string; attempt: number }> = [];
  const sent: string[][] = [];
  const queue = {
    queueSend: (t: Pick<StoredTx, 'tx_id'>, attempt: number) => queued.push({ txId: t.tx_id, attempt }),
    push: (job: SendJob) => queued.push({ txId: job.txId, attempt: job.attempt }),
    has: () => false,
    cool: () => undefined,
    isCooling: () => false,
    answered: () => undefined,
  };
  const ports = {
    chain,
    crashPoint: undefined,
    engine: {
      getTipAccounts: () => Promise.resolve([TIP_ACCOUNT]),
      sendBundle: (wires: Buffer[]) => {
        sent.push(wires.map((w) => w.toString('base64')));
        return Promise.resolve({
          ok: false as const,
          kind: 'transport' as const,
          message: 'x',
          status: 503,
          retryAfterMs: null,
        });
      },
      regions: [],
    },
    enqueuedAt: new Map<string, number>(),
    hub: { publish: () => undefined },
    leaders: { leaderAt: () => null, nextBundleEngineSlot: () => null },
    locks: new KeyedLock(),
    log,
    metrics: new Metrics(),
    now: () => 1_700_000_000_000,
    oracle: {
      view: () => ({ p25: 1_000, p50: 2_000, p75: 3_000, p95: 4_000, p99: 5_000, ema: 2_000, stale: false }),
    },
    policy: () => DEFAULT_POLICY,
    rpc: { recentBlockhash: () => Promise.resolve({ blockhash: BLOCKHASH, lastValidBlockHeight: 1_150 }) },
    store,
    isClosed: () => false,
    lastErrors: { engine: null },
    blockhashes: {},
  };
  const signer = new TipSigner(tipper);
  const tippers = {
    reserve: () => ({
      pubkey: tipper.publicKey.toBase58(),
      signer,
      journaled: () => undefined,
      cancel: () => undefined,
    }),
  };
  const built: string[] = [];
  const gate = new OutageGate(ports as never, queue as never, { carrierOf: () => null });
  const builder = new AttemptBuilder(
    ports as never,
    { decisionMode: 'reflex' },
    tippers,
    queue as unknown as SendQueue,
    { built: (txId, n) => built.push(`${txId}#${n}`) },
    gate,
  );
  return { store, chain, queued, sent, built, gate, builder, ports, queue };
}

/** A sender on the rig's ports and queue (settling and packing do nothing), with `prepare` before a first send. */
function senderOn(
  ports: unknown,
  queue: unknown,
  prepare?: (tx: StoredTx, attempt: StoredAttempt) => Promise<StoredAttempt>,
): Sender {
  return new Sender(
    ports as never,
    { markSubmitted: () => Promise.resolve() } as never,
    queue as never,
    { faultOf: () => Promise.resolve(null), observeSend: () => undefined },
    { apply: () => Promise.resolve() },
    prepare,
  );
}

async function codeOf(promise: Promise<unknown>): Promise<RelayErrorCode | 'resolved'> {
  try {
    await promise;
    return 'resolved';
  } catch (error) {
    if (isRelayError(error)) return error.code;
    throw error;
  }
}

test('an attempt whose COMMIT answer is lost is neither queued nor sent; after the outage the committed bytes are', async () => {
  const { store, queued, built, gate, builder } = rig();
  await store.accept(tx('tx_a', signature()));
  await store.accept(tx('tx_b', signature()));
  store.lose = 'addAttempt';
  expect(await codeOf(builder.submit({ tx_id: 'tx_a', tip_lamports: 50_000, reason: 'test' }))).toBe(
    'RELAY_E_DB_COMMIT_UNKNOWN',
  );
  store.lose = null;
  // It did commit (the worst case), and nothing was queued or counted as built here.
  const committed = (await store.get('tx_a'))?.attempts[0] as StoredAttempt;
  expect(committed.stage).toBe('journaled');
  expect(queued).toEqual([]);
  expect(built).toEqual([]);

  // The store reports the outage and the database's return: the re-read queues the committed attempt (its bytes).
  gate.onAvailability({ kind: 'down', url: 'postgres://relay:***@db/relay', reason: 'gone', at: 0 });
  // While it is away, no tip is built for anyone (the store would refuse it anyway).
  expect(await codeOf(builder.submit({ tx_id: 'tx_b', tip_lamports: 50_000, reason: 'meanwhile' }))).toBe(
    'RELAY_E_DB_UNAVAILABLE',
  );
  gate.onAvailability({ kind: 'up', url: 'postgres://relay:***@db/relay', downMs: 1, at: 1 });
  await waitFor(() => queued.length === 1);
  expect(queued).toEqual([{ txId: 'tx_a', attempt: 1 }]);
  // The database holds the committed tip (it is followed as before the outage): new tips resume at once.
  await waitFor(() => gate.held === null);
  expect(await codeOf(builder.submit({ tx_id: 'tx_b', tip_lamports: 50_000, reason: 'new tip' }))).toBe(
    'resolved',
  );
  gate.stop();
});

test("a first send whose refreshed tip's COMMIT answer is lost sends nothing then, and later only what the store holds", async () => {
  const { store, queued, sent, ports, queue } = rig();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.addAttempt('tx_a', attempt(1, 'bundle-old', { tip_tx: 'T0xE', tip_signature: 'tip-old' }));
  // The first send re-signs the aged tip: a compare-and-set the store commits, and whose answer is lost.
  const prepare = async (t: StoredTx, a: StoredAttempt) => {
    store.lose = 'transition';
    try {
      await store.transition(
        t.tx_id,
        { attempt: { n: a.attempt, stage: 'journaled', bundleId: a.bundle_id } },
        {
          attempts: [
            { n: a.attempt, set: { tip_tx: 'TkVX', tip_signature: 'tip-new', bundle_id: 'bundle-new' } },
          ],
        },
      );
    } finally {
      store.lose = null;
    }
    return a;
  };
  let firstSend = true;
  const sender = senderOn(ports, queue, (t, a) => {
    if (!firstSend) return Promise.resolve(a);
    firstSend = false;
    return prepare(t, a);
  });
  const job: SendJob = { txId: 'tx_a', attempt: 1, priority: 1, deadline: 1_150, notBefore: 0 };
  await sender.sendOne(job, turnOn(0));
  // Nothing went out; the job is back in the queue.
  expect(sent).toEqual([]);
  expect(queued).toEqual([{ txId: 'tx_a', attempt: 1 }]);
  // The next send re-reads: what goes out is the tip the store holds (the re-signed one), never the old bytes.
  await sender.sendOne(job, turnOn(0));
  expect(sent).toHaveLength(1);
  expect(sent[0]?.[sent[0].length - 1]).toBe('TkVX');
  expect(sent.flat()).not.toContain('T0xE');
});

test('while the outcome of a lost commit is still unknown to the store, the sender sends nothing and the gate holds new tips', async () => {
  const { store, queued, sent, ports, queue, gate, builder } = rig();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.accept(tx('tx_b', signature()));
  await store.addAttempt('tx_a', attempt(1, 'bundle-a', { tip_tx: 'VElQ', tip_signature: 'tip-a' }));
  store.unresolved = 'tx_a';
  const sender = senderOn(ports, queue);
  const job: SendJob = { txId: 'tx_a', attempt: 1, priority: 1, deadline: 1_150, notBefore: 0 };
  await sender.sendOne(job, turnOn(0));
  await sender.sendOne(job, turnOn(0));
  // Nothing went out; the job went back to the queue each time.
  expect(sent).toEqual([]);
  expect(queued).toEqual([
    { txId: 'tx_a', attempt: 1 },
    { txId: 'tx_a', attempt: 1 },
  ]);
  // The database is back, but the gate cannot list what is in flight while the store cannot: it queues no resend
  // of the record, and new tips stay held.
  gate.onAvailability({ kind: 'down', url: 'postgres://relay:***@db/relay', reason: 'gone', at: 0 });
  gate.onAvailability({ kind: 'up', url: 'postgres://relay:***@db/relay', downMs: 1, at: 1 });
  await waitFor(() => store.lives >= 1);
  await new Promise((resolve) => setImmediate(resolve));
  expect(queued).toHaveLength(2);
  expect(gate.held).toMatch(/back after an outage/);
  expect(await codeOf(builder.submit({ tx_id: 'tx_b', tip_lamports: 50_000, reason: 'new tip' }))).toBe(
    'RELAY_E_NOT_READY',
  );
  // Resolved: the gate's next re-read queues the committed bytes, and the sender sends them.
  store.unresolved = null;
  await waitFor(() => queued.length === 3);
  expect(queued[2]).toEqual({ txId: 'tx_a', attempt: 1 });
  await waitFor(() => gate.held === null);
  await sender.sendOne(job, turnOn(0));
  expect(sent).toHaveLength(1);
  expect(sent[0]?.[sent[0].length - 1]).toBe('VElQ');
  gate.stop();
});

test.each([
  ['its row still read as this process held it', false],
  ['its row gone from every read (the new primary lacks it): judged on the copy this process sent', true],
])(
  'after an outage, a tip the database does not hold (a lost commit) holds new tips until its blockhash is dead (with the late-landing margin): %s',
  async (_case, rowGone) => {
    const { store, chain, gate, builder } = rig();
    await store.accept(tx('tx_a', signature()));
    await store.accept(tx('tx_b', signature(), { expires_at_slot: 2_000 }));
    await store.accept(tx('tx_c', signature(), { expires_at_slot: 2_000 }));
    // Attempt 1 of tx_a was committed and sent before the outage; its tip's blockhash lives to block height 1,050.
    // The database came back without it (a failover lost the commit); tx_c's tip it holds.
    await store.addAttempt(
      'tx_a',
      attempt(1, 'bundle-a', { stage: 'submitted', tip_last_valid_block_height: 1_050 }),
    );
    await store.addAttempt('tx_c', attempt(1, 'bundle-c', { stage: 'submitted' }));
    store.lostTips.add('tip-bundle-a');
    gate.onAvailability({ kind: 'down', url: 'postgres://relay:***@db/relay', reason: 'gone', at: 0 });
    gate.onAvailability({ kind: 'up', url: 'postgres://relay:***@db/relay', downMs: 1, at: 1 });
    await waitFor(
      () => gate.held !== null && /1 tip\(s\) relay sent that the database does not hold/.test(gate.held),
    );
    if (rowGone) {
      store.lostRows = true;
      expect((await store.get('tx_a'))?.attempts).toEqual([]);
    } else {
      // Judged lost after the outage: not proof that its tip cannot land while its blockhash lives.
      await store.transition(
        'tx_a',
        { state: 'pending' },
        { attempts: [{ n: 1, set: { stage: 'failed', outcome: 'dropped' } }] },
      );
    }
    chain.advance(1_200, 1_060);
    // Re-read twice since (a whole re-check after the change), and still held.
    const reads = store.gets;
    await waitFor(() => store.gets >= reads + 2);
    expect(gate.held).toMatch(/1 tip\(s\) relay sent that the database does not hold/);
    expect(await codeOf(builder.submit({ tx_id: 'tx_b', tip_lamports: 50_000, reason: 'new tip' }))).toBe(
      'RELAY_E_NOT_READY',
    );
    // Past its last valid block height and the margin a late landing needs to be seen: dead. New tips resume.
    chain.advance(1_300, 1_083);
    await waitFor(() => gate.held === null);
    expect(await codeOf(builder.submit({ tx_id: 'tx_b', tip_lamports: 50_000, reason: 'new tip' }))).toBe(
      'resolved',
    );
    gate.stop();
  },
);

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!condition()) throw new Error('condition never held');
}

test('a send failing for a reason not the store nor the engine is said, counted and retried with a doubling back-off', async () => {
  const { store, ports } = rig();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.addAttempt('tx_a', attempt(1, 'bundle-a'));
  const pushed: SendJob[] = [];
  const queue = { queueSend: () => undefined, push: (job: SendJob) => pushed.push(job), has: () => false };
  // A bug on the way: reading the record throws something that is not a store failure.
  let failWith: unknown = new TypeError('a bug');
  const real = store.get.bind(store);
  store.get = (id: string) => (failWith ? Promise.reject(failWith) : real(id));
  const sender = senderOn(ports, queue);
  const now = (ports as { now: () => number }).now();
  const metrics = (ports as { metrics: Metrics }).metrics;
  let job: SendJob = { txId: 'tx_a', attempt: 1, priority: 1, deadline: 1_150, notBefore: 0 };
  const delays: number[] = [];
  for (let i = 0; i < 8; i++) {
    await sender.sendOne(job, turnOn(0));
    job = pushed.at(-1) as SendJob;
    delays.push(job.notBefore - now);
  }
  expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
  expect(job.failures).toBe(8);
  expect((await metrics.registry.getSingleMetric('relay_send_failures_total')?.get())?.values[0]?.value).toBe(
    8,
  );
  // The store away is expected: tried again in 1 s, the streak of faults forgotten, nothing counted.
  failWith = new RelayError('RELAY_E_DB_UNAVAILABLE', {
    url: 'postgres://db',
    reason: 'gone',
    retry_after_s: 1,
  });
  await sender.sendOne(job, turnOn(0));
  expect(pushed.at(-1)).toMatchObject({ failures: 0, notBefore: now + 1_000 });
  expect((await metrics.registry.getSingleMetric('relay_send_failures_total')?.get())?.values[0]?.value).toBe(
    8,
  );
});

test('the same journaled bytes sent twice at once (a job queued again while the sender held it): counted, recorded once', async () => {
  const { store, ports } = rig();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.addAttempt('tx_a', attempt(1, 'bundle-a'));
  let sends = 0;
  let release: () => void = () => undefined;
  const bothSent = new Promise<void>((resolve) => (release = resolve));
  const engine = (ports as { engine: Record<string, unknown> }).engine;
  engine.sendBundle = async () => {
    if (++sends === 2) release();
    await bothSent; // neither answer comes before both sends went out
    return { ok: true as const, bundleId: 'bundle-a' };
  };
  const settle = {
    markSubmitted: async (t: StoredTx, a: StoredAttempt) => {
      await store.transition(
        t.tx_id,
        { attempt: { n: a.attempt, stage: 'journaled' } },
        { attempts: [{ n: a.attempt, set: { stage: 'submitted' } }] },
      );
    },
  };
  const queue = {
    queueSend: () => undefined,
    push: () => undefined,
    has: () => false,
    cool: () => undefined,
    isCooling: () => false,
    answered: () => undefined,
  };
  const sender = new Sender(
    ports as never,
    settle as never,
    queue as never,
    { faultOf: () => Promise.resolve(null), observeSend: () => undefined },
    { apply: () => Promise.resolve() },
  );
  const job: SendJob = { txId: 'tx_a', attempt: 1, priority: 1, deadline: 1_150, notBefore: 0 };
  await Promise.all([sender.sendOne(job, turnOn(0)), sender.sendOne(job, turnOn(0))]);
  expect(sends).toBe(2);
  expect((await store.get('tx_a'))?.attempts.map((a) => a.stage)).toEqual(['submitted']);
  const metrics = (ports as { metrics: Metrics }).metrics;
  expect(
    (await metrics.registry.getSingleMetric('relay_repeated_sends_total')?.get())?.values[0]?.value,
  ).toBe(1);
});

test('a migration window that opens while a job is being prepared holds it: nothing is sent, the job goes back to the queue', async () => {
  const { store, ports, chain } = rig();
  await store.accept(tx('tx_a', 'sig-a'));
  await store.addAttempt('tx_a', attempt(1, 'bundle-a'));
  let sends = 0;
  const engine = (ports as { engine: Record<string, unknown> }).engine;
  engine.sendBundle = async () => {
    sends++;
    return { ok: true as const, bundleId: 'bundle-a' };
  };
  const pushed: SendJob[] = [];
  const queue = {
    queueSend: () => undefined,
    push: (job: SendJob) => pushed.push(job),
    has: () => false,
    cool: () => undefined,
    isCooling: () => false,
    answered: () => undefined,
  };
  // The cluster announces its migration at the next slot while the first send is being prepared (after the queue
  // let the job go, before the bundle leaves).
  const sender = senderOn(ports, queue, async (_t, a) => {
    chain.consensus.observeMigrationSlot(1_011);
    chain.consensus.observeSlot({ slot: 1_011, status: 'processed' });
    return a;
  });
  expect(chain.consensus.snapshot().holdSends).toBe(false);
  const job: SendJob = { txId: 'tx_a', attempt: 1, priority: 1, deadline: 1_150, notBefore: 0 };
  await sender.sendOne(job, turnOn(0));
  expect(chain.consensus.snapshot().holdSends).toBe(true);
  expect(sends).toBe(0);
  expect(pushed).toEqual([expect.objectContaining({ txId: 'tx_a', attempt: 1 })]);
  expect((await store.get('tx_a'))?.attempts[0]?.stage).toBe('journaled');
});
