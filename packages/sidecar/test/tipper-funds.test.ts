import { Keypair } from '@solana/web3.js';
import { DEFAULT_POLICY, emptyTimeline, isRelayError, type Policy } from '@solrelay/core';
import bs58 from 'bs58';
import { TIP_LANDING_HORIZON_SLOTS } from '../src/chain/tip-life';
import { TipSigner } from '../src/engine/tip-tx';
import { Metrics } from '../src/metrics';
import {
  RENT_EXEMPT_MINIMUM,
  mayStillDebit,
  tipCost,
  tipperLoads,
  tipperOf,
} from '../src/operator/tipper-funds';
import { TipperPool } from '../src/operator/tippers';
import type { StoredAttempt, StoredTx } from '../src/store/records';

/**
 * The tipper pool's arithmetic and choices, on fakes (no I/O): what an attempt may still take from its tipper after
 * a balance read, and which tipper the next tip goes to. The same behaviour over the wire is in
 * e2e/tipper-funds.test.ts and e2e/tipper-pool.test.ts.
 */

const CHAIN = { slot: 1000, blockHeight: 900 };
const TIP = 50_000;

function attempt(over: Partial<StoredAttempt>): StoredAttempt {
  return {
    attempt: 1,
    bundle_id: 'b'.repeat(64),
    tip_lamports: TIP,
    tip_tx: null,
    tip_signature: 'tipsig',
    tip_account: 'acct',
    tipper: 'T1',
    tip_last_valid_block_height: 950,
    bundle_signatures: [],
    created_at: 0,
    created_slot: 990,
    slot_submitted: 991,
    target_slot: 992,
    window_end_slot: 995,
    leader: null,
    stage: 'submitted',
    outcome: null,
    slot_landed: null,
    floor_at_submit: { p25: 0, p50: 0, p75: 0, p95: 0, p99: 0, ema: 0, stale: false },
    decision: { mode: 'reflex', bypass: true, escalated: false, reason: 't', trace: null, source: 'bypass' },
    reserved_lamports: TIP + 5000,
    released: false,
    leaked: false,
    timeline: emptyTimeline(),
    send_errors: 0,
    ...over,
  };
}

function tx(attempts: StoredAttempt[]): StoredTx {
  return { tx_id: `tx_${Math.random()}`, attempts } as unknown as StoredTx;
}

describe('what an attempt may still take from its tipper after a balance read at slot 995', () => {
  test.each([
    ['built, not yet sent', { stage: 'journaled' as const }, true],
    ['sent, not settled', { stage: 'submitted' as const }, true],
    ['landed after the read', { stage: 'processed' as const, slot_landed: 996 }, true],
    [
      'landed at or before the read (in the balance)',
      { stage: 'finalized' as const, slot_landed: 995 },
      false,
    ],
    ['lost, its blockhash alive (an uncled block may re-broadcast it)', { stage: 'failed' as const }, true],
    ['lost, its blockhash long dead', { stage: 'failed' as const, tip_last_valid_block_height: 800 }, false],
    ['leaked after the read', { stage: 'failed' as const, leaked: true, slot_landed: 999 }, true],
    ['leaked before the read', { stage: 'failed' as const, leaked: true, slot_landed: 990 }, false],
    ['no tip transaction ("tip":"included")', { tip_signature: null, tipper: null }, false],
  ])('%s', (_what, over, expected) => {
    expect(mayStillDebit(attempt(over), 995, CHAIN)).toBe(expected);
  });

  test('per tipper, summed over the records, with the attempts in flight counted', () => {
    const loads = tipperLoads(
      [
        tx([attempt({ stage: 'failed' }), attempt({ attempt: 2, stage: 'submitted' })]),
        tx([attempt({ tipper: 'T2', stage: 'journaled' })]),
        tx([attempt({ tipper: 'T2', stage: 'finalized', slot_landed: 900 })]),
        tx([attempt({ tipper: 'gone', stage: 'submitted' })]),
      ],
      new Map([
        ['T1', 995],
        ['T2', 995],
      ]),
      CHAIN,
    );
    expect(loads.get('T1')).toEqual({ reserved: 2 * tipCost(TIP), inFlight: 1 });
    expect(loads.get('T2')).toEqual({ reserved: tipCost(TIP), inFlight: 1 });
    expect(loads.has('gone')).toBe(false);
  });
});

