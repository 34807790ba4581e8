import type { Simnet } from '@solrelay/simnet';
import { get, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startMigrationStack, type MigrationStack } from '../helpers/migration-stack';

/**
 * A window lost inside a TowerBFT -> Alpenglow migration's vote-only blocks (issue 31 review M5 and m5, DESIGN §12),
 * over the wire on a clock the test steps one slot at a time. The boundary is announced on the slot that ends a
 * leader window with no bundle engine, just before one with a bundle engine, so a bundle relay sends in the slot
 * before the boundary is auctioned by the engine in the next bundle-engine window: the four slots after the
 * boundary, all vote-only (SIMD-0371: no user transactions). The window lasts long (the certificate comes
 * {@link CERTIFICATE_AFTER} slots after the transition), and the transaction's expiry slot falls early in it: relay
 * judges the window lost, counts no retry for it, does not give up (the vote-only slots do not count against its
 * expiry slot), neither expires nor fails it (its blockhash is alive), sends it again once Alpenglow runs, and it
 * lands there with one tip paid.
 */
const FEE = 5_000;
const TIP = 50_000;
/** Slots from the transition block to the certificate: the window outlasts relay's judging of the lost window. */
const CERTIFICATE_AFTER = 40;
/** The transaction's own expiry: its expiry slot lies in the vote-only window, before the loss is judged. */
const EXPIRY_SLOTS = 6;
let m: MigrationStack;
let stack: Stack<Sidecar>;

beforeAll(async () => {
  // No boundary yet: the test announces one where the leader schedule puts a bundle-engine window right after it.
  m = await startMigrationStack({ boundarySlot: null, certificateAfterSlots: CERTIFICATE_AFTER });
  ({ stack } = m);
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

/**
 * The first slot from `from` on that ends a leader window with no bundle engine and is followed by a whole
 * bundle-engine leader window (4 slots), all of them vote-only blocks once it is the boundary.
 */
function boundaryBeforeEngineWindow(cluster: Simnet['cluster'], from: number): number {
  for (let s = from; s < from + 4_000; s++) {
    if (cluster.leaderAt(s)?.bundleEngine !== false) continue;
    const next = cluster.leaderAt(s + 1);
    if (!next?.bundleEngine) continue;
    let whole = true;
    for (let k = 2; k <= 4; k++) if (cluster.leaderAt(s + k)?.identity !== next.identity) whole = false;
    if (whole) return s;
  }
  throw new Error(`no bundle-engine window after a non-engine slot from ${from}`);
}

test('a window lost in the vote-only blocks counts no retry, gives up nothing, and it lands after with one tip', async () => {
  const { cluster, engine } = stack.simnet;
  const relay = stack.sidecar.relay;
  const url = stack.sidecar.url;
  const boundary = boundaryBeforeEngineWindow(cluster, cluster.slot + 8);
  cluster.scheduleMigration(boundary);
  // relay learns it from `getAlpenglowMigrationSlot` (polled): wait without stepping, so the boundary stays ahead.
  await waitUntil(
    async () => relay.consensus().migrationSlot === boundary,
    15_000,
    'relay to know the boundary',
  );
  const tipperBefore = await stack.connection().getBalance(stack.tipper.publicKey, 'confirmed');

  // Sent in the slot before the boundary: the engine auctions it in the bundle-engine window after the boundary.
  await m.stepTo(boundary - 1);
  const txId = await m.enqueue(1, { expiry_slots: EXPIRY_SLOTS });
  await m.untilSent(txId);
  const first = (await m.stored(txId)).attempts[0];
  const atEngine = engine.state().pendingBundles.find((b) => b.bundleId === first?.bundle_id);
  expect(atEngine?.window).toMatchObject({ firstSlot: boundary + 1, lastSlot: boundary + 4 });

  // Step until the engine's window has passed and relay judged the attempt lost; at every slot, nothing terminal.
  const phases = new Map<number, string>();
  const statesSeen = new Set<string>();
  await stepSlotsUntil(
    stack,
    async () => {
      phases.set(cluster.slot, cluster.consensusPhase);
      const tx = await m.stored(txId);
      statesSeen.add(tx.state);
      return tx.attempts[0]?.stage === 'failed';
    },
    30_000,
    'the first attempt judged lost',
  );
  // Its window's slots were all vote-only blocks: nothing could land there, and nothing did.
  for (let s = boundary + 1; s <= boundary + 4; s++) expect(phases.get(s)).toBe('vote-only');
  const lost = await m.stored(txId);
  expect(lost.attempts[0]?.outcome).toMatch(/^(fee_too_low|dropped)$/);
  const lostTip = lost.attempts[0]?.tip_signature ?? null;
  expect(lostTip).not.toBeNull();
  expect(cluster.signatureStatus(lostTip as string)).toBeNull();
  expect(lost.retries).toBe(0);
  // Judged past its expiry slot, inside the window: relay does not give up on it (review m5).
  expect(lost.expires_at_slot).toBeLessThan(boundary + EXPIRY_SLOTS);
  expect(lost.attempts[0]?.timeline.failed?.slot).toBeGreaterThan(lost.expires_at_slot);
  expect(cluster.consensusPhase).toBe('vote-only');
  expect(lost.state).toBe('pending');
  expect(lost.stopped).toBe(false);

  // It is sent again once Alpenglow runs and finalizes there; never expired or failed on the way.
  await stepSlotsUntil(
    stack,
    async () => {
      const tx = await m.stored(txId);
      statesSeen.add(tx.state);
      return tx.state === 'finalized';
    },
    60_000,
    'it to finalize after the window',
  );
  const record = (await get(url, `/tx/${txId}`)).body;
  expect(record.retries).toBe(0);
  expect([...statesSeen].filter((s) => s === 'expired' || s === 'failed')).toEqual([]);
  expect(record.history.map((h: { state: string }) => h.state)).not.toContain('expired');
  expect(record.history.map((h: { state: string }) => h.state)).not.toContain('failed');
  expect(record.attempts.length).toBeGreaterThanOrEqual(2);
  const genesis = cluster.migrationState.genesisSlot as number;
  const status = cluster.signatureStatus(record.tx_signatures[0]);
  expect(status?.confirmationStatus).toBe('finalized');
  expect(status?.err).toBeNull();
  expect(status?.slot).toBeGreaterThan(genesis);

  // No bundle reached the engine while blocks were vote-only.
  expect(m.received.length).toBeGreaterThanOrEqual(2);
  expect(m.received.filter((r) => r.phase === 'vote-only')).toEqual([]);

  // One tip paid: exactly one attempt's tip transaction is on chain, and the tipper paid that tip and its fee.
  const stored = await m.stored(txId);
  const tipsOnChain = stored.attempts.filter(
    (a) => a.tip_signature !== null && cluster.signatureStatus(a.tip_signature) !== null,
  );
  expect(tipsOnChain.map((a) => a.tip_lamports)).toEqual([TIP]);
  const tipperAfter = await stack.connection().getBalance(stack.tipper.publicKey, 'confirmed');
  expect(tipperBefore - tipperAfter).toBe(TIP + FEE);
}, 120_000);
