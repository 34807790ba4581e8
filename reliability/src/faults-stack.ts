import { ComputeBudgetProgram, Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { configFromEnv, startSidecar, type Sidecar, type SidecarOptions } from '@solrelay/sidecar';
import {
  DEFAULT_CLEARING_TIP_PER_CU,
  get,
  inProcessSidecar,
  post,
  startStack,
  TEST_INTERVALS,
  type HttpAnswer,
  type Stack,
} from '@solrelay/testkit';

/**
 * The upstream-fault suite's stack: the real simnet and the real sidecar (in-process `startSidecar`, built package),
 * the sidecar deciding by itself with its core reflex (no agent connected: `agent_absent` fallback after a 1 s
 * grace). Poll intervals are shortened for 60 ms slots; the logger keeps warnings and errors so a test can read what
 * the sidecar said (stream cuts, leaked tips) without printing them.
 */

export const SLOT_MS = 60;

/** Poll intervals for 60 ms slots (the production defaults are for 400 ms slots). */
export const FAULT_INTERVALS: NonNullable<SidecarOptions['intervals']> = {
  ...TEST_INTERVALS,
  slotStallMs: 3000,
  // The production 5 s poll of getAlpenglowMigrationSlot, scaled from 400 ms slots to 60 ms ones.
  consensusMs: 750,
};

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  msg: string;
  at: number;
  fields: Record<string, unknown>;
}

/** A pino-shaped logger that drops info/debug and keeps warn/error lines in memory. */
export function capturingLogger(lines: LogLine[]): NonNullable<SidecarOptions['logger']> {
  const keep =
    (level: LogLine['level']) =>
    (a: unknown, b?: unknown): void => {
      const fields = typeof a === 'object' && a !== null ? (a as Record<string, unknown>) : {};
      const msg = typeof a === 'string' ? a : typeof b === 'string' ? b : '';
      lines.push({ level, msg, at: Date.now(), fields });
      if (lines.length > 20_000) lines.splice(0, lines.length - 20_000);
    };
  const ignore = (): void => undefined;
  const logger: Record<string, unknown> = {
    level: 'info',
    trace: ignore,
    debug: ignore,
    info: keep('info'),
    warn: keep('warn'),
    error: keep('error'),
    fatal: keep('error'),
  };
  logger.child = () => logger;
  return logger as unknown as NonNullable<SidecarOptions['logger']>;
}

export interface FaultStack {
  stack: Stack<Sidecar>;
  url: string;
  logs: LogLine[];
  /** Funded payer for the transfers that must land. */
  payer: Keypair;
  /** A payer that can pay fees but not the transfers it signs (execution fails: simulation_failed). */
  poorPayer: Keypair;
}

/** `storeEnv`: the store's variables (`RELAY_DATABASE_URL` for PostgreSQL), kept across the stack's restarts. */
export async function startFaultStack(
  policy: Record<string, unknown> = {},
  storeEnv: Record<string, string> = {},
  slotMs = SLOT_MS,
): Promise<FaultStack> {
  const logs: LogLine[] = [];
  const stack = await startStack<Sidecar>({
    // The `migration` consensus mode with no boundary planned: TowerBFT (its RPC answers getAlpenglowMigrationSlot
    // with null, and slot messages carry a bank id) until the consensus-migration phase announces one.
    simnet: { slotMs, seed: 10, consensus: 'migration', migration: { boundarySlot: null } },
    // Stated, not left to the default: `low_tip` loses to this competitor by its requested CU (see its constant).
    clearingTipPerCu: DEFAULT_CLEARING_TIP_PER_CU,
    env: { RELAY_AGENT_GRACE_S: '1', ...storeEnv },
    policy: { 'rate-limit': 100_000, 'max-queue': 10_000, ...policy },
    start: inProcessSidecar(
      { configFromEnv, startSidecar },
      { logger: capturingLogger(logs), intervals: FAULT_INTERVALS },
    ),
  });
  return {
    stack,
    url: stack.sidecar.url,
    logs,
    payer: stack.payer,
    poorPayer: stack.simnet.fundedKeypair(50_000_000),
  };
}

/** The kinds of transaction a fault load carries, and what each must end as. */
export type TxKind = 'good' | 'unfunded' | 'overdraft' | 'low_tip';

export const EXPECTED: Record<TxKind, { state: string; failure: string | null }> = {
  good: { state: 'finalized', failure: null },
  unfunded: { state: 'failed', failure: 'insufficient_funds' },
  overdraft: { state: 'failed', failure: 'simulation_failed' },
  low_tip: { state: 'expired', failure: null },
};

