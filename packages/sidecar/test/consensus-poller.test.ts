import { ConsensusDetector } from '@solrelay/core';
import { genesisSlotOf, migrationSlotOf, readConsensusInfo } from '../src/inputs/consensus-poller';

const METHOD_NOT_FOUND = { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } };
const answer = (result: unknown) => ({ jsonrpc: '2.0', id: 1, result });

describe('the consensus poller reads Agave 4.3 answers (DESIGN §12)', () => {
  it('reads the migration slot: a slot, null (none planned), or undefined (cannot say)', () => {
    expect(migrationSlotOf(answer(64))).toBe(64);
    expect(migrationSlotOf(answer(null))).toBeNull();
    // A node older than 4.3: unknown, never "no migration".
    expect(migrationSlotOf(METHOD_NOT_FOUND)).toBeUndefined();
    expect(migrationSlotOf({ error: { code: -32005, message: 'Node is unhealthy' } })).toBeUndefined();
    expect(migrationSlotOf(answer('64'))).toBeUndefined();
    expect(migrationSlotOf(answer(-1))).toBeUndefined();
    expect(migrationSlotOf({ jsonrpc: '2.0', id: 1 })).toBeUndefined();
    expect(migrationSlotOf(undefined)).toBeUndefined();
  });

  it('reads the genesis certificate: its block slot, null (not migrated), or undefined (cannot say)', () => {
    expect(genesisSlotOf(answer({ block: { slot: 66, blockId: [1, 2, 3] } }))).toBe(66);
    expect(genesisSlotOf(answer(null))).toBeNull();
    expect(genesisSlotOf(METHOD_NOT_FOUND)).toBeUndefined();
    expect(genesisSlotOf(answer({ slot: 66 }))).toBeUndefined();
    expect(genesisSlotOf(answer({ block: { slot: 'x' } }))).toBeUndefined();
  });

  it('a node without the methods leaves a known migration slot as it was', async () => {
    const detector = new ConsensusDetector();
    const feed = async (rawRequest: (method: string) => Promise<unknown>) => {
      const info = await readConsensusInfo({ rawRequest });
      detector.observeMigrationSlot(info.migrationSlot);
      detector.observeGenesisSlot(info.genesisSlot);
      return info;
    };
    expect(await feed(async (m) => (m === 'getAlpenglowMigrationSlot' ? answer(100) : answer(null)))).toEqual(
      { migrationSlot: 100, genesisSlot: null },
    );
    expect(detector.snapshot().migrationSlot).toBe(100);
    // Behind a load balancer, the next answer comes from an older node: -32601 says nothing.
    expect(await feed(async () => METHOD_NOT_FOUND)).toEqual({
      migrationSlot: undefined,
      genesisSlot: undefined,
    });
    expect(detector.snapshot().migrationSlot).toBe(100);
    // A transport failure says nothing either.
    expect(
      await feed(async () => {
        throw new Error('fetch failed');
      }),
    ).toEqual({ migrationSlot: undefined, genesisSlot: undefined });
    expect(detector.snapshot().migrationSlot).toBe(100);
  });
});
