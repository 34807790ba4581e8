import { randomInt } from 'node:crypto';
import { ComputeBudgetProgram, SystemProgram, Transaction, type Keypair } from '@solana/web3.js';
import { deriveBundleId, isRelayError, parseJitoTipFloorResponse } from '@solrelay/core';
import {
  EngineRegions,
  GeyserStream,
  SolanaRpc,
  TipSigner,
  parseTransaction,
  configFromEnv,
  loadKeypair,
  type SidecarConfig,
} from '@solrelay/sidecar';
import { EXIT_CODES, ExitError } from '../../errors';
import type { CliContext, CommandResult } from '../../output';
import { untilSignal } from '../../runtime/process-group';
import { startSimulatedCluster, type SimFlags, type SimulatedCluster } from '../../runtime/simulated-cluster';

export interface SmokeOptions {
  sim: SimFlags | null;
  /** Tip in lamports; default the tip floor's p75 (at least 1,000, Jito's minimum). */
  tip?: number | undefined;
  /** Bundles to try when one's leader window passes without it landing (a lost auction). Default 3. */
  attempts: number;
  /** Give up (exit 1) after this many seconds. */
  timeoutS: number;
  /** Progress goes to stderr under `--json`, so stdout holds only the result document. */
  json: boolean;
}

export interface SmokeResult {
  stage: 'finalized';
  bundle_id: string;
  signatures: string[];
  tip_lamports: number;
  attempts: number;
  slot_submitted: number;
  slot_landed: number;
  leader: string | null;
  elapsed_ms: number;
}

/** Slots after the targeted window's last slot before an attempt is judged lost (status propagation). */
const WINDOW_GRACE_SLOTS = 3;
/** Submit when a bundle-engine leader's slot is at most this many slots ahead. */
const SUBMIT_LOOKAHEAD_SLOTS = 2;
const SLOT_LEADER_BATCH = 256;
/** How far ahead a block engine looks for a leader to forward a bundle to. */
const ENGINE_LOOKAHEAD_SLOTS = 4;

type Stage = 'waiting' | 'submitted' | 'landed' | 'processed' | 'confirmed' | 'finalized';

/**
 * `relay smoke` (the spec's `stream_smoke`): talks to the upstreams directly, not to a sidecar. It follows slots on
 * the gRPC stream, waits for a bundle-engine leader window, sends one bundle (a self-transfer plus a tip, both
 * signed by the keypair), and polls the signatures' status until finalized, printing slot, leader and stage as it
 * goes. Only finalized exits 0.
 */