export interface SentTx {
  txId: string;
  kind: TxKind;
  phase: string;
  signature: string;
  blockhash: string;
  enqueuedAt: number;
}

/**
 * What a `low_tip` transaction requests with SetComputeUnitLimit: Agave's most (MAX_COMPUTE_UNIT_LIMIT). The stack's
 * competitor is pinned per requested CU (testkit's default, 5,000 lamports over a 201,400-CU bundle), so it outbids a
 * bundle of 1.4M CU with ≈ 34.8k lamports, far above the 1,000 a low_tip caller allows; a light transfer at 1,000
 * would clear it.
 */
export const LOW_TIP_COMPUTE_UNIT_LIMIT = 1_400_000;

/**
 * A signed SystemProgram transfer on the cluster's latest confirmed blockhash; with `computeUnitLimit`, preceded by a
 * ComputeBudget SetComputeUnitLimit of that many CU (what the transaction requests, and the auction ranks by).
 */
export function signedTransfer(
  fs: FaultStack,
  from: Keypair,
  lamports: number,
  computeUnitLimit?: number,
): { wire: string; blockhash: string } {
  const { blockhash } = fs.stack.simnet.cluster.latestBlockhash('confirmed');
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash });
  if (computeUnitLimit !== undefined)
    tx.add(ComputeBudgetProgram.setComputeUnitLimit({ units: computeUnitLimit }));
  tx.add(
    SystemProgram.transfer({
      fromPubkey: from.publicKey,
      toPubkey: Keypair.generate().publicKey,
      // Above the rent-exempt minimum so the new account is valid.
      lamports: 890_880 + lamports,
    }),
  );
  tx.sign(from);
  return { wire: tx.serialize().toString('base64'), blockhash };
}

/** Build and enqueue one transaction of `kind`; returns what was sent (throws if relay refuses it). */
export async function enqueueKind(
  fs: FaultStack,
  kind: TxKind,
  phase: string,
  options: { freshPayer?: boolean } = {},
): Promise<SentTx> {
  let built: { wire: string; blockhash: string };
  const body: Record<string, unknown> = {};
  switch (kind) {
    case 'good':
      if (options.freshPayer) {
        // A fee payer that exists only from this moment (the lagging-engine-bank phase).
        const payer = Keypair.generate();
        fs.stack.simnet.cluster.airdrop(payer.publicKey.toBase58(), 1_000_000_000);
        built = signedTransfer(fs, payer, 1000);
      } else built = signedTransfer(fs, fs.payer, 1000);
      break;
    case 'unfunded':
      // A fee payer the cluster has never seen: it cannot pay the fee.
      built = signedTransfer(fs, Keypair.generate(), 1000);
      break;
    case 'overdraft':
      // The payer covers the fee but not the 5 SOL it sends: the transfer fails when executed.
      built = signedTransfer(fs, fs.poorPayer, 5_000_000_000);
      break;
    case 'low_tip':
      // The caller caps its tip at min-tip on a transaction requesting 1.4M CU: below what the pinned competitor bids
      // per requested CU at that size, so every attempt loses, then the blockhash dies.
      built = signedTransfer(fs, fs.payer, 1000, LOW_TIP_COMPUTE_UNIT_LIMIT);
      body.max_tip = 1000;
      break;
  }
  const answer: HttpAnswer = await post(fs.url, '/tx/enqueue', { transaction: built.wire, ...body });
  if (answer.status !== 202) {
    throw new Error(
      `enqueue of a ${kind} transaction answered ${answer.status}: ${JSON.stringify(answer.body)}`,
    );
  }
  const signature = (answer.body.signatures as string[])[0] as string;
  return {
    txId: answer.body.tx_id as string,
    kind,
    phase,
    signature,
    blockhash: built.blockhash,
    enqueuedAt: Date.now(),
  };
}

export interface Health {
  ready: boolean;
  reasons: string[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the /status JSON as served
  status: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the /tip JSON as served
  tip: any;
}

/** /readyz, /status and /tip read together. */
export async function readHealth(url: string): Promise<Health> {
  const [readyz, status, tip] = await Promise.all([
    get(url, '/readyz'),
    get(url, '/status'),
    get(url, '/tip'),
  ]);
  const reasons: string[] =
    readyz.status === 200
      ? []
      : ((readyz.body?.error?.details?.reasons as string[] | undefined) ?? ['(none)']);
  return { ready: readyz.status === 200, reasons, status: status.body, tip: tip.body };
}

/** The value of one Prometheus series (0 when absent). */
export async function metric(url: string, series: string): Promise<number> {
  const text = (await get(url, '/metrics')).body as string;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    if (line.slice(0, space) === series) return Number(line.slice(space + 1));
  }
  return 0;
}
