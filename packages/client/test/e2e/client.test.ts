import {
  AccountRole,
  address,
  appendTransactionMessageInstruction,
  blockhash,
  createKeyPairSignerFromBytes,
  createTransactionMessage,
  generateKeyPairSigner,
  getSignatureFromTransaction,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
} from '@solana/kit';
import { Keypair, PublicKey, Transaction, VersionedTransaction } from '@solana/web3.js';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { freePort, startInProcessStack, waitUntil, type Stack } from '@solrelay/testkit';
import {
  RelayClient,
  isRelayError,
  isTxFailedError,
  parseSseEventId,
  type ConnectionStateEvent,
  type FetchFunction,
} from '../../src';
import { base58Encode } from '../helpers/base58';
import { TcpProxy } from '../helpers/tcp-proxy';

// One bypass stack (each enqueue is submitted at once at a fixed tip; ~3 s to finalized with 60 ms slots) behind a
// bearer token, on a pinned port so the client finds the sidecar at the same URL across a restart.
const TOKEN = 'client-test-token';
let stack: Stack<Sidecar>;
let baseUrl: string;
const clients: RelayClient[] = [];
const proxies: TcpProxy[] = [];

function client(
  options: { baseUrl?: string; token?: string | null; fetch?: FetchFunction } = {},
): RelayClient {
  const c = new RelayClient({
    baseUrl: options.baseUrl ?? baseUrl,
    ...(options.token === null ? {} : { token: options.token ?? TOKEN }),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  clients.push(c);
  return c;
}

async function proxy(): Promise<TcpProxy> {
  const p = await TcpProxy.start(stack.sidecar.port);
  proxies.push(p);
  return p;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  const port = await freePort();
  stack = await startInProcessStack(
    { configFromEnv, startSidecar },
    {
      env: { BYPASS_AGENT: '1', API_PORT: String(port), RELAY_API_TOKEN: TOKEN },
    },
  );
  baseUrl = stack.sidecar.url;
  expect(baseUrl).toContain(`:${port}`);
}, 30_000);

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const p of proxies.splice(0)) await p.close();
});

afterAll(async () => {
  await stack?.close();
});

test('enqueue then waitFor("finalized") resolves with the finalized status; earlier targets are satisfied by it', async () => {
  const relay = client();
  const encoded = stack.transfer();
  const handle = await relay.enqueue(encoded);
  expect(handle.tx_id).toMatch(/^tx_/);
  expect(handle.created).toBe(true);
  expect(handle.signatures).toEqual([
    base58Encode(Transaction.from(Buffer.from(encoded, 'base64')).signature!),
  ]);

  const status = await handle.waitFor('finalized', { timeoutMs: 20_000 });
  expect(status).toMatchObject({ tx_id: handle.tx_id, state: 'finalized', tx_signatures: handle.signatures });
  expect(await handle.state()).toBe('finalized');
  await expect(handle.waitFor('confirmed')).resolves.toMatchObject({ state: 'finalized' });
  await expect(handle.waitFor('landed')).resolves.toMatchObject({ state: 'finalized' });

  // The same bytes again: an idempotent repeat (200) with the same id.
  const again = await relay.enqueue(encoded);
  expect(again.tx_id).toBe(handle.tx_id);
  expect(again.created).toBe(false);
}, 25_000);

test('waitFor("landed") resolves at landed or a later state, before finality', async () => {
  const relay = client();
  const handle = await relay.enqueue(stack.transfer());
  const status = await handle.waitFor('landed', { timeoutMs: 20_000 });
  expect(['landed', 'processed', 'confirmed']).toContain(status.state);
  expect(status.tx_signatures).toEqual(handle.signatures);
}, 25_000);

