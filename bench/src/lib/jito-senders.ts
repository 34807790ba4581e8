/**
 * The baselines of the submission benchmark, written as users of jito-js-rpc write them (shared/reference/peers.md):
 * the real `jito-js-rpc` client against the first block-engine address only, web3.js `Connection` for blockhashes
 * and getSignatureStatuses, and `GET tip_floor` for the tip.
 *
 * - `naive-p75`: per transaction, GET tip_floor and tip its p75; send the bundle [user tx, tip tx] with
 *   `sendBundle`; every 2 s check getSignatureStatuses and, unless it has landed (processed or better), send the same
 *   bundle again, until the blockhash's last valid block height passes.
 * - `always-p95`: the same sender, tip = p95.
 * - `helius-style`: helius-sdk's `sendTransactionWithSender` shape: the tip (tip floor p75, fetched once per
 *   transaction) is a transfer inside the user's own transaction; it is sent once, then statuses are polled every 2 s
 *   (the SDK's `pollIntervalMs` default) and the same bytes are re-broadcast after each poll that does not show it
 *   `confirmed`, until the last valid block height. Sent to the engine as a single-transaction bundle
 *   (`sendTransaction?bundleOnly=true` through jito-js-rpc's `sendTxn`), since the simnet has no Helius Sender.
 *
 * Each transaction runs its own "send, wait 2 s, check, resend" loop; the status checks of all loops that wake in
 * the same round are made in one getSignatureStatuses call (the RPC is not rate-limited, so batching changes only the
 * load on the simnet, not what a loop learns).
 */
import { Connection } from '@solana/web3.js';
import { Rng, TestKeypair } from '@solrelay/simnet';
import { JitoJsonRpcClient } from 'jito-js-rpc';
import {
  engineSide,
  engineSideStart,
  landedSlots,
  newOutcome,
  sleep,
  slotTimeline,
  spentLamports,
  type StrategyRun,
  type TxOutcome,
} from './e2e-run';
import type { SimnetChild } from './processes';
import { UserTxFactory } from './usertx';

export type BaselineKind = 'naive-p75' | 'always-p95' | 'helius-style';

const RESEND_MS = 2_000;

interface OpenTx {
  outcome: TxOutcome;
  send: () => Promise<unknown>;
  lastValidBlockHeight: number;
  nextAt: number;
  done: boolean;
}

interface TipFloorEntry {
  landed_tips_75th_percentile: number;
  landed_tips_95th_percentile: number;
}

