import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Simnet } from '@solrelay/simnet';
import { SseReader, freePort, get, post, spawnSidecar, type RunningSidecar } from '@solrelay/testkit';
import { createDatabasePool, parseDatabaseUrl } from '@solrelay/sidecar/pg';
import { ChainWatch } from './crash-chain';
import { SIDECAR_MAIN, spawnAgent, trialWorkspace, type RunningAgent } from './crash-trial';
import { TransferSigner, type SignedTransfer } from './crash-wire';
import { readRecordsById, type RelayRecord } from './relay-records';
import type { NetLab } from './netns';
import { LinkProxy } from './tcp-link';
import { percentile } from './security-results';

/**
 * One fleet trial (issue #29's failure matrix, first row): three sidecar processes of one fleet (`RELAY_FLEET=1`,
 * each its own `RELAY_HOST_ID`, port and data directory) on one PostgreSQL and one simulated cluster, paying from one
 * shared tipper, take a load of transfers round-robin; one of them is SIGKILLed under that load, at a named crash
 * point (`attempt.journaled`: committed, not sent; `attempt.sent`: sent, the answer not recorded) or at a random
 * moment, and is not started again. The two left must finish everything: the dead host's live work is adopted by the
 * takeover sweep and resumed.
 *
 * Judged as the crash suite judges, through the survivors' HTTP API, the simulated chain and (for the takeover's
 * timing only) the `events` table:
 * - lost: an acknowledged transaction no survivor knows, or not terminal by the end (must be 0);
 * - second tips: a landed transaction with more than one tip on chain, or a tip on chain tied to no attempt of its
 *   transaction (must be 0); the tipper's balance dropped by exactly the tips and fees on chain;
 * - relay == chain, signature by signature: finalized ones on chain once, the others not on chain;
 * - takeover: from the kill to each of the dead host's live transactions' `tx_adopted` event (p99 ≤ 7 s with the
 *   default 5 s lease).
 *
 * An enqueue the victim never answered is sent again, byte for byte, to a survivor (as a client would).
 */

export type FleetKill =
  | { kind: 'point'; point: 'attempt.journaled' | 'attempt.sent'; after: number }
  | { kind: 'random'; delayMs: number }
  /** SIGSTOP after `delayMs`, SIGCONT `pauseMs` later: a host that wakes after its work moved (a zombie). */
  | { kind: 'pause'; delayMs: number; pauseMs: number }
  /**
   * The host's link to the database cut once it has acknowledged `afterAcks` enqueues, for `cutMs` (its own forwarder, see tcp-link.ts): the host
   * runs on, its lease lapses by the database's clock, its work moves, and it must re-register when the link heals.
   */
  | { kind: 'link'; afterAcks: number; cutMs: number }
  /**
   * Every link of the host cut (its network namespace's veth down: database, RPC, stream and engine at once; the
   * trial's context must give `network`) once it has acknowledged `afterAcks` enqueues, for `cutMs`: as `link`, and it
   * cannot reach the engine either while its work moves.
   */
  | { kind: 'isolate'; afterAcks: number; cutMs: number }
  /**
   * The fleet's PostgreSQL shut down (`pg_ctl stop -m fast`) once the hosts together acknowledged `afterAcks`
   * enqueues, and started again on its own data `downMs` later (the matrix's "PostgreSQL restarted under a 3-host
   * load"); nobody is killed.
   */
  | { kind: 'db-restart'; afterAcks: number; downMs: number }
  /** No fault: a fault-free run (with `skew`, the matrix's "one host's clock skewed": no takeover may happen). */
  | { kind: 'none' };

