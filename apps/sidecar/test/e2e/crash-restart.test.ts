import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import type { TxRecord } from '@solrelay/core';
import { REFERENCE_BUNDLE_CU, startSimnet, type Simnet } from '@solrelay/simnet';
import { get, post, waitUntil, freePort } from '@solrelay/testkit';
import { spawnSidecar, type RunningSidecar } from '../process';

/**
 * The promise: a crash at any point loses nothing and never pays a second tip. The real process is killed with
 * SIGKILL at named points (RELAY_CRASH_AT), restarted on the same files, and must land the transaction with
 * exactly one tip paid.
 */
let simnet: Simnet;

/** Below the bypass tip: every auction is won, whatever slot a test happens to reach (issue #19). */
const CLEARING_TIP = 10_000;
const BYPASS_TIP = 250_000;

beforeAll(async () => {
  // Every leader runs the bundle engine, so a restarted sidecar's first send meets an engine window at once and the
  // leader schedule's timing takes no part in these tests. Two clean-clone CIs (session 13) each met a restarted
  // attempt judged lost (the journaled attempt dropped at slot 19, the next one landed, one tip paid: safe, but not
  // the one attempt these tests expect); the cause is not established. Losses after a restart are tested on purpose
  // below.
  simnet = await startSimnet({ slotMs: 60, rateLimit: false, bundleEngineShare: 1 });
  // The seeded auction's regime depends on the slot, and which slot a test reaches depends on how fast the machine
  // is: in a spike the clearing tip passes the bypass tip, the attempt rightly loses and a second one follows. That
  // was the CI failure of issue #19 ("two attempts"); here it is pinned, and tested on purpose below.
  simnet.engine.auction.setFixedClearingTip(CLEARING_TIP);
}, 20_000);

afterAll(async () => {
  await simnet?.stop();
});

async function setup(): Promise<{
  env: Record<string, string>;
  tipper: Keypair;
  payer: Keypair;
  dir: string;
}> {
  const dir = await mkdtemp(join(tmpdir(), 'relay-crash-'));
  const tipper = simnet.fundedKeypair(10_000_000_000);
  const payer = simnet.fundedKeypair(10_000_000_000);
  await writeFile(join(dir, 'tipper.json'), JSON.stringify([...tipper.secretKey]), { mode: 0o600 });
  const env = {
    ...simnet.env(),
    KEYPAIR_PATH: join(dir, 'tipper.json'),
    API_PORT: String(await freePort()),
    RELAY_DATA_DIR: join(dir, 'data'),
    LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl'),
    RELAY_POLICY_FILE: join(dir, 'relay.policy.json'),
    BUNDLE_ENGINE_RPS: '100',
    BYPASS_AGENT: '1',
    BYPASS_TIP_LAMPORTS: String(BYPASS_TIP),
  };
  return { env, tipper, payer, dir };
}

/**
 * Start the sidecar again with the chain standing still: how long a restart takes on a loaded machine must not
 * decide whether the bundle still lands in its window (issue #19).
 */
async function restartWithChainStopped(env: Record<string, string>): Promise<RunningSidecar> {
  simnet.cluster.stop();
  try {
    return await spawnSidecar(env);
  } finally {
    simnet.cluster.start();
  }
}

/** Wait until the transaction is finalized; its record then has one attempt and no retry. */
async function finalizedWithOneAttempt(url: string, txId: string): Promise<TxRecord> {
  await waitUntil(
    async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
    30_000,
    'finalized after restart',
  );
  const record: TxRecord = (await get(url, `/tx/${txId}`)).body;
  expect(record.attempts).toHaveLength(1);
  expect(record.retries).toBe(0);
  return record;
}

function transfer(payer: Keypair): string {
  const tx = new Transaction({
    feePayer: payer.publicKey,
    recentBlockhash: simnet.cluster.latestBlockhash().blockhash,
  });
  tx.add(
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 2_000_000,
    }),
  );
  tx.sign(payer);
  return tx.serialize().toString('base64');
}

