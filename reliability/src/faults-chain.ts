import { readFile } from 'node:fs/promises';
import type { Connection, SignatureStatus } from '@solana/web3.js';
import type { Simnet } from '@solrelay/simnet';
import { ChainWatch } from './crash-chain';
import { EXPECTED, type SentTx } from './faults-stack';
import { readRecordsById, type RelayRecord } from './relay-records';

/**
 * Ground truth for the upstream-fault suite: every transaction's relay record against the chain, signature by
 * signature, over the simnet's JSON-RPC (`getSignatureStatuses` with `searchTransactionHistory`), and every
 * transaction the tipper paid for, enumerated from the chain itself (not from relay's lifecycle log), to find tips
 * that landed without their bundle and to account for every lamport the tipper lost.
 */

/** Solana's base fee per signature, which the simulated bank charges; a tip transaction has one signature. */
export const LAMPORTS_PER_SIGNATURE = 5000;

export interface LifecycleLine {
  bundle_id: string;
  tx_id: string;
  attempt: number;
  stage: string;
  failure: string | null;
  slot_submitted: number;
  slot_landed: number | null;
  tip_lamports: number;
  transactions: string[];
}

/** The latest line of every bundle in a lifecycle log (a torn last line is skipped, as the sidecar does). */
export async function readLifecycle(path: string): Promise<Map<string, LifecycleLine>> {
  const text = await readFile(path, 'utf8').catch(() => '');
  const latest = new Map<string, LifecycleLine>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const entry = JSON.parse(line) as LifecycleLine;
      latest.set(entry.bundle_id, entry);
    } catch {
      /* torn line */
    }
  }
  return latest;
}

/** Signature statuses from the chain's whole history, in chunks the RPC accepts. */
export async function chainStatuses(
  connection: Connection,
  signatures: string[],
): Promise<Map<string, SignatureStatus>> {
  const out = new Map<string, SignatureStatus>();
  const unique = [...new Set(signatures)];
  for (let i = 0; i < unique.length; i += 200) {
    const chunk = unique.slice(i, i + 200);
    const { value } = await connection.getSignatureStatuses(chunk, { searchTransactionHistory: true });
    value.forEach((status, j) => {
      if (status) out.set(chunk[j] as string, status);
    });
  }
  return out;
}

/** The records of every transaction sent (each must be known). */
export async function readRecords(url: string, sent: SentTx[]): Promise<Map<string, RelayRecord>> {
  const records = await readRecordsById(
    url,
    sent.map((s) => s.txId),
    { batch: 16 },
  );
  const out = new Map<string, RelayRecord>();
  for (const [id, record] of records) {
    if (!record) throw new Error(`GET /tx/${id} answered 404`);
    out.set(record.tx_id, record);
  }
  return out;
}

/** What the block engine received: one tip transaction (paid by the tipper) and the bundle it came in. */
interface EngineTip {
  /** Every bundle (by Jito id) that carried this tip transaction. */
  bundleIds: string[];
  /** The bundle's first transaction: the user transaction the tip paid for. */
  userSignature: string;
  /** Lamports the tip transaction moves to tip accounts, as the engine read them from its bytes. */
  lamports: number;
  /** The slot the engine first received a bundle with this tip in. */
  receivedSlot: number;
}

/** A transaction the tipper paid for that is on chain now, classified from the chain and the engine alone. */
export interface ChainTip {
  signature: string;
  slot: number;
  /** The bundle it came in (null: no bundle the engine received carries it). */
  bundleId: string | null;
  userSignature: string | null;
  lamports: number;
  /** It sits right after its bundle's user transaction in the same live block: the bundle landed whole. */
  credited: boolean;
  /** One of its bundles is in a block the chain uncled (the only way a bundle's tip can land alone). */
  fromUncledBundle: boolean;
  receivedSlot: number | null;
}

export interface TipLedgerSnapshot {
  tips: ChainTip[];
  /** What the tipper lost, less what the operator moved out of it or into it (see `TipLedger.operator`). */
  tipperDropLamports: number;
  /** Relay bundles (those with a tipper-paid transaction) in blocks the chain uncled. */
  uncledRelayBundles: number;
}

/**
 * Every transaction the tipper put on chain, seen from inside the simnet: `ChainWatch` (crash-chain.ts) records the
 * tipper's and the payers' transactions block by block (the payers given, and the user transaction's fee payer of every
 * bundle with a tip the engine received), minus what a dead or uncled slot rolled back, and ties a tip to the user
 * transaction right before it in its block. The block engine is instrumented (every decision passes
 * through unchanged) to remember, for every tip transaction it received, the bundle it came in and its lamports as
 * read from its bytes. Nothing here reads relay's lifecycle log or records.
 */