export async function runBaseline(
  kind: BaselineKind,
  simnet: SimnetChild,
  factory: UserTxFactory,
  arrivalsMs: readonly number[],
  seed: number,
): Promise<StrategyRun> {
  const { rpcUrl, engineUrls, tipFloorUrl } = simnet.started;
  const connection = new Connection(rpcUrl, 'confirmed');
  const client = new JitoJsonRpcClient(`${engineUrls[0] as string}/api/v1`, '');
  const counters = { engineRequests: 0, engine429s: 0, engineOtherErrors: 0 };
  const tipper = TestKeypair.generate(new Rng(seed * 7919 + 17));
  const wallets = [...factory.payers.map((p) => p.publicKey), tipper.publicKey];
  await simnet.request({ op: 'fund', addresses: wallets, lamports: 10_000_000_000_000 });
  const before = await simnet.request<number[]>({ op: 'balances', addresses: wallets });

  /** Every engine request goes through here, so requests and 429s are counted where they are made. */
  async function engine<T>(call: () => Promise<T>): Promise<T | null> {
    counters.engineRequests++;
    try {
      return await call();
    } catch (error) {
      if ((error as { response?: { status?: number } }).response?.status === 429) counters.engine429s++;
      else counters.engineOtherErrors++;
      return null;
    }
  }

  // A user asks for the tip accounts once (getTipAccounts is rate-limited like every JSON-RPC call).
  let tipAccounts: string[] = [];
  while (tipAccounts.length === 0) {
    const answer = await engine(() => client.getTipAccounts());
    tipAccounts = (answer?.result as string[] | undefined) ?? [];
    if (tipAccounts.length === 0) await sleep(1_000);
  }

  const side0 = await engineSideStart(simnet);
  const open: OpenTx[] = [];
  let tipCounter = 0;
  async function start(arrivalMs: number): Promise<void> {
    const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash('confirmed');
    const floor = (await readJson(tipFloorUrl)) as TipFloorEntry[];
    const entry = floor[0] as TipFloorEntry;
    const sol = kind === 'always-p95' ? entry.landed_tips_95th_percentile : entry.landed_tips_75th_percentile;
    const tip = Math.max(1_000, Math.round(sol * 1e9));
    const account = tipAccounts[tipCounter++ % tipAccounts.length] as string;
    let send: () => Promise<unknown>;
    let tx;
    if (kind === 'helius-style') {
      tx = factory.make(blockhash, { account, lamports: tip });
      const params: [string, { encoding: 'base64' }] = [tx.base64, { encoding: 'base64' }];
      send = () => client.sendTxn(params, true);
    } else {
      tx = factory.make(blockhash);
      const bundle: [string[], { encoding: 'base64' }] = [
        [tx.base64, UserTxFactory.tipTx(tipper, account, tip, blockhash)],
        { encoding: 'base64' },
      ];
      send = () => client.sendBundle(bundle);
    }
    const outcome = newOutcome(tx, arrivalMs);
    const entryOpen: OpenTx = {
      outcome,
      send,
      lastValidBlockHeight,
      nextAt: Date.now() + RESEND_MS,
      done: false,
    };
    open.push(entryOpen);
    fire(entryOpen);
  }
  function fire(tx: OpenTx): void {
    void engine(tx.send).then((answer) => {
      if (answer) tx.outcome.accepted = true;
    });
  }

  const t0 = Date.now();
  const starts: Array<Promise<void>> = [];
  let next = 0;
  let lastPoll = 0;
  for (;;) {
    const now = Date.now();
    while (next < arrivalsMs.length && t0 + (arrivalsMs[next] as number) <= now) {
      starts.push(start(now));
      next++;
    }
    if (now - lastPoll >= RESEND_MS && open.some((t) => !t.done)) {
      lastPoll = now;
      const waiting = open.filter((t) => !t.done && t.nextAt <= now);
      if (waiting.length) {
        const height = await connection.getBlockHeight('confirmed');
        const statuses = new Map<string, string | null>();
        for (let i = 0; i < waiting.length; i += 256) {
          const chunk = waiting.slice(i, i + 256);
          const answer = await connection.getSignatureStatuses(chunk.map((t) => t.outcome.signature));
          answer.value.forEach((s, j) => {
            if (s && s.err === null)
              statuses.set((chunk[j] as OpenTx).outcome.signature, s.confirmationStatus ?? 'processed');
          });
        }
        for (const tx of waiting) {
          const status = statuses.get(tx.outcome.signature);
          const finished =
            kind === 'helius-style'
              ? status === 'confirmed' || status === 'finalized'
              : status !== undefined && status !== null;
          if (finished || height > tx.lastValidBlockHeight) {
            tx.done = true;
            continue;
          }
          tx.nextAt = Date.now() + RESEND_MS;
          fire(tx);
        }
      }
    }
    if (next >= arrivalsMs.length && open.length === arrivalsMs.length && open.every((t) => t.done)) break;
    await sleep(50);
  }
  await Promise.all(starts);
  // Let sends still in flight answer, and the last landings be produced.
  await sleep(1_500);
  const outcomes = open.map((t) => t.outcome);
  const landed = await landedSlots(
    rpcUrl,
    outcomes.map((o) => o.signature),
  );
  for (const o of outcomes) o.landedSlot = landed.get(o.signature) ?? null;
  const side = await engineSide(simnet, side0);
  const after = await simnet.request<number[]>({ op: 'balances', addresses: wallets });
  return {
    strategy: kind,
    outcomes,
    counters,
    lamportsSpent: spentLamports(before, after, outcomes),
    slotTimes: await slotTimeline(simnet),
    engineSide: side,
    notes: [],
  };
}

/**
 * GET a JSON document, as a user's script would with one retry policy: a connection the server closed just as it was
 * reused ("other side closed", undici's keep-alive race; a burst of 500 met one) is tried again, up to three times.
 */
async function readJson(url: string): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await (await fetch(url)).json();
    } catch (error) {
      if (attempt >= 3) throw error;
      await sleep(50 * attempt);
    }
  }
}