describe.each(['attempt.journaled', 'attempt.sent'])('SIGKILL at %s', (point) => {
  test('restart lands the transaction with exactly one tip paid', async () => {
    const { env, tipper, payer, dir } = await setup();
    const balanceBefore = simnet.cluster.getBalance(tipper.publicKey.toBase58());
    const first: RunningSidecar = await spawnSidecar({ ...env, RELAY_CRASH_AT: point });
    const wire = transfer(payer);
    const enqueued = await post(first.url, '/tx/enqueue', { transaction: wire });
    expect(enqueued.status).toBe(202);
    const txId = enqueued.body.tx_id;
    expect(await first.exited).toBe('SIGKILL');
    expect(first.output()).toContain(`crash point ${point} reached`);

    // The chain stands still while relay is down.
    const second = await restartWithChainStopped(env);
    try {
      const record = await finalizedWithOneAttempt(second.url, txId);
      // Exactly one tip (plus one signature fee) left the tipper.
      await waitUntil(
        () => simnet.cluster.getBalance(tipper.publicKey.toBase58()) < balanceBefore,
        5000,
        'the tip to be paid',
      );
      expect(balanceBefore - simnet.cluster.getBalance(tipper.publicKey.toBase58())).toBe(BYPASS_TIP + 5000);
      // The user transaction is on chain once.
      const status = simnet.cluster.signatureStatus(record.tx_signatures[0] as string);
      expect(status?.err).toBeNull();
      const lifecycle = (await readFile(join(dir, 'lifecycle.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(new Set(lifecycle.map((e) => e.bundle_id)).size).toBe(1);
      expect(lifecycle[lifecycle.length - 1].stage).toBe('finalized');
    } finally {
      await second.stop();
    }
  }, 60_000);
});

test('a tipper pool: restarted with the pool in another order, the journaled attempt lands once, paid by the tipper it names', async () => {
  const { env, tipper, payer, dir } = await setup();
  const other = simnet.fundedKeypair(10_000_000_000);
  const otherPath = join(dir, 'tipper-2.json');
  await writeFile(otherPath, JSON.stringify([...other.secretKey]), { mode: 0o600 });
  const keys = [tipper, other].map((k) => k.publicKey.toBase58());
  const before = keys.map((k) => simnet.cluster.getBalance(k));
  const first = await spawnSidecar({
    ...env,
    KEYPAIR_PATH: `${env.KEYPAIR_PATH},${otherPath}`,
    RELAY_CRASH_AT: 'attempt.journaled',
  });
  const enqueued = await post(first.url, '/tx/enqueue', { transaction: transfer(payer) });
  expect(enqueued.status).toBe(202);
  const txId = enqueued.body.tx_id;
  expect(await first.exited).toBe('SIGKILL');

  // The pool comes back in the other order: a rebuilt tip would now go to the other tipper. The journaled bytes,
  // signed by the first, are what is resent, and the attempt still names the tipper that signed them.
  const second = await restartWithChainStopped({ ...env, KEYPAIR_PATH: `${otherPath},${env.KEYPAIR_PATH}` });
  try {
    const record = await finalizedWithOneAttempt(second.url, txId);
    expect(record.attempts[0]?.tipper).toBe(keys[0]);
    await waitUntil(
      () => simnet.cluster.getBalance(keys[0] as string) < (before[0] as number),
      5000,
      'the tip to be paid',
    );
    expect(keys.map((k, i) => (before[i] as number) - simnet.cluster.getBalance(k))).toEqual([
      BYPASS_TIP + 5000,
      0,
    ]);
    // Both tippers are watched and shown after the restart, in the new order.
    const status = (await get(second.url, '/status')).body;
    expect(status.tippers.map((t: { pubkey: string }) => t.pubkey)).toEqual([keys[1], keys[0]]);
  } finally {
    await second.stop();
  }
}, 60_000);

test('a restarted attempt that loses its auction is judged lost and retried, and only the winner pays a tip', async () => {
  const { env, tipper, payer } = await setup();
  const balanceBefore = simnet.cluster.getBalance(tipper.publicKey.toBase58());
  const first = await spawnSidecar({ ...env, RELAY_CRASH_AT: 'attempt.journaled' });
  const enqueued = await post(first.url, '/tx/enqueue', { transaction: transfer(payer) });
  expect(enqueued.status).toBe(202);
  const txId = enqueued.body.tx_id;
  expect(await first.exited).toBe('SIGKILL');
  // What the CI failure of issue #19 met by chance: the resent bundle's auctions clear above its tip.
  simnet.engine.auction.setFixedClearingTip(BYPASS_TIP * 4);
  const second = await spawnSidecar(env);
  try {
    await waitUntil(
      async () => (await get(second.url, `/tx/${txId}`)).body.attempts?.[0]?.outcome != null,
      30_000,
      'the resent attempt judged lost',
    );
    simnet.engine.auction.setFixedClearingTip(CLEARING_TIP);
    await waitUntil(
      async () => (await get(second.url, `/tx/${txId}`)).body.state === 'finalized',
      30_000,
      'finalized after the retry',
    );
    const record = (await get(second.url, `/tx/${txId}`)).body;
    // Bypass retries at once: on a loaded machine a retry can go out (and lose) before this test, polling, has
    // lowered the clearing tip. Every attempt but the last lost; the last finalized; each loss counted a retry.
    const attempts: Array<{ stage: string; outcome: string | null }> = record.attempts;
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    for (const lost of attempts.slice(0, -1)) expect(['dropped', 'fee_too_low']).toContain(lost.outcome);
    expect(attempts.at(-1)?.stage).toBe('finalized');
    expect(record.retries).toBe(attempts.length - 1);
    // The bundle that lost never executed: it paid neither tip nor fee.
    await waitUntil(
      () => simnet.cluster.getBalance(tipper.publicKey.toBase58()) < balanceBefore,
      5000,
      'the tip to be paid',
    );
    expect(balanceBefore - simnet.cluster.getBalance(tipper.publicKey.toBase58())).toBe(BYPASS_TIP + 5000);
  } finally {
    simnet.engine.auction.setFixedClearingTip(CLEARING_TIP);
    await second.stop();
  }
}, 90_000);

test('SIGKILL right after an enqueue is journaled: the repeat enqueue finds it and it lands', async () => {
  const { env, tipper, payer } = await setup();
  const balanceBefore = simnet.cluster.getBalance(tipper.publicKey.toBase58());
  const first = await spawnSidecar({ ...env, RELAY_CRASH_AT: 'enqueue.journaled' });
  const wire = transfer(payer);
  // The process dies before answering: the caller sees a failed request and retries after the restart.
  await expect(post(first.url, '/tx/enqueue', { transaction: wire })).rejects.toThrow();
  expect(await first.exited).toBe('SIGKILL');
  const second = await spawnSidecar(env);
  try {
    const repeat = await post(second.url, '/tx/enqueue', { transaction: wire });
    expect(repeat.status).toBe(200);
    await waitUntil(
      async () => (await get(second.url, `/tx/${repeat.body.tx_id}`)).body.state === 'finalized',
      30_000,
      'finalized',
    );
    expect(balanceBefore - simnet.cluster.getBalance(tipper.publicKey.toBase58())).toBe(BYPASS_TIP + 5000);
  } finally {
    await second.stop();
  }
}, 60_000);

test('SIGKILL between a status change and its webhook outbox write: the next start delivers it, with its live id', async () => {
  const { env, payer } = await setup();
  const received: Array<{ id: string; type: string; state?: string }> = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      received.push({ id: req.headers['webhook-id'] as string, type: body.type, state: body.data.state });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  const hooks = {
    ...env,
    RELAY_WEBHOOK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
    RELAY_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 9).toString('base64')}`,
  };
  // The 1st webhook event is the enqueue's `pending`; the 2nd, `submitted`, dies between store and outbox.
  const first = await spawnSidecar({
    ...hooks,
    RELAY_CRASH_AT: 'webhook.before-outbox',
    RELAY_CRASH_AFTER: '2',
  });
  let second: RunningSidecar | undefined;
  try {
    const enqueued = await post(first.url, '/tx/enqueue', { transaction: transfer(payer) });
    expect(enqueued.status).toBe(202);
    const txId: string = enqueued.body.tx_id;
    expect(await first.exited).toBe('SIGKILL');
    expect(first.output()).toContain('crash point webhook.before-outbox reached');

    second = await spawnSidecar(hooks);
    const url = second.url;
    await waitUntil(
      async () => (await get(url, `/tx/${txId}`)).body.state === 'finalized',
      30_000,
      'finalized',
    );
    const history: string[] = (await get(url, `/tx/${txId}`)).body.history.map(
      (h: { state: string }) => h.state,
    );
    const statuses = () => {
      const seen = new Map<string, string>();
      for (const r of received) if (r.type === 'tx_status_changed') seen.set(r.id, r.state as string);
      return seen;
    };
    await waitUntil(() => statuses().size === history.length, 15_000, 'every status delivered');
    // Every state once, in order, under the ids a live delivery would have used: the 2nd is the one the crash
    // kept out of the outbox, added back from the record at the start.
    expect([...statuses().values()]).toEqual(history);
    expect([...statuses().keys()]).toEqual(history.map((_, i) => `msg_${txId}_s${i}`));
    expect(history[1]).toBe('submitted');
  } finally {
    await second?.stop();
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  }
}, 60_000);

test('a bad environment stops start-up with one clear line', async () => {
  const { env } = await setup();
  const { RPC_URL: _omit, ...withoutRpc } = env;
  await expect(spawnSidecar(withoutRpc)).rejects.toThrow(
    /RELAY_E_CONFIG_MISSING_ENV: Environment variable RPC_URL is required/,
  );
  await expect(spawnSidecar({ ...env, KEYPAIR_PATH: '/nonexistent/id.json' })).rejects.toThrow(
    /RELAY_E_CONFIG_UNREADABLE_KEYPAIR/,
  );
  // A pool whose second file is missing: start-up names that file.
  await expect(
    spawnSidecar({ ...env, KEYPAIR_PATH: `${env.KEYPAIR_PATH},/nonexistent/pool-2.json` }),
  ).rejects.toThrow(
    /RELAY_E_CONFIG_UNREADABLE_KEYPAIR: Cannot read the keypair at \/nonexistent\/pool-2\.json/,
  );
  await expect(spawnSidecar({ ...env, BYPASS_TIP_LAMPORTS: '5000000' })).rejects.toThrow(
    /RELAY_E_CONFIG_BYPASS_TIP_ABOVE_MAX_TIP/,
  );
}, 30_000);

test('one sidecar per data directory: a second start refuses, naming it; after a SIGKILL the next start takes over', async () => {
  const { env } = await setup();
  const first = await spawnSidecar(env);
  let third: RunningSidecar | null = null;
  try {
    // Another port, the same files: it would replay the same journal and send everything twice.
    const secondEnv = { ...env, API_PORT: String(await freePort()) };
    await expect(spawnSidecar(secondEnv)).rejects.toThrow(
      new RegExp(
        `RELAY_E_CONFIG_DATA_DIR_IN_USE: The data directory ${env.RELAY_DATA_DIR} is in use by another relay sidecar \\(pid ${first.child.pid}\\)`,
      ),
    );
    expect((await get(first.url, '/healthz')).status).toBe(200); // the running one is untouched
    first.child.kill('SIGKILL');
    await first.exited;
    // The crash left its lock behind; a lock whose process is gone blocks nothing.
    expect(await readFile(join(env.RELAY_DATA_DIR as string, 'relay.lock'), 'utf8')).toBe(
      `${first.child.pid}\n`,
    );
    third = await spawnSidecar(env);
    expect((await get(third.url, '/healthz')).status).toBe(200);
  } finally {
    await third?.stop();
    if (first.child.exitCode === null && first.child.signalCode === null) await first.stop();
  }
}, 60_000);

test('SIGKILL with a packed bundle journaled: restart sends the same pack, its riders wait for it; one tip per bundle', async () => {
  const { env, tipper, dir } = await setup();
  const payers = Array.from({ length: 4 }, () => simnet.fundedKeypair(1_000_000_000));
  const tipperKey = tipper.publicKey.toBase58();
  const balanceBefore = simnet.cluster.getBalance(tipperKey);
  // One bundle a second: the first transaction takes the token and goes alone; the next three, enqueued together once
  // it went, wait for the next token and go as one pack (distinct payers, nothing written in common).
  // One regional engine (each region has its own bucket: with eight, all four would go out at once).
  // The sidecar's own reflex decides (no agent for 1 s), not bypass: a pack keeps every member's rank (tip per
  // requested CU), and a fixed bypass tip over one transaction ranks above the same tip over four, so nothing would
  // ride under it. The reflex prices a light transfer at min-tip, which leaves room under its rank for riders.
  const { BYPASS_AGENT: _bypass, BYPASS_TIP_LAMPORTS: _bypassTip, ...decided } = env;
  const packedEnv = {
    ...decided,
    AGENT_DECISION_MODE: 'reflex',
    RELAY_AGENT_GRACE_S: '1',
    BUNDLE_ENGINE_URL: (env.BUNDLE_ENGINE_URL ?? '').split(',')[0] as string,
    BUNDLE_ENGINE_GRPC_URL: (env.BUNDLE_ENGINE_GRPC_URL ?? '').split(',')[0] as string,
    BUNDLE_ENGINE_RPS: '1',
    BUNDLE_PACK_MAX: '4',
  };
  // The competitor pinned per requested CU (5,000 lamports over a 201,400-CU swap, testkit's default) instead of the
  // flat 10,000 the bypass tests run against: the reflex's min-tip bids for light transfers rank above it.
  simnet.engine.auction.setFixedClearingTip(null);
  simnet.engine.auction.setFixedClearingTipPerCu(5_000 / REFERENCE_BUNDLE_CU);
  try {
    await packedCrash(packedEnv, payers, tipperKey, balanceBefore, dir);
  } finally {
    simnet.engine.auction.setFixedClearingTipPerCu(null);
    simnet.engine.auction.setFixedClearingTip(CLEARING_TIP);
  }
}, 90_000);

async function packedCrash(
  packedEnv: Record<string, string>,
  payers: Keypair[],
  tipperKey: string,
  balanceBefore: number,
  dir: string,
): Promise<void> {
  const first = await spawnSidecar({ ...packedEnv, RELAY_CRASH_AT: 'pack.journaled' });
  const alone = await post(first.url, '/tx/enqueue', { transaction: transfer(payers[0] as Keypair) });
  expect(alone.status).toBe(202);
  // The engine took the first one alone (its region is recorded then) before the others are enqueued: decided
  // together, all four would go as one pack (a ready bundle waits briefly for decisions still to come).
  await waitUntil(
    async () => Boolean((await get(first.url, `/tx/${alone.body.tx_id as string}`)).body.attempts[0]?.region),
    15_000,
    'the engine to take the first transaction alone',
  );
  const rest = await Promise.all(
    payers.slice(1).map((p) => post(first.url, '/tx/enqueue', { transaction: transfer(p) })),
  );
  for (const r of rest) expect(r.status).toBe(202);
  expect(await first.exited).toBe('SIGKILL');
  expect(first.output()).toContain('crash point pack.journaled reached');

  const second = await restartWithChainStopped(packedEnv);
  try {
    const ids = [alone.body.tx_id as string, ...rest.map((r) => r.body.tx_id as string)];
    await waitUntil(
      async () => {
        for (const id of ids)
          if ((await get(second.url, `/tx/${id}`)).body.state !== 'finalized') return false;
        return true;
      },
      30_000,
      'all four finalized after restart',
    );
    const records: TxRecord[] = await Promise.all(
      ids.map(async (id) => (await get(second.url, `/tx/${id}`)).body),
    );
    // Two bundles landed: the first transaction's, and the pack carrying the other three.
    const landed = records.flatMap((r) => r.attempts.filter((a) => a.stage === 'finalized'));
    expect(landed).toHaveLength(2);
    for (const r of records) expect(r.retries).toBe(0);
    // Each user transaction is on chain once, and the tipper paid the two landed bundles' tips and two fees, no more.
    for (const r of records)
      expect(simnet.cluster.signatureStatus(r.tx_signatures[0] as string)?.err).toBeNull();
    const tips = landed.reduce((sum, a) => sum + a.tip_lamports, 0);
    await waitUntil(
      () => balanceBefore - simnet.cluster.getBalance(tipperKey) === tips + 2 * 5000,
      10_000,
      'two tips paid',
    );
    const lifecycle = (await readFile(join(dir, 'lifecycle.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { bundle_id: string; stage: string; transactions: string[] });
    const pack = lifecycle.find((e) => e.stage === 'finalized' && e.transactions.length === 4);
    expect(pack).toBeDefined();
  } finally {
    await second.stop();
  }
}