export class TipLedger {
  private readonly watch: ChainWatch;
  private readonly byTip = new Map<string, EngineTip>();
  private readonly uncled = new Set<string>();
  /** The operator's own tipper transactions (not tips: a withdrawal), and the lamports it moved in or out. */
  private readonly operatorSignatures = new Set<string>();
  private operatorNetOut = 0;
  private readonly tipperBefore: number;
  private readonly restore: () => void;
  private readonly onRollback = (event: { uncledBundleIds?: string[] }): void => {
    for (const id of event.uncledBundleIds ?? []) this.uncled.add(id);
  };

  constructor(
    private readonly simnet: Simnet,
    payers: string[],
    private readonly tipper: string,
  ) {
    this.watch = new ChainWatch(simnet, payers, tipper);
    this.tipperBefore = simnet.cluster.getBalance(tipper);
    const engine = simnet.engine;
    const submit = engine.submitBundle;
    engine.submitBundle = (...args: Parameters<typeof submit>) => {
      const outcome = submit.apply(engine, args);
      if (outcome.ok) {
        const bundle = engine.getBundle(outcome.bundleId);
        for (const tx of bundle?.transactions ?? []) {
          if (tx.signers[0] !== tipper || !bundle) continue;
          // The user transaction's fee payer is watched from now on, before the bundle can land: a payer created for
          // one transaction (the fault suite's fresh payers) is known only here, and a tip can be tied to its
          // transaction on chain only if that transaction is watched (else the tip would look as if it landed alone).
          // Every user transaction's payer: a pack's riders too (its tip sits after all of them).
          for (const user of bundle.transactions) {
            const userPayer = user.signers[0];
            if (userPayer !== undefined && userPayer !== tipper) this.watch.addPayer(userPayer);
          }
          const signature = tx.signatures[0] as string;
          const known = this.byTip.get(signature);
          if (known) {
            if (!known.bundleIds.includes(bundle.bundleId)) known.bundleIds.push(bundle.bundleId);
            continue;
          }
          this.byTip.set(signature, {
            bundleIds: [bundle.bundleId],
            userSignature: bundle.signatures[0] as string,
            lamports: tx.tipTransfers.reduce((sum, t) => sum + t.lamports, 0),
            receivedSlot: bundle.receivedSlot,
          });
        }
      }
      return outcome;
    };
    simnet.cluster.on('rollback', this.onRollback);
    this.restore = () => {
      engine.submitBundle = submit;
      simnet.cluster.off('rollback', this.onRollback);
    };
  }

  stop(): void {
    this.watch.stop();
    this.restore();
  }

  /**
   * The operator moved lamports out of the tipper (`signatures`: its transfers, failed ones included, which are then
   * no tips; `lamports` with their fees) or into it (a negative amount, no signature: a faucet credit). Kept apart
   * from what relay paid.
   */
  operator(lamports: number, signatures: readonly string[] = []): void {
    this.operatorNetOut += lamports;
    for (const signature of signatures) this.operatorSignatures.add(signature);
  }

  /** The chain now (read in one go, so the balance and the list describe the same instant). */
  snapshot(): TipLedgerSnapshot {
    const seen = new Map<string, { slot: number; adjacentBundleIds: Set<string> }>();
    for (const t of this.watch.view().tips) {
      if (this.operatorSignatures.has(t.signature)) continue;
      let entry = seen.get(t.signature);
      if (!entry) seen.set(t.signature, (entry = { slot: t.slot, adjacentBundleIds: new Set() }));
      if (t.bundleId) entry.adjacentBundleIds.add(t.bundleId);
    }
    const tipperDropLamports =
      this.tipperBefore - this.simnet.cluster.getBalance(this.tipper) - this.operatorNetOut;
    const tips: ChainTip[] = [];
    for (const [signature, { slot, adjacentBundleIds }] of seen) {
      const engine = this.byTip.get(signature);
      const creditedId = engine?.bundleIds.find((id) => adjacentBundleIds.has(id));
      const uncledId = engine?.bundleIds.find((id) => this.uncled.has(id));
      tips.push({
        signature,
        slot,
        bundleId: creditedId ?? uncledId ?? engine?.bundleIds[0] ?? null,
        userSignature: engine?.userSignature ?? null,
        lamports: engine?.lamports ?? 0,
        credited: creditedId !== undefined,
        fromUncledBundle: uncledId !== undefined,
        receivedSlot: engine?.receivedSlot ?? null,
      });
    }
    const relayBundles = new Set([...this.byTip.values()].flatMap((e) => e.bundleIds));
    const uncledRelayBundles = [...this.uncled].filter((id) => relayBundles.has(id)).length;
    return { tips, tipperDropLamports, uncledRelayBundles };
  }
}

