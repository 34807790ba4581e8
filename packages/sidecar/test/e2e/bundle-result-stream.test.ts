import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import { TipSigner } from '../../src/engine/tip-tx';
import type { Sidecar } from '../../src/service';
import { GrpcBlockEngine } from '../../src/upstream/block-engine-grpc';
import { counterValue, startRelayStack } from '../helpers/relay-stack';

/**
 * The gRPC bundle-result stream can end cleanly (status OK, no error); jito-ts's `onBundleResult` then calls neither
 * callback, and a consumer that waits for an error never hears from the engine again. relay watches the end itself
 * and subscribes again, so an auction loss after the end is still heard from the engine, not inferred later.
 */
let stack: Stack<Sidecar>;
let url: string;

beforeAll(async () => {
  stack = await startRelayStack({
    env: { BUNDLE_ENGINE_TRANSPORT: 'grpc', RELAY_AGENT_GRACE_S: '0' },
    policy: { 'max-retries': 0 },
  });
  url = stack.sidecar.url;
  await waitUntil(async () => (await get(url, '/status')).body.slot > 0, 10_000, 'first slot');
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

/** A transfer of `lamports` and a 10,000-lamport tip from the stack's tipper, as wire bytes: a bundle to send. */
function bundleOf(lamports: number): Uint8Array[] {
  const signer = new TipSigner(stack.tipper);
  const blockhash = stack.simnet.cluster.latestBlockhash('confirmed').blockhash;
  const user = Buffer.from(stack.transfer(lamports), 'base64');
  const tipAccount = [...stack.simnet.engine.tipAccounts][0] as string;
  return [user, signer.build({ tipAccount, lamports: 10_000, blockhash }).wire];
}

function counter(name: string): Promise<number> {
  return counterValue(url, name);
}

test('a bundle-result stream that ends without an error is opened again, and results keep coming', async () => {
  const resubscribedBefore = await counter('relay_bundle_result_resubscribes_total');
  const endedBefore = stack.simnet.faults.injected.bundleResultStreamsEnded;
  stack.simnet.faults.endBundleResultStreams();
  // The sidecar follows one stream per region (eight), and each of them ended.
  expect(stack.simnet.faults.injected.bundleResultStreamsEnded).toBe(
    endedBefore + stack.simnet.endpoints.regions.length,
  );
  await waitUntil(
    async () => (await counter('relay_bundle_result_resubscribes_total')) > resubscribedBefore,
    10_000,
    'relay to open the stream again',
  );

  stack.simnet.engine.auction.setFixedClearingTip(10_000_000);
  try {
    const { tx_id } = (await post(url, '/tx/enqueue', { transaction: stack.transfer(21) })).body;
    const submit = await post(url, '/internal/submit', { tx_id, tip_lamports: 20_000, reason: 'will lose' });
    expect(submit.status).toBe(202);
    await waitUntil(
      async () => (await get(url, `/tx/${tx_id}`)).body.attempts[0]?.outcome !== null,
      20_000,
      'the lost auction to be reported',
    );
    const record = (await get(url, `/tx/${tx_id}`)).body;
    // Heard on the stream ("engine: ..."), not inferred from a passed window.
    expect(record.last_error).toMatchObject({ code: 'RELAY_E_ATTEMPT_LOST' });
    expect(record.last_error.details.reason).toMatch(/^engine: /);
  } finally {
    stack.resetAuction();
  }
}, 45_000);

test('a bundle-result stream that stays open but falls silent after an accepted bundle is given up, once', async () => {
  // The adapter itself, against the simulated engine's gRPC server, with a short silence limit.
  const engine = new GrpcBlockEngine(stack.simnet.endpoints.engineGrpcUrl, { silenceMs: 400 });
  const errors: Error[] = [];
  const stop = engine.subscribeBundleResults(
    () => undefined,
    (error) => errors.push(error),
  );
  stack.simnet.faults.set({ bundleResultsSilent: true });
  try {
    const sent = await engine.sendBundle(bundleOf(23));
    expect(sent.ok).toBe(true);
    await waitUntil(() => errors.length > 0, 10_000, 'the silence to be noticed');
    expect(errors[0]?.message).toMatch(/silent \d+ s after an accepted bundle/);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(errors).toHaveLength(1); // reported once; the stream is cancelled
  } finally {
    stack.simnet.faults.reset();
    stop();
    engine.close();
  }
}, 30_000);

test('a SendBundle the engine does not answer in time is a transport failure (the region is not held for good)', async () => {
  // jito-ts sets no deadline on SendBundle: the adapter's own limit ends the wait.
  const engine = new GrpcBlockEngine(stack.simnet.endpoints.engineGrpcUrl, { sendTimeoutMs: 300 });
  stack.simnet.faults.set({ engineLatencyMs: 3_000 });
  try {
    // The engine answers after 3 s: a timeout is the adapter's own, not the engine's answer.
    const sent = await engine.sendBundle(bundleOf(24));
    expect(sent).toMatchObject({ ok: false, kind: 'transport', status: 'timeout' });
  } finally {
    stack.simnet.faults.reset();
    engine.close();
  }
}, 30_000);
