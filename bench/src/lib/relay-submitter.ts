/**
 * relay as a user runs it: the real sidecar process (and the real agent process, reflex tier) on a rate-limited
 * simnet, BUNDLE_ENGINE_RPS at the real budget (1), every transaction POSTed to /tx/enqueue when it arrives; 202 or
 * 429 (with Retry-After) recorded; each accepted transaction followed over the SSE stream to confirmed or a terminal
 * state; engine requests read from relay_engine_requests_total.
 */
import { Connection } from '@solana/web3.js';
import type { StrategyRun, TxOutcome } from './e2e-run';
import {
  engineSide,
  engineSideStart,
  landedSlots,
  newOutcome,
  pinAndWarmUp,
  sleep,
  slotTimeline,
  spentLamports,
} from './e2e-run';
import { SseReader } from './sse';
import { distribution } from './stats';
import { benchPolicy, startRelayStack } from './stack';
import type { BenchStore } from './store';
import { UserTxFactory, type UserTxKind } from './usertx';

export interface RelayRunOptions {
  seed: number;
  regions: number;
  regime: 'calm' | 'busy' | 'spike' | null;
  kind: UserTxKind;
  /** Funded fee payers the transactions rotate over (default 32; 1: every transaction from one wallet). */
  payers?: number;
  arrivalsMs: readonly number[];
  /** Slots of the pinned regime before the first arrival (see pinAndWarmUp). */
  warmupSlots: number;
  /** Sidecar environment besides the defaults (e.g. BUNDLE_PACK_MAX). */
  env?: Record<string, string>;
  /** The strategy's name in the results (default `relay`). */
  label?: string;
  /** Where the sidecar keeps its records (default: the local journal). */
  store?: BenchStore;
}

const FOLLOWED = new Set(['confirmed', 'finalized', 'failed', 'expired']);