/** A tip on chain outside its bundle (from the chain), and whether relay reported it. */
export interface LeakedTip {
  txId: string;
  bundleId: string;
  tipSignature: string;
  tipSlot: number;
  /** From the tip's bytes (engine), not from relay. */
  lamports: number;
  /** Its lifecycle entry says so: stage failed with `slot_landed` at the tip's slot. */
  reportedInLifecycle: boolean;
  /** How the user transaction ended up on chain: with a later bundle of relay's, on its own, or not at all. */
  userLanded: 'with_a_later_bundle' | 'without_a_bundle' | 'not_on_chain';
  fromUncledBundle: boolean;
}

export interface TxVerdict {
  sent: SentTx;
  state: string;
  failure: string | null;
  onChain: boolean;
  chainSlot: number | null;
  chainErr: unknown;
  /** Relay's state agrees with the chain (the truth rules of DESIGN §2). */
  agrees: boolean;
  /** The state and class are the ones this kind of transaction must end with. */
  asExpected: boolean;
  problems: string[];
}

export interface ChainReport {
  verdicts: TxVerdict[];
  leaked: LeakedTip[];
  /** Tips on chain that belong to none of the sent transactions, or to no bundle the engine received. */
  strayTips: ChainTip[];
  /** Tips on chain per landed transaction beyond the one its landed bundle paid. */
  extraTips: number;
  extraTipLamports: number;
  /** Tips whose bundle reached the engine after the user transaction had landed (must be none). */
  secondTips: Array<{ txId: string; bundleId: string; tipSlot: number; landedSlot: number }>;
  tipsOnChain: number;
  creditedTips: number;
  creditedLamports: number;
  leakedLamports: number;
  /** The tipper's fees: one signature per transaction it has on chain. */
  feeLamports: number;
  tipperDropLamports: number;
  uncledRelayBundles: number;
}

function failureClassOf(err: unknown): string {
  return /InsufficientFundsForFee|AccountNotFound/.test(JSON.stringify(err))
    ? 'insufficient_funds'
    : 'simulation_failed';
}

/**
 * Compare every sent transaction with the chain, and every tip on chain (from `ledger`) with relay's records and
 * lifecycle log. `records` must all be terminal (the caller waits for that first).
 */
