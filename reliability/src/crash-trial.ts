import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseLifecycleLine } from '@solrelay/core';
import type { Keypair } from '@solana/web3.js';
import type { Simnet } from '@solrelay/simnet';
import { freePort, get, post, spawnSidecar, waitUntil, type RunningSidecar } from '@solrelay/testkit';
import { ChainWatch } from './crash-chain';
import { TransferSigner, type SignedTransfer } from './crash-wire';
import { readRecordsById, type RelayRecord } from './relay-records';

/**
 * One crash trial: a load of transactions through the real sidecar process (apps/sidecar/dist/main.cjs), killed
 * with SIGKILL one or more times — at a named crash point (`RELAY_CRASH_AT` + `RELAY_CRASH_AFTER`, the sidecar kills
 * itself there) or by this process after a random delay — and restarted each time on the same data dir, lifecycle
 * log and policy file, until every accepted transaction is terminal. Then everything is checked against the chain
 * and the files, and a sidecar started once more on the final data dir must answer the same records through its API.
 * Everything is judged through the sidecar's HTTP API (`/enqueue`, `/tx/{id}`, `/queue`), the simulated chain
 * (signatures, tip transfers, the tipper's balance, the block engine's bundles) and the lifecycle log, never by
 * reading the store's own files or structures: the trial holds for any store the sidecar keeps its records in.
 *
 * The client side is accounted for exactly: a transaction is *acknowledged* once any sidecar answered its enqueue
 * with a 2xx (it has a tx_id from then on). An enqueue in flight when the process died has no answer; it is sent
 * again, byte for byte, to the next process (as a client would), which finds it (200, journaled before the crash),
 * accepts it (202, it never was) or refuses it (422, only because its blockhash died meanwhile: checked against the
 * chain). Every other answer is a problem. An acknowledged transaction is never sent again, so a journal that
 * lost it cannot be hidden by a re-enqueue: after each restart it must be found by its tx_id.
 */

export const SIDECAR_MAIN = join(__dirname, '..', '..', 'apps', 'sidecar', 'dist', 'main.cjs');
export const AGENT_MAIN = join(__dirname, '..', '..', 'apps', 'agents', 'dist', 'main.cjs');

/**
 * A kill at the `after`-th hit of a named crash point, or by this process at a random moment: `fraction` of the way
 * through the trial's span (`TrialContext.randomKill`), so random kills land anywhere from the enqueue burst to the
 * last finalizations and compactions.
 */
export type Kill = { kind: 'point'; point: string; after: number } | { kind: 'random'; fraction: number };

/** A crash point that never fired: the process had fewer than `after` hits (flushes batch more on a loaded box). */
export class CrashPointNotReached extends Error {
  override readonly name = 'CrashPointNotReached';
  constructor(
    readonly killIndex: number,
    readonly point: string,
    readonly after: number,
    detail: string,
  ) {
    super(`crash point ${point} #${after} never fired\n${detail}`);
  }
}

export interface TrialSpec {
  name: string;
  /** Kills of the successive processes; the process after the last one runs to the end. */
  kills: Kill[];
  /** Decisions by the real agent process (reflex) instead of the sidecar's bypass. */
  agent?: boolean;
  /** RELAY_JOURNAL_COMPACT_BYTES for every process of the trial. */
  compactBytes: number;
}

export interface TrialContext {
  simnet: Simnet;
  txs: number;
  /** Enqueues in flight at once. */
  concurrency: number;
  bypassTip: number;
  /**
   * The store's variables, asked once per trial (a fresh database each: `RELAY_DATABASE_URL`); every process of the
   * trial, the final replay included, gets the same. Nothing for the journal (the data dir).
   */
  storeEnv?: () => Promise<Record<string, string>>;
  /** Random kills land `floorMs + fraction × spanMs` after their process is listening. */
  randomKill: { floorMs: number; spanMs: number };
}

interface Sent extends SignedTransfer {
  index: number;
  txId: string | null;
  /** Which process (1-based) acknowledged it. */
  ackedBy: number | null;
  /** Every answer, in order: the HTTP status, or 0 for "no answer" (the process died). */
  answers: Array<{ proc: number; status: number; code?: string }>;
  /** Refused for good (a resend whose blockhash expired while no process was up to take it). */
  refused: boolean;
}

/** The only refusal a resend may get: its blockhash died while relay was down. */
const EXPIRED_CODE = 'RELAY_E_TX_BLOCKHASH_EXPIRED';

