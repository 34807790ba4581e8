import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import type { MigrationOptions } from '@solrelay/simnet';
import { get, post, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import type { StoredTx } from '../../src/store/records';
import { startRelayStack } from './relay-stack';

/** What a migration test works with (see `startMigrationStack`). */
export interface MigrationStack {
  stack: Stack<Sidecar>;
  url: string;
  /** Every bundle the engine received: the slot and the cluster's consensus phase then. */
  received: Array<{ slot: number; phase: string }>;
  /**
   * Enqueue a transfer on a blockhash from before the boundary (the finalized one: it survives the migration), with
   * `fields` added to the request (`expiry_slots`, ...).
   */
  enqueue(lamports: number, fields?: Record<string, unknown>): Promise<string>;
  /** The stored record (attempt stages as stored: `journaled` is not shown as `submitted`). */
  stored(txId: string): Promise<StoredTx>;
  /** Step slots until relay knows the boundary (from `getAlpenglowMigrationSlot`), well before the boundary. */
  untilBoundaryKnown(): Promise<void>;
  /** Step slots until the cluster is at `slot`. */
  stepTo(slot: number): Promise<void>;
  /** Wait until the first attempt of `txId` is at the engine (stored `submitted`). */
  untilSent(txId: string): Promise<void>;
}

/**
 * A bypass sidecar over a simnet in the `migration` consensus mode on a manual clock (the test steps it, each slot
 * only once relay has read the last), ready; the engine's bundle receipts are recorded with the cluster's phase.
 */
export async function startMigrationStack(migration: MigrationOptions): Promise<MigrationStack> {
  const stack = await startRelayStack({
    simnet: { clock: 'manual', consensus: 'migration', migration },
    env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' },
  });
  const url = stack.sidecar.url;
  const received: MigrationStack['received'] = [];
  const { engine, cluster } = stack.simnet;
  const submit = engine.submitBundle.bind(engine);
  engine.submitBundle = (...args: Parameters<typeof submit>) => {
    received.push({ slot: cluster.slot, phase: cluster.consensusPhase });
    return submit(...args);
  };
  await stepSlotsUntil(
    stack,
    async () => (await get(url, '/readyz')).status === 200,
    30_000,
    'the sidecar to be ready',
  );
  const transfer = (lamports: number): string => {
    const { blockhash } = cluster.latestBlockhash('finalized');
    const tx = new Transaction({ feePayer: stack.payer.publicKey, recentBlockhash: blockhash });
    tx.add(
      SystemProgram.transfer({
        fromPubkey: stack.payer.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 890_880 + lamports,
      }),
    );
    tx.sign(stack.payer);
    return tx.serialize().toString('base64');
  };
  const stored = async (txId: string) => (await stack.sidecar.relay.stored(txId)) as StoredTx;
  return {
    stack,
    url,
    received,
    async enqueue(lamports, fields = {}) {
      const answer = await post(url, '/tx/enqueue', { transaction: transfer(lamports), ...fields });
      if (answer.status !== 202) throw new Error(`enqueue answered ${answer.status}`);
      return answer.body.tx_id as string;
    },
    stored,
    async untilBoundaryKnown() {
      const boundary = migration.boundarySlot ?? 64;
      if (cluster.slot >= boundary - 4) throw new Error(`the cluster is already at ${cluster.slot}`);
      const known = async () => stack.sidecar.relay.consensus().migrationSlot === boundary;
      await stepSlotsUntil(stack, known, 30_000, 'relay to know the boundary');
    },
    async stepTo(slot) {
      await stepSlotsUntil(stack, async () => cluster.slot >= slot, 30_000, `slot ${slot}`);
    },
    async untilSent(txId) {
      const sent = async () => (await stored(txId)).attempts[0]?.stage === 'submitted';
      await waitUntil(sent, 15_000, 'its bundle at the engine');
    },
  };
}
