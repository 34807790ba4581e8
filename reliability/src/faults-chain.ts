import { readFile } from 'node:fs/promises';
import type { Connection, SignatureStatus } from '@solana/web3.js';
import { get } from '@solrelay/testkit';
import { EXPECTED, type SentTx } from './faults-stack';

/**
 * Ground truth for the upstream-fault suite: every transaction's relay record against the chain, signature by
 * signature, over the simnet's JSON-RPC (`getSignatureStatuses` with `searchTransactionHistory`), and every tip
 * transaction relay built against the chain too, to find tips that landed without their bundle.
 */

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

/** The relay record of a transaction, as `GET /tx/{id}` serves it. */
export interface RelayRecord {
  tx_id: string;
  state: string;
  failure: string | null;
  tx_signatures: string[];
  attempts: Array<{
    attempt: number;
    bundle_id: string;
    tip_lamports: number;
    stage: string;
    outcome: string | null;
  }>;
}

export async function readRecords(url: string, sent: SentTx[]): Promise<Map<string, RelayRecord>> {
  const out = new Map<string, RelayRecord>();
  for (let i = 0; i < sent.length; i += 16) {
    const answers = await Promise.all(sent.slice(i, i + 16).map((s) => get(url, `/tx/${s.txId}`)));
    for (const answer of answers) {
      if (answer.status !== 200)
        throw new Error(`GET /tx answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      out.set(answer.body.tx_id as string, answer.body as RelayRecord);
    }
  }
  return out;
}

/** A tip transaction relay built that is on chain outside its bundle. */
export interface LeakedTip {
  txId: string;
  bundleId: string;
  tipSignature: string;
  tipSlot: number;
  lamports: number;
  /** Its lifecycle entry says so: stage failed with `slot_landed` at the tip's slot. */
  reported: boolean;
  /** How the user transaction ended up on chain: with a later bundle of relay's, on its own, or not at all. */
  userLanded: 'with_a_later_bundle' | 'without_a_bundle' | 'not_on_chain';
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
  /** Tips on chain per landed transaction beyond the one its landed bundle paid. */
  extraTips: number;
  /** Tips paid by attempts built after the user transaction had already landed (must be none). */
  secondTips: Array<{ txId: string; bundleId: string; tipSlot: number; landedSlot: number }>;
  tipsOnChain: number;
}

function failureClassOf(err: unknown): string {
  return /InsufficientFundsForFee|AccountNotFound/.test(JSON.stringify(err))
    ? 'insufficient_funds'
    : 'simulation_failed';
}

/**
 * Compare every sent transaction with the chain. `records` must all be terminal (the caller waits for that first).
 */
export async function verifyAgainstChain(
  connection: Connection,
  sent: SentTx[],
  records: Map<string, RelayRecord>,
  lifecycle: Map<string, LifecycleLine>,
): Promise<ChainReport> {
  const user = await chainStatuses(
    connection,
    sent.map((s) => s.signature),
  );
  const tipOf = (entry: LifecycleLine | undefined): string | null =>
    entry && entry.transactions.length > 1
      ? (entry.transactions[entry.transactions.length - 1] as string)
      : null;
  const tipSignatures: string[] = [];
  for (const record of records.values())
    for (const a of record.attempts) {
      const tip = tipOf(lifecycle.get(a.bundle_id));
      if (tip) tipSignatures.push(tip);
    }
  const tips = await chainStatuses(connection, tipSignatures);

  const verdicts: TxVerdict[] = [];
  const leaked: LeakedTip[] = [];
  const secondTips: ChainReport['secondTips'] = [];
  let extraTips = 0;
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
        const valid = (await connection.isBlockhashValid(s.blockhash, { commitment: 'finalized' })).value;
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

    // Tips: the bundle that landed is the one whose tip is in the user transaction's slot (bundles are atomic);
    // of several there (an old attempt's tip re-broadcast next to a new bundle), the latest attempt's. Every other
    // tip on chain landed without its bundle: leaked.
    const landedSlot = onChain && status.err === null ? status.slot : null;
    const withTip = record.attempts
      .map((a) => {
        const entry = lifecycle.get(a.bundle_id);
        const tip = tipOf(entry);
        const tipStatus = tip ? (tips.get(tip) ?? null) : null;
        return { a, entry, tip, tipStatus };
      })
      .filter((x) => x.tipStatus !== null);
    const credited = [...withTip]
      .reverse()
      .find((x) => landedSlot !== null && x.tipStatus!.slot === landedSlot);
    if (credited && credited.entry) {
      if (record.state === 'finalized' && credited.entry.stage !== 'finalized')
        problems.push(`the bundle that landed (${credited.a.bundle_id}) is at stage ${credited.entry.stage}`);
    }
    for (const x of withTip) {
      if (x === credited) continue;
      const tipSlot = x.tipStatus!.slot;
      leaked.push({
        txId: s.txId,
        bundleId: x.a.bundle_id,
        tipSignature: x.tip as string,
        tipSlot,
        lamports: x.a.tip_lamports,
        reported: x.entry !== undefined && x.entry.stage === 'failed' && x.entry.slot_landed === tipSlot,
        userLanded: !onChain ? 'not_on_chain' : credited ? 'with_a_later_bundle' : 'without_a_bundle',
      });
      if (landedSlot !== null) {
        extraTips++;
        if ((x.entry?.slot_submitted ?? 0) > landedSlot)
          secondTips.push({ txId: s.txId, bundleId: x.a.bundle_id, tipSlot, landedSlot });
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
  return { verdicts, leaked, extraTips, secondTips, tipsOnChain: tips.size };
}
