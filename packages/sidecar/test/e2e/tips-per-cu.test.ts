import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  type TransactionInstruction,
} from '@solana/web3.js';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { counterValue, startPackingStack, startRelayStack, waitAllFinalized } from '../helpers/relay-stack';

/**
 * Tips priced per requested CU and by contention, and packs that keep every member's rank (DESIGN §11, issue 30), over
 * the wire: the real sidecar's own reflex (no agent, no bypass) against the simnet's engine and RPC.
 */

const MARKER = new PublicKey('jitodontfront111111111111111111111111111111');

interface AttemptView {
  attempt: number;
  bundle_id: string;
  /** The slot it went out in (created, for one never sent). */
  slot_submitted: number;
  tip_lamports: number;
  stage: string;
  compute_units: number | null;
  tip_per_cu: number | null;
  bid_per_cu: number | null;
  priced_by: string | null;
}

interface EntryView {
  bundle_id: string;
  tx_id: string;
  slot_submitted: number;
  stage: string;
  transactions: string[];
  tip_lamports: number;
  compute_units?: number | null;
  tip_per_cu?: number | null;
  contention?: string | null;
  priced_by?: string | null;
}

/** A signed transfer of `from` to `to` (a fresh account unless given), with extra instructions first. */
function transfer(
  stack: Stack<Sidecar>,
  from: Keypair,
  options: { to?: PublicKey; computeUnitLimit?: number; marked?: boolean } = {},
): string {
  const { blockhash } = stack.simnet.cluster.latestBlockhash('confirmed');
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash });
  const instructions: TransactionInstruction[] = [];
  if (options.computeUnitLimit !== undefined)
    instructions.push(ComputeBudgetProgram.setComputeUnitLimit({ units: options.computeUnitLimit }));
  const move = SystemProgram.transfer({
    fromPubkey: from.publicKey,
    toPubkey: options.to ?? Keypair.generate().publicKey,
    lamports: 1_000_000,
  });
  if (options.marked) move.keys.push({ pubkey: MARKER, isSigner: false, isWritable: false });
  instructions.push(move);
  tx.add(...instructions);
  tx.sign(from);
  return tx.serialize().toString('base64');
}

async function enqueue(url: string, transaction: string): Promise<string> {
  const answer = await post(url, '/tx/enqueue', { transaction });
  expect(answer.status).toBe(202);
  return answer.body.tx_id as string;
}

async function attemptsOf(url: string, id: string): Promise<AttemptView[]> {
  return (await get(url, `/tx/${id}`)).body.attempts as AttemptView[];
}

/** A stack started once for the enclosing suite and closed after it; returns its getter. */
function stackPerSuite(start: () => Promise<Stack<Sidecar>>): () => Stack<Sidecar> {
  let stack: Stack<Sidecar> | undefined;
  beforeAll(async () => {
    stack = await start();
  }, 30_000);
  afterAll(async () => {
    await stack?.close();
  });
  return () => stack as Stack<Sidecar>;
}

async function lifecycle(url: string): Promise<EntryView[]> {
  return ((await get(url, '/lifecycle?last=500')).body as { entries: EntryView[] }).entries;
}

