import { EnqueueTimes } from './util/enqueue-times';
import type { Keypair } from '@solana/web3.js';
import type { DecisionMode, LeaderBuffer, LifecycleEntry, Policy, TipOracle } from '@solrelay/core';
import type { Logger } from 'pino';
import { BlockhashChecks } from './chain/blockhash';
import { ChainPosition } from './chain/position';
import { Announcer } from './events/announce';
import type { EventHub } from './events/hub';
import type { LifecycleLog } from './lifecycle/log';
import type { Metrics } from './metrics';
import { ContentionReader } from './chain/pricing';
import type { TxStore } from './store/store';
import type { EngineRegions } from './upstream/engine-regions';
import type { SolanaRpc } from './upstream/solana-rpc';
import { KeyedLock } from './util/keyed-lock';
import type { SignatureVerifier } from './wire/signature-verifier';

export interface RelayOptions {
  /** The records (service.ts gives it the local journal; see store/store.ts). */
  store: TxStore;
  lifecycle: LifecycleLog<LifecycleEntry>;
  hub: EventHub;
  rpc: SolanaRpc;
  /** The regional block engines bundles go to. */
  engine: EngineRegions;
  /** The tipper pool (`KEYPAIR_PATH`'s files, in order; at least one). */
  tippers: Keypair[];
  oracle: TipOracle;
  leaders: LeaderBuffer;
  policy: () => Policy;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
  bypass: { enabled: boolean; tipLamports: number };
  initialMode: DecisionMode;
  /** With no agent for this long (and not bypass), the sidecar decides with its own reflex. 0 disables. */
  agentGraceMs: number;
  /** Send budget per region (requests per second). */
  bundleEngineRps: number;
  /** Most user transactions one bundle carries, packing other waiting transactions in (1 or absent: no packing). */
  packMaxTransactions?: number;
  /** Crash-test hook: called at named points; inert unless a test sets it. */
  crashPoint?: (name: CrashPointName) => void;
  /** Signature checks off the event loop; inline checks when absent. */
  verifier?: SignatureVerifier;
}

export type CrashPointName = 'enqueue.journaled' | 'attempt.journaled' | 'attempt.sent' | 'pack.journaled';

/**
 * Everything a stage may be given: the options, and what one relay shares at run time (one clock, the
 * per-transaction locks, the chain position, blockhash checks, the announcer). No stage is handed this whole: each
 * declares the `Pick<RelayPorts, ...>` it uses in its constructor, so a stage's dependencies read off its signature
 * and a unit test passes exactly those. `compose.ts` builds it once and wires the stages.
 */
export interface RelayPorts extends Omit<RelayOptions, 'now'> {
  readonly now: () => number;
  readonly locks: KeyedLock;
  readonly chain: ChainPosition;
  readonly blockhashes: BlockhashChecks;
  readonly announce: Announcer;
  /**
   * Write-set contention readings (DESIGN §11), one cache per relay: the fallback decider reads through it, and the
   * events that hand a transaction to the agent carry what it holds (no RPC call on their paths).
   */
  readonly contention: ContentionReader;
  /** When each transaction was accepted (performance.now()), until its first attempt: decision latency, pack fill. */
  readonly enqueuedAt: EnqueueTimes;
  readonly lastErrors: { engine: string | null };
  /** Whether the relay was closed (passes stop, timers end). */
  readonly isClosed: () => boolean;
}

/** The shared run-time parts over `o`, and the switch that closes them. */
export function createPorts(o: RelayOptions): { ports: RelayPorts; close: () => void } {
  const now = o.now ?? Date.now;
  // Accepted in the last 2 s and undecided: what may still fill a pack (a burst's decisions follow within a second).
  const enqueuedAt = new EnqueueTimes(2_000);
  const chain = new ChainPosition();
  const announce = new Announcer({ hub: o.hub, lifecycle: o.lifecycle, log: o.log, enqueuedAt, now });
  // What the store commits is announced from its change feed, in commit order, and nowhere else.
  const unfollow = announce.follow(o.store.changes);
  o.store.changes.onListenerError = (error, change) =>
    o.log.error({ err: error, tx_id: change.tx.tx_id, seq: change.seq }, 'a change-feed listener failed');
  let closed = false;
  const ports: RelayPorts = {
    ...o,
    now,
    locks: new KeyedLock(),
    chain,
    blockhashes: new BlockhashChecks(
      o.rpc,
      now,
      () => chain.slot,
      () => chain.finalizedSlot,
    ),
    announce,
    contention: new ContentionReader({ rpc: o.rpc, now }),
    enqueuedAt,
    lastErrors: { engine: null },
    isClosed: () => closed,
  };
  return {
    ports,
    close: () => {
      closed = true;
      unfollow();
    },
  };
}
