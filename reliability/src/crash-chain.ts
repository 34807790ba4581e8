import type { Simnet } from '@solrelay/simnet';
import { bundleIdOf } from './crash-wire';

/**
 * The chain's side of a crash trial, seen from inside the simnet (the test process runs it): every transaction the
 * trial's payer or tipper put into a block, in block order, minus whatever a dead slot rolled back. Relay's records
 * are then judged against this, not against what relay says about itself.
 *
 * Bundles execute as one unit and their transactions are recorded one after another, so a tip transaction sits
 * right after the user transaction of its bundle: that adjacency is how a tip on chain is tied to the transaction
 * it paid for, without asking relay. The bundle id computed from the pair must then be one of that transaction's
 * attempts in relay's record.
 */

interface Seen {
  slot: number;
  index: number;
  signature: string;
  payer: string;
}

/** A tip transaction on chain and the user transaction it was bundled with (null: it landed on its own). */
export interface ChainTip {
  signature: string;
  slot: number;
  userSignature: string | null;
  /** The bundle id of (user, tip), when bundled. */
  bundleId: string | null;
}

export interface ChainView {
  /** How many times each of the payers' signatures is on chain now (more than one would be a double landing). */
  landings: Map<string, number>;
  tips: ChainTip[];
}

export class ChainWatch {
  private readonly bySlot = new Map<number, Seen[]>();
  private readonly rolledBack = new Set<string>();
  private readonly onTransaction = (event: {
    slot: number;
    index: number;
    signature: string;
    feePayer: string;
  }): void => {
    if (!this.payers.has(event.feePayer) && event.feePayer !== this.tipper) return;
    let list = this.bySlot.get(event.slot);
    if (!list) this.bySlot.set(event.slot, (list = []));
    list.push({ slot: event.slot, index: event.index, signature: event.signature, payer: event.feePayer });
  };
  private readonly onRollback = (event: { slot: number; signatures: string[] }): void => {
    const list = this.bySlot.get(event.slot);
    if (!list) return;
    for (const seen of list) this.rolledBack.add(`${seen.slot}:${seen.signature}`);
  };

  /** The fee payers whose transactions are watched (user transactions); more can be added (`addPayer`). */
  private readonly payers: Set<string>;

  constructor(
    private readonly simnet: Simnet,
    payers: string | readonly string[],
    private readonly tipper: string,
  ) {
    this.payers = new Set(typeof payers === 'string' ? [payers] : payers);
    simnet.cluster.on('transaction', this.onTransaction);
    simnet.cluster.on('rollback', this.onRollback);
  }

  /**
   * Watch this fee payer's transactions too, from the next block on: a payer that exists only from some moment (the
   * fault suite's fresh payers). A tip right after a transaction of a payer not watched is taken to have landed alone.
   */
  addPayer(payer: string): void {
    this.payers.add(payer);
  }

  stop(): void {
    this.simnet.cluster.off('transaction', this.onTransaction);
    this.simnet.cluster.off('rollback', this.onRollback);
  }

  /** What is on chain now: landings of the payer's signatures, and the tipper's transactions with their bundles. */
  view(): ChainView {
    const landings = new Map<string, number>();
    const tips: ChainTip[] = [];
    for (const list of this.bySlot.values()) {
      const alive = list.filter((s) => !this.rolledBack.has(`${s.slot}:${s.signature}`));
      const byIndex = new Map(alive.map((s) => [s.index, s]));
      for (const seen of alive) {
        if (seen.payer !== this.tipper) {
          landings.set(seen.signature, (landings.get(seen.signature) ?? 0) + 1);
          continue;
        }
        const before = byIndex.get(seen.index - 1);
        const user = before && before.payer !== this.tipper ? before.signature : null;
        tips.push({
          signature: seen.signature,
          slot: seen.slot,
          userSignature: user,
          bundleId: user ? bundleIdOf([user, seen.signature]) : null,
        });
      }
    }
    return { landings, tips };
  }
}