export async function smoke(ctx: CliContext, options: SmokeOptions): Promise<CommandResult> {
  const progress = (line: string) => (options.json ? ctx.io.stderr(`${line}\n`) : ctx.io.stdout(`${line}\n`));
  const cleanups: Array<() => Promise<unknown> | void> = [];
  const signal = untilSignal((line) => ctx.io.stderr(`${line}\n`));
  let interrupted = false;
  void signal.promise.then(() => (interrupted = true));
  try {
    let env: Record<string, string | undefined> = ctx.env;
    let cluster: SimulatedCluster | null = null;
    if (options.sim) {
      cluster = await startSimulatedCluster(options.sim);
      const started = cluster;
      cleanups.push(() => started.stop());
      env = { ...ctx.env, ...cluster.env };
      progress(`smoke: simulated cluster up (rpc ${cluster.simnet.endpoints.rpcUrl})`);
    }
    let config: SidecarConfig;
    let keypair: Keypair;
    try {
      config = configFromEnv(env, ctx.cwd);
      keypair = await loadKeypair(config.keypairPath);
    } catch (error) {
      if (!isRelayError(error)) throw error;
      throw new ExitError(EXIT_CODES.failure, `smoke: ${error.code}: ${error.message}`, {
        ...(options.sim ? {} : { hint: 'Set the upstream variables (see the README), or add --sim.' }),
      });
    }

    const rpc = new SolanaRpc({ url: config.rpcUrl });
    const engine = EngineRegions.fromConfig(config);
    cleanups.push(() => engine.close());

    // The stream: slots, and the keypair's transactions (both of the bundle's are its).
    let slot = 0;
    const seenOnStream = new Map<string, { slot: number; failed: boolean }>();
    let wake: (() => void) | null = null;
    const stream = new GeyserStream({
      endpoint: config.streamEndpoint,
      xToken: config.streamXToken,
      staticAccounts: [keypair.publicKey.toBase58()],
      onSlot: (update) => {
        if (update.status === 'processed' && update.slot > slot) {
          slot = update.slot;
          wake?.();
        }
      },
      onTransactionStatus: (status) => {
        seenOnStream.set(status.signature, { slot: status.slot, failed: status.failed });
        wake?.();
      },
    });
    stream.start();
    cleanups.push(() => stream.stop());

    const started = Date.now();
    const deadline = started + options.timeoutS * 1000;
    const nextEvent = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          wake = null;
          resolve();
        }
        wake = done;
      });
    const checkTime = (what: string) => {
      if (interrupted) throw new ExitError(EXIT_CODES.failure, 'smoke: interrupted');
      if (Date.now() > deadline) {
        throw new ExitError(EXIT_CODES.failure, `smoke: timed out after ${options.timeoutS} s ${what}`);
      }
    };

    while (slot === 0) {
      checkTime(`waiting for the first slot from the stream at ${config.streamEndpoint}`);
      await nextEvent(500);
    }
    progress(`smoke: stream connected at ${config.streamEndpoint}, slot ${slot}`);

    // Which slots belong to bundle-engine leaders (null: unknown, then any slot will do, as the sidecar does).
    // Every configured region's leaders, and which region each is connected to (the bundle goes there).
    let engineSlots: Map<number, string> | null = null;
    const regionOfLeader = new Map<string, string>();
    try {
      await engine.resolveNames();
      engineSlots = new Map();
      for (const [region, connected] of Object.entries(await engine.connectedLeaders())) {
        for (const [identity, slots] of Object.entries(connected)) {
          regionOfLeader.set(identity, region);
          for (const s of slots) engineSlots.set(s, identity);
        }
      }
    } catch (error) {
      progress(
        `smoke: bundle-engine leader data unavailable (${(error as Error).message}); submitting without waiting`,
      );
    }
    let leaderStart = 0;
    let leaderIds: string[] = [];
    const leaderOf = async (s: number): Promise<string | null> => {
      if (s < leaderStart || s >= leaderStart + leaderIds.length) {
        try {
          leaderIds = await rpc.getSlotLeaders(s, SLOT_LEADER_BATCH);
          leaderStart = s;
        } catch {
          return engineSlots?.get(s) ?? null;
        }
      }
      return leaderIds[s - leaderStart] ?? null;
    };
    const isEngineSlot = (s: number) => engineSlots === null || engineSlots.has(s);
    /** The bundle-engine leader window a bundle sent at slot `s` competes in: the first one within the lookahead. */
    const windowAfter = (s: number): { start: number; end: number } => {
      let start = s + 1;
      while (start <= s + ENGINE_LOOKAHEAD_SLOTS && !isEngineSlot(start)) start++;
      let end = start;
      const identity = engineSlots?.get(start);
      while (engineSlots && identity !== undefined && engineSlots.get(end + 1) === identity) end++;
      return { start, end };
    };

    const tip = options.tip ?? (await defaultTip(config.tipFloorUrl, progress));
    const tipAccounts = await engine.getTipAccounts();
    const tipAccount = tipAccounts[randomInt(tipAccounts.length)];
    if (!tipAccount)
      throw new ExitError(EXIT_CODES.failure, 'smoke: the block engine returned no tip accounts');
    const tipSigner = new TipSigner(keypair);

    for (let attempt = 1; attempt <= options.attempts; attempt++) {
      // Wait for a bundle-engine leader window.
      let reported = -1;
      let target = -1;
      for (;;) {
        checkTime('waiting for a bundle-engine leader window');
        const current = slot;
        for (let s = current; s <= current + SUBMIT_LOOKAHEAD_SLOTS; s++) {
          if (isEngineSlot(s)) {
            target = s;
            break;
          }
        }
        if (target >= 0) break;
        if (current !== reported) {
          reported = current;
          progress(
            `slot ${current}  leader ${(await leaderOf(current)) ?? 'unknown'}  stage waiting (no bundle-engine leader within ${SUBMIT_LOOKAHEAD_SLOTS} slots)`,
          );
        }
        await nextEvent(1000);
      }
      const { blockhash } = await rpc.recentBlockhash();
      const transfer = selfTransfer(keypair, blockhash, attempt);
      const tipTx = tipSigner.build({ tipAccount, lamports: tip, blockhash });
      const signatures = [transfer.signature, tipTx.signature];
      const bundleId = deriveBundleId(signatures);
      const wires = [transfer.wire, tipTx.wire];

      // To the region of the leader ahead (forwarding from another costs time); a busy region passes to the next.
      const ahead = windowAfter(slot);
      const aheadLeader = engineSlots?.get(ahead.start);
      let region = engine.indexOf(aheadLeader ? (regionOfLeader.get(aheadLeader) ?? null) : null) ?? 0;
      let sent = await engine.sendBundle(wires, region);
      while (!sent.ok && sent.kind === 'transport') {
        checkTime('sending the bundle');
        // Spaced so a full round of regions stays inside their budgets of one request a second each.
        const waitMs = engine.size > 1 ? Math.ceil(1000 / engine.size) : (sent.retryAfterMs ?? 1000);
        const from = engine.regions[region]?.name;
        region = (region + 1) % engine.size;
        progress(
          `smoke: block engine ${from} busy (${sent.message}); resending${engine.size > 1 ? ` to ${engine.regions[region]?.name}` : ''} in ${waitMs} ms`,
        );
        await new Promise((r) => setTimeout(r, waitMs));
        sent = await engine.sendBundle(wires, region);
      }
      if (!sent.ok) {
        throw new ExitError(
          EXIT_CODES.failure,
          `smoke: the block engine refused the bundle (${sent.rejection}): ${sent.message}`,
        );
      }
      // The window is the one ahead when the engine took the bundle (a rate-limited send may have taken slots).
      const slotSubmitted = slot;
      const window = windowAfter(slotSubmitted);
      const leader = (await leaderOf(window.start)) ?? engineSlots?.get(window.start) ?? null;
      progress(
        `slot ${slotSubmitted}  leader ${leader ?? 'unknown'}  stage submitted  bundle ${bundleId} (attempt ${attempt}/${options.attempts}, tip ${tip} lamports, window ${window.start}..${window.end})`,
      );

      // Follow the signatures until finalized, or until the window has passed without them.
      // An object, not a let: `advance` changes it from a closure, which narrowing would not see.
      const tracked: { stage: Stage } = { stage: 'submitted' };
      let slotLanded: number | null = null;
      const order: Stage[] = ['submitted', 'landed', 'processed', 'confirmed', 'finalized'];
      const advance = async (next: Stage) => {
        if (order.indexOf(next) <= order.indexOf(tracked.stage)) return;
        for (const s of order.slice(order.indexOf(tracked.stage) + 1, order.indexOf(next) + 1)) {
          progress(
            `slot ${slot}  leader ${(await leaderOf(slot)) ?? 'unknown'}  stage ${s}${s === 'landed' ? ` (slot ${slotLanded})` : ''}`,
          );
        }
        tracked.stage = next;
      };
      for (;;) {
        checkTime(`waiting for bundle ${bundleId} (stage ${tracked.stage})`);
        const onStream = seenOnStream.get(signatures[0] as string);
        if (onStream && slotLanded === null) {
          if (onStream.failed)
            throw new ExitError(
              EXIT_CODES.failure,
              `smoke: the self-transfer failed on chain in slot ${onStream.slot}`,
            );
          slotLanded = onStream.slot;
          await advance('landed');
        }
        const statuses = await rpc.getSignatureStatuses(signatures).catch(() => [null, null]);
        const status = statuses[0];
        if (status) {
          if (status.err)
            throw new ExitError(
              EXIT_CODES.failure,
              `smoke: the self-transfer failed: ${JSON.stringify(status.err)}`,
            );
          slotLanded ??= status.slot;
          const commitment = status.confirmationStatus ?? 'processed';
          await advance(
            commitment === 'finalized' ? 'finalized' : commitment === 'confirmed' ? 'confirmed' : 'processed',
          );
        }
        if (tracked.stage === 'finalized') {
          const result: SmokeResult = {
            stage: 'finalized',
            bundle_id: bundleId,
            signatures,
            tip_lamports: tip,
            attempts: attempt,
            slot_submitted: slotSubmitted,
            slot_landed: slotLanded as number,
            leader,
            elapsed_ms: Date.now() - started,
          };
          return {
            data: result,
            text: `smoke: finalized — bundle ${bundleId} landed in slot ${slotLanded}, finalized after ${(result.elapsed_ms / 1000).toFixed(1)} s`,
          };
        }
        if (tracked.stage === 'submitted' && slot > window.end + WINDOW_GRACE_SLOTS) break; // the window passed: lost
        await nextEvent(400);
      }
      progress(
        `slot ${slot}  leader ${(await leaderOf(slot)) ?? 'unknown'}  stage dropped (window ${window.start}..${window.end} passed without the bundle)`,
      );
    }
    throw new ExitError(EXIT_CODES.failure, `smoke: no bundle landed in ${options.attempts} attempt(s)`, {
      hint: 'Raise the tip with --tip, or allow more --attempts.',
    });
  } finally {
    signal.cancel();
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
  }
}