export interface FleetTrialSpec {
  name: string;
  kill: FleetKill;
  /**
   * An agent process (reflex) beside each host deciding for it, instead of the sidecars' bypass: each follows its own
   * host's events (`?scope=host`) and must decide what its host adopts from `tx_adopted` (the agents' 30 s watchdog
   * would come too late for a blockhash's 9 s).
   */
  agents?: boolean;
  /**
   * host-2's wall clock offset (libfaketime's FAKETIME, e.g. `+30s`, `-30s x1.001` for drifting), its monotonic clock
   * left alone: relay's leases are kept by the database's clock and hosts compare only their own monotonic durations,
   * so a skewed host must lose nothing. The trial checks that the skew was in effect (host-2's events' own timestamps
   * against the database's clock).
   */
  skew?: string;
  /**
   * Fleet-wide limits in the hosts' policy (the matrix's "3 hosts racing at spend-limit and rate-limit"): an enqueue
   * refused `RELAY_E_RATE_LIMITED` is counted, not sent again.
   */
  limits?: { rateLimit?: number; spendLimit?: number };
  /**
   * Every transfer enqueued at two hosts at the same moment (the matrix's "the same first signature sent to two hosts
   * at once"; with `kill: none`): both must answer with one `tx_id`, exactly one of them having created it (202, the
   * other 200).
   */
  twice?: boolean;
}

export interface FleetTrialContext {
  simnet: Simnet;
  /** A fresh migrated database's URL for the trial (every host of it shares it). */
  databaseUrl: () => Promise<string>;
  txs: number;
  bypassTip: number;
  /** The database server, for a `db-restart` trial. */
  database?: { shutDown(mode: 'fast' | 'immediate'): Promise<void>; startAgain(): Promise<void> };
  /**
   * Each host in a network namespace of its own (host i at `network.address(i)`, its API there too), reaching the
   * cluster and the database at the bridge's address, which `simnet` and `databaseUrl` must then listen on. Without
   * it the hosts share loopback.
   */
  network?: NetLab;
  /** The hosts' BUNDLE_ENGINE_RPS (default 2000: the trials run with the engine's rate limits off). */
  engineRps?: number;
}

export interface FleetTrialResult {
  name: string;
  hosts: number;
  txs: number;
  acknowledged: number;
  /** Refused with RELAY_E_TX_BLOCKHASH_EXPIRED: held by a paused host past the blockhash's life (off chain: checked). */
  refused_expired: number;
  /** Refused with RELAY_E_RATE_LIMITED (a trial with `limits.rateLimit`). */
  refused_rate_limited: number;
  /** Enqueues with no answer from the victim, sent again to a survivor. */
  resent: number;
  kill: { kind: string; point: string | null; ended: string; at_ms: number | null };
  /** The victim's transactions a survivor adopted (none is left live under the victim: checked). */
  adopted: number;
  /** Of those, how many carried an attempt the victim had built (held by rule 3 until its tip died, or landed). */
  adopted_with_attempts: number;
  /** Bundles of this trial the block engine received whose id no attempt in the database has (must be 0). */
  engine_bundles_unknown: number;
  /** A skewed host: the median offset of its events' own timestamps from the database's clock (ms). */
  skew_ms: number | null;
  /** A paused or cut-off victim: registered again after waking or the link healing (a new epoch, live). */
  woke_live: boolean | null;
  /** Milliseconds from the kill to each orphan's adoption. */
  takeover_ms: { p50: number | null; p99: number | null; max: number | null };
  terminal: Record<string, number>;
  /** What became of each transaction that did not finalize (its attempts, who accepted it, who adopted it). */
  unfinalized: Array<Record<string, unknown>>;
  lost: number;
  disagree: number;
  double_landed: number;
  tips_on_chain: number;
  double_tips: number;
  orphan_tips: number;
  /**
   * The survivors' SSE (`/internal/events`, the fleet's events), each opened before the load: how many acknowledged
   * transactions' terminal `tx_status_changed` each saw (must be all of them, whichever host settled them).
   */
  sse_terminal_seen: Record<string, number>;
  /** Every adoption (relative to the kill) and every host session of the trial: what the takeover figures come from. */
  adoptions: Array<{ tx_id: string; after_kill_ms: number; from: string; by: string }>;
  sessions: Array<{ host: string; started_ms: number; ended_ms: number | null }>;
  tipper_drop_lamports: number;
  chain_tips_lamports: number;
  duration_ms: number;
  problems: string[];
}

const FEE = 5_000;
const TERMINAL = new Set(['finalized', 'failed', 'expired']);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Host {
  id: string;
  env: Record<string, string>;
  proc: RunningSidecar;
  dead: boolean;
}