export interface KillReport {
  kind: Kill['kind'];
  point: string | null;
  after: number | null;
  delay_ms: number | null;
  /** Random kills: where in the span the delay was drawn (0..1). */
  fraction: number | null;
  /** How the process ended: SIGKILL expected. */
  ended: string;
  /** Its stderr named the crash point it died at. */
  crash_point_reached: boolean;
  /** Milliseconds from spawn to "listening" of this process. */
  start_ms: number;
  /** Milliseconds from spawn to death of this process. */
  died_at_ms: number;
  /** Milliseconds from its death to the next process listening: time no process could take or send anything. */
  down_ms: number;
  /** Acknowledged before this kill. */
  acked_before: number;
  /** Enqueues that had no answer when it died. */
  in_flight: number;
  /** Lifecycle log right after the kill: a torn last line, and complete lines that do not parse (must be 0). */
  lifecycle_torn_tail_bytes: number;
  lifecycle_bad_lines: number;
  /** The journal store's files right after the kill: reported, not judged (none on PostgreSQL). */
  journal_files: string[];
  /** What the next process said while recovering (torn journal or lifecycle lines it skipped and cut). */
  recovery_warnings: string[];
}

export interface TrialResult {
  trial: number;
  name: string;
  agent: boolean;
  txs: number;
  kills: KillReport[];
  /** Start of the process that ran to the end (after the last kill); spawn to listening of the one started once
   * more on the final data dir (its store's replay). */
  restart_ms: number;
  replay_ms: number;
  acknowledged: number;
  /** In flight at a crash, sent again to the next process: found (200), accepted anew (202), refused (422, the
   * blockhash expired meanwhile: the only refusal accepted; each checked to be off chain with a dead blockhash). */
  resent: { found: number; accepted: number; refused: number };
  /** Enqueue answers outside the expected set (must be 0); 429 and 503-not-ready answers, retried. */
  unexpected_answers: number;
  retried_answers: { rate_limited: number; not_ready: number };
  /** Refusals whose transaction is on chain or whose blockhash is still valid (must be 0). */
  refused_unexplained: number;
  /** Total time with no process up (sum of the kills' down_ms). */
  downtime_ms: number;
  /** Acknowledged transactions the next process did not know (must be 0). */
  lost: number;
  terminal: Record<string, number>;
  not_terminal: number;
  /** Relay's final state disagrees with the chain (finalized: on chain and finalized; expired: not on chain and its
   * blockhash no longer valid; failed: not on chain or failed there). */
  disagree: number;
  /** The payer's signatures on chain more than once, or on chain with no acknowledged record (both must be 0). */
  double_landed: number;
  unknown_landed: number;
  /** Tip transactions on chain; landed transactions with more than one; tips whose bundle relay has no attempt for. */
  tips_on_chain: number;
  double_tips: number;
  orphan_tips: number;
  /** Tipper's balance drop, the tips on chain plus their fees, and what relay's records say it paid. */
  tipper_drop_lamports: number;
  chain_tips_lamports: number;
  relay_paid_lamports: number;
  attempts: number;
  /** Attempts whose bundle the block engine never took (never sent, or refused at admission). */
  unsent_attempts: number;
  /** Expired transactions whose last attempt relay journaled and never sent (must be 0). */
  expired_with_unsent_attempt: number;
  lifecycle: { lines: number; bad_lines: number; torn_tail_bytes: number; stale_entries: number };
  /** The journal store's files at the end: reported, not judged (none on PostgreSQL). */
  journal: { files: string[]; bytes: number; snapshot: boolean };
  /** Records (state, failure, signatures, attempts with their tips and stages) that a sidecar started once more on
   * the final data dir answers differently through its API (must be 0). */
  replay_mismatch: number;
  duration_ms: number;
  phases_ms: Record<string, number>;
  problems: string[];
}

/** A seeded generator (mulberry32): the same seed draws the same trials. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export interface RunningAgent {
  child: ChildProcess;
  output: () => string;
  stop(): Promise<void>;
}

export function spawnAgent(env: Record<string, string>): RunningAgent {
  const child = spawn(process.execPath, [AGENT_MAIN], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    child,
    output: () => output,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The lifecycle file as it is: complete lines that do not parse, the torn tail, and the latest entry per bundle. */
