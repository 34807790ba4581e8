import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection, Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { REFERENCE_BUNDLE_CU, startSimnet, type Simnet, type SimnetOptions } from '@solrelay/simnet';

/** What a stack needs of a sidecar, however it runs (in this process, or a child process). */
export interface SidecarLike {
  url: string;
  close(): Promise<void>;
}

/** Starts a sidecar on the stack's environment and directory (see `inProcessSidecar`, or spawn a built one). */
export type StartSidecar<S extends SidecarLike> = (env: Record<string, string>, dir: string) => Promise<S>;

/**
 * What a stack needs of a simulated cluster, however it runs: the environment that points a sidecar at it, funded
 * keypairs, and a way to stop it. The in-process simnet is one (`inProcessCluster`); bench's forked simnet another.
 */
export interface ClusterLike {
  env(): Record<string, string>;
  /** A fresh keypair credited with `lamports`. */
  fundedKeypair(lamports: number): Keypair | Promise<Keypair>;
  stop(): Promise<void>;
}

/** What a stack needs of an agent it starts: a way to stop it (stopped before the sidecar). */
export interface AgentLike {
  close(): Promise<void>;
}

/**
 * Starts an agent once the sidecar listens; it is given the stack (the sidecar's URL, env, dir, the cluster), whose
 * `agent` is still null then.
 */
export type StartAgent<C extends ClusterLike, S extends SidecarLike, A extends AgentLike> = (
  stack: RelayStack<C, S, A>,
) => Promise<A>;

export interface RelayStackOptions<
  C extends ClusterLike,
  S extends SidecarLike,
  A extends AgentLike = never,
> {
  /** Starts the cluster (stopped again if anything after it fails). */
  cluster: () => Promise<C>;
  /** Starts the sidecar, at first and on each `restart`. */
  start: StartSidecar<S>;
  /** Starts an agent after the sidecar (none by default). */
  agent?: StartAgent<C, S, A>;
  /** Overrides of the stack's sidecar environment (see `startRelayStack`). */
  env?: Record<string, string>;
  /** Written as the policy file before the sidecar starts. */
  policy?: Record<string, unknown>;
  /** How many funded tipper keypairs `KEYPAIR_PATH` lists (comma-separated, a pool). Default 1. */
  tippers?: number;
  /** Lamports each tipper and the payer are funded with. Default 50 SOL. */
  lamports?: number;
  /** The stack's directory (default: a fresh temp directory). */
  dir?: string;
}

/** A cluster, a sidecar and (when asked) an agent, with every file of the sidecar in one directory. */
export interface RelayStack<C extends ClusterLike, S extends SidecarLike, A extends AgentLike = never> {
  simnet: C;
  /** The running sidecar (replaced by `restart`). */
  readonly sidecar: S;
  /** The agent `agent` started (null without one). */
  readonly agent: A | null;
  dir: string;
  /** The sidecar's environment (`restart` may add to it for one start). */
  env: Record<string, string>;
  payer: Keypair;
  /** The tipper (the first of `tippers`). */
  tipper: Keypair;
  /** Every tipper keypair, in `KEYPAIR_PATH` order (one unless `tippers` asked for a pool). */
  tippers: Keypair[];
  /** Stop the sidecar and start it again on the same files (a restart). */
  restart(extraEnv?: Record<string, string>): Promise<S>;
  /** Stop the agent, the sidecar and the cluster. */
  close(): Promise<void>;
}

/**
 * The one sidecar stack: starts a cluster, funds the tipper(s) and a payer, writes the keypair files and the policy
 * into one directory, and starts the sidecar there with the environment below (then the agent, if asked). Each
 * part is a factory the caller passes, so this package depends on neither the sidecar nor the agent and each caller
 * runs them as it needs (from source, as a built package in this process, or as a child process).
 *
 * The sidecar's environment: the cluster's endpoints, `KEYPAIR_PATH` (the tipper files), `API_PORT=0`,
 * `RELAY_DATA_DIR`, `LIFECYCLE_PATH`, `RELAY_POLICY_FILE` (all in the directory), `BUNDLE_ENGINE_RPS=100`,
 * `AGENT_DECISION_MODE=reflex`, then `options.env`.
 */
export async function startRelayStack<
  C extends ClusterLike,
  S extends SidecarLike,
  A extends AgentLike = never,