export async function runFleetTrial(ctx: FleetTrialContext, spec: FleetTrialSpec): Promise<FleetTrialResult> {
  const started = Date.now();
  const problems: string[] = [];
  const { simnet } = ctx;
  const { dir, payer, tipperKey, keypairPath, policyPath } = await trialWorkspace(
    simnet,
    'relay-fleet-trial-',
  );
  if (spec.limits) {
    // The workspace's policy, with the trial's limits (spend-limit may not be under max-tip: lowered with it).
    const policy = JSON.parse(await readFile(policyPath, 'utf8')) as Record<string, number>;
    if (spec.limits.rateLimit !== undefined) policy['rate-limit'] = spec.limits.rateLimit;
    if (spec.limits.spendLimit !== undefined) {
      policy['spend-limit'] = spec.limits.spendLimit;
      policy['max-tip'] = Math.min(2_000_000, spec.limits.spendLimit);
    }
    await writeFile(policyPath, JSON.stringify(policy));
  }
  const databaseUrl = await ctx.databaseUrl();
  const db = createDatabasePool(parseDatabaseUrl(databaseUrl));
  const watch = new ChainWatch(simnet, payer.publicKey.toBase58(), tipperKey);
  const tipperBefore = simnet.cluster.getBalance(tipperKey);
  const signer = new TransferSigner(payer, () => simnet.cluster.latestBlockhash('confirmed').blockhash);
  const hosts: Host[] = [];
  const agents: RunningAgent[] = [];
  const followers = new Map<string, SseReader>();
  const victimIndex = 1;
  let killedAt: number | null = null;
  let ended = 'alive';
  let link: LinkProxy | null = null;
  /** An isolate trial's pending heal (cleared if the trial ends first: the lab may be gone by then). */
  let healTimer: NodeJS.Timeout | null = null;
  let skewMs: number | null = null;
  try {
    if (spec.kill.kind === 'link') {
      const target = new URL(databaseUrl);
      link = await LinkProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    }
    for (let i = 0; i < 3; i++) {
      const id = `host-${i + 1}`;
      const port = await freePort();
      const env: Record<string, string> = {
        ...simnet.env(),
        KEYPAIR_PATH: keypairPath,
        API_PORT: String(port),
        RELAY_HOST_ID: id,
        RELAY_DATA_DIR: join(dir, `data-${i + 1}`),
        LIFECYCLE_PATH: join(dir, `lifecycle-${i + 1}.jsonl`),
        RELAY_POLICY_FILE: policyPath,
        ...(ctx.engineRps === undefined
          ? { BUNDLE_ENGINE_RPS: '2000' }
          : { BUNDLE_ENGINE_RPS: String(ctx.engineRps) }),
        ...(ctx.network ? { API_HOST: ctx.network.address(i) } : {}),
        RELAY_DATABASE_URL: i === victimIndex && link ? viaPort(databaseUrl, link.port) : databaseUrl,
        RELAY_FLEET: '1',
        ...(spec.agents
          ? { AGENT_DECISION_MODE: 'reflex', RELAY_AGENT_GRACE_S: '600' }
          : { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: String(ctx.bypassTip) }),
        ...(i === victimIndex && spec.skew !== undefined
          ? { LD_PRELOAD: libfaketime(), FAKETIME: spec.skew, DONT_FAKE_MONOTONIC: '1' }
          : {}),
        ...(i === victimIndex && spec.kill.kind === 'point'
          ? { RELAY_CRASH_AT: spec.kill.point, RELAY_CRASH_AFTER: String(spec.kill.after) }
          : {}),
      };
      const launcher = ctx.network ? ctx.network.inside(i, []) : [];
      hosts.push({ id, env, proc: await spawnSidecar(SIDECAR_MAIN, env, 30_000, [], launcher), dead: false });
    }
    if (spec.agents) for (const host of hosts) agents.push(spawnAgent({ RELAY_URL: host.proc.url }));
    // A client of each survivor following the fleet's events from before the load (DESIGN §10: an SSE client on one
    // host sees what another did).
    for (const [i, host] of hosts.entries())
      if (i !== victimIndex) followers.set(host.id, await SseReader.open(`${host.proc.url}/internal/events`));
    const victim = hosts[victimIndex] as Host;
    void victim.proc.exited.then((how) => {
      victim.dead = true;
      killedAt ??= Date.now();
      ended = String(how);
    });
    const kill = spec.kill;
    if (kill.kind === 'random')
      setTimeout(() => {
        killedAt = Date.now();
        victim.proc.child.kill('SIGKILL');
      }, kill.delayMs).unref();
    // A pause: the victim stops answering (its enqueues go to the others) until it wakes.
    let paused = false;
    if (kill.kind === 'pause')
      setTimeout(() => {
        killedAt = Date.now();
        paused = true;
        victim.proc.child.kill('SIGSTOP');
        setTimeout(() => {
          victim.proc.child.kill('SIGCONT');
          paused = false;
        }, kill.pauseMs).unref();
      }, kill.delayMs).unref();

    // A cut link: the victim still answers, but without its database (503s), so the load goes to the others. Cut under
    // load: once the victim has acknowledged `afterAcks` enqueues, so it owns live work when its lease lapses.
    let victimAcks = 0;
    let isolated = false;
    if (kill.kind === 'isolate' && !ctx.network) problems.push('an isolate trial needs ctx.network');
    const onVictimAck = () => {
      if (kill.kind === 'isolate' && ctx.network && ++victimAcks === kill.afterAcks) {
        const network = ctx.network;
        killedAt = Date.now();
        isolated = true;
        network.cut(victimIndex);
        healTimer = setTimeout(() => {
          healTimer = null;
          try {
            network.heal(victimIndex);
          } catch (error) {
            problems.push(`healing ${victim.id}'s link failed: ${String(error)}`);
          }
          isolated = false;
        }, kill.cutMs);
        healTimer.unref();
        return;
      }
      if (kill.kind !== 'link' || !link || ++victimAcks !== kill.afterAcks) return;
      const cutOff = link;
      killedAt = Date.now();
      cutOff.cut();
      setTimeout(() => cutOff.heal(), kill.cutMs).unref();
    };
    // A database restart: under load, once the fleet acknowledged `afterAcks`.
    let fleetAcks = 0;
    let restarted: Promise<void> = Promise.resolve();
    const onAck = () => {
      if (kill.kind !== 'db-restart' || ++fleetAcks !== kill.afterAcks) return;
      const server = ctx.database;
      if (!server) {
        problems.push('a db-restart trial needs ctx.database');
        return;
      }
      killedAt = Date.now();
      restarted = server
        .shutDown('fast')
        .then(() => sleep(kill.downMs))
        .then(() => server.startAgain())
        .catch((error: unknown) => {
          problems.push(`restarting PostgreSQL failed: ${String(error)}`);
        });
    };
    const unreachable = (host: Host) =>
      host.dead || (host === victim && (paused || isolated || (link?.isDown ?? false)));

    // The load: round-robin over the hosts, eight at a time; what a dead host did not answer goes to the next one.
    const acked = new Map<string, { transfer: SignedTransfer; host: string }>();
    let resent = 0;
    const refused: string[] = [];
    let rateLimited = 0;
    let next = 0;
    const transfers = Array.from({ length: ctx.txs }, () => signer.transfer());
    const sendTwice = async (transfer: SignedTransfer, first: number): Promise<void> => {
      const pair = [hosts[first % hosts.length], hosts[(first + 1) % hosts.length]] as Host[];
      const answers = await Promise.all(
        pair.map((host) =>
          post(host.proc.url, '/tx/enqueue', { transaction: transfer.wire }).catch(() => null),
        ),
      );
      const ids = new Set(answers.map((a) => a?.body?.tx_id as string | undefined));
      const statuses = answers.map((a) => a?.status ?? null).sort();
      const id = [...ids][0];
      if (ids.size !== 1 || id === undefined || statuses[0] !== 200 || statuses[1] !== 202) {
        problems.push(
          `${transfer.signature} sent to ${pair.map((h) => h.id).join(' and ')} at once: answered ${JSON.stringify(
            answers.map((a) => [a?.status ?? null, a?.body?.tx_id ?? a?.body?.error?.code ?? null]),
          )}`,
        );
        if (id === undefined) return;
      }
      acked.set(id, { transfer, host: pair.map((h) => h.id).join('+') });
    };
    const send = async (transfer: SignedTransfer, first: number): Promise<void> => {
      if (spec.twice) return sendTwice(transfer, first);
      for (let k = 0; k < 3 * hosts.length; k++) {
        const host = hosts[(first + k) % hosts.length] as Host;
        if (unreachable(host)) continue;
        const answer = await post(host.proc.url, '/tx/enqueue', { transaction: transfer.wire }).catch(
          () => null,
        );
        if (answer && (answer.status === 200 || answer.status === 202)) {
          acked.set(answer.body.tx_id as string, { transfer, host: host.id });
          if (host === victim) onVictimAck();
          onAck();
          return;
        }
        if (!answer || host.dead) {
          resent++;
          continue;
        }
        // Held past its blockhash's life (a paused host answered at last): refused, the one refusal allowed; it must
        // then be off chain (checked below).
        if (answer.status === 422 && answer.body?.error?.code === 'RELAY_E_TX_BLOCKHASH_EXPIRED') {
          refused.push(transfer.signature);
          return;
        }
        if (
          spec.limits?.rateLimit !== undefined &&
          answer.status === 429 &&
          answer.body?.error?.code === 'RELAY_E_RATE_LIMITED'
        ) {
          rateLimited++;
          return;
        }
        if (answer.status === 429 || answer.status === 503) {
          await sleep(200);
          k--;
          continue;
        }
        problems.push(`enqueue to ${host.id} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
        return;
      }
      problems.push(`no host took transfer ${transfer.signature}`);
    };
    const workers = Array.from({ length: 8 }, async () => {
      while (next < transfers.length) {
        const i = next++;
        await send(transfers[i] as SignedTransfer, i % hosts.length);
        // Spread over a few seconds: the kill lands under load, not after it.
        await sleep(40);
      }
    });
    await Promise.all(workers);
    await restarted;

    // A point kill that never fired is a trial that did not test what it names.
    if (spec.kill.kind === 'point') {
      const deadline = Date.now() + 20_000;
      while (!victim.dead && Date.now() < deadline) await sleep(100);
      if (!victim.dead) problems.push(`crash point ${spec.kill.point} #${spec.kill.after} never fired`);
    }
    const killMoment = killedAt ?? Date.now();
    const reader = hosts[0] as Host;

    // Everything acknowledged reaches a terminal state through the survivors.
    const ids = [...acked.keys()];
    let records = new Map<string, RelayRecord | null>();
    const deadline = Date.now() + 150_000;
    for (;;) {
      records = await readRecordsById(reader.proc.url, ids, { unreadable: 'null' });
      const open = [...records.values()].filter((r) => !r || !TERMINAL.has(r.state)).length;
      if (open === 0 || Date.now() > deadline) break;
      await sleep(500);
    }

    // Every survivor's SSE saw each acknowledged transaction's terminal state, whichever host settled it (a cut-off or
    // paused host's own settlements included, once it is back).
    const sseTerminalSeen: Record<string, number> = {};
    for (const [hostId, reader] of followers) {
      const terminalOf = new Map(
        [...records].map(([id, r]) => [id, r && TERMINAL.has(r.state) ? r.state : null] as const),
      );
      const seen = () => {
        const ended = new Set<string>();
        for (const message of reader.events('tx_status_changed')) {
          const event = JSON.parse(message.data) as { tx_id: string; state: string };
          if (terminalOf.get(event.tx_id) === event.state) ended.add(event.tx_id);
        }
        return ended;
      };
      await reader.waitFor(() => seen().size >= terminalOf.size, 20_000).catch(() => undefined);
      const ended = seen();
      sseTerminalSeen[hostId] = ended.size;
      const missing = [...terminalOf.keys()].filter((id) => !ended.has(id));
      if (missing.length > 0)
        problems.push(
          `${hostId}'s SSE never showed the terminal state of ${missing.length}: ${missing.slice(0, 5).join(', ')}` +
            (reader.ended ? ' (its stream ended)' : ''),
        );
    }

    // A skewed host: its own timestamps (its events' `ts`) against the database's clock, which must show the skew.
    if (spec.skew !== undefined) {
      const { rows } = await db.query<{ offset_ms: number | null }>(
        `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY (payload->>'ts')::float8
           - extract(epoch FROM created_at) * 1000) AS offset_ms
         FROM events WHERE host_id = $1 AND payload->>'ts' IS NOT NULL`,
        [victim.id],
      );
      skewMs = rows[0]?.offset_ms ?? null;
      const wanted = fakeOffsetMs(spec.skew);
      if (skewMs === null || Math.abs(skewMs - wanted) > 5_000)
        problems.push(`${victim.id}'s clock was not skewed by ${spec.skew} (its events say ${skewMs} ms)`);
    }

    // Takeover: the dead host's transactions adopted, and when.
    const { rows: adoptedRows } = await db.query<{
      tx_id: string;
      at: number;
      from_host: string;
      from_epoch: string;
      by: string;
    }>(
      `SELECT tx_id, (payload->>'ts')::float8 AS at, payload->>'from_host_id' AS from_host,
         payload->>'from_epoch' AS from_epoch, host_id AS by
       FROM events WHERE name = 'tx_adopted'`,
    );
    const adoptedFromVictim = adoptedRows.filter((r) => r.from_host === victim.id);
    const { rows: victimRows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM transactions t WHERE t.owner_host = $1 AND t.terminal_at IS NULL`,
      [victim.id],
    );
    if (
      (victimRows[0]?.n ?? 0) > 0 &&
      kill.kind !== 'pause' &&
      kill.kind !== 'link' &&
      kill.kind !== 'isolate'
    )
      problems.push(`${victimRows[0]?.n} live transactions still owned by ${victim.id}`);
    // A paused victim wakes (a cut-off one sees its database again), finds its lease gone, and registers again: live
    // under a new epoch.
    let wokeLive: boolean | null = null;
    if (kill.kind === 'pause' || kill.kind === 'link' || kill.kind === 'isolate') {
      const until = Date.now() + 20_000;
      for (;;) {
        const status = await get(victim.proc.url, '/status').catch(() => null);
        wokeLive = status?.status === 200 && status.body.fleet?.live === true;
        if (wokeLive || Date.now() > until) break;
        await sleep(250);
      }
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM host_sessions WHERE host_id = $1`,
        [victim.id],
      );
      if (!wokeLive || (rows[0]?.n ?? 0) < 2)
        problems.push(
          `the ${kill.kind === 'pause' ? 'paused' : 'cut-off'} ${victim.id} did not register again (live ${wokeLive}, ${rows[0]?.n} sessions)`,
        );
    }
    // Every session of the trial, read after a paused or cut-off victim had its chance to register again.
    const { rows: sessions } = await db.query<{
      host_id: string;
      epoch: string;
      started: number;
      ended: number | null;
    }>(
      `SELECT host_id, epoch, (extract(epoch FROM started_at) * 1000)::float8 AS started,
         (extract(epoch FROM ended_at) * 1000)::float8 AS ended FROM host_sessions ORDER BY epoch`,
    );
    const takeover = adoptedFromVictim.map((r) => r.at - killMoment);
    // Adopted with an attempt the victim had built (rule 3's case), not only pending ones.
    const { rows: inheritedRows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM transactions WHERE inherited_attempts > 0`,
    );
    const inheritedAttempts = inheritedRows[0]?.n ?? 0;
    if (kill.kind === 'point' && inheritedAttempts === 0)
      problems.push(
        `killed at ${kill.point}, yet no adopted transaction carried an attempt of ${victim.id}'s`,
      );

    // The chain's side.
    const view = watch.view();
    let lost = 0;
    let disagree = 0;
    let doubleLanded = 0;
    let doubleTips = 0;
    const terminal: Record<string, number> = {};
    const bySignature = new Map<string, RelayRecord>();
    for (const [id, record] of records) {
      if (!record) {
        lost++;
        problems.push(`acknowledged ${id} unknown to ${reader.id}`);
        continue;
      }
      terminal[record.state] = (terminal[record.state] ?? 0) + 1;
      if (!TERMINAL.has(record.state)) {
        lost++;
        problems.push(`${id} not terminal at the end (${record.state})`);
      }
      const signature = record.tx_signatures[0] as string;
      bySignature.set(signature, record);
      const landings = view.landings.get(signature) ?? 0;
      if (landings > 1) doubleLanded++;
      if ((record.state === 'finalized') !== (landings === 1)) {
        disagree++;
        problems.push(`${id} is ${record.state} and on chain ${landings} times`);
      }
    }
    const tipsByUser = new Map<string, number>();
    let orphanTips = 0;
    let chainTipsLamports = 0;
    for (const tip of view.tips) {
      const user = tip.userSignature;
      const record = user ? bySignature.get(user) : undefined;
      const attempt = record?.attempts.find((a) => a.bundle_id === tip.bundleId);
      if (!record || !attempt) {
        orphanTips++;
        problems.push(`tip ${tip.signature} on chain for no attempt (bundle ${tip.bundleId ?? 'none'})`);
        continue;
      }
      chainTipsLamports += attempt.tip_lamports + FEE;
      tipsByUser.set(user as string, (tipsByUser.get(user as string) ?? 0) + 1);
    }
    for (const [user, n] of tipsByUser)
      if (n > 1) {
        doubleTips++;
        problems.push(`transaction ${user} has ${n} tips on chain`);
      }
    // Every bundle of this trial that reached the engine, from any host (a zombie included), is one the fleet
    // committed: its id is an attempt's (or an attempt's before its tip was signed again).
    const { rows: known } = await db.query<{ id: string }>(
      `SELECT bundle_id AS id FROM attempts UNION SELECT unnest(previous_bundle_ids) FROM attempts`,
    );
    const knownIds = new Set(known.map((r) => r.id));
    let engineUnknown = 0;
    for (const bundle of simnet.engine.received().bundles) {
      const user = bundle.signatures[0];
      if (!user || !bySignature.has(user)) continue;
      if (bundle.bundleId && knownIds.has(bundle.bundleId)) continue;
      engineUnknown++;
      problems.push(
        `the engine received bundle ${bundle.bundleId ?? '?'} for ${user}: no attempt in the database`,
      );
    }
    for (const signature of refused)
      if (view.landings.has(signature)) problems.push(`refused ${signature} (blockhash expired) is on chain`);
    const tipperDrop = tipperBefore - simnet.cluster.getBalance(tipperKey);
    // With agents: every transaction a survivor adopted pending was taken up by that survivor's agent.
    if (spec.agents) {
      const { rows: pendingAdopted } = await db.query<{ tx_id: string; by: string }>(
        `SELECT tx_id, host_id AS by FROM events WHERE name = 'tx_adopted' AND payload->>'state' = 'pending'`,
      );
      for (const { tx_id: txId, by } of pendingAdopted) {
        const agent = agents[hosts.findIndex((h) => h.id === by)];
        if (!agent?.output().includes(`adopted ${txId} `))
          problems.push(`${by}'s agent never took up ${txId}, adopted pending`);
      }
    }
    if (tipperDrop !== chainTipsLamports)
      problems.push(
        `the tipper dropped ${tipperDrop} lamports; the tips on chain and their fees are ${chainTipsLamports}`,
      );
    if (lost + disagree + doubleLanded + doubleTips + orphanTips > 0)
      problems.push(
        `lost ${lost}, disagree ${disagree}, double landed ${doubleLanded}, double tips ${doubleTips}`,
      );
    const p99 = percentile(takeover, 99);
    if (p99 !== null && p99 > 7_000) problems.push(`takeover p99 ${p99} ms (target ≤ 7000)`);

    // A failed trial keeps each host's log (LOG_LEVEL=warn and up) beside its files, named in the problems.
    if (problems.length > 0)
      for (const host of hosts) {
        const path = join(dir, `${host.id}.log`);
        await writeFile(path, host.proc.output());
        problems.push(`${host.id}'s log: ${path}`);
      }
    return {
      name: spec.name,
      hosts: hosts.length,
      txs: ctx.txs,
      acknowledged: acked.size,
      refused_expired: refused.length,
      refused_rate_limited: rateLimited,
      resent,
      kill: {
        kind: spec.kill.kind,
        point: spec.kill.kind === 'point' ? spec.kill.point : null,
        ended,
        at_ms: killedAt === null ? null : killedAt - started,
      },
      adopted: adoptedFromVictim.length,
      adopted_with_attempts: inheritedAttempts,
      sse_terminal_seen: sseTerminalSeen,
      engine_bundles_unknown: engineUnknown,
      woke_live: wokeLive,
      skew_ms: skewMs,
      takeover_ms: {
        p50: percentile(takeover, 50),
        p99,
        max: takeover.length ? Math.max(...takeover) : null,
      },
      terminal,
      unfinalized: [...records.values()]
        .filter((r): r is RelayRecord => r !== null && r.state !== 'finalized')
        .map((r) => ({
          tx_id: r.tx_id,
          state: r.state,
          accepted_by: acked.get(r.tx_id)?.host ?? null,
          adopted_by: adoptedRows.find((a) => a.tx_id === r.tx_id) ? 'yes' : 'no',
          attempts: r.attempts.map((a) => [a.attempt, a.stage, a.outcome ?? null, a.slot_submitted ?? null]),
          history: (r.history ?? []).map((h) => `${h.state}@${h.slot}`),
          last_error: r.last_error?.details ?? null,
        })),
      lost,
      disagree,
      double_landed: doubleLanded,
      tips_on_chain: view.tips.length,
      double_tips: doubleTips,
      orphan_tips: orphanTips,
      adoptions: adoptedRows.map((r) => ({
        tx_id: r.tx_id,
        after_kill_ms: Math.round(r.at - killMoment),
        from: `${r.from_host}#${r.from_epoch}`,
        by: r.by,
      })),
      sessions: sessions.map((r) => ({
        host: `${r.host_id}#${r.epoch}`,
        started_ms: Math.round(r.started - killMoment),
        ended_ms: r.ended === null ? null : Math.round(r.ended - killMoment),
      })),
      tipper_drop_lamports: tipperDrop,
      chain_tips_lamports: chainTipsLamports,
      duration_ms: Date.now() - started,
      problems,
    };
  } finally {
    await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
    for (const reader of followers.values()) reader.close();
    watch.stop();
    for (const h of hosts) h.proc.child.kill('SIGCONT');
    if (healTimer) {
      clearTimeout(healTimer);
      healTimer = null;
    }
    if (spec.kill.kind === 'isolate') {
      try {
        ctx.network?.heal(victimIndex);
      } catch {
        // the lab is gone, or the link is up already
      }
    }
    await Promise.all(hosts.map((h) => h.proc.stop().catch(() => undefined)));
    await link?.close();
    await db.end();
  }
}

/** `url` with its port replaced (a host reaching the database through its own link). */
function viaPort(url: string, port: number): string {
  const via = new URL(url);
  via.port = String(port);
  return via.toString();
}

/** libfaketime from the machine's packages (Debian: `faketime`), for a skewed host; a clear error without it. */
function libfaketime(): string {
  const candidates = [
    '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
    '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
    '/usr/lib/faketime/libfaketime.so.1',
    '/usr/local/lib/faketime/libfaketime.so.1',
  ];
  const found = candidates.find((path) => existsSync(path));
  if (!found)
    throw new Error(
      `a skewed-clock trial needs libfaketime (Debian/Ubuntu package "faketime"); looked in ${candidates.join(', ')}`,
    );
  return found;
}

/** The offset a FAKETIME spec such as `+30s` or `-30s x1.001` starts at, in ms. */
function fakeOffsetMs(spec: string): number {
  const match = /^([+-]\d+(?:\.\d+)?)([smhd]?)/.exec(spec.trim());
  if (!match) throw new Error(`FAKETIME ${spec}: only relative offsets are used here`);
  const unit = { '': 1, s: 1, m: 60, h: 3_600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit * 1_000;
}