describe('packs under per-CU pricing', () => {
  const current = stackPerSuite(startPackingStack);
  let stack: Stack<Sidecar>;
  let url: string;
  beforeAll(() => {
    stack = current();
    url = stack.sidecar.url;
  });

  test('a pack never ranks a member below its own bid; a jitodontfront transaction never rides', async () => {
    const payers = Array.from({ length: 9 }, () => stack.simnet.fundedKeypair(100_000_000));
    // Six light transfers (3,000 CU each, no limit set), one marked light transfer, two heavy ones (1,000,000 CU asked
    // by SetComputeUnitLimit): one region takes a bundle a second, so they queue and packs form.
    const light = await Promise.all(payers.slice(0, 6).map((p) => enqueue(url, transfer(stack, p))));
    const marked = await enqueue(url, transfer(stack, payers[6] as Keypair, { marked: true }));
    const heavy = await Promise.all(
      payers.slice(7).map((p) => enqueue(url, transfer(stack, p, { computeUnitLimit: 1_000_000 }))),
    );
    await waitAllFinalized(url, [...light, marked], 90_000);
    // The heavy ones were priced (their first attempt built).
    await waitUntil(
      async () => {
        for (const id of heavy) if ((await attemptsOf(url, id)).length === 0) return false;
        return true;
      },
      30_000,
      'the heavy transactions priced',
    );

    const ids = [...light, marked, ...heavy];
    const bySignature = new Map<string, string>();
    const attempts = new Map<string, AttemptView[]>();
    for (const id of ids) {
      bySignature.set((await get(url, `/tx/${id}`)).body.tx_signatures[0] as string, id);
      attempts.set(id, await attemptsOf(url, id));
    }
    // Every attempt shows its bundle's requested CU, its tip per CU and what priced it.
    for (const id of ids)
      for (const a of attempts.get(id) ?? []) {
        expect(a.compute_units).toBeGreaterThan(0);
        expect(a.tip_per_cu).toBeCloseTo(a.tip_lamports / (a.compute_units as number), 9);
        expect(a.priced_by).toMatch(/contended|uncontended|contention unknown/);
      }
    // A heavy transaction's attempt alone: 1,000,000 CU asked, plus relay's tip transaction (450..1,399).
    for (const id of heavy) {
      const first = (attempts.get(id) ?? [])[0] as AttemptView;
      expect(first.compute_units).toBeGreaterThanOrEqual(1_000_450);
      expect(first.compute_units).toBeLessThan(1_001_400);
    }

    const entries = await lifecycle(url);
    const packs = entries.filter((e) => e.transactions.length > 2);
    expect(await counterValue(url, 'relay_packed_bundles_total')).toBeGreaterThan(0);
    expect(packs.length).toBeGreaterThan(0);
    for (const pack of packs) {
      const members = pack.transactions.slice(0, -1).map((s) => bySignature.get(s));
      // Each member's own bid when it rode (the attempt it had then: what its pricing asked per CU): the pack ranks
      // at least that. A member's later attempt, after the pack was lost, may bid more (escalation) and is not this
      // pack's to match.
      for (const member of members) {
        expect(member).toBeDefined();
        const rode = (attempts.get(member as string) ?? [])
          .filter((a) => a.slot_submitted <= pack.slot_submitted)
          .at(-1);
        expect(rode).toBeDefined();
        const bid = rode?.bid_per_cu;
        if (bid != null)
          expect(
            (pack.tip_per_cu ?? 0) >= bid
              ? 'ranks'
              : `pack ${pack.bundle_id} at ${pack.tip_per_cu} per CU below ${member} #${rode?.attempt} bidding ${bid}`,
          ).toBe('ranks');
      }
      // The pack's CU counts every member and the tip transaction: 3,000 per light transfer, 1M per heavy one.
      const userCu = members.reduce((sum, m) => sum + (heavy.includes(m as string) ? 1_000_000 : 3_000), 0);
      expect(pack.compute_units).toBeGreaterThanOrEqual(userCu + 450);
      expect(pack.compute_units).toBeLessThan(userCu + 1_400);
      expect(pack.tip_per_cu).toBeCloseTo(pack.tip_lamports / (pack.compute_units as number), 9);
    }
    // The marked transaction is first in every bundle it was ever in: it never rode.
    const markedSignature = (await get(url, `/tx/${marked}`)).body.tx_signatures[0] as string;
    for (const entry of entries) {
      const at = entry.transactions.indexOf(markedSignature);
      if (at >= 0) expect(at).toBe(0);
    }
    // And the engine refused no bundle of relay's (a marked rider behind a carrier would be refused).
    const metrics = (await get(url, '/metrics')).body as string;
    expect(metrics).toMatch(/relay_engine_requests_total\{[^}]*result="accepted"[^}]*\} [1-9]/);
    expect(metrics).not.toMatch(/relay_engine_requests_total\{[^}]*result="rejected"[^}]*\} [1-9]/);
  }, 150_000);
});