test('an attempt journaled before the pool names its tipper through its tip transaction', () => {
  const keypair = Keypair.generate();
  const tip = new TipSigner(keypair).build({
    tipAccount: Keypair.generate().publicKey.toBase58(),
    lamports: TIP,
    blockhash: bs58.encode(Buffer.alloc(32, 7)),
  });
  const old = attempt({ tip_tx: Buffer.from(tip.wire).toString('base64') });
  delete old.tipper;
  expect(tipperOf(old)).toBe(keypair.publicKey.toBase58());
});

describe('the pool', () => {
  function rig(n: number, policy: Partial<Policy> = {}) {
    const keypairs = Array.from({ length: n }, () => Keypair.generate());
    const records = new Map<string, StoredTx>();
    // Other hosts' attempts (a fleet sharing tippers): what otherHostsTips answers, and the slot it was asked from.
    const others: StoredAttempt[] = [];
    const asked: number[] = [];
    const log = { warn: jest.fn(), info: jest.fn(), debug: jest.fn(), error: jest.fn() };
    // Exactly the ports the pool declares; the log is a recording stand-in for pino's.
    const ports: ConstructorParameters<typeof TipperPool>[0] = {
      log: log as unknown as ConstructorParameters<typeof TipperPool>[0]['log'],
      metrics: new Metrics(),
      policy: () => ({ ...DEFAULT_POLICY, ...policy }),
      now: () => 0,
      chain: CHAIN as ConstructorParameters<typeof TipperPool>[0]['chain'],
      store: {
        held: () => Promise.resolve([...records.values()]),
        otherHostsTips: (since: number) => {
          asked.push(since);
          return Promise.resolve([...others]);
        },
      } as ConstructorParameters<typeof TipperPool>[0]['store'],
    };
    const pool = new TipperPool(ports, keypairs);
    const keys = keypairs.map((k) => k.publicKey.toBase58());
    const fund = (lamports: number[], slot = 995) =>
      pool.setBalances(
        keys.map((pubkey, i) => ({ pubkey, lamports: lamports[i] as number, contextSlot: slot })),
      );
    return { pool, keys, records, others, asked, fund, log };
  }

  test('takes the tipper used longest ago, so consecutive bundles lock different accounts', async () => {
    const { pool, keys, fund } = rig(3);
    await fund([10e9, 10e9, 10e9]);
    const used = Array.from({ length: 6 }, () => pool.reserve(TIP).pubkey);
    expect(used).toEqual([...keys, ...keys]);
  });

  test('a reservation counts at once: two tips the balance pays only one of are never both built', async () => {
    const { pool, keys, fund } = rig(1);
    await fund([RENT_EXEMPT_MINIMUM + tipCost(TIP) + 1000]);
    pool.reserve(TIP);
    let refusal: unknown;
    try {
      pool.reserve(TIP);
    } catch (error) {
      refusal = error;
    }
    expect(isRelayError(refusal, 'RELAY_E_TIPPER_UNDERFUNDED')).toBe(true);
    const details = (refusal as { details: Record<string, unknown> }).details;
    expect(details.tipper).toBe(keys[0]);
    expect(details.reserved_lamports).toBe(tipCost(TIP));
    expect(details.shortfall_lamports).toBe(tipCost(TIP) - 1000);
    expect(pool.paused).toMatch(
      /a transaction waits for funds: tipper \w+ holds \d+ lamports.*short by 54000/,
    );
  });

  test('a cancelled reservation frees its lamports; a journaled one stays counted until a scan sees its attempt', async () => {
    const { pool, keys, records, fund } = rig(1);
    await fund([RENT_EXEMPT_MINIMUM + tipCost(TIP)]);
    pool.reserve(TIP).cancel();
    const kept = pool.reserve(TIP);
    kept.journaled();
    kept.cancel(); // after the journal: the attempt exists, its tip stays reserved
    expect(() => pool.reserve(TIP)).toThrow(/short by/);
    // The next read's scan finds the attempt in the records: counted once, not twice.
    records.set('tx_1', tx([attempt({ tipper: keys[0] as string })]));
    await fund([RENT_EXEMPT_MINIMUM + 2 * tipCost(TIP)]);
    expect(pool.status()[0]).toMatchObject({ reserved_lamports: tipCost(TIP), in_flight: 1 });
    expect(pool.reserve(TIP).pubkey).toBe(keys[0]);
  });

  test('a fleet sharing a tipper: what other hosts’ attempts may still take is reserved too; a settled one is not', async () => {
    const { pool, keys, others, asked, fund } = rig(1);
    const shared = keys[0] as string;
    others.push(
      attempt({ tipper: shared, stage: 'submitted' }),
      attempt({ attempt: 2, tipper: shared, stage: 'failed', tip_last_valid_block_height: 850 }), // its tip is dead
    );
    await fund([RENT_EXEMPT_MINIMUM + 2 * tipCost(TIP)]);
    expect(asked).toEqual([CHAIN.slot - TIP_LANDING_HORIZON_SLOTS]);
    expect(pool.status()[0]).toMatchObject({ reserved_lamports: tipCost(TIP), in_flight: 1 });
    pool.reserve(TIP); // the one left beside the other host's tip in flight
    expect(() => pool.reserve(TIP)).toThrow(/short by/);
  });

  test('the fleet’s other tippers (from other hosts’ attempts) are named for the stream to watch; this pool’s are not', async () => {
    const { pool, keys, others, fund } = rig(1);
    const elsewhere = Keypair.generate().publicKey.toBase58();
    expect(pool.fleetTippers).toEqual([]);
    others.push(
      attempt({ tipper: keys[0] as string, stage: 'submitted' }),
      attempt({ attempt: 2, tipper: elsewhere, stage: 'journaled' }),
      attempt({ attempt: 3, tipper: null, tip_tx: null, stage: 'submitted' }), // "tip":"included": no tipper
    );
    await fund([10e9]);
    expect(pool.fleetTippers).toEqual([elsewhere]);
    // The next pass reads the fleet again: a tipper whose attempts are all settled is dropped.
    others.splice(0);
    await fund([10e9]);
    expect(pool.fleetTippers).toEqual([]);
  });

  test("a pack's raise is reserved on the carrier's own tipper only if it covers it beside what it holds", async () => {
    const { pool, keys, fund } = rig(2);
    await fund([RENT_EXEMPT_MINIMUM + tipCost(TIP) + 30_000, 10e9]);
    const first = pool.reserve(TIP);
    expect(first.pubkey).toBe(keys[0]);
    first.journaled();
    // 30,000 more fits on that tipper (and no other tipper is asked); a second 30,000 does not.
    const raise = pool.raise(keys[0] as string, 30_000);
    expect(raise?.pubkey).toBe(keys[0]);
    expect(pool.raise(keys[0] as string, 1)).toBeNull();
    // Cancelled before it is journaled: the lamports are free again. Counted once as a tip in flight.
    raise?.cancel();
    expect(pool.raise(keys[0] as string, 30_000)).not.toBeNull();
    expect(pool.status()[0]).toMatchObject({ in_flight: 1 });
    // An unknown or held tipper is never raised on.
    expect(pool.raise('unknown', 1)).toBeNull();
    pool.tipFailed(attempt({ tipper: keys[1] as string, stage: 'failed' }), 'simulation failed');
    expect(pool.raise(keys[1] as string, 1)).toBeNull();
  });

  test('a short tipper is passed over; the pool pauses only when none can pay', async () => {
    const { pool, keys, fund } = rig(2);
    await fund([RENT_EXEMPT_MINIMUM + 1000, 10e9]);
    expect(pool.reserve(TIP).pubkey).toBe(keys[1]);
    expect(pool.reserve(TIP).pubkey).toBe(keys[1]);
    expect(pool.paused).toBeNull();
    await fund([RENT_EXEMPT_MINIMUM + 1000, RENT_EXEMPT_MINIMUM]);
    expect(pool.paused).toMatch(/no tipper can pay even a min-tip tip/);
  });

  test('a tipper whose own tip transaction failed is held until a read covers that tip; the other carries on', async () => {
    const { pool, keys, fund } = rig(2);
    await fund([10e9, 10e9]);
    pool.tipFailed(attempt({ tipper: keys[0] as string, stage: 'failed' }), 'simulation failed');
    expect(pool.reserve(TIP).pubkey).toBe(keys[1]);
    expect(pool.reserve(TIP).pubkey).toBe(keys[1]);
    expect(pool.status()[0]?.held_reason).toMatch(/could not execute \(simulation failed\)/);
    await fund([10e9, 10e9]);
    expect(pool.status()[0]?.held_reason).toBeNull();
    expect(pool.reserve(TIP).pubkey).toBe(keys[0]);
  });

  test('a reading older than the last one is ignored (a lagging node behind a load balancer)', async () => {
    const { pool, keys, fund } = rig(1);
    await fund([10e9], 995);
    await pool.setBalances([{ pubkey: keys[0] as string, lamports: 1, contextSlot: 990 }]);
    expect(pool.status()[0]?.balance_lamports).toBe(10e9);
  });

  test('before any balance is read, a tip waits (no guess)', async () => {
    const { pool } = rig(1);
    expect(() => pool.reserve(TIP)).toThrow(/not been read yet/);
  });
});
