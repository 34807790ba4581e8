import {
  COMPUTE_BUDGET_PROGRAM_ID,
  SYSTEM_PROGRAM_ID,
  choosePassengers,
  feePayerDebit,
  planPack,
  ranksAtLeast,
  type PackCandidate,
} from '../src';

const c = (item: string, writeLocks: string[], transactions = 1, lookups = false): PackCandidate<string> => ({
  item,
  writeLocks,
  transactions,
  lookups,
});

describe('choosePassengers', () => {
  const lead = { transactions: 1, writeLocks: ['payerA', 'dest1'], lookups: false };

  test('takes candidates in order while they lock nothing in common, up to four user transactions', () => {
    const picked = choosePassengers(lead, [
      c('b', ['payerB', 'dest2']),
      c('c', ['payerC', 'dest3']),
      c('d', ['payerD', 'dest4']),
      c('e', ['payerE', 'dest5']),
    ]);
    expect(picked).toEqual(['b', 'c', 'd']);
  });

  test('skips a candidate that writes what the lead or an earlier passenger writes, and goes on', () => {
    const picked = choosePassengers(lead, [
      c('samePayer', ['payerA', 'dest9']),
      c('b', ['payerB', 'pool']),
      c('samePool', ['payerC', 'pool']),
      c('d', ['payerD', 'dest4']),
    ]);
    expect(picked).toEqual(['b', 'd']);
  });

  test('counts every user transaction of a candidate, and skips one that would not fit', () => {
    const picked = choosePassengers(lead, [
      c('three', ['x', 'y'], 3),
      c('two', ['p', 'q'], 2),
      c('one', ['r']),
    ]);
    expect(picked).toEqual(['three']);
    expect(choosePassengers(lead, [c('two', ['p'], 2), c('one', ['r']), c('more', ['s'])])).toEqual([
      'two',
      'one',
    ]);
  });

  test('nothing rides with address-table lookups (unknown locks), nor past the configured maximum', () => {
    expect(choosePassengers({ ...lead, lookups: true }, [c('b', ['payerB'])])).toEqual([]);
    expect(choosePassengers(lead, [c('alt', ['payerB'], 1, true), c('b', ['payerC'])])).toEqual(['b']);
    expect(choosePassengers(lead, [c('b', ['payerB']), c('c', ['payerC'])], 2)).toEqual(['b']);
    expect(choosePassengers(lead, [c('b', ['payerB'])], 1)).toEqual([]);
    expect(choosePassengers({ ...lead, transactions: 4 }, [c('b', ['payerB'])])).toEqual([]);
    // The bundle limit holds whatever is configured.
    expect(
      choosePassengers(lead, [c('b', ['b']), c('c', ['c']), c('d', ['d']), c('e', ['e'])], 9),
    ).toHaveLength(3);
  });
});

