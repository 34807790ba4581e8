/**
 * relay as a user runs it: the real sidecar process (and the real agent process, reflex tier) on a rate-limited
 * simnet, BUNDLE_ENGINE_RPS at the real budget (1), every transaction POSTed to /tx/enqueue when it arrives; 202 or
 * 429 (with Retry-After) recorded; each accepted transaction followed over the SSE stream to confirmed or a terminal
 * state; engine requests read from relay_engine_requests_total. Or a fleet of sidecars on one PostgreSQL database
 * (`fleet`), the arrivals spread round-robin over its hosts.
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
import {
  benchPolicy,
  startRelayStack,
  type BenchFleetOptions,
  type BenchSidecar,
  type BenchStack,
} from './stack';
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
  /**
   * Run a fleet instead (see BenchStackOptions.fleet; PostgreSQL, no agent: `env` says how the hosts decide). The
   * n-th arrival goes to host n mod hosts; a host marked down, not answering within ENQUEUE_TIMEOUT_MS or answering
   * 503 has the same bytes sent to the next host, as a fleet's client would (dedupe by signature is fleet-wide).
   */
  fleet?: BenchFleetOptions;
  /** Runs beside the load from the first arrival (e.g. kills a host), awaited before the follow; `extra.during`. */
  during?: (run: LiveRelayRun) => Promise<unknown>;
  /** Runs once every accepted transaction is followed, before the stack stops (e.g. reads the database); `extra.after`. */
  after?: (run: LiveRelayRun) => Promise<unknown>;
}

/** A run in progress, for `during` and `after`. */
export interface LiveRelayRun {
  stack: BenchStack;
  /** Date.now() at the first arrival. */
  t0: number;
  /** Hosts (by index) the load no longer sends to: a client that knows a host is down. */
  down: Set<number>;
  outcomes: readonly TxOutcome[];
  /** Each accepted transaction's tx_id. */
  txIds: ReadonlyMap<TxOutcome, string>;
}

const FOLLOWED = new Set(['confirmed', 'finalized', 'failed', 'expired']);
/**
 * How long a fleet's client waits for an enqueue's answer before sending it to the next host: long, a safety net
 * only (a killed host's connections fail at once, and a paused one answers at wake); a short one would have a slow
 * admission's transactions sent twice and counted as not accepted when the first host took them after all.
 */
const ENQUEUE_TIMEOUT_MS = 60_000;

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
    ...(options.fleet ? { fleet: options.fleet } : { agent: () => ({}) }),
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
    const { fleet } = options;
    const hosts = stack.hosts;
    const down = new Set<number>();
    let arrivals = 0;
    let resent = 0;
    /** Why enqueues were sent again: `503 <code>`, `timeout`, or the connection error's code. */
    const resentFor: Record<string, number> = {};
    /** The answer to an enqueue, from the first host (a fleet: the first that answers, see `fleet`); null: none did. */
    async function post(body: string, first: number): Promise<{ res: Response; host: number } | null> {
      let why: string;
      for (let k = 0; ; k++) {
        const host = (first + k) % hosts.length;
        const last = k >= 2 * hosts.length - 1;
        if (fleet && down.has(host) && !last) continue;
        try {
          const res = await fetch(`${(hosts[host] as BenchSidecar).url}/tx/enqueue`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body,
            ...(fleet ? { signal: AbortSignal.timeout(ENQUEUE_TIMEOUT_MS) } : {}),
          });
          if (!fleet || last || res.status !== 503) return { res, host };
          const answer = (await res.json().catch(() => ({}))) as { error?: { code?: string } };
          why = `503 ${answer.error?.code ?? ''}`.trim();
          await sleep(200);
        } catch (error) {
          if (!fleet) throw error;
          if (last) return null;
          const e = error as Error & { cause?: { code?: string } };
          why = e.name === 'TimeoutError' ? 'timeout' : (e.cause?.code ?? e.message);
        }
        resent++;
        resentFor[why] = (resentFor[why] ?? 0) + 1;
      }
    }
    async function enqueue(): Promise<void> {
      const arrivalMs = Date.now();
      const { blockhash } = await connection.getLatestBlockhash('confirmed');
      const tx = factory.make(blockhash);
      const outcome = newOutcome(tx, arrivalMs);
      outcomes.push(outcome);
      const posted = Date.now();
      const answer = await post(
        JSON.stringify({ transaction: tx.base64, encoding: 'base64' }),
        arrivals++ % hosts.length,
      );
      outcome.answerMs = Date.now() - posted;
      if (!answer) {
        outcome.refusalCode = 'no host answered';
        return;
      }
      const { res } = answer;
      if (fleet) outcome.host = answer.host;
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
    const live: LiveRelayRun = { stack, t0, down, outcomes, txIds };
    const during = options.during?.(live);
    // Awaited below; a failure surfaces there.
    during?.catch(() => undefined);
    const sends: Array<Promise<void>> = [];
    for (const at of options.arrivalsMs) {
      const wait = t0 + at - Date.now();
      if (wait > 0) await sleep(wait);
      sends.push(enqueue());
    }
    await Promise.all(sends);
    const duringValue = await during;
    // Follow every accepted transaction to confirmed or a terminal state (150 slots of expiry is 60 s).
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      const open = [...txIds.values()].filter((id) => !FOLLOWED.has(stateOf.get(id) ?? 'pending'));
      if (open.length === 0) break;
      await sleep(250);
    }
    const storeUse = await stack.store.since(store0);
    const afterValue = await options.after?.(live);
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
    // A fleet's engine requests are every host's that still answers (a killed host's are gone with it).
    const metrics = (
      await Promise.all(
        hosts.map((h) =>
          fetch(`${h.url}/metrics`)
            .then((r) => r.text())
            .catch(() => ''),
        ),
      )
    ).join('\n');
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
        ...(fleet
          ? { hosts: hosts.length, resent, resent_for: resentFor, during: duringValue, after: afterValue }
          : {}),
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