test('enqueue accepts web3.js Transaction and VersionedTransaction objects, bytes and base58, several at once', async () => {
  const relay = client();
  const legacy = Transaction.from(Buffer.from(stack.transfer(), 'base64'));
  const versioned = VersionedTransaction.deserialize(Buffer.from(stack.transfer(2000), 'base64'));
  const bytes = new Uint8Array(Buffer.from(stack.transfer(3000), 'base64'));
  const base58 = base58Encode(Buffer.from(stack.transfer(4000), 'base64'));

  const objects = await relay.enqueue([legacy, versioned]);
  expect(objects.signatures).toEqual([
    base58Encode(legacy.signature!),
    base58Encode(versioned.signatures[0]!),
  ]);
  const fromBytes = await relay.enqueue(bytes);
  expect(fromBytes.signatures).toEqual([base58Encode(bytes.subarray(1, 65))]);
  const fromBase58 = await relay.enqueue(base58);
  expect(fromBase58.created).toBe(true);
  await expect(objects.waitFor('confirmed', { timeoutMs: 20_000 })).resolves.toMatchObject({
    tx_signatures: objects.signatures,
  });
}, 25_000);

test('a transaction built and signed with @solana/kit is enqueued as it is and reaches finalized', async () => {
  const signer = await createKeyPairSignerFromBytes(stack.payer.secretKey);
  const recipient = await generateKeyPairSigner();
  const latest = await stack.connection().getLatestBlockhash('confirmed');
  const data = new Uint8Array(12);
  new DataView(data.buffer).setUint32(0, 2, true); // SystemInstruction::Transfer
  new DataView(data.buffer).setBigUint64(4, 1_000_000n, true); // above the rent-exempt minimum of a new account
  const signed = await signTransactionMessageWithSigners(
    pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(signer, m),
      (m) =>
        setTransactionMessageLifetimeUsingBlockhash(
          {
            blockhash: blockhash(latest.blockhash),
            lastValidBlockHeight: BigInt(latest.lastValidBlockHeight),
          },
          m,
        ),
      (m) =>
        appendTransactionMessageInstruction(
          {
            programAddress: address('11111111111111111111111111111111'),
            accounts: [
              { address: signer.address, role: AccountRole.WRITABLE_SIGNER, signer },
              { address: recipient.address, role: AccountRole.WRITABLE },
            ],
            data,
          },
          m,
        ),
    ),
  );

  const handle = await client().enqueue(signed);
  expect(handle.signatures).toEqual([getSignatureFromTransaction(signed)]);
  await expect(handle.waitFor('finalized', { timeoutMs: 20_000 })).resolves.toMatchObject({
    state: 'finalized',
  });
  expect(await stack.connection().getBalance(new PublicKey(recipient.address), 'finalized')).toBe(1_000_000);
}, 25_000);

test('every API error is a RelayError with the server code; the typed views answer', async () => {
  const relay = client();
  const missing = await relay.tx('tx_does_not_exist').catch((e: unknown) => e);
  expect(isRelayError(missing, 'RELAY_E_TX_NOT_FOUND')).toBe(true);
  const badBundle = await relay.bundle('nothex').catch((e: unknown) => e);
  expect(isRelayError(badBundle, 'RELAY_E_REQUEST_INVALID_FIELD')).toBe(true);
  const agent = await relay.agentInfo().catch((e: unknown) => e);
  expect(isRelayError(agent, 'RELAY_E_AGENT_NOT_CONNECTED')).toBe(true);
  const undecodable = await relay.enqueue(new Uint8Array([1, 2, 3])).catch((e: unknown) => e);
  expect(isRelayError(undecodable, 'RELAY_E_TX_UNDECODABLE')).toBe(true);
  expect((undecodable as { status: number }).status).toBe(400);

  const status = await relay.status();
  expect(status.bypass).toBe(true);
  expect(typeof (await relay.tip()).p50).toBe('number');
  expect(Array.isArray((await relay.queue()).entries)).toBe(true);
  expect((await relay.policy()).values['max-retries']).toBeGreaterThanOrEqual(0);
  expect(await relay.setMode('cortex')).toEqual({ decision_mode: 'cortex' });
  expect(await relay.mode()).toEqual({ decision_mode: 'cortex' });
  await relay.setMode('reflex');

  const handle = await relay.enqueue(stack.transfer());
  const finalized = await handle.waitFor('finalized', { timeoutMs: 20_000 });
  const entry = await relay.bundle(finalized.bundle_id!);
  expect(entry).toMatchObject({ bundle_id: finalized.bundle_id, tx_id: handle.tx_id, stage: 'finalized' });
  const { entries } = await relay.lifecycle({ last: 50 });
  expect(entries.some((e) => e.bundle_id === finalized.bundle_id)).toBe(true);
  // Submitting a finalized transaction is the wrong state (409), not a silent no-op.
  const wrong = await relay
    .submit({ tx_id: handle.tx_id, tip_lamports: 10_000, reason: 'test' })
    .catch((e: unknown) => e);
  expect(isRelayError(wrong, 'RELAY_E_TX_WRONG_STATE')).toBe(true);
}, 25_000);

