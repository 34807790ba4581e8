// Jito's `jitodontfront` sandwich mitigation (jito-docs lowlatencytxnsend.md, "Sandwich Mitigation"): a bundle whose
// marked transaction is not first is refused at admission, over JSON-RPC (jito-js-rpc) and gRPC (jito-ts).
import { credentials, status } from '@grpc/grpc-js';
import { Keypair, PublicKey, SystemProgram, Transaction, VersionedTransaction } from '@solana/web3.js';
import { JitoJsonRpcClient } from 'jito-js-rpc';
import { SearcherServiceClient } from 'jito-ts/dist/gen/block-engine/searcher';
import { SearcherClient } from 'jito-ts/dist/sdk/block-engine/searcher';
import { Bundle } from 'jito-ts/dist/sdk/block-engine/types';
import { signatureOf } from '../src/chain';
import { startGrpcEngine, type StartedGrpcEngine } from '../src/engine/grpc';
import { BundleErrors, violatesDontFront } from '../src/engine/validate';
import {
  advanceToBeforeBundleEngineWindow,
  b64,
  rpc,
  startHarness,
  tipTx,
  type Harness,
} from './engine-harness';

const MARKER = 'jitodontfront111111111111111111111111111111';

describe('the rule, as the docs list its patterns', () => {
  const tx = (signers: string[], marked: boolean) => ({
    signers,
    writableStaticKeys: [...signers, 'recipient'],
    readonlyStaticKeys: marked
      ? ['11111111111111111111111111111111', MARKER]
      : ['11111111111111111111111111111111'],
  });
  const tip = tx(['tipper'], false);

  test.each([
    ['[tx_with_dont_front, tip]', [tx(['s1'], true), tip]],
    ['[tx_with_dont_front, arbitrage, tip]', [tx(['s1'], true), tx(['searcher'], false), tip]],
    ['[df signer 1, df signers 1 and 2, tip]', [tx(['s1'], true), tx(['s1', 's2'], true), tip]],
    [
      '[df s1 s2, df s1 s3, df s2 s4]',
      [tx(['s1', 's2'], true), tx(['s1', 's3'], true), tx(['s2', 's4'], true)],
    ],
    ['no marker anywhere', [tx(['s1'], false), tip]],
  ])('allowed: %s', (_, bundle) => {
    expect(violatesDontFront(bundle)).toBe(false);
  });

  test.each([
    ['[tip, tx_with_dont_front]', [tip, tx(['s1'], true)]],
    ['[df signer 1, df signer 2]', [tx(['s1'], true), tx(['s2'], true)]],
    ['[df signer 1, df signer 2, tip]', [tx(['s1'], true), tx(['s2'], true), tip]],
    [
      '[trade, tx_with_dont_front, arbitrage, tip]',
      [tx(['t'], false), tx(['s1'], true), tx(['a'], false), tip],
    ],
    ['marked, unmarked, marked (not contiguous)', [tx(['s1'], true), tip, tx(['s1'], true)]],
  ])('refused: %s', (_, bundle) => {
    expect(violatesDontFront(bundle)).toBe(true);
  });

  test('any key starting with jitodontfront is a marker, writable or not', () => {
    const custom = 'jitodontfront111111111114511111111111111123';
    expect(new PublicKey(custom).toBase58()).toBe(custom);
    const writableMarker = { signers: ['s1'], writableStaticKeys: ['s1', custom], readonlyStaticKeys: [] };
    expect(violatesDontFront([tip, writableMarker])).toBe(true);
  });
});

