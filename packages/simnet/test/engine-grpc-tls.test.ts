import './grpc-roots-env';
import { PublicKey, VersionedTransaction } from '@solana/web3.js';
import { searcherClient } from 'jito-ts/dist/sdk/block-engine/searcher';
import { Bundle } from 'jito-ts/dist/sdk/block-engine/types';
import { startGrpcEngine, type StartedGrpcEngine } from '../src/engine/grpc';
import { MAINNET_TIP_ACCOUNTS } from '../src/tip-accounts';
import { advanceToBeforeBundleEngineWindow, plainTx, startHarness, type Harness } from './engine-harness';

let h: Harness;
let tls: StartedGrpcEngine;

beforeAll(async () => {
  h = await startHarness({ seed: 5 });
  tls = await startGrpcEngine({ engine: h.engine, tls: true });
});

afterAll(async () => {
  await tls.close();
  await h.close();
});

test('jito-ts searcherClient() (always TLS) trusts the test certificate through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH', async () => {
  expect(tls.caCertPath).toBe(process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH);
  expect(tls.url).toBe(`https://localhost:${tls.port}`);
  const client = searcherClient(tls.address);
  expect(await client.getTipAccounts()).toEqual({ ok: true, value: [...MAINNET_TIP_ACCOUNTS] });

  const processed: string[] = [];
  const cancel = client.onBundleResult(
    (result) => {
      if (result.processed) processed.push(result.bundleId);
    },
    () => undefined,
  );
  try {
    advanceToBeforeBundleEngineWindow(h);
    h.engine.auction.setFixedClearingTip(1_000);
    const bundle = new Bundle([VersionedTransaction.deserialize(plainTx(h))], 5).addTipTx(
      h.payer.toWeb3(),
      30_000,
      new PublicKey(MAINNET_TIP_ACCOUNTS[0] as string),
      h.cluster.latestBlockhash().blockhash,
    );
    if (bundle instanceof Error) throw bundle;
    const sent = await client.sendBundle(bundle);
    if (!sent.ok) throw sent.error;
    h.cluster.advance(1);
    const deadline = Date.now() + 5_000;
    while (!processed.includes(sent.value) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    expect(processed).toContain(sent.value);
  } finally {
    cancel();
  }
});

test('an insecure client cannot talk to the TLS port', async () => {
  const { credentials } = await import('@grpc/grpc-js');
  const { SearcherServiceClient } = await import('jito-ts/dist/gen/block-engine/searcher');
  const { SearcherClient } = await import('jito-ts/dist/sdk/block-engine/searcher');
  const plain = new SearcherClient(
    new SearcherServiceClient(`127.0.0.1:${tls.port}`, credentials.createInsecure()),
  );
  const answer = await plain.getTipAccounts();
  expect(answer.ok).toBe(false);
});