describe('choosePassengers keeps every member rank (tip per requested CU)', () => {
  const priced = (
    item: string,
    writeLocks: string[],
    computeUnits: number,
    bidPerCu: number,
    dontFront = false,
  ): PackCandidate<string> => ({
    item,
    writeLocks,
    transactions: 1,
    lookups: false,
    computeUnits,
    bidPerCu,
    dontFront,
  });
  const lead = {
    transactions: 1,
    writeLocks: ['payerA'],
    lookups: false,
    computeUnits: 4_000,
    bidPerCu: 0.025,
  };
  const tip = { tipLamports: 1_000, overheadCu: 1_400 };

  test('light riders join while the pack still ranks each member at its own bid', () => {
    const picked = choosePassengers(
      lead,
      [
        priced('b', ['payerB'], 4_000, 0.025),
        priced('c', ['payerC'], 4_000, 0.025),
        priced('d', ['payerD'], 4_000, 0.025),
      ],
      4,
      tip,
    );
    expect(picked).toEqual(['b', 'c', 'd']);
    // 1,000 lamports over 17,400 CU = 0.057 per CU, at least every member's 0.025.
    expect(ranksAtLeast(tip.tipLamports, 4_000 * 4 + 1_400, 0.025)).toBe(true);
  });

  test('a heavy rider that would dilute the pack below a member bid stays out', () => {
    const picked = choosePassengers(
      lead,
      [priced('heavy', ['payerH'], 300_000, 0.001), priced('light', ['payerL'], 4_000, 0.025)],
      4,
      tip,
    );
    // 1,000 / 305,400 = 0.0033 < the lead's 0.025.
    expect(picked).toEqual(['light']);
  });

  test('a rider bidding more per CU than the pack offers stays out', () => {
    const picked = choosePassengers(lead, [priced('contended', ['payerX'], 4_000, 0.2)], 4, tip);
    expect(picked).toEqual([]);
  });

  test('a jitodontfront transaction never rides, priced or not', () => {
    expect(choosePassengers(lead, [priced('marked', ['payerM'], 4_000, 0.001, true)], 4, tip)).toEqual([]);
    expect(
      choosePassengers({ transactions: 1, writeLocks: ['payerA'], lookups: false }, [
        { item: 'marked', writeLocks: ['payerM'], transactions: 1, lookups: false, dontFront: true },
      ]),
    ).toEqual([]);
  });

  test('without the CU of the lead or a candidate nothing rides under a tip', () => {
    expect(
      choosePassengers(
        { transactions: 1, writeLocks: ['payerA'], lookups: false },
        [priced('b', ['payerB'], 1, 1)],
        4,
        tip,
      ),
    ).toEqual([]);
    expect(choosePassengers(lead, [c('unpriced', ['payerB'])], 4, tip)).toEqual([]);
  });
});

describe('planPack raises the pack tip so every member keeps its rank, within max-tip and the members own tips', () => {
  /** A rider bidding `bidPerCu` alone: its own tip is that bid over its CU and its own tip transaction's. */
  const rider = (
    item: string,
    payer: string,
    computeUnits: number,
    bidPerCu: number,
  ): PackCandidate<string> => ({
    item,
    writeLocks: [payer],
    transactions: 1,
    lookups: false,
    computeUnits,
    bidPerCu,
    tipLamports: Math.ceil(bidPerCu * (computeUnits + 1_400)),
  });
  // A 200k-CU lead bidding 0.05 per CU alone: 10,070 lamports over its 201,400 CU.
  const lead = {
    transactions: 1,
    writeLocks: ['payerA'],
    lookups: false,
    computeUnits: 200_000,
    bidPerCu: 0.05,
  };
  const leadTip = Math.ceil(0.05 * 201_400);

  test('riders at the same bid join and the tip rises to rank the whole pack at that bid', () => {
    const plan = planPack(
      lead,
      [
        rider('b', 'payerB', 300_000, 0.05),
        rider('c', 'payerC', 300_000, 0.05),
        rider('d', 'payerD', 300_000, 0.05),
      ],
      4,
      { tipLamports: leadTip, overheadCu: 1_400, maxLamports: 10_000_000 },
    );
    expect(plan.passengers).toEqual(['b', 'c', 'd']);
    const packCu = 200_000 + 1_400 + 3 * 300_000;
    expect(plan.tipLamports).toBe(Math.ceil(0.05 * packCu));
    expect(ranksAtLeast(plan.tipLamports, packCu, 0.05)).toBe(true);
    // Cheaper than four bundles at the same bid: the riders' tip transactions' CU are not paid for.
    const alone = leadTip + 3 * Math.ceil(0.05 * 301_400);
    expect(plan.tipLamports).toBeLessThan(alone);
  });

  test('without maxLamports the tip stays the lead and a rider it cannot rank stays out (the old rule)', () => {
    const plan = planPack(lead, [rider('b', 'payerB', 300_000, 0.05)], 4, {
      tipLamports: leadTip,
      overheadCu: 1_400,
    });
    expect(plan).toEqual({ passengers: [], tipLamports: leadTip });
  });

  test('the raise stops at max-tip: the riders that would pass it stay out', () => {
    const maxLamports = Math.ceil(0.05 * (201_400 + 300_000));
    const plan = planPack(
      lead,
      [rider('b', 'payerB', 300_000, 0.05), rider('c', 'payerC', 300_000, 0.05)],
      4,
      { tipLamports: leadTip, overheadCu: 1_400, maxLamports },
    );
    expect(plan.passengers).toEqual(['b']);
    expect(plan.tipLamports).toBeLessThanOrEqual(maxLamports);
  });

  test('the raise never passes what the members would tip alone: a rider outbidding the pack pays its own rank', () => {
    // A contended rider bids 0.5 per CU; ranking the lead's 200k CU at 0.5 too would cost more than both alone.
    const contended = rider('hot', 'payerH', 10_000, 0.5);
    const plan = planPack(lead, [contended], 4, {
      tipLamports: leadTip,
      overheadCu: 1_400,
      maxLamports: 10_000_000,
    });
    expect(plan).toEqual({ passengers: [], tipLamports: leadTip });
    // A rider with no own tip known gives nothing to raise with.
    const unknown = { ...rider('u', 'payerU', 300_000, 0.05), tipLamports: undefined };
    expect(
      planPack(lead, [unknown], 4, { tipLamports: leadTip, overheadCu: 1_400, maxLamports: 10_000_000 }),
    ).toEqual({
      passengers: [],
      tipLamports: leadTip,
    });
  });

  test('a rider the lead tip already ranks joins without a raise', () => {
    const rich = { ...lead, bidPerCu: 0.001 };
    const plan = planPack(rich, [rider('b', 'payerB', 4_000, 0.001)], 4, {
      tipLamports: 10_000,
      overheadCu: 1_400,
      maxLamports: 10_000_000,
    });
    expect(plan).toEqual({ passengers: ['b'], tipLamports: 10_000 });
  });
});