describe('over the wire', () => {
  let h: Harness;
  let grpc: StartedGrpcEngine;
  let searcher: SearcherClient;

  beforeAll(async () => {
    h = await startHarness({ seed: 31 });
    grpc = await startGrpcEngine({ engine: h.engine });
    searcher = new SearcherClient(new SearcherServiceClient(grpc.address, credentials.createInsecure()));
  });

  afterAll(async () => {
    await grpc.close();
    await h.close();
  });

  /** A web3.js transfer from the harness payer (plus `cosigner`) to a fresh account, with the marker read-only. */
  function markedTx(cosigner?: Keypair): Transaction {
    const payer = h.payer.toWeb3();
    const transfer = SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 1_000_000,
    });
    transfer.keys.push({ pubkey: new PublicKey(MARKER), isSigner: false, isWritable: false });
    if (cosigner) transfer.keys.push({ pubkey: cosigner.publicKey, isSigner: true, isWritable: false });
    const tx = new Transaction({
      feePayer: payer.publicKey,
      recentBlockhash: h.cluster.latestBlockhash().blockhash,
    });
    tx.add(transfer);
    tx.sign(payer, ...(cosigner ? [cosigner] : []));
    return tx;
  }

  test('JSON-RPC: a marked transaction behind the tip is refused with 400 / -32602; at the front it lands', async () => {
    const marked = markedTx().serialize();
    const behind = await rpc(h.http.url, 'sendBundle', [
      [b64(tipTx(h, 10_000)), b64(marked)],
      { encoding: 'base64' },
    ]);
    expect(behind.status).toBe(400);
    expect(behind.body.error).toEqual({ code: -32602, message: BundleErrors.dontFront, data: null });
    expect(behind.body.error?.message).toMatch(/jitodontfront/);

    // The same transaction first, through jito-js-rpc unchanged.
    advanceToBeforeBundleEngineWindow(h);
    const client = new JitoJsonRpcClient(`${h.http.url}/api/v1`, '');
    const tip = tipTx(h, 10_000);
    const sent = (await client.sendBundle([[b64(marked), b64(tip)], { encoding: 'base64' }])) as {
      result: string;
    };
    expect(sent.result).toMatch(/^[0-9a-f]{64}$/);
    h.cluster.advance(1);
    expect(h.engine.getBundle(sent.result)?.state).toBe('landed');
    expect(h.cluster.signatureStatus(signatureOf(marked))?.err).toBeNull();
  });

  test('JSON-RPC through jito-js-rpc: a refusal is an axios 400 carrying the text', async () => {
    const client = new JitoJsonRpcClient(`${h.http.url}/api/v1`, '');
    const marked = markedTx().serialize();
    await expect(
      client.sendBundle([[b64(tipTx(h, 10_000)), b64(marked)], { encoding: 'base64' }]),
    ).rejects.toMatchObject({
      response: { status: 400, data: { error: { message: BundleErrors.dontFront } } },
    });
  });

  test('two marked transactions at the front pass only when they share a signer with the first', async () => {
    const stranger = Keypair.generate();
    const first = markedTx();
    const cosigned = markedTx(stranger); // signed by the payer and a stranger: shares the payer with the first
    const send = (txs: Transaction[]) =>
      rpc(h.http.url, 'sendBundle', [
        [...txs.map((t) => b64(t.serialize())), b64(tipTx(h, 10_000))],
        { encoding: 'base64' },
      ]);
    expect((await send([first, cosigned])).status).toBe(200);

    // A marked transaction signed only by someone else, right behind the first: refused.
    const other = Keypair.generate();
    const foreign = new Transaction({
      feePayer: other.publicKey,
      recentBlockhash: h.cluster.latestBlockhash().blockhash,
    });
    const ix = SystemProgram.transfer({
      fromPubkey: other.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 1,
    });
    ix.keys.push({ pubkey: new PublicKey(MARKER), isSigner: false, isWritable: false });
    foreign.add(ix);
    foreign.sign(other);
    const refused = await send([markedTx(), foreign]);
    expect(refused.status).toBe(400);
    expect(refused.body.error?.message).toBe(BundleErrors.dontFront);
  });

  test('gRPC through jito-ts: INVALID_ARGUMENT with the same text', async () => {
    const tipFirst = new Bundle([VersionedTransaction.deserialize(tipTx(h, 10_000))], 5);
    const bundle = tipFirst.addTransactions(VersionedTransaction.deserialize(markedTx().serialize()));
    if (bundle instanceof Error) throw bundle;
    const answer = await searcher.sendBundle(bundle);
    expect(answer.ok).toBe(false);
    if (answer.ok) return;
    expect(answer.error.code).toBe(status.INVALID_ARGUMENT);
    expect(answer.error.message).toBe(`Invalid argument provided: ${BundleErrors.dontFront}`);
  });
});