/** The tip floor's p75, at least Jito's 1,000-lamport minimum; 10,000 when the floor cannot be read. */
async function defaultTip(url: string, progress: (line: string) => void): Promise<number> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const floor = parseJitoTipFloorResponse(await response.json());
    return Math.max(1_000, floor.p75);
  } catch (error) {
    progress(`smoke: tip floor unavailable (${(error as Error).message}); tipping 10,000 lamports`);
    return 10_000;
  }
}

/**
 * A 1-lamport transfer from the keypair to itself, the bundle's "user" transaction. A compute-unit limit taken from
 * the clock and the attempt keeps every one distinct (two identical transactions would make the second bundle
 * "already processed"). Built with web3.js, which lists the keypair once: the sidecar's byte-written tip layout
 * assumes two distinct accounts, and a key listed twice makes the transaction invalid.
 */
function selfTransfer(
  keypair: Keypair,
  blockhash: string,
  attempt: number,
): { wire: Uint8Array; signature: string } {
  const tx = new Transaction({ feePayer: keypair.publicKey, recentBlockhash: blockhash }).add(
    ComputeBudgetProgram.setComputeUnitLimit({ units: 1_000 + ((Date.now() * 8 + attempt) % 1_000_000) }),
    SystemProgram.transfer({ fromPubkey: keypair.publicKey, toPubkey: keypair.publicKey, lamports: 1 }),
  );
  tx.sign(keypair);
  const wire = tx.serialize();
  return { wire, signature: parseTransaction(wire).signatures[0]! };
}