>(options: RelayStackOptions<C, S, A>): Promise<RelayStack<C, S, A>> {
  const simnet = await options.cluster();
  let sidecar: S | null = null;
  try {
    const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'relay-stack-')));
    const lamports = options.lamports ?? 50_000_000_000;
    const tippers: Keypair[] = [];
    for (let i = 0; i < (options.tippers ?? 1); i++) tippers.push(await simnet.fundedKeypair(lamports));
    const tipper = tippers[0] as Keypair;
    const payer = await simnet.fundedKeypair(lamports);
    // The first keeps its old name; a pool's others are tipper-2.json, tipper-3.json, ...
    const keypairPaths = tippers.map((_, i) => join(dir, i === 0 ? 'tipper.json' : `tipper-${i + 1}.json`));
    for (const [i, path] of keypairPaths.entries())
      await writeFile(path, JSON.stringify([...(tippers[i] as Keypair).secretKey]), { mode: 0o600 });
    if (options.policy) await writeFile(join(dir, 'relay.policy.json'), JSON.stringify(options.policy));
    const env: Record<string, string> = {
      ...simnet.env(),
      KEYPAIR_PATH: keypairPaths.join(','),
      API_PORT: '0',
      RELAY_DATA_DIR: join(dir, 'data'),
      LIFECYCLE_PATH: join(dir, 'lifecycle.jsonl'),
      RELAY_POLICY_FILE: join(dir, 'relay.policy.json'),
      BUNDLE_ENGINE_RPS: '100',
      AGENT_DECISION_MODE: 'reflex',
      ...options.env,
    };
    sidecar = await options.start(env, dir);
    let agent: A | null = null;
    const stack: RelayStack<C, S, A> = {
      simnet,
      get sidecar() {
        return sidecar as S;
      },
      get agent() {
        return agent;
      },
      dir,
      env,
      payer,
      tipper,
      tippers,
      async restart(extraEnv = {}) {
        await (sidecar as S).close();
        sidecar = await options.start({ ...env, ...extraEnv }, dir);
        return sidecar;
      },
      async close() {
        await agent?.close().catch(() => undefined);
        await sidecar?.close().catch(() => undefined);
        await simnet.stop();
      },
    };
    if (options.agent) agent = await options.agent(stack);
    return stack;
  } catch (error) {
    await sidecar?.close().catch(() => undefined);
    await simnet.stop();
    throw error;
  }
}

/** The in-process simnet as a stack's cluster. */
export function inProcessCluster(options: SimnetOptions = {}): () => Promise<Simnet> {
  return () => startSimnet({ slotMs: 60, rateLimit: false, ...options });
}

/** A stack on an in-process simnet: `startRelayStack`'s, plus what tests do with the simnet at hand. */
export interface Stack<S extends SidecarLike> extends RelayStack<Simnet, S> {
  /** A signed transfer from the funded payer (or `from`), base64, on a fresh confirmed blockhash (or `blockhash`). */
  transfer(lamports?: number, from?: Keypair, blockhash?: string): string;
  connection(): Connection;
  /** Put the auction back as the stack started it (the clearing tip pins it started with, no pinned regime). */
  resetAuction(): void;
}

export interface StackOptions<S extends SidecarLike> extends Omit<
  RelayStackOptions<Simnet, S>,
  'cluster' | 'agent' | 'lamports'
> {
  simnet?: SimnetOptions;
  /**
   * A flat clearing tip (lamports): a competitor bidding that many lamports at whatever requested CU it meets, so
   * every bundle tipping less loses, light or heavy. Not pinned unless given; passing it (a number, or null for
   * none) also drops the default per-CU pin below unless `clearingTipPerCu` is given too. null with no
   * `clearingTipPerCu` runs the seeded calm / busy / spike auction.
   */
  clearingTip?: number | null;
  /**
   * A clearing tip per requested CU (lamports per CU): a competitor at that rank in every auction, so a bundle of c
   * requested CU tipping less than ceil(rank × c) loses, as Jito ranks bundles by tip per requested CU. Pinned so
   * that whether a bundle lands does not depend on which regime the seeded auction happens to be in when a slow
   * machine gets to it. Default {@link DEFAULT_CLEARING_TIP_PER_CU} (5,000 lamports over the 201,400-CU reference
   * bundle, ≈ 0.0248 per CU: a reference swap at 5,000 lamports wins, a light transfer tipping min-tip wins, a
   * 1.4M-CU bundle needs ≈ 34,757), unless `clearingTip` is given, which then pins alone; null pins none.
   */
  clearingTipPerCu?: number | null;
}

/**
 * The stacks' default competitor: 5,000 lamports over {@link REFERENCE_BUNDLE_CU} (a 200k-CU swap plus its tip
 * transaction), per requested CU. It replaced a flat 5,000 lamports per bundle, which a bundle priced per CU (a light
 * transfer at min-tip) lost to although the real auction ranks it above that swap.
 */
export const DEFAULT_CLEARING_TIP_PER_CU = 5_000 / REFERENCE_BUNDLE_CU;

/** The pins a stack starts its auction with (see `StackOptions.clearingTip` and `clearingTipPerCu`). */
export function stackClearingPins(
  options: Pick<StackOptions<SidecarLike>, 'clearingTip' | 'clearingTipPerCu'>,
): {
  flat: number | null;
  perCu: number | null;
} {
  if (options.clearingTip !== undefined)
    return { flat: options.clearingTip, perCu: options.clearingTipPerCu ?? null };
  return {
    flat: null,
    perCu: options.clearingTipPerCu === undefined ? DEFAULT_CLEARING_TIP_PER_CU : options.clearingTipPerCu,
  };
}