export async function runRelay(options: RelayRunOptions): Promise<StrategyRun> {
  let pinned: Promise<void> = Promise.resolve();
  const stack = await startRelayStack({
    store: options.store,
    simnet: {
      seed: options.seed,
      slotMs: 400,
      fixedClearingTip: null,
      rateLimit: true,
      regions: options.regions,
    },
    // DESIGN §5: a benchmark sets the load-shaping keys itself; everything else (tip p75, max-retries 3,
    // expiry-slots 150, max-tip, escalation) is the sidecar's default.
    policy: benchPolicy(),
    env: { BUNDLE_ENGINE_RPS: '1', AGENT_DECISION_MODE: 'reflex', ...options.env },
    // Pinned before the sidecar starts, so the warm-up below is all of the pinned regime.
    onSimnet: (simnet) => {
      if (options.regime) {
        pinned = pinAndWarmUp(simnet, options.regime, options.warmupSlots);
        // Awaited after the sidecar and agent are up; a failure surfaces there.
        pinned.catch(() => undefined);
      }
      return Promise.resolve();
    },
    agent: () => ({}),
  });
  try {
    const { started } = stack.simnet;
    await pinned;
    const factory = new UserTxFactory(options.kind, options.seed, {
      hotAccounts: started.hotAccounts ?? [],
      ...(options.payers !== undefined ? { payers: options.payers } : {}),
    });
    const payers = factory.payers.map((p) => p.publicKey);
    await stack.simnet.request({ op: 'fund', addresses: payers, lamports: 10_000_000_000_000 });
    const wallets = [...payers, stack.tipper.publicKey.toBase58()];
    const before = await stack.simnet.request<number[]>({ op: 'balances', addresses: wallets });
    const url = stack.sidecar.url;
    const connection = new Connection(started.rpcUrl, 'confirmed');

    const stateOf = new Map<string, string>();
    /** When the first `submit_requested` of each transaction was read (the decision made and journaled). */
    const decidedAt = new Map<string, number>();
    const observer = new SseReader(`${url}/internal/events`, {
      onEvent: (e) => {
        if (e.event === 'submit_requested') {
          const d = JSON.parse(e.data) as { tx_id: string };
          if (!decidedAt.has(d.tx_id)) decidedAt.set(d.tx_id, e.receivedAt);
          return;
        }
        if (e.event !== 'tx_status_changed') return;
        const d = JSON.parse(e.data) as { tx_id: string; state: string };
        stateOf.set(d.tx_id, d.state);
      },
    });
    await observer.open();

    const outcomes: TxOutcome[] = [];
    const txIds = new Map<TxOutcome, string>();
    async function enqueue(): Promise<void> {
      const arrivalMs = Date.now();
      const { blockhash } = await connection.getLatestBlockhash('confirmed');
      const tx = factory.make(blockhash);
      const outcome = newOutcome(tx, arrivalMs);
      outcomes.push(outcome);
      const posted = Date.now();
      const res = await fetch(`${url}/tx/enqueue`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ transaction: tx.base64, encoding: 'base64' }),
      });
      outcome.answerMs = Date.now() - posted;
      const body = (await res.json()) as { tx_id?: string; error?: { code?: string }; code?: string };
      if (res.status === 202 || res.status === 200) {
        outcome.accepted = true;
        txIds.set(outcome, body.tx_id as string);
      } else {
        outcome.refused = res.status === 429;
        const retryAfter = res.headers.get('retry-after');
        outcome.retryAfterS = retryAfter === null ? null : Number(retryAfter);
        outcome.refusalCode = body.error?.code ?? body.code ?? `HTTP ${res.status}`;
      }
    }

    const side0 = await engineSideStart(stack.simnet);
    const store0 = await stack.store.sample();
    const t0 = Date.now();
    const sends: Array<Promise<void>> = [];
    for (const at of options.arrivalsMs) {
      const wait = t0 + at - Date.now();
      if (wait > 0) await sleep(wait);
      sends.push(enqueue());
    }
    await Promise.all(sends);
    // Follow every accepted transaction to confirmed or a terminal state (150 slots of expiry is 60 s).
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      const open = [...txIds.values()].filter((id) => !FOLLOWED.has(stateOf.get(id) ?? 'pending'));
      if (open.length === 0) break;
      await sleep(250);
    }
    const storeUse = await stack.store.since(store0);
    observer.close();
    for (const [outcome, id] of txIds) {
      outcome.relayState = stateOf.get(id) ?? 'pending';
      if (outcome.relayState === 'pending') {
        const record = (await (await fetch(`${url}/tx/${id}`)).json()) as { state?: string };
        outcome.relayState = record.state ?? 'unknown';
      }
    }
    const landed = await landedSlots(
      started.rpcUrl,
      outcomes.map((o) => o.signature),
    );
    for (const o of outcomes) o.landedSlot = landed.get(o.signature) ?? null;
    const side = await engineSide(stack.simnet, side0);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const byResult: Record<string, number> = {};
    let requests = 0;
    for (const line of metrics.split('\n')) {
      const m = /^relay_engine_requests_total\{([^}]*)\}\s+(\d+(?:\.\d+)?)/.exec(line);
      if (!m) continue;
      const result = /result="([^"]*)"/.exec(m[1] as string)?.[1] ?? 'unknown';
      byResult[result] = (byResult[result] ?? 0) + Number(m[2]);
      requests += Number(m[2]);
    }
    const after = await stack.simnet.request<number[]>({ op: 'balances', addresses: wallets });
    const states: Record<string, number> = {};
    for (const o of outcomes) if (o.relayState) states[o.relayState] = (states[o.relayState] ?? 0) + 1;
    return {
      strategy: options.label ?? 'relay',
      outcomes,
      counters: {
        engineRequests: requests,
        engine429s: byResult.transport ?? 0,
        engineOtherErrors: byResult.rejected ?? 0,
      },
      lamportsSpent: spentLamports(before, after, outcomes),
      slotTimes: await slotTimeline(stack.simnet),
      engineSide: side,
      notes: [],
      extra: {
        engine_requests_by_result: byResult,
        relay_states: states,
        store_use: storeUse,
        // Where a transaction's time to land goes: the answer to its POST, and the arrival to its first decision.
        answer_ms: distribution(outcomes.map((o) => o.answerMs ?? 0)),
        decided_ms: distribution(
          [...txIds].flatMap(([o, id]) => {
            const at = decidedAt.get(id);
            return at === undefined ? [] : [at - o.arrivalMs];
          }),
        ),
      },
    };
  } finally {
    await stack.close();
  }
}