async function inspectLifecycle(path: string): Promise<{
  lines: number;
  bad: number;
  tornBytes: number;
  latest: Map<string, { stage: string; tx_id: string }>;
}> {
  const text = await readFile(path, 'utf8').catch(() => '');
  const parts = text.split('\n');
  const tail = parts.pop() ?? '';
  const latest = new Map<string, { stage: string; tx_id: string }>();
  let bad = 0;
  let lines = 0;
  for (const line of parts) {
    if (line.length === 0) continue;
    lines++;
    const entry = parseLifecycleLine(line);
    if (!entry) bad++;
    else latest.set(entry.bundle_id, { stage: entry.stage, tx_id: entry.tx_id });
  }
  return { lines, bad, tornBytes: Buffer.byteLength(tail), latest };
}

/** The records of `ids` (null for one the sidecar does not know). */
function readRecords(url: string, ids: string[]): Promise<Map<string, RelayRecord | null>> {
  return readRecordsById(url, ids);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const TERMINAL = new Set(['finalized', 'failed', 'expired']);

/** The recovery warnings a sidecar logged (pino JSON lines at warn): torn or incomplete files it skipped. */
function recoveryWarnings(output: string): string[] {
  const out: string[] = [];
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { msg?: string; relogged?: number };
      const msg = entry.msg ?? '';
      if (/torn|incomplete|unreadable|lifecycle log/.test(msg))
        out.push(entry.relogged !== undefined ? `${msg} (${entry.relogged})` : msg);
    } catch {
      /* not a log line */
    }
  }
  return out;
}

/** A trial's scratch directory, with a funded tipper (its keypair file) and payer, and the policy file its sidecars use. */
export interface TrialWorkspace {
  dir: string;
  tipper: Keypair;
  tipperKey: string;
  payer: Keypair;
  keypairPath: string;
  policyPath: string;
}

export async function trialWorkspace(simnet: Simnet, prefix: string): Promise<TrialWorkspace> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const tipper = simnet.fundedKeypair(100_000_000_000);
  const payer = simnet.fundedKeypair(100_000_000_000);
  const keypairPath = join(dir, 'tipper.json');
  await writeFile(keypairPath, JSON.stringify([...tipper.secretKey]), { mode: 0o600 });
  // Limits out of the way of a burst of a thousand; retries enough that losing an auction now and then never strands one.
  const policyPath = join(dir, 'relay.policy.json');
  await writeFile(
    policyPath,
    JSON.stringify({ 'rate-limit': 1_000_000, 'max-queue': 100_000, 'max-retries': 20 }),
  );
  return { dir, tipper, tipperKey: tipper.publicKey.toBase58(), payer, keypairPath, policyPath };
}