/**
 * A real simnet in this process plus a sidecar over loopback, with every file in a fresh temp directory: the ground
 * of every integration test. Rate limits are off and slots are 60 ms unless the options say otherwise. With
 * `inProcessSidecar` as `start`, the sidecar runs in this process too.
 */
export async function startStack<S extends SidecarLike>(options: StackOptions<S>): Promise<Stack<S>> {
  const pins = stackClearingPins(options);
  const pinAuction = (simnet: Simnet) => {
    simnet.engine.auction.setFixedClearingTip(pins.flat);
    simnet.engine.auction.setFixedClearingTipPerCu(pins.perCu);
  };
  const startSimnetHere = inProcessCluster(options.simnet);
  const stack = await startRelayStack<Simnet, S>({
    ...options,
    cluster: async () => {
      const simnet = await startSimnetHere();
      pinAuction(simnet);
      return simnet;
    },
  });
  const { simnet, payer } = stack;
  return Object.assign(stack, {
    transfer(
      lamports = 1000,
      from = payer,
      blockhash = simnet.cluster.latestBlockhash('confirmed').blockhash,
    ) {
      const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: blockhash });
      // Above the rent-exempt minimum so the new recipient account is valid.
      tx.add(
        SystemProgram.transfer({
          fromPubkey: from.publicKey,
          toPubkey: Keypair.generate().publicKey,
          lamports: 890_880 + lamports,
        }),
      );
      tx.sign(from);
      return tx.serialize().toString('base64');
    },
    connection() {
      return new Connection(simnet.endpoints.rpcUrl, 'confirmed');
    },
    resetAuction() {
      pinAuction(simnet);
      simnet.engine.auction.setRegime(null);
    },
  });
}

export interface HttpAnswer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON answers
  body: any;
  headers: Headers;
}

async function answer(response: Response): Promise<HttpAnswer> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON: keep the text */
  }
  return { status: response.status, body, headers: response.headers };
}

/** POST JSON (a string body is sent as is). */
export async function post(
  base: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<HttpAnswer> {
  return answer(
    await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
  );
}

export async function get(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<HttpAnswer> {
  return answer(await fetch(base + path, { headers }));
}

/** Poll until `probe` returns something truthy. */
export async function waitUntil<T>(
  probe: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 15_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * With the simnet's clock stopped (`stack.simnet.cluster.stop()`), produces slots one at a time until `done`: the
 * next slot only once the sidecar has read the last one (its `/status` slot), so it never misses a slot it had to
 * act in, however slowly a loaded machine runs it.
 */
export async function stepSlotsUntil(
  stack: Stack<SidecarLike>,
  done: () => Promise<boolean>,
  timeoutMs = 30_000,
  what = 'condition',
): Promise<void> {
  const { cluster } = stack.simnet;
  await waitUntil(
    async () => {
      if (await done()) return true;
      if ((await get(stack.sidecar.url, '/status')).body.slot >= cluster.slot) cluster.advance(1);
      return false;
    },
    timeoutMs,
    what,
  );
}

/**
 * Move an account's lamports away with transfers it signs, on chain, until it holds `keep` (as an operator withdrawing
 * from relay's tipper would, or another program sharing its key). Something else may be spending from it meanwhile
 * (relay's tips landing): a transfer sized from a balance read before a tip landed fails on chain (its fee still
 * taken), and the next is sized again from a fresh read; a tip landing after the drain leaves it below `keep`. Resolves
 * once the chain shows it at or below `keep`; returns every transfer sent (`signatures`, failed ones included: each
 * cost its fee), the last one that moved lamports (`signature`), and the lamports they took in all (amounts moved plus
 * fees).
 */
export async function drainTo(
  stack: Pick<Stack<SidecarLike>, 'connection'>,
  from: Keypair,
  keep: number,
): Promise<{ signature: string; signatures: string[]; lamports: number }> {
  const connection = stack.connection();
  const signatures: string[] = [];
  let moved = 0;
  let signature = '';
  for (let round = 0; round < 10; round++) {
    const balance = await connection.getBalance(from.publicKey, 'processed');
    if (balance <= keep) return { signature, signatures, lamports: moved };
    const lamports = balance - keep - 5_000;
    if (lamports <= 0) throw new Error(`cannot drain ${balance} lamports to ${keep}: the fee alone is 5000`);
    const drain = new Transaction({
      feePayer: from.publicKey,
      recentBlockhash: (await connection.getLatestBlockhash('confirmed')).blockhash,
    }).add(
      SystemProgram.transfer({
        fromPubkey: from.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports,
      }),
    );
    drain.sign(from);
    const sent = await connection.sendRawTransaction(drain.serialize(), { skipPreflight: true });
    signatures.push(sent);
    const status = await waitUntil(
      async () => (await connection.getSignatureStatuses([sent])).value[0] ?? null,
      10_000,
      'the drain transfer to land',
    );
    moved += 5_000;
    if (status.err === null) {
      moved += lamports;
      signature = sent;
    }
  }
  throw new Error(`the account was not drained to ${keep} lamports in 10 transfers`);
}
