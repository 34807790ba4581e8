import { diagnoseUserTransactions, recheckEngineFailure } from '../src/operator/diagnose';
import type { StoredTx } from '../src/store/records';
import type { SolanaRpc } from '../src/upstream/solana-rpc';

/**
 * A fake RPC node (pure logic under test) at `nodeSlot`, whose bank shows the payer unfunded: like Agave, it refuses a
 * `minContextSlot` above its own slot (-32016) rather than answer from an older bank.
 */
function nodeAt(nodeSlot: number, balance: number) {
  const asked: Array<number | undefined> = [];
  const behind = (min?: number) => {
    if (min !== undefined && min > nodeSlot)
      throw new Error('Minimum context slot has not been reached (-32016)');
  };
  const rpc = {
    getBalance: async (_address: string, _commitment: string, minContextSlot?: number) => {
      asked.push(minContextSlot);
      behind(minContextSlot);
      return balance;
    },
    simulate: async (_wire: Uint8Array, minContextSlot?: number) => {
      behind(minContextSlot);
      return null;
    },
  } as unknown as SolanaRpc;
  return { rpc, asked };
}

const tx = { fee_payers: ['payer'], wires: null } as unknown as StoredTx;

test('"the fee payer cannot pay" is said only by a node at the slot relay judges at; one behind cannot say', async () => {
  const stale = nodeAt(98, 0);
  expect(await diagnoseUserTransactions(stale.rpc, tx, 100)).toBeNull();
  expect(stale.asked).toEqual([100]);
  const fresh = nodeAt(100, 0);
  expect(await diagnoseUserTransactions(fresh.rpc, tx, 100)).toMatchObject({ outcome: 'insufficient_funds' });
  const funded = nodeAt(100, 1_000_000);
  expect(await diagnoseUserTransactions(funded.rpc, tx, 100)).toBeNull();
});

describe("re-checking an engine's fatal verdict on a bundle of several transactions", () => {
  const bundle = { signatures: ['s0', 's1'], wires: ['AQ==', 'Ag=='] };
  const clean = { simulate: async () => null };

  test('a verdict on a later member cannot be re-checked alone: unavailable (not fatal, a retry counted)', async () => {
    expect(await recheckEngineFailure(clean, bundle, 's1', 100)).toMatchObject({ kind: 'unavailable' });
  });

  test('no member named and the first runs clean: that clears nothing, unavailable', async () => {
    expect(await recheckEngineFailure(clean, bundle, null, 100)).toMatchObject({ kind: 'unavailable' });
    // Alone, the first running clean is the engine's lag.
    expect(
      await recheckEngineFailure(clean, { signatures: ['s0'], wires: ['AQ=='] }, null, 100),
    ).toMatchObject({
      kind: 'cleared',
    });
  });

  test('the bytes gone: unverifiable', async () => {
    expect(await recheckEngineFailure(clean, { signatures: ['s0'], wires: null }, 's0', 100)).toEqual({
      kind: 'unverifiable',
    });
  });
});
