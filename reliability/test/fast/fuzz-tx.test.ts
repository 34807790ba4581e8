import { Keypair, VersionedTransaction } from '@solana/web3.js';
import { PACKET_DATA_SIZE, mutate, oversizeDataLength, oversizeTransaction } from '../../src/fuzz-tx';

/**
 * The request fuzzer's transaction generator must itself be right: a "must refuse" case that is in fact a valid
 * transaction makes fuzz-routes fail by chance (issue #19: `oversize` with a small size built exactly 1,232 bytes).
 */
const payer = Keypair.generate();
const blockhash = Keypair.generate().publicKey.toBase58();

test('every oversize size the fuzzer can draw is above a packet', () => {
  // The whole range `mutate` draws from, through the pure size arithmetic.
  const wrong: string[] = [];
  for (let size = 0; size < 64 * 1024; size++) {
    const requested = PACKET_DATA_SIZE + 1 + size;
    const data = oversizeDataLength(requested);
    const prefix = data < 0x80 ? 1 : data < 0x4000 ? 2 : 3;
    const built = 1 + 64 + 3 + 1 + 32 * 3 + 1 + 1 + 1 + prefix + data;
    // Exact except where the data's length prefix grows by a byte at that very size.
    if (built < requested || built - requested > 1)
      wrong.push(`size ${size}: ${built} bytes for ${requested}`);
  }
  expect(wrong).toEqual([]);
});

test.each([0, 1, 2, 3, 127, 128, 15_000, 16_383, 16_384, 20_000])(
  'the oversize mutation of size %i is a parseable, signed transaction above a packet',
  (size) => {
    const encoded = mutate(Buffer.alloc(0), { kind: 'oversize', size }, { payer, blockhash });
    const wire = Buffer.from(encoded.text, 'base64');
    expect(encoded.corrupt).toBe(true);
    expect(wire.length).toBeGreaterThan(PACKET_DATA_SIZE);
    // Well-formed apart from its size: web3.js parses it and finds the payer's signature over the message.
    const parsed = VersionedTransaction.deserialize(wire);
    expect(parsed.message.staticAccountKeys[0]?.toBase58()).toBe(payer.publicKey.toBase58());
  },
);

test('oversizeTransaction builds the size asked for', () => {
  for (const size of [1233, 1234, 1300, 4096])
    expect(oversizeTransaction(payer, blockhash, size).length).toBe(size);
});
