import type { Journal } from '../journal/journal';
import type { StoreOp, StoreState, StoredTx } from './records';

/** One change to a transaction record, as the stages write it. */
export type TxPatch = Omit<Extract<StoreOp, { k: 'patch' }>, 'k'>;

/**
 * The transaction records, behind the narrowest interface the stages need: read the state, and make a change
 * durable (each call resolves once the change would survive a crash). Only this module talks to the journal, so
 * another store (several sidecars sharing PostgreSQL: the engine's budget is per IP, so more throughput means more
 * hosts) can replace the local journal without touching a stage.
 */
export interface TxStore {
  readonly state: StoreState;
  /** False while writes are failing (readiness says so). */
  readonly healthy: boolean;
  /** A new record (an accepted transaction). */
  insert(tx: StoredTx): Promise<void>;
  /** Change a record: fields, history entries, a new attempt, attempt fields, an eviction count. */
  update(patch: TxPatch): Promise<void>;
  /** Forget spend reservations older than `before` (they left the rolling hour). */
  pruneSpend(before: number): Promise<void>;
  /** Whether any spend reservation is older than `before`. */
  hasSpendOlderThan(before: number): boolean;
}

/** The store on the local append-only journal (fsync, group commit, snapshot compaction). */
export class JournalTxStore implements TxStore {
  constructor(private readonly journal: Journal<StoreState, StoreOp>) {}

  get state(): StoreState {
    return this.journal.state;
  }

  get healthy(): boolean {
    return this.journal.healthy;
  }

  insert(tx: StoredTx): Promise<void> {
    return this.journal.commit({ k: 'put', tx });
  }

  update(patch: TxPatch): Promise<void> {
    return this.journal.commit({ k: 'patch', ...patch });
  }

  pruneSpend(before: number): Promise<void> {
    return this.journal.commit({ k: 'prune-spend', before });
  }

  hasSpendOlderThan(before: number): boolean {
    return this.journal.state.spend.hasOlderThan(before);
  }
}