test('a 401 stops the event stream with a typed error instead of looping; HTTP calls and waitFor reject by code', async () => {
  let streamRequests = 0;
  const counting: FetchFunction = (input, init) => {
    if (String(input).endsWith('/internal/events')) streamRequests++;
    return fetch(input, init);
  };
  const anonymous = client({ token: null, fetch: counting });
  const states: ConnectionStateEvent[] = [];
  anonymous.on('connection', (e) => states.push(e));
  await waitUntil(() => anonymous.connectionState === 'unauthorized', 5000, 'unauthorized');
  expect(anonymous.streamError?.code).toBe('RELAY_E_AUTH_MISSING_TOKEN');
  expect(states.map((s) => s.state)).toEqual(['connecting', 'unauthorized']);
  await sleep(1500); // three reconnect periods of the first backoff step
  expect(streamRequests).toBe(1);
  expect(anonymous.connectionState).toBe('unauthorized');

  const wrongToken = client({ token: 'not-the-token' });
  const error = await wrongToken.status().catch((e: unknown) => e);
  expect(isRelayError(error, 'RELAY_E_AUTH_INVALID_TOKEN')).toBe(true);
  expect((error as { status: number }).status).toBe(401);
  const handle = wrongToken.handle('tx_anything');
  const waited = await handle.waitFor('confirmed', { timeoutMs: 5000 }).catch((e: unknown) => e);
  expect(isRelayError(waited, 'RELAY_E_AUTH_INVALID_TOKEN')).toBe(true);
}, 15_000);

test('waitFor survives a forced connection drop: reconnects, re-reads the truth and resolves', async () => {
  const p = await proxy();
  const relay = client({ baseUrl: p.url });
  const direct = client();
  const handle = await relay.enqueue(stack.transfer());
  const waiting = handle.waitFor('finalized', { timeoutMs: 25_000 });
  // Cut while the transaction is on its way (sent, not yet final), so the wait has something left to learn.
  const inFlight = ['submitted', 'landed', 'processed', 'confirmed'];
  await waitUntil(async () => inFlight.includes((await direct.tx(handle.tx_id)).state), 5000, 'in flight');
  const acceptedBefore = p.accepted;
  // Cut the stream and keep the sidecar unreachable until the transaction has finalized behind the client's back.
  p.refuse(true);
  p.dropAll();
  await waitUntil(async () => (await direct.tx(handle.tx_id)).state === 'finalized', 15_000, 'finalized');
  p.refuse(false);
  await expect(waiting).resolves.toMatchObject({ tx_id: handle.tx_id, state: 'finalized' });
  expect(p.accepted).toBeGreaterThan(acceptedBefore + 1); // refused retries, then the one that got through
}, 30_000);