describe('feePayerDebit: what a transaction takes from its fee payer, when its bytes say it all', () => {
  const payer = 'Payer1111111111111111111111111111111111111';
  const transfer = (from: string, lamports: number) => {
    const data = Buffer.alloc(12);
    data.writeUInt32LE(2, 0);
    data.writeBigUInt64LE(BigInt(lamports), 4);
    return {
      program: SYSTEM_PROGRAM_ID,
      data,
      accounts: [from, 'To11111111111111111111111111111111111111111'],
    };
  };
  const price = (microLamports: number) => {
    const data = Buffer.alloc(9);
    data[0] = 3;
    data.writeBigUInt64LE(BigInt(microLamports), 1);
    return { program: COMPUTE_BUDGET_PROGRAM_ID, data, accounts: [] };
  };
  const limit = (units: number) => {
    const data = Buffer.alloc(5);
    data[0] = 2;
    data.writeUInt32LE(units, 1);
    return { program: COMPUTE_BUDGET_PROGRAM_ID, data, accounts: [] };
  };

  test('fees and transfers from the payer', () => {
    expect(feePayerDebit(payer, 1, [transfer(payer, 1_000_000)])).toBe(1_005_000);
    // Priority fee: 1,000,000 micro-lamports per CU over a 10,000-CU limit = 10,000 lamports.
    expect(feePayerDebit(payer, 1, [limit(10_000), price(1_000_000), transfer(payer, 7)])).toBe(
      5_000 + 10_000 + 7,
    );
    // Rounded up: 1 micro-lamport over 3,000 + 3,000 + 3,000 default CU (three builtins) = 0.009 lamports -> 1.
    expect(feePayerDebit(payer, 2, [price(1), transfer(payer, 0), transfer(payer, 0)])).toBe(10_001);
    expect(
      feePayerDebit(payer, 1, [
        { program: 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr', data: Buffer.from('hi'), accounts: [] },
      ]),
    ).toBe(5_000);
  });

  test('the priority fee in integers, as Agave computes it: no rounding at extreme prices', () => {
    const price = (microLamports: bigint) => {
      const data = Buffer.alloc(9);
      data[0] = 3;
      data.writeBigUInt64LE(microLamports, 1);
      return { program: COMPUTE_BUDGET_PROGRAM_ID, data, accounts: [] };
    };
    // 2^53 + 1 micro-lamports per CU over 6,000 CU (two builtins): 54,043,195,528,445.958 lamports, rounded up.
    expect(feePayerDebit(payer, 1, [price(9_007_199_254_740_993n), transfer(payer, 0)])).toBe(
      54_043_195_528_446 + 5_000,
    );
  });

  test('unknown when anything else may move lamports', () => {
    expect(feePayerDebit(payer, 1, [transfer('Other111111111111111111111111111111111111111', 1)])).toBeNull();
    expect(
      feePayerDebit(payer, 1, [
        { program: 'Prog111111111111111111111111111111111111111', data: Buffer.alloc(1), accounts: [payer] },
      ]),
    ).toBeNull();
    // A System instruction other than Transfer (CreateAccount), or a truncated one.
    expect(feePayerDebit(payer, 1, [{ ...transfer(payer, 1), data: Buffer.alloc(52) }])).toBeNull();
    expect(feePayerDebit(payer, 1, [{ ...transfer(payer, 1), data: Buffer.alloc(4) }])).toBeNull();
  });
});

describe('planPack lets members share only their fee payer while it can pay them all in sequence', () => {
  const same = (item: string, debit: number, extra: string[] = []): PackCandidate<string> => ({
    item,
    writeLocks: ['hot-wallet', `to-${item}`, ...extra],
    transactions: 1,
    lookups: false,
    payerDebits: { 'hot-wallet': debit },
  });
  const lead = same('lead', 1_000);

  test('riders of the same payer join while its spendable lamports cover every debit together', () => {
    const funds = new Map([['hot-wallet', 2_500]]);
    expect(planPack(lead, [same('b', 1_000), same('c', 1_000)], 4, null, funds).passengers).toEqual(['b']);
    expect(planPack(lead, [same('b', 1_000), same('c', 500)], 4, null, funds).passengers).toEqual(['b', 'c']);
  });

  test('no funds read, an unknown debit, or another shared account: it does not ride', () => {
    expect(planPack(lead, [same('b', 1)], 4, null).passengers).toEqual([]);
    const funds = new Map([['hot-wallet', 1e9]]);
    const unknown = { ...same('u', 1), payerDebits: undefined };
    expect(planPack(lead, [unknown], 4, null, funds).passengers).toEqual([]);
    // Shares the payer and the lead's recipient: not only the payer.
    expect(planPack(lead, [same('b', 1, ['to-lead'])], 4, null, funds).passengers).toEqual([]);
    // The lead's own debit unknown: its payer cannot be shared.
    expect(planPack({ ...lead, payerDebits: undefined }, [same('b', 1)], 4, null, funds).passengers).toEqual(
      [],
    );
  });

  test('a member that writes a wallet it does not pay from keeps that wallet closed to later riders', () => {
    const funds = new Map([['hot-wallet', 1e9]]);
    const lead: PackCandidate<string> = {
      item: 'lead',
      writeLocks: ['lead-payer', 'to-lead'],
      transactions: 1,
      lookups: false,
      payerDebits: { 'lead-payer': 5_000 },
    };
    // Pays into the hot wallet from its own payer: the hot wallet is written, its debit from it unknown.
    const credits: PackCandidate<string> = {
      item: 'credits-wallet',
      writeLocks: ['third-payer', 'hot-wallet'],
      transactions: 1,
      lookups: false,
      payerDebits: { 'third-payer': 5_000 },
    };
    expect(planPack(lead, [credits, same('b', 1)], 4, null, funds).passengers).toEqual(['credits-wallet']);
    // The other order: the wallet's own transaction first, then the one crediting it shares a non-payer key.
    expect(planPack(lead, [same('b', 1), credits], 4, null, funds).passengers).toEqual(['b']);
  });
});