/** Run one trial; the result carries every figure and a list of problems (empty when every invariant held). */
export async function runTrial(ctx: TrialContext, spec: TrialSpec, trial: number): Promise<TrialResult> {
  const started = Date.now();
  /** Where the trial's time went. */
  const phases: Record<string, number> = {};
  let mark = started;
  const lap = (name: string) => {
    const now = Date.now();
    phases[name] = (phases[name] ?? 0) + now - mark;
    mark = now;
  };
  const { simnet } = ctx;
  const problems: string[] = [];
  const { dir, payer, tipperKey, keypairPath, policyPath } = await trialWorkspace(
    simnet,
    'relay-crash-trial-',
  );
  const lifecyclePath = join(dir, 'lifecycle.jsonl');
  const journalDir = join(dir, 'data', 'journal');
  const port = await freePort();
  const env: Record<string, string> = {
    ...simnet.env(),
    KEYPAIR_PATH: keypairPath,
    API_PORT: String(port),
    RELAY_DATA_DIR: join(dir, 'data'),
    LIFECYCLE_PATH: lifecyclePath,
    RELAY_POLICY_FILE: policyPath,
    BUNDLE_ENGINE_RPS: '2000',
    RELAY_JOURNAL_COMPACT_BYTES: String(spec.compactBytes),
    ...(await ctx.storeEnv?.()),
    ...(spec.agent
      ? { AGENT_DECISION_MODE: 'reflex', RELAY_AGENT_GRACE_S: '600' }
      : { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(ctx.bypassTip) }),
  };
  const watch = new ChainWatch(simnet, payer.publicKey.toBase58(), tipperKey);
  const tipperBefore = simnet.cluster.getBalance(tipperKey);
  const signer = new TransferSigner(payer, () => simnet.cluster.latestBlockhash('confirmed').blockhash);

  const sent: Sent[] = [];
  const retry: Sent[] = [];
  const resent = { found: 0, accepted: 0, refused: 0 };
  const retried = { rate_limited: 0, not_ready: 0 };
  let unexpected = 0;
  const unexpectedAnswer = (message: string) => {
    unexpected++;
    if (unexpected <= 5) problems.push(message);
  };
  const fresh = (): Sent | null => {
    if (sent.length >= ctx.txs) return null;
    const tx: Sent = {
      ...signer.transfer(),
      index: sent.length,
      txId: null,
      ackedBy: null,
      answers: [],
      refused: false,
    };
    sent.push(tx);
    return tx;
  };

  /**
   * Send (and resend) enqueues to process `proc` until the load is all answered or the process is gone. Expected
   * answers: 202 (accepted), 200 (found: only for a transaction in flight at an earlier crash), no answer while the
   * process is being killed, 429 and 503 RELAY_E_NOT_READY (retried), and for a resend the blockhash-expired 422.
   * Anything else is a problem.
   */
  const sendPhase = async (
    proc: number,
    url: string,
    alive: () => boolean,
    exited: Promise<unknown>,
  ): Promise<void> => {
    const worker = async (): Promise<void> => {
      while (alive()) {
        const tx = retry.shift() ?? fresh();
        if (!tx) return;
        // In flight when an earlier process died: it may or may not be in the journal.
        const wasInFlight = tx.answers.some((a) => a.status === 0 && a.proc < proc);
        // Status 0: no answer, the process died with the request in flight.
        let status = 0;
        let code: string | undefined;
        let txId: string | undefined;
        try {
          const answer = await post(url, '/tx/enqueue', { transaction: tx.wire });
          status = answer.status;
          code = answer.body?.error?.code as string | undefined;
          txId = answer.body?.tx_id as string | undefined;
        } catch {
          /* no answer */
        }
        tx.answers.push({ proc, status, ...(code ? { code } : {}) });
        const what = `process ${proc} answered the enqueue of tx #${tx.index}${wasInFlight ? ' (a resend)' : ''}`;
        if (status === 200 || status === 202) {
          if (!txId) unexpectedAnswer(`${what} ${status} without a tx_id`);
          if (tx.txId && tx.txId !== txId) problems.push(`${tx.signature} got two tx ids`);
          if (status === 200 && !wasInFlight)
            unexpectedAnswer(`${what} 200 (already known), but no process ever took it before`);
          tx.txId = txId ?? null;
          tx.ackedBy = proc;
          if (wasInFlight) {
            if (status === 200) resent.found++;
            else resent.accepted++;
          }
        } else if (status === 0) {
          retry.push(tx);
          // No answer is expected only from a process being killed: it must be dead (or die) right after.
          if (alive()) await Promise.race([exited, sleep(5000)]);
          if (alive()) {
            unexpectedAnswer(
              `process ${proc} gave no answer to the enqueue of tx #${tx.index} and stayed up`,
            );
            await sleep(100);
          } else return;
        } else if (status === 429 || (status === 503 && code === 'RELAY_E_NOT_READY')) {
          if (status === 429) retried.rate_limited++;
          else retried.not_ready++;
          retry.push(tx);
          await sleep(100);
        } else if (status === 422 && code === EXPIRED_CODE && wasInFlight) {
          tx.refused = true;
          resent.refused++;
        } else {
          unexpectedAnswer(`${what} ${status} ${code ?? JSON.stringify(code)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: ctx.concurrency }, worker));
  };

  const acked = () => sent.filter((s) => s.txId !== null);
  const kills: KillReport[] = [];
  let agent: RunningAgent | null = null;
  let sidecar: RunningSidecar | null = null;
  let restartMs = 0;
  let replayMismatch = 0;
  let finalRecords = new Map<string, RelayRecord | null>();
  /** When the previous process died (to measure the time with no process up). */
  let previousDiedAt: number | null = null;
  try {
    for (let proc = 1; proc <= spec.kills.length + 1; proc++) {
      const kill = spec.kills[proc - 1];
      const crashEnv: Record<string, string> =
        kill?.kind === 'point' ? { RELAY_CRASH_AT: kill.point, RELAY_CRASH_AFTER: String(kill.after) } : {};
      const t0 = Date.now();
      const running: RunningSidecar = await spawnSidecar(SIDECAR_MAIN, { ...env, ...crashEnv }, 30_000);
      sidecar = running;
      const listeningAt = Date.now();
      const startMs = listeningAt - t0;
      const previousKill = kills[kills.length - 1];
      if (previousKill && previousDiedAt !== null) previousKill.down_ms = listeningAt - previousDiedAt;
      if (spec.agent && !agent) {
        agent = spawnAgent({
          RELAY_URL: running.url,
          AGENT_WATCHDOG_MS: '1000',
        });
      }
      let dead = false;
      let diedAt = 0;
      void running.exited.then(() => {
        dead = true;
        diedAt = Date.now();
      });

      // Acknowledged transactions survive the crash: the new process knows every one of them.
      // (A process that dies at a crash point while being asked is checked by the next one; the last one always is.)
      if (proc > 1) {
        const ids = acked().map((s) => s.txId as string);
        try {
          const records = await readRecords(running.url, ids);
          const missing = ids.filter((id) => records.get(id) === null);
          if (missing.length > 0)
            problems.push(`process ${proc} does not know ${missing.length} acknowledged tx: ${missing[0]}…`);
        } catch (error) {
          if (!(await Promise.race([running.exited.then(() => true), sleep(2000).then(() => false)])))
            throw error;
        }
      }

      if (!kill) {
        restartMs = startMs;
        lap('kills_and_restarts');
        await sendPhase(proc, running.url, () => !dead, running.exited);
        if (retry.length > 0) problems.push(`${retry.length} enqueues never answered by the last process`);
        await waitUntil(
          async () => {
            if (dead) throw new Error(`the last sidecar died:\n${running.output().slice(-2000)}`);
            const queue = await get(running.url, '/queue');
            return queue.status === 200 && queue.body.pending === 0;
          },
          180_000,
          'every accepted transaction terminal',
        ).catch(async (error: unknown) => {
          // Say what is still pending (state, attempts and their stages, last error), for a person to follow.
          const records = await readRecords(
            running.url,
            acked().map((s) => s.txId as string),
          ).catch(() => new Map<string, RelayRecord | null>());
          const pending = [...records.values()].filter((r) => r && !TERMINAL.has(r.state));
          const show = pending.slice(0, 5).map((r) => JSON.stringify(r));
          throw new Error(
            `${(error as Error).message}; ${pending.length} not terminal, the first: ${show.join('\n')}`,
          );
        });
        lap('load_to_terminal');
        finalRecords = await readRecords(
          running.url,
          acked().map((s) => s.txId as string),
        );
        await running.stop();
        if (previousKill) previousKill.recovery_warnings = recoveryWarnings(running.output());
        // For a person: what the last process said (its log), beside the records dumped below.
        if (process.env.RELIABILITY_CRASH_DEBUG)
          await writeFile(
            `${process.env.RELIABILITY_CRASH_DEBUG}-trial${trial}-sidecar.log`,
            running.output(),
          );
        break;
      }

      const ackedBefore = acked().length;
      const phase = sendPhase(proc, running.url, () => !dead, running.exited);
      let timer: NodeJS.Timeout | null = null;
      const delayMs =
        kill.kind === 'random'
          ? Math.round(ctx.randomKill.floorMs + kill.fraction * ctx.randomKill.spanMs)
          : null;
      // A random kill lands at its moment after "listening", whatever the process is doing then, idle included.
      if (delayMs !== null)
        timer = setTimeout(
          () => running.child.kill('SIGKILL'),
          Math.max(0, listeningAt + delayMs - Date.now()),
        );
      // A crash point that has not fired once the whole load is terminal and sent never will: give up then.
      let idleSince: number | null = null;
      const quiet = async (): Promise<'idle'> => {
        for (;;) {
          await sleep(250);
          if (dead) return new Promise<never>(() => undefined);
          const settled =
            sent.length >= ctx.txs &&
            retry.length === 0 &&
            (await get(running.url, '/queue').then(
              (q) => q.status === 200 && q.body.pending === 0,
              () => false,
            ));
          idleSince = settled ? (idleSince ?? Date.now()) : null;
          if (idleSince !== null && Date.now() - idleSince > 4000) return 'idle';
        }
      };
      const ended = await Promise.race([
        running.exited,
        ...(kill.kind === 'point' ? [quiet()] : []),
        new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 120_000).unref()),
      ]);
      if (timer) clearTimeout(timer);
      if (ended === 'timeout' || ended === 'idle') {
        running.child.kill('SIGKILL');
        await running.exited;
        await phase;
        const detail = running.output().slice(-2000);
        if (kill.kind === 'point' && ended === 'idle')
          throw new CrashPointNotReached(proc - 1, kill.point, kill.after, detail);
        throw new Error(`trial ${spec.name}: process ${proc} did not exit (${kill.kind} kill)\n${detail}`);
      }
      await phase;
      await running.exited;
      previousDiedAt = diedAt;
      if (previousKill) previousKill.recovery_warnings = recoveryWarnings(running.output());
      const reached = kill.kind === 'point' && running.output().includes(`crash point ${kill.point} reached`);
      if (kill.kind === 'point' && !reached)
        problems.push(`process ${proc} ended (${String(ended)}) without reaching ${kill.point}`);
      if (ended !== 'SIGKILL') problems.push(`process ${proc} ended with ${String(ended)}, not SIGKILL`);
      const life = await inspectLifecycle(lifecyclePath);
      if (life.bad > 0)
        problems.push(`after kill ${proc}: ${life.bad} complete lifecycle lines do not parse`);
      kills.push({
        kind: kill.kind,
        point: kill.kind === 'point' ? kill.point : null,
        after: kill.kind === 'point' ? kill.after : null,
        delay_ms: delayMs,
        fraction: kill.kind === 'random' ? kill.fraction : null,
        ended: String(ended),
        crash_point_reached: reached,
        start_ms: startMs,
        died_at_ms: diedAt - t0,
        down_ms: 0,
        acked_before: ackedBefore,
        in_flight: retry.length,
        lifecycle_torn_tail_bytes: life.tornBytes,
        lifecycle_bad_lines: life.bad,
        journal_files: (await readdir(journalDir).catch(() => [])).sort(),
        recovery_warnings: [],
      });
    }
    await agent?.stop();
    agent = null;

    lap('read_records');
    // ---- the chain, the tipper's balance and the records
    await waitUntil(
      () => simnet.cluster.slotAt('finalized') > simnet.cluster.slotAt('processed') - 40,
      10_000,
      'finalization to catch up',
    );
    const chain = watch.view();
    const ackedTxs = acked();
    const bySignature = new Map(ackedTxs.map((s) => [s.signature, s]));
    const terminal: Record<string, number> = {};
    let notTerminal = 0;
    let disagree = 0;
    let lost = 0;
    const suspects = new Set<string>();
    let attempts = 0;
    let unsentAttempts = 0;
    let expiredWithUnsent = 0;
    let relayPaid = 0;
    const attemptsByBundle = new Map<string, { txId: string; tip: number; stage: string }>();
    for (const s of ackedTxs) {
      const record = finalRecords.get(s.txId as string);
      if (!record) {
        lost++;
        continue;
      }
      terminal[record.state] = (terminal[record.state] ?? 0) + 1;
      if (!TERMINAL.has(record.state)) notTerminal++;
      const status = simnet.cluster.signatureStatus(s.signature);
      const onChainFinal =
        status !== null && status.err === null && status.confirmationStatus === 'finalized';
      // Expired means nothing can land any more (DESIGN §2): not on chain, and its blockhash no longer valid.
      const blockhashValid = simnet.cluster.isBlockhashValid(s.blockhash);
      const agrees =
        record.state === 'finalized'
          ? onChainFinal
          : record.state === 'expired'
            ? status === null && !blockhashValid
            : record.state === 'failed'
              ? status === null || status.err !== null
              : false;
      if (!agrees) {
        disagree++;
        if (disagree <= 3)
          problems.push(
            `${s.txId} is ${record.state}; chain: ${JSON.stringify(status)}, blockhash valid: ${blockhashValid}`,
          );
      }
      // The engine tracks every bundle it took; one it refused (say, an expired blockhash) is not tracked either, but
      // then the refusal is the record's last error. An attempt the engine never saw, settled by relay's own expiry
      // check, is one relay journaled and never (re)sent.
      let unsent = 0;
      for (const a of record.attempts) if (!simnet.engine.getBundle(a.bundle_id)) unsent++;
      unsentAttempts += unsent;
      const last = record.attempts[record.attempts.length - 1];
      if (
        record.state === 'expired' &&
        last &&
        !simnet.engine.getBundle(last.bundle_id) &&
        record.last_error?.code === 'RELAY_E_ATTEMPT_LOST' &&
        record.last_error.details.reason === 'the blockhash expired'
      ) {
        expiredWithUnsent++;
        problems.push(`${record.tx_id} expired with its last attempt never sent`);
        suspects.add(record.tx_id);
      }
      for (const a of record.attempts) {
        attempts++;
        attemptsByBundle.set(a.bundle_id, { txId: record.tx_id, tip: a.tip_lamports, stage: a.stage });
        if (a.stage === 'finalized') relayPaid += a.tip_lamports + 5000;
      }
    }
    if (lost > 0) problems.push(`${lost} acknowledged transactions are unknown at the end`);

    // Every transaction of the load is accounted for: acknowledged, or refused for a reason the chain confirms (the
    // resend's blockhash is dead and the transaction is not on chain, so the client's refusal is final).
    const refusedTxs = sent.filter((s) => s.refused);
    let refusedUnexplained = 0;
    for (const s of refusedTxs) {
      const onChain = (chain.landings.get(s.signature) ?? 0) > 0;
      const valid = simnet.cluster.isBlockhashValid(s.blockhash);
      if (onChain || valid || s.txId !== null) {
        refusedUnexplained++;
        problems.push(
          `tx #${s.index} was refused as expired, but on chain=${onChain}, blockhash valid=${valid}, acknowledged=${s.txId !== null}`,
        );
      }
    }
    if (sent.length !== ctx.txs) problems.push(`${sent.length} transactions sent, not ${ctx.txs}`);
    if (ackedTxs.length + refusedTxs.length !== ctx.txs)
      problems.push(
        `${ackedTxs.length} acknowledged + ${refusedTxs.length} refused != ${ctx.txs} transactions of the load`,
      );

    let doubleLanded = 0;
    let unknownLanded = 0;
    for (const [signature, count] of chain.landings) {
      if (count > 1) doubleLanded++;
      if (!bySignature.has(signature)) unknownLanded++;
    }
    const tipsPerUser = new Map<string, number>();
    let orphanTips = 0;
    let chainTipsLamports = 0;
    for (const tip of chain.tips) {
      const attempt = tip.bundleId ? attemptsByBundle.get(tip.bundleId) : undefined;
      if (!tip.userSignature || !attempt) {
        orphanTips++;
        problems.push(`tip ${tip.signature} (slot ${tip.slot}) matches no attempt of relay's`);
        continue;
      }
      chainTipsLamports += attempt.tip + 5000;
      // A pack's one tip paid for each of its transactions (the lead's and its riders').
      for (const user of tip.userSignatures) tipsPerUser.set(user, (tipsPerUser.get(user) ?? 0) + 1);
      if (attempt.stage !== 'finalized') {
        problems.push(`tip of bundle ${tip.bundleId} is on chain but relay's attempt is ${attempt.stage}`);
        suspects.add(attempt.txId);
      }
    }
    const doubleTips = [...tipsPerUser.values()].filter((n) => n > 1).length;
    for (const s of ackedTxs) {
      const record = finalRecords.get(s.txId as string);
      if (record?.state === 'finalized' && (tipsPerUser.get(s.signature) ?? 0) !== 1)
        problems.push(`${s.txId} finalized with ${tipsPerUser.get(s.signature) ?? 0} tips on chain`);
    }
    const tipperDrop = tipperBefore - simnet.cluster.getBalance(tipperKey);
    if (tipperDrop !== chainTipsLamports)
      problems.push(`tipper paid ${tipperDrop} lamports; the tips on chain account for ${chainTipsLamports}`);
    if (tipperDrop !== relayPaid)
      problems.push(`tipper paid ${tipperDrop} lamports; relay's records say ${relayPaid}`);

    if (process.env.RELIABILITY_CRASH_DEBUG && suspects.size > 0) {
      // The whole records (history, attempts, last error) and lifecycle lines of what went wrong, for a person.
      const lines = (await readFile(lifecyclePath, 'utf8')).split('\n');
      const dump = [...suspects].slice(0, 20).map((id) => ({
        record: finalRecords.get(id),
        lifecycle: lines.filter((l) => l.includes(id)).map((l) => JSON.parse(l) as unknown),
        engine: finalRecords.get(id)?.attempts.map((a) => {
          const b = simnet.engine.getBundle(a.bundle_id);
          return b
            ? { state: b.state, landedSlot: b.landedSlot, failure: b.failure, window: b.window }
            : null;
        }),
        chain: finalRecords.get(id)?.tx_signatures.map((sig) => simnet.cluster.signatureStatus(sig)),
        tips: chain.tips.filter((t) => {
          const signature = sent.find((x) => x.txId === id)?.signature;
          return signature !== undefined && t.userSignatures.includes(signature);
        }),
      }));
      await writeFile(
        `${process.env.RELIABILITY_CRASH_DEBUG}-trial${trial}.json`,
        JSON.stringify(dump, null, 2),
      );
    }

    // ---- the lifecycle log: every line a valid entry, and the latest entry of every bundle at its attempt's stage
    const life = await inspectLifecycle(lifecyclePath);
    let stale = 0;
    for (const [bundleId, attempt] of attemptsByBundle) {
      const entry = life.latest.get(bundleId);
      if (!entry || entry.stage !== attempt.stage) {
        stale++;
        if (stale <= 3)
          problems.push(
            `lifecycle: bundle ${bundleId.slice(0, 12)} of ${attempt.txId} reads ${entry?.stage ?? '(none)'}, the record ${attempt.stage}`,
          );
      }
    }
    for (const bundleId of life.latest.keys())
      if (!attemptsByBundle.has(bundleId))
        problems.push(`lifecycle: bundle ${bundleId} is no attempt of relay's`);
    if (life.bad > 0) problems.push(`lifecycle: ${life.bad} lines do not parse at the end`);
    if (life.tornBytes > 0) problems.push(`lifecycle: a torn tail of ${life.tornBytes} bytes at the end`);

    // ---- the store, replayed by a sidecar started once more on the same files after the clean stop: through its
    // API it answers the same records (whatever store it keeps them in), and it warns of nothing it had to skip
    lap('verify');
    const t0 = Date.now();
    const again: RunningSidecar = await spawnSidecar(SIDECAR_MAIN, env, 30_000);
    sidecar = again;
    const replayMs = Date.now() - t0;
    const replayed = await readRecords(again.url, [...finalRecords.keys()]);
    await again.stop();
    const replayWarnings = recoveryWarnings(again.output());
    const shape = (record: RelayRecord) =>
      JSON.stringify([
        record.state,
        record.failure,
        record.tx_signatures,
        record.attempts.map((a) => [
          a.bundle_id,
          a.tip_lamports,
          a.stage === 'journaled' ? 'submitted' : a.stage,
        ]),
      ]);
    for (const [id, before] of finalRecords) {
      const after = replayed.get(id);
      const same = before && after ? shape(before) === shape(after) : !before && !after;
      if (!same) replayMismatch++;
    }
    if (replayMismatch > 0)
      problems.push(`${replayMismatch} records differ when a restarted sidecar replays the store`);
    if (replayWarnings.length > 0)
      problems.push(`restarting on the final store warned: ${replayWarnings.join('; ')}`);
    lap('replay');
    const journalFiles = (await readdir(journalDir).catch(() => [])).sort();
    let journalBytes = 0;
    for (const f of journalFiles) journalBytes += (await stat(join(journalDir, f))).size;

    if (doubleLanded > 0) problems.push(`${doubleLanded} signatures on chain twice`);
    if (unknownLanded > 0)
      problems.push(`${unknownLanded} of the payer's transactions on chain with no record`);
    if (doubleTips > 0) problems.push(`${doubleTips} transactions with more than one tip on chain`);
    if (notTerminal > 0) problems.push(`${notTerminal} not terminal`);

    const result: TrialResult = {
      trial,
      name: spec.name,
      agent: spec.agent ?? false,
      txs: sent.length,
      kills,
      restart_ms: restartMs,
      replay_ms: replayMs,
      acknowledged: ackedTxs.length,
      resent,
      unexpected_answers: unexpected,
      retried_answers: retried,
      refused_unexplained: refusedUnexplained,
      downtime_ms: kills.reduce((a, k) => a + k.down_ms, 0),
      lost,
      terminal,
      not_terminal: notTerminal,
      disagree,
      double_landed: doubleLanded,
      unknown_landed: unknownLanded,
      tips_on_chain: chain.tips.length,
      double_tips: doubleTips,
      orphan_tips: orphanTips,
      tipper_drop_lamports: tipperDrop,
      chain_tips_lamports: chainTipsLamports,
      relay_paid_lamports: relayPaid,
      attempts,
      unsent_attempts: unsentAttempts,
      expired_with_unsent_attempt: expiredWithUnsent,
      lifecycle: {
        lines: life.lines,
        bad_lines: life.bad,
        torn_tail_bytes: life.tornBytes,
        stale_entries: stale,
      },
      journal: {
        files: journalFiles,
        bytes: journalBytes,
        snapshot: journalFiles.some((f) => f.startsWith('snapshot-')),
      },
      replay_mismatch: replayMismatch,
      duration_ms: Date.now() - started,
      phases_ms: phases,
      problems,
    };
    return result;
  } finally {
    watch.stop();
    await agent?.stop();
    if (sidecar) {
      sidecar.child.kill('SIGKILL');
      await sidecar.exited;
    }
    await rm(dir, { recursive: true, force: true });
  }
}