test('the global stream resumes with Last-Event-ID: events emitted during the gap are delivered, none skipped', async () => {
  const p = await proxy();
  const relay = client({ baseUrl: p.url });
  const seqs: number[] = [];
  const enqueued: string[] = [];
  const states: ConnectionStateEvent[] = [];
  const record = () => {
    const id = parseSseEventId(relay.lastEventId ?? '');
    if (id) seqs.push(id.seq);
  };
  relay.on('connection', (e) => states.push(e));
  relay.on('slot_update', record);
  relay.on('tx_status_changed', record);
  relay.on('bundle_settled', record);
  relay.on('submit_requested', record);
  relay.on('tip_update', record);
  relay.on('tx_enqueued', (e) => {
    record();
    enqueued.push(e.tx_id);
  });
  await waitUntil(() => seqs.length >= 5, 5000, 'first events');

  p.refuse(true);
  p.dropAll();
  const direct = client();
  const during = await direct.enqueue(stack.transfer()); // emitted while the client is cut off
  await sleep(200);
  p.refuse(false);

  await waitUntil(() => enqueued.includes(during.tx_id), 10_000, 'the gap-time tx_enqueued');
  expect(states.some((s) => s.state === 'reconnecting' && s.delay_ms === 500)).toBe(true);
  expect(states[states.length - 1]?.state).toBe('open');
  expect(states.filter((s) => s.state === 'reconnecting').length).toBe(1);
  // Every id of this boot, in order and without a hole: the replay filled the gap exactly.
  const first = seqs[0] as number;
  expect(seqs).toEqual(seqs.map((_, i) => first + i));
}, 20_000);

test('rejects with TxFailedError carrying the class when the fee payer cannot pay (DESIGN §2: failed, insufficient_funds)', async () => {
  const relay = client();
  const unfunded = Keypair.generate();
  const handle = await relay.enqueue(stack.transfer(1000, unfunded));
  const error = await handle.waitFor('finalized', { timeoutMs: 20_000 }).catch((e: unknown) => e);
  expect(isTxFailedError(error)).toBe(true);
  expect(error).toMatchObject({ tx_id: handle.tx_id, state: 'failed', failure: 'insufficient_funds' });
}, 25_000);

test('rejects with TxFailedError (state expired, last attempt class) when attempts stop and the blockhash dies', async () => {
  const relay = client();
  stack.simnet.engine.auction.setFixedClearingTip(1_000_000_000_000); // no bundle wins an auction
  try {
    const handle = await relay.enqueue(stack.transfer(), { expiry_slots: 5 });
    const waiting = handle.waitFor('finalized', { timeoutMs: 20_000 }).catch((e: unknown) => e);
    await waitUntil(async () => (await relay.tx(handle.tx_id)).attempts.length > 0, 5000, 'an attempt');
    stack.simnet.faults.expireBlockhashes();
    const error = await waiting;
    expect(isTxFailedError(error)).toBe(true);
    expect(error).toMatchObject({ tx_id: handle.tx_id, state: 'expired' });
    expect(['fee_too_low', 'dropped']).toContain((error as { failure: string }).failure);
    expect((error as { record: { state: string } }).record.state).toBe('expired');
  } finally {
    stack.resetAuction();
  }
}, 25_000);

test('waitFor and the global stream survive a sidecar restart: the wait resolves and the stream resyncs', async () => {
  const relay = client();
  const states: string[] = [];
  const resyncs: unknown[] = [];
  relay.on('connection', (e) => states.push(e.state));
  relay.on('resync', (e) => resyncs.push(e));
  await waitUntil(() => relay.lastEventId !== null, 5000, 'a first event');
  const bootBefore = parseSseEventId(relay.lastEventId as string)?.bootId;

  const handle = await relay.enqueue(stack.transfer());
  const waiting = handle.waitFor('finalized', { timeoutMs: 25_000 });
  await stack.restart();
  expect(stack.sidecar.url).toBe(baseUrl);
  await expect(waiting).resolves.toMatchObject({ tx_id: handle.tx_id, state: 'finalized' });
  expect(await handle.state()).toBe('finalized');

  // The old boot's Last-Event-ID is unknown to the new process: the stream says so, then carries on live.
  await waitUntil(() => resyncs.length > 0, 10_000, 'resync');
  await waitUntil(
    () => parseSseEventId(relay.lastEventId as string)?.bootId !== bootBefore,
    5000,
    'new boot ids',
  );
  expect(states).toContain('reconnecting');
  expect(states[states.length - 1]).toBe('open');
}, 35_000);
