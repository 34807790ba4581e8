/**
 * Conformance: @triton-one/yellowstone-grpc 7.x (napi binding over the Rust tonic client) against the simnet's
 * Yellowstone server. Its prost encoder omits empty map values (`slots: {client: {}}`), which the server must
 * decode; its errors carry no gRPC codes, so failures are asserted by message.
 */
import Client, { CommitmentLevel, txErrDecode } from '@triton-one/yellowstone-grpc';
import { inspect } from 'node:util';
import bs58 from 'bs58';
import { SimCluster } from '../src/chain/cluster';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import { startGeyserServer, type GeyserServerHandle } from '../src/geyser/server';
import { Faults } from '../src/faults';
import { Collector, requestsApplied, subscribeRequest } from './geyser-helpers';

type Update = {
  filters: string[];
  slot?: { slot: string | bigint; parent?: string | bigint; status: number; deadError?: string };
  transactionStatus?: { slot: string | bigint; signature: Uint8Array; err?: { err: Uint8Array } };
  pong?: { id: number };
};

describe('Yellowstone server with @triton-one/yellowstone-grpc 7.x (napi)', () => {
  const faults = new Faults();
  const cluster = new SimCluster({ seed: 31, faults });
  const payer = TestKeypair.generate();
  let server: GeyserServerHandle;
  let client: Client;
  const streams: Array<{ destroy(): void }> = [];

  async function open(request: never) {
    const stream = await client.subscribe(request);
    streams.push(stream);
    return { stream, updates: new Collector<Update>(stream) };
  }

  beforeAll(async () => {
    cluster.airdrop(payer.publicKey, 10_000_000_000);
    cluster.advance(5);
    server = await startGeyserServer({
      cluster,
      faults,
      xToken: 'secret',
      pingIntervalMs: 200,
      replaySlots: 20,
    });
    client = new Client(server.endpoint, 'secret', undefined);
    await client.connect();
  });

  afterAll(async () => {
    for (const stream of streams) stream.destroy();
    cluster.close();
    await server.close();
  });

  it('answers unary calls', async () => {
    expect((await client.ping(3)).count).toBe(3);
    expect(String((await client.getSlot(CommitmentLevel.PROCESSED)).slot)).toBe(String(cluster.slot));
    const replay = await client.subscribeReplayInfo();
    expect(Number(replay.firstAvailable)).toBeGreaterThan(0);
  });

  it('decodes empty map values and streams slots + transaction statuses; pings get pongs', async () => {
    const { stream, updates } = await open(
      subscribeRequest({
        slots: { client: {} },
        transactionsStatus: {
          mine: { accountInclude: [payer.publicKey], accountExclude: [], accountRequired: [] },
        },
        commitment: CommitmentLevel.PROCESSED,
      }),
    );
    await requestsApplied(stream, updates);
    const failing = createTransferTx({
      from: payer,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000_000_000 }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
    expect(cluster.submitTransaction(failing).ok).toBe(true);
    cluster.advance(1);
    const status = await updates.waitFor(
      (u) => bs58.encode(u.transactionStatus?.signature ?? []) === signatureOf(failing),
    );
    expect(status.filters).toEqual(['mine']);
    expect(String(status.transactionStatus?.slot)).toBe(String(cluster.slot));
    const decoded = txErrDecode.decode(status.transactionStatus?.err?.err as Uint8Array);
    expect(JSON.stringify(decoded)).toMatch(/InstructionError/);
    const slot = await updates.waitFor((u) => String(u.slot?.slot) === String(cluster.slot));
    expect(slot.filters).toEqual(['client']);

    stream.write(subscribeRequest({ ping: { id: 9 } }));
    expect((await updates.waitFor((u) => u.pong?.id === 9)).pong?.id).toBe(9);
  });

  it('an orphaned block: statuses back to null, no message, its slot never confirms; a replay failure gets SLOT_DEAD', async () => {
    const { stream, updates } = await open(
      subscribeRequest({
        slots: { client: { interslotUpdates: true } }, // SLOT_DEAD is an inter-slot update
        transactionsStatus: {
          mine: { accountInclude: [payer.publicKey], accountExclude: [], accountRequired: [] },
        },
        commitment: CommitmentLevel.PROCESSED,
      }),
    );
    await requestsApplied(stream, updates);
    const transfer = createTransferTx({
      from: payer,
      transfers: [{ to: TestKeypair.generate().publicKey, lamports: 1_000_000 }],
      recentBlockhash: cluster.latestBlockhash('processed').blockhash,
    });
    expect(cluster.submitTransaction(transfer).ok).toBe(true);
    const orphanedBefore = faults.injected.orphanedBlocks;
    faults.set({ orphanedBlockRate: 1 });
    cluster.advance(1);
    faults.reset();
    const orphan = cluster.slot;
    const parent = cluster.block(orphan)?.parentSlot as number;
    await updates.waitFor((u) => bs58.encode(u.transactionStatus?.signature ?? []) === signatureOf(transfer));
    expect(cluster.signatureStatus(signatureOf(transfer))?.slot).toBe(orphan);

    cluster.advance(4); // the next block builds on the orphan's parent; two more slots confirm past it
    const next = orphan + 1;
    await updates.waitFor((u) => String(u.slot?.slot) === String(next + 1) && u.slot?.status === 1);
    expect(faults.injected.orphanedBlocks).toBe(orphanedBefore + 1);
    expect(cluster.signatureStatus(signatureOf(transfer))).toBeNull();
    const aboutOrphan = updates.updates.filter((u) => String(u.slot?.slot) === String(orphan));
    // First shred, bank created, completed, processed; then silence: no DEAD, no CONFIRMED.
    expect(aboutOrphan.map((u) => u.slot?.status)).toEqual([3, 5, 4, 0]);
    const confirmedNext = updates.updates.find(
      (u) => String(u.slot?.slot) === String(next) && u.slot?.status === 1,
    );
    expect(String(confirmedNext?.slot?.parent)).toBe(String(parent)); // the fork shows only in the parent link

    faults.set({ deadSlotRate: 1 });
    cluster.advance(1);
    faults.reset();
    const dead = cluster.slot;
    cluster.advance(1);
    const deadUpdate = await updates.waitFor(
      (u) => String(u.slot?.slot) === String(dead) && u.slot?.status === 6,
    );
    expect(deadUpdate.slot?.deadError).toBe('slot marked dead');
  });

  it('reconnects with from_slot after a cut and sees every slot once; OUT_OF_RANGE beyond the buffer', async () => {
    const first = await open(subscribeRequest({ slots: { s: {} } }));
    await requestsApplied(first.stream, first.updates);
    cluster.advance(3);
    await first.updates.waitFor((u) => String(u.slot?.slot) === String(cluster.slot));
    const lastSeen = Math.max(
      ...first.updates.updates.filter((u) => u.slot?.status === 0).map((u) => Number(u.slot?.slot)),
    );
    faults.cutStreams();
    const cut = await first.updates.waitForError();
    // The napi client reports no gRPC code or details ("subscribe stream receive failed").
    expect(cut).toBeInstanceOf(Error);
    cluster.advance(4); // slots pass while disconnected

    const second = await open(subscribeRequest({ slots: { s: {} }, fromSlot: String(lastSeen + 1) }));
    await second.updates.waitFor(
      (u) => String(u.slot?.slot) === String(cluster.slot) && u.slot?.status === 0,
    );
    const replayed = second.updates.updates
      .filter((u) => u.slot?.status === 0)
      .map((u) => Number(u.slot?.slot));
    expect(replayed).toEqual(Array.from({ length: cluster.slot - lastSeen }, (_, i) => lastSeen + 1 + i));

    cluster.advance(25);
    // The napi client sends the request while opening the stream, so the refusal rejects subscribe() itself.
    const refused = await client
      .subscribe(subscribeRequest({ slots: { s: {} }, fromSlot: String(lastSeen + 1) }) as never)
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(refused).not.toBeNull();
    expect(inspect(refused)).toMatch(
      /past the valid range.*broadcast from \d+ is not available, last available: \d+/,
    );
  });
});
