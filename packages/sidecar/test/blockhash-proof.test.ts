import {
  BlockhashChecks,
  INTAKE_RECHECKS,
  INTAKE_RECHECK_MS,
  INTAKE_SLOT_SLACK_SLOTS,
} from '../src/chain/blockhash';
import type { StoredTx } from '../src/store/records';
import type { SolanaRpc } from '../src/upstream/solana-rpc';

/** A fake RPC (pure logic under test): validity per commitment, switchable. */
function setup(chain: { slot: number; finalizedSlot: number }) {
  const valid = { processed: true, finalized: true };
  const rpc = {
    isBlockhashValid: async (_blockhash: string, commitment: 'processed' | 'finalized') => valid[commitment],
    getNonceValue: async () => null,
  } as unknown as SolanaRpc;
  let now = 0;
  const checks = new BlockhashChecks(
    rpc,
    () => (now += 2_000), // every read is fresh (the validity cache keeps an answer 1 s)
    () => chain.slot,
    () => chain.finalizedSlot,
  );
  return { checks, valid };
}

const tx = (enqueued_block_height?: number, enqueued_slot = 0): StoredTx =>
  ({
    signatures: ['sig'],
    blockhashes: ['hash'],
    nonce_accounts: [null],
    enqueued_slot,
    ...(enqueued_block_height === undefined ? {} : { enqueued_block_height }),
  }) as unknown as StoredTx;

test('by height: dead once the finalized height passes intake height + 150 + 32, not before', async () => {
  const { checks } = setup({ slot: 500, finalizedSlot: 400 });
  expect(await checks.provablyDead(tx(100), 282)).toBe(false);
  expect(await checks.provablyDead(tx(100), 283)).toBe(true);
  expect(await checks.provablyDead(tx(100), null)).toBe(false); // the height is unknown now
  expect(await checks.provablyDead(tx(), 10_000)).toBe(false); // no intake height: rule 1 says nothing
});

test('by validity: only a blockhash relay saw valid, once the root has passed that point, invalid at both', async () => {
  const chain = { slot: 100, finalizedSlot: 60 };
  const { checks, valid } = setup(chain);
  valid.processed = false;
  valid.finalized = false;
  // Never seen valid (it may be newer than the node's bank): no proof.
  expect(await checks.provablyDead(tx(), null)).toBe(false);
  valid.processed = true;
  expect(await checks.stillValid('hash')).toBe(true); // seen valid at slot 100 (at intake, say)
  valid.processed = false;
  // Invalid at both now, but the root (60) has not passed slot 100: "newer than the root" is not ruled out.
  expect(await checks.provablyDead(tx(), null)).toBe(false);
  chain.finalizedSlot = 101;
  expect(await checks.provablyDead(tx(), null)).toBe(true);
  valid.finalized = true; // still valid at the root: not dead
  expect(await checks.provablyDead(tx(), null)).toBe(false);
});

test('after a restart (nothing seen valid by this process, no intake height): the intake slot + slack stands in', async () => {
  // Accepted at slot 100 by an earlier process, with no fresh block height; this process never saw the blockhash valid.
  const chain = { slot: 400, finalizedSlot: 100 + INTAKE_SLOT_SLACK_SLOTS };
  const { checks, valid } = setup(chain);
  valid.processed = false;
  valid.finalized = false;
  // The root has not passed intake + slack: the caller's blockhash may still be newer than the root.
  expect(await checks.provablyDead(tx(undefined, 100), null)).toBe(false);
  chain.finalizedSlot = 101 + INTAKE_SLOT_SLACK_SLOTS;
  expect(await checks.provablyDead(tx(undefined, 100), null)).toBe(true);
  valid.finalized = true; // still valid at the root: not dead
  expect(await checks.provablyDead(tx(undefined, 100), null)).toBe(false);
  valid.finalized = false;
  valid.processed = true; // still valid at processed: not dead
  expect(await checks.provablyDead(tx(undefined, 100), null)).toBe(false);
});

