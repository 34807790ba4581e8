import { Connection, Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { startSimnet, type Simnet } from '@solrelay/simnet';
import { waitUntil } from '@solrelay/testkit';
import { parseSignatureStatuses, SolanaRpc } from '../src/upstream/solana-rpc';

let simnet: Simnet;
beforeAll(async () => {
  simnet = await startSimnet({ slotMs: 60, rateLimit: false });
}, 30_000);
afterAll(async () => {
  await simnet?.stop();
});

test("the tracker's status read answers what web3.js's getSignatureStatuses answers, landed or unknown", async () => {
  const connection = new Connection(simnet.endpoints.rpcUrl, 'processed');
  const payer = simnet.fundedKeypair(1_000_000_000);
  const { blockhash } = await connection.getLatestBlockhash('confirmed');
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 2_000_000,
    }),
  );
  tx.sign(payer);
  const landed = await connection.sendRawTransaction(tx.serialize(), { skipPreflight: true });
  await waitUntil(async () => (await connection.getSignatureStatus(landed)).value !== null, 10_000, 'landed');
  const unknown = '1'.repeat(64);
  const signatures = [landed, unknown];

  const ours = await new SolanaRpc({ url: simnet.endpoints.rpcUrl }).getSignatureStatuses(signatures);
  const theirs = (await connection.getSignatureStatuses(signatures)).value;
  expect(ours[1]).toBeNull();
  expect(ours[0]).toMatchObject({ err: null });
  // Same slot and commitment (the slot may move on between the two reads: compare what cannot go backwards).
  expect(ours[0]!.slot).toBe(theirs[0]!.slot);
  expect(ours[0]!.err).toEqual(theirs[0]!.err);
  expect(['processed', 'confirmed', 'finalized']).toContain(ours[0]!.confirmationStatus);
  expect(theirs[1]).toBeNull();
}, 30_000);

test('a malformed answer is an error naming what is wrong, never a wrong status', () => {
  const ok = { jsonrpc: '2.0', id: 1, result: { context: { slot: 9 }, value: [null] } };
  expect(parseSignatureStatuses(ok, 1)).toEqual([null]);
  expect(
    parseSignatureStatuses(
      { result: { value: [{ slot: 5, confirmations: 2, err: null, confirmationStatus: 'confirmed' }] } },
      1,
    ),
  ).toEqual([{ slot: 5, confirmations: 2, err: null, confirmationStatus: 'confirmed' }]);
  expect(() => parseSignatureStatuses({ error: { code: -32005, message: 'busy' } }, 1)).toThrow(
    /-32005: busy/,
  );
  expect(() => parseSignatureStatuses({ result: { value: [] } }, 1)).toThrow(/0 statuses for 1 signatures/);
  expect(() => parseSignatureStatuses({ result: {} }, 1)).toThrow(/no value array/);
  expect(() => parseSignatureStatuses({ result: { value: [{ confirmations: 1 }] } }, 1)).toThrow(/no slot/);
  expect(() =>
    parseSignatureStatuses({ result: { value: [{ slot: 1, confirmationStatus: 'rooted' }] } }, 1),
  ).toThrow(/unknown confirmationStatus/);
  expect(() => parseSignatureStatuses('<html>', 1)).toThrow(/not an object/);
});