describe('the tip per CU follows contention', () => {
  let stack: Stack<Sidecar>;
  let url: string;

  beforeAll(async () => {
    stack = await startRelayStack({
      simnet: { slotMs: 150, regions: 1 },
      clearingTip: 1_000,
      // No packing: each transaction's landing is its own bundle's (the landing figures below count by bundle).
      env: { RELAY_AGENT_GRACE_S: '1', BUNDLE_PACK_MAX: '1' },
    });
    url = stack.sidecar.url;
    await waitUntil(async () => (await get(url, '/readyz')).status === 200, 15_000, 'ready');
    // The background market has priced the hottest account in most recent slots (getRecentPrioritizationFees).
    const hot = stack.simnet.engine.hotAccounts[0] as string;
    await waitUntil(
      async () => {
        const fees = await stack.connection().getRecentPrioritizationFees({
          lockedWritableAccounts: [new PublicKey(hot)],
        });
        const priced = fees.filter((f) => f.prioritizationFee > 0).length;
        return fees.length >= 10 && priced * 2 > fees.length;
      },
      30_000,
      'the hot account priced in most recent slots',
    );
  }, 60_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('a contended write set gets a higher tip per CU than an uncontended one, each entry naming its signal', async () => {
    const hot = new PublicKey(stack.simnet.engine.hotAccounts[0] as string);
    const [a, b] = [stack.simnet.fundedKeypair(100_000_000), stack.simnet.fundedKeypair(100_000_000)];
    // The same compute (1,000,000 CU asked), one writing a hot pool-like account, one a fresh account.
    const contended = await enqueue(
      url,
      transfer(stack, a as Keypair, { to: hot, computeUnitLimit: 1_000_000 }),
    );
    const quiet = await enqueue(url, transfer(stack, b as Keypair, { computeUnitLimit: 1_000_000 }));
    const firstEntry = async (id: string) => {
      let found: EntryView | undefined;
      await waitUntil(
        async () => {
          found = (await lifecycle(url)).find((e) => e.tx_id === id);
          return found !== undefined;
        },
        30_000,
        `the lifecycle entry of ${id}`,
      );
      return found as EntryView;
    };
    const hotEntry = await firstEntry(contended);
    const quietEntry = await firstEntry(quiet);
    expect(hotEntry.contention).toBe('contended');
    expect(hotEntry.priced_by).toMatch(/^contended write set/);
    expect(quietEntry.contention).toBe('uncontended');
    expect(quietEntry.priced_by).toMatch(/^uncontended write set/);
    expect(hotEntry.compute_units).toBeGreaterThanOrEqual(1_000_450);
    expect(quietEntry.compute_units).toBeGreaterThanOrEqual(1_000_450);
    expect(hotEntry.tip_per_cu ?? 0).toBeGreaterThan(quietEntry.tip_per_cu ?? Infinity);
    expect(hotEntry.tip_lamports).toBeGreaterThan(quietEntry.tip_lamports);

    // Landing and cost per contention class (/status, /metrics): each landed bundle under the class it was priced for.
    await waitAllFinalized(url, [contended, quiet], 60_000);
    const expected = new Map<string, { landed: number; tips: number }>();
    for (const id of [contended, quiet]) {
      const record = (await get(url, `/tx/${id}`)).body as { attempts: AttemptView[] };
      const won = record.attempts.find((x) => x.stage === 'finalized') as AttemptView;
      const entry = (await get(url, `/bundle/${won.bundle_id}`)).body as EntryView;
      const tally = expected.get(entry.contention as string) ?? { landed: 0, tips: 0 };
      expected.set(entry.contention as string, {
        landed: tally.landed + 1,
        tips: tally.tips + won.tip_lamports,
      });
    }
    expect([...expected.keys()].sort()).toEqual(['contended', 'uncontended']);
    const landing = (await get(url, '/status')).body.landing as {
      by_contention: Array<{ contention: string; landed: number; tips_paid_lamports: number }>;
    };
    const metrics = (await get(url, '/metrics')).body as string;
    for (const [contention, { landed, tips }] of expected) {
      expect(landing.by_contention.find((c) => c.contention === contention)).toMatchObject({
        landed,
        tips_paid_lamports: tips,
      });
      const line = metrics
        .split('\n')
        .filter(
          (l) => l.startsWith('relay_bundles_landed_total{') && l.includes(`contention="${contention}"`),
        )
        .reduce((n, l) => n + Number(l.split(' ')[1]), 0);
      expect(line).toBe(landed);
    }
  }, 120_000);
});