export async function verifyAgainstChain(
  connection: Connection,
  sent: SentTx[],
  records: Map<string, RelayRecord>,
  lifecycle: Map<string, LifecycleLine>,
  ledger: TipLedgerSnapshot,
): Promise<ChainReport> {
  const user = await chainStatuses(
    connection,
    sent.map((s) => s.signature),
  );
  const tipsByUser = new Map<string, ChainTip[]>();
  const sentSignatures = new Set(sent.map((s) => s.signature));
  const strayTips: ChainTip[] = [];
  for (const tip of ledger.tips) {
    if (!tip.userSignature || !tip.bundleId || !sentSignatures.has(tip.userSignature)) {
      strayTips.push(tip);
      continue;
    }
    const list = tipsByUser.get(tip.userSignature) ?? [];
    list.push(tip);
    tipsByUser.set(tip.userSignature, list);
  }

  const verdicts: TxVerdict[] = [];
  const leaked: LeakedTip[] = [];
  const secondTips: ChainReport['secondTips'] = [];
  let extraTips = 0;
  let extraTipLamports = 0;
  let creditedTips = 0;
  let creditedLamports = 0;
  for (const s of sent) {
    const record = records.get(s.txId);
    const problems: string[] = [];
    if (!record) throw new Error(`no relay record for ${s.txId}`);
    const status = user.get(s.signature) ?? null;
    const onChain = status !== null;
    let agrees: boolean;
    switch (record.state) {
      case 'finalized':
        agrees = onChain && status.err === null && status.confirmationStatus === 'finalized';
        if (!agrees) problems.push(`finalized but the chain says ${JSON.stringify(status)}`);
        break;
      case 'failed':
        if (onChain) {
          agrees = status.err !== null && record.failure === failureClassOf(status.err);
          if (!agrees)
            problems.push(`failed (${record.failure}) but the chain says ${JSON.stringify(status)}`);
        } else {
          agrees = ['insufficient_funds', 'simulation_failed', 'invalid_bundle'].includes(
            record.failure ?? '',
          );
          if (!agrees) problems.push(`failed with a retryable class ${record.failure} and not on chain`);
        }
        break;
      case 'expired': {
        // At the tip: at `finalized` Agave calls every blockhash newer than the root invalid, which proves nothing.
        const valid = (await connection.isBlockhashValid(s.blockhash, { commitment: 'processed' })).value;
        agrees = !onChain && !valid;
        if (!agrees) problems.push(`expired but on chain=${onChain}, blockhash still valid=${valid}`);
        break;
      }
      default:
        agrees = false;
        problems.push(`not terminal: ${record.state}`);
    }
    const expected = EXPECTED[s.kind];
    const asExpected = record.state === expected.state && record.failure === expected.failure;
    if (!asExpected)
      problems.push(`a ${s.kind} transaction should end ${expected.state}/${expected.failure}`);

    // Tips, from the chain: the one credited is the tip that sits right after this transaction in the same block
    // (its bundle landed whole); every other tip of this transaction's bundles that is on chain landed alone: leaked.
    const landedSlot = onChain && status.err === null ? status.slot : null;
    const mine = tipsByUser.get(s.signature) ?? [];
    const credited = mine.filter((t) => t.credited);
    const attemptOf = (bundleId: string) => record.attempts.find((a) => a.bundle_id === bundleId);
    if (credited.length > 1) problems.push(`${credited.length} bundles of it landed whole`);
    for (const t of credited) {
      creditedTips++;
      creditedLamports += t.lamports;
      const attempt = attemptOf(t.bundleId as string);
      if (!attempt) problems.push(`its bundle ${t.bundleId} landed but is none of relay's attempts`);
      else if (attempt.tip_lamports !== t.lamports)
        problems.push(
          `relay says ${attempt.tip_lamports} lamports for ${t.bundleId}; the tip moved ${t.lamports}`,
        );
      if (t.slot !== landedSlot)
        problems.push(`its bundle landed at ${t.slot}, the chain says ${landedSlot}`);
      const entry = lifecycle.get(t.bundleId as string);
      if (record.state === 'finalized' && entry?.stage !== 'finalized')
        problems.push(`the bundle that landed (${t.bundleId}) is at lifecycle stage ${entry?.stage}`);
    }
    for (const t of mine) {
      if (t.credited) continue;
      const bundleId = t.bundleId as string;
      const attempt = attemptOf(bundleId);
      if (!attempt) problems.push(`a tip of bundle ${bundleId} is on chain; relay has no such attempt`);
      else if (attempt.tip_lamports !== t.lamports)
        problems.push(
          `relay says ${attempt.tip_lamports} lamports for ${bundleId}; the tip moved ${t.lamports}`,
        );
      const entry = lifecycle.get(bundleId);
      leaked.push({
        txId: s.txId,
        bundleId,
        tipSignature: t.signature,
        tipSlot: t.slot,
        lamports: t.lamports,
        reportedInLifecycle: entry !== undefined && entry.stage === 'failed' && entry.slot_landed === t.slot,
        userLanded: !onChain
          ? 'not_on_chain'
          : credited.length > 0
            ? 'with_a_later_bundle'
            : 'without_a_bundle',
        fromUncledBundle: t.fromUncledBundle,
      });
      if (landedSlot !== null) {
        extraTips++;
        extraTipLamports += t.lamports;
        if (t.receivedSlot !== null && t.receivedSlot > landedSlot)
          secondTips.push({ txId: s.txId, bundleId, tipSlot: t.slot, landedSlot });
      }
    }
    verdicts.push({
      sent: s,
      state: record.state,
      failure: record.failure,
      onChain,
      chainSlot: status?.slot ?? null,
      chainErr: status?.err ?? null,
      agrees,
      asExpected,
      problems,
    });
  }
  return {
    verdicts,
    leaked,
    strayTips,
    extraTips,
    extraTipLamports,
    secondTips,
    tipsOnChain: ledger.tips.length,
    creditedTips,
    creditedLamports,
    leakedLamports: leaked.reduce((sum, l) => sum + l.lamports, 0),
    feeLamports: ledger.tips.length * LAMPORTS_PER_SIGNATURE,
    tipperDropLamports: ledger.tipperDropLamports,
    uncledRelayBundles: ledger.uncledRelayBundles,
  };
}
