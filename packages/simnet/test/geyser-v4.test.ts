/**
 * Conformance: @triton-one/yellowstone-grpc 4.0.2 (pure JS, grpc-js + ts-proto; installed as yellowstone-grpc-v4)
 * against the simnet's Yellowstone server. Slot and transaction-status streams with x-token, pings both ways, filter
 * replacement, from_slot replay and OUT_OF_RANGE, stream cuts.
 */
import Client, { CommitmentLevel, txErrDecode } from 'yellowstone-grpc-v4';
import bs58 from 'bs58';
import { SimCluster } from '../src/chain/cluster';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import { startGeyserServer, type GeyserServerHandle } from '../src/geyser/server';
import { Faults } from '../src/faults';
import { Collector, requestsApplied, subscribeRequest } from './geyser-helpers';

type Update = {
  filters: string[];
  slot?: { slot: string; parent?: string; status: number; deadError?: string };
  transactionStatus?: { slot: string; signature: Uint8Array; index: string; err?: { err: Uint8Array } };
  ping?: object;
  pong?: { id: number };
  blockMeta?: { slot: string; blockhash: string; blockHeight?: { blockHeight: string } };
};

describe('Yellowstone server with @triton-one/yellowstone-grpc 4.0.2', () => {
  const faults = new Faults();
  const cluster = new SimCluster({ seed: 21, faults });
  const payer = TestKeypair.generate();
  const other = TestKeypair.generate();
  let server: GeyserServerHandle;
  let client: Client;
  const streams: Array<{ cancel(): void; destroy(): void }> = [];

  async function open(): Promise<{
    stream: Awaited<ReturnType<Client['subscribe']>>;
    updates: Collector<Update>;
  }> {
    const stream = await client.subscribe();
    streams.push(stream);
    return { stream, updates: new Collector<Update>(stream) };
  }

  function transfer(from: TestKeypair, lamports: number): Uint8Array {
    return createTransferTx({
      from,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
  }

  beforeAll(async () => {
    cluster.airdrop(payer.publicKey, 10_000_000_000);
    cluster.airdrop(other.publicKey, 10_000_000_000);
    cluster.advance(5);
    server = await startGeyserServer({
      cluster,
      faults,
      xToken: 'secret',
      pingIntervalMs: 150,
      replaySlots: 20,
    });
    client = new Client(server.endpoint, 'secret', undefined);
  });

  afterAll(async () => {
    for (const stream of streams) {
      stream.cancel();
      stream.destroy();
    }
    client._client.close();
    cluster.close();
    await server.close();
  });

  it('answers the unary calls', async () => {
    expect(await client.ping(7)).toBe(7);
    expect(await client.getSlot(CommitmentLevel.PROCESSED)).toBe(String(cluster.slot));
    expect(await client.getSlot(CommitmentLevel.CONFIRMED)).toBe(String(cluster.slotAt('confirmed')));
    expect(await client.getBlockHeight(CommitmentLevel.PROCESSED)).toBe(String(cluster.blockHeight));
    const latest = await client.getLatestBlockhash(CommitmentLevel.CONFIRMED);
    expect(latest.blockhash).toBe(cluster.latestBlockhash('confirmed').blockhash);
    expect(await client.isBlockhashValid(latest.blockhash)).toMatchObject({ valid: true });
    expect(await client.isBlockhashValid(bs58.encode(new Uint8Array(32).fill(9)))).toMatchObject({
      valid: false,
    });
    expect(JSON.parse(await client.getVersion())).toHaveProperty('version.package');
  });

  it('refuses a wrong x-token with UNAUTHENTICATED', async () => {
    const intruder = new Client(server.endpoint, 'wrong', undefined);
    await expect(intruder.ping(1)).rejects.toMatchObject({ code: 16 });
    const stream = await intruder.subscribe();
    const updates = new Collector<Update>(stream);
    expect((await updates.waitForError()).code).toBe(16);
    stream.destroy();
    intruder._client.close();
  });

  it('streams slots and matching transaction statuses, with bincode errors', async () => {
    const { stream, updates } = await open();
    stream.write(
      subscribeRequest({
        slots: { slots: {} },
        transactionsStatus: {
          payer: { accountInclude: [payer.publicKey], accountExclude: [], accountRequired: [] },
          failedOnly: {
            accountInclude: [payer.publicKey],
            accountExclude: [],
            accountRequired: [],
            failed: true,
          },
        },
        commitment: CommitmentLevel.PROCESSED,
      }),
    );
    await requestsApplied(stream, updates);
    const ok = transfer(payer, 1_000_000);
    const failing = transfer(payer, 1_000_000_000_000);
    const unrelated = transfer(other, 1_000_000);
    for (const wire of [ok, failing, unrelated]) expect(cluster.submitTransaction(wire).ok).toBe(true);
    cluster.advance(3);
    const landedSlot = String(cluster.slot - 2);

    const okUpdate = await updates.waitFor(
      (u) => bs58.encode(u.transactionStatus?.signature ?? []) === signatureOf(ok),
    );
    expect(okUpdate.filters).toEqual(['payer']);
    expect(okUpdate.transactionStatus?.slot).toBe(landedSlot);
    expect(okUpdate.transactionStatus?.err).toBeUndefined();

    const failUpdate = await updates.waitFor(
      (u) => bs58.encode(u.transactionStatus?.signature ?? []) === signatureOf(failing),
    );
    expect(failUpdate.filters.sort()).toEqual(['failedOnly', 'payer']);
    const err = failUpdate.transactionStatus?.err?.err as Uint8Array;
    expect([...err]).toEqual([8, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0]);
    expect(JSON.stringify(txErrDecode.decode(err))).toMatch(/Custom/);

    await updates.waitFor((u) => u.slot?.slot === String(cluster.slot) && u.slot.status === 0);
    const confirmed = await updates.waitFor((u) => u.slot?.slot === landedSlot && u.slot.status === 1);
    expect(confirmed.filters).toEqual(['slots']);
    expect(confirmed.slot?.parent).toBe(String(Number(landedSlot) - 1));
    expect(
      updates.updates.some(
        (u) => bs58.encode(u.transactionStatus?.signature ?? []) === signatureOf(unrelated),
      ),
    ).toBe(false);
    // Interslot statuses only when asked for.
    expect(updates.updates.some((u) => u.slot && u.slot.status > 2)).toBe(false);
  });

  it("streams block meta with each block's blockhash and height (upstream field 5, BlockHeight)", async () => {
    const { stream, updates } = await open();
    stream.write(subscribeRequest({ blocksMeta: { meta: {} }, commitment: CommitmentLevel.PROCESSED }));
    await requestsApplied(stream, updates);
    cluster.advance(2);
    const slot = cluster.slot;
    const meta = await updates.waitFor((u) => u.blockMeta?.slot === String(slot));
    expect(meta.filters).toEqual(['meta']);
    expect(meta.blockMeta?.blockhash).toBe(cluster.latestBlockhash('processed').blockhash);
    expect(meta.blockMeta?.blockHeight?.blockHeight).toBe(String(cluster.blockHeightAt('processed')));
  });

  it('sends server pings, answers client pings with pongs, and replaces filters on each request', async () => {
    const { stream, updates } = await open();
    stream.write(subscribeRequest({ slots: { a: {} } }));
    await updates.waitFor((u) => u.ping !== undefined);
    stream.write(subscribeRequest({ ping: { id: 42 } }));
    expect((await updates.waitFor((u) => u.pong !== undefined)).pong?.id).toBe(42);
    // The ping did not clear the filters.
    cluster.advance(1);
    await updates.waitFor((u) => u.slot?.slot === String(cluster.slot) && u.filters.includes('a'));
    // A new request replaces the whole set: only `b` now, and only the finalized status.
    stream.write(
      subscribeRequest({ slots: { b: { filterByCommitment: true } }, commitment: CommitmentLevel.FINALIZED }),
    );
    await requestsApplied(stream, updates);
    const mark = updates.updates.length;
    cluster.advance(40); // past the 32-slot finalization lag
    const finalizedBefore = cluster.slotAt('finalized');
    cluster.advance(2);
    await updates.waitFor((u) => u.slot?.slot === String(cluster.slotAt('finalized')), undefined, mark);
    const after = updates.updates.slice(mark).filter((u) => u.slot);
    expect(after.every((u) => u.filters.join() === 'b' && u.slot?.status === 2)).toBe(true);
    expect(after.map((u) => Number(u.slot?.slot)).slice(-3)).toEqual([
      finalizedBefore,
      finalizedBefore + 1,
      finalizedBefore + 2,
    ]);
  });

  it('emits dead slots only with interslot_updates', async () => {
    const { stream, updates } = await open();
    stream.write(subscribeRequest({ slots: { plain: {}, inter: { interslotUpdates: true } } }));
    await requestsApplied(stream, updates);
    faults.set({ deadSlotRate: 1 });
    cluster.advance(1);
    faults.reset();
    const doomed = cluster.slot;
    cluster.advance(1);
    const dead = await updates.waitFor((u) => u.slot?.status === 6);
    expect(dead.slot?.slot).toBe(String(doomed));
    expect(dead.filters).toEqual(['inter']);
    expect(dead.slot?.deadError).toBeTruthy();
  });

  it('replays from_slot out of the ring buffer, then goes live; OUT_OF_RANGE beyond it', async () => {
    cluster.advance(30); // more than the 20-slot buffer
    const from = cluster.slot - 10;
    const { stream, updates } = await open();
    stream.write(subscribeRequest({ slots: { s: {} }, fromSlot: String(from) }));
    await updates.waitFor((u) => u.slot?.slot === String(cluster.slot) && u.slot.status === 0);
    const processed = updates.updates.filter((u) => u.slot?.status === 0).map((u) => Number(u.slot?.slot));
    expect(processed.slice(0, 11)).toEqual(Array.from({ length: 11 }, (_, i) => from + i));
    cluster.advance(1);
    await updates.waitFor((u) => u.slot?.slot === String(cluster.slot) && u.slot.status === 0);

    const late = await open();
    late.stream.write(subscribeRequest({ slots: { s: {} }, fromSlot: String(cluster.slot - 25) }));
    const error = await late.updates.waitForError();
    expect(error.code).toBe(11);
    expect(error.details).toMatch(/is not available, last available: \d+/);
  });

  it('ends every Subscribe with UNAVAILABLE on cutStreams', async () => {
    const first = await open();
    const second = await open();
    first.stream.write(subscribeRequest({ slots: { s: {} } }));
    second.stream.write(subscribeRequest({}));
    await requestsApplied(first.stream, first.updates);
    await requestsApplied(second.stream, second.updates);
    faults.cutStreams();
    expect((await first.updates.waitForError()).code).toBe(14);
    expect((await second.updates.waitForError()).code).toBe(14);
  });

  it('cuts every Subscribe again and again while streamCutIntervalMs is set, and stops when cleared', async () => {
    faults.set({ streamCutIntervalMs: 100 });
    try {
      for (let i = 0; i < 3; i++) {
        const next = await open();
        next.stream.write(subscribeRequest({ slots: { s: {} } }));
        const error = await next.updates.waitForError(2_000);
        expect(error.code).toBe(14);
        expect(error.details).toMatch(/stream cut/);
      }
    } finally {
      faults.reset();
    }
    const calm = await open();
    calm.stream.write(subscribeRequest({ slots: { s: {} } }));
    await requestsApplied(calm.stream, calm.updates);
    cluster.advance(1);
    await calm.updates.waitFor((u) => u.slot !== undefined);
    expect(calm.updates.error).toBeNull();
  });
});