describe('at intake, a blockhash is refused as expired only on the word of a node at or past relay slot', () => {
  /** A fake RPC whose node sits at `nodeSlot`: it refuses a minContextSlot above it (-32016), as Agave does. */
  function intake(answers: { slack: boolean; atRelaySlot: boolean }, nodeSlots: number[]) {
    const asked: Array<number | undefined> = [];
    const rpc = {
      isBlockhashValid: async (_b: string, _c: string, minContextSlot?: number) => {
        asked.push(minContextSlot);
        const nodeSlot = nodeSlots.shift() ?? 0;
        if (minContextSlot !== undefined && nodeSlot < minContextSlot)
          throw new Error('Minimum context slot has not been reached (-32016)');
        return minContextSlot === 100 ? answers.atRelaySlot : answers.slack;
      },
    } as unknown as SolanaRpc;
    const slept: number[] = [];
    const checks = new BlockhashChecks(
      rpc,
      () => 0, // one moment: the validity cache (1 s) holds what was last answered
      () => 100,
      () => 50,
      async (ms) => {
        slept.push(ms);
      },
    );
    return { checks, asked, slept };
  }

  test('valid from a node two slots behind: accepted at once', async () => {
    const { checks, asked } = intake({ slack: true, atRelaySlot: true }, [98]);
    expect(await checks.expiredAtIntake('hash')).toBe(false);
    expect(asked).toEqual([98]);
  });

  test('"invalid" from a node behind relay (the blockhash may be newer than its bank), valid at relay slot: accepted', async () => {
    const { checks, asked, slept } = intake({ slack: false, atRelaySlot: true }, [98, 99, 100]);
    expect(await checks.expiredAtIntake('hash')).toBe(false);
    expect(asked).toEqual([98, 100, 100]);
    expect(slept).toEqual([INTAKE_RECHECK_MS]);
    expect(await checks.stillValid('hash')).toBe(true); // the later answer is the one the cache keeps
  });

  test('invalid at relay slot too: refused', async () => {
    const { checks } = intake({ slack: false, atRelaySlot: false }, [98, 101]);
    expect(await checks.expiredAtIntake('hash')).toBe(true);
  });

  test('no node reaches relay slot in time: not proven, accepted (the expiry proof decides later)', async () => {
    const { checks, asked, slept } = intake({ slack: false, atRelaySlot: false }, [98, 99, 99, 99, 99]);
    expect(await checks.expiredAtIntake('hash')).toBe(false);
    expect(asked).toHaveLength(1 + INTAKE_RECHECKS);
    expect(slept).toHaveLength(INTAKE_RECHECKS - 1);
  });
});

test("a blockhash's blocks left: its block's height (the stream's block meta) + 150 - the latest height; null when unseen", () => {
  const { checks } = setup({ slot: 500, finalizedSlot: 468 });
  expect(checks.blocksLeft('never-seen')).toBeNull();
  for (let height = 1_000; height <= 1_032; height++) checks.recordBlock(`hash-${height}`, height);
  // A `confirmed`-like blockhash one block behind, and a `finalized`-like one 32 behind.
  expect(checks.blocksLeft('hash-1031')).toBe(149);
  expect(checks.blocksLeft('hash-1000')).toBe(118);
  // Only the last two lives of blocks (and a margin) are kept: the oldest are forgotten, not guessed.
  for (let height = 1_033; height <= 1_500; height++) checks.recordBlock(`hash-${height}`, height);
  expect(checks.blocksLeft('hash-1000')).toBeNull();
  expect(checks.blocksLeft('hash-1400')).toBe(50);
  // A block reported again (a replay after a reconnect) keeps its height; the latest height never steps back.
  checks.recordBlock('hash-1400', 1_400);
  expect(checks.blocksLeft('hash-1500')).toBe(150);
});
