import type { Simnet } from '@solrelay/simnet';
import { bundleIdOf } from './crash-wire';

/**
 * The chain's side of a crash trial, seen from inside the simnet (the test process runs it): every transaction the
 * trial's payer or tipper put into a block, in block order, minus whatever a dead slot rolled back. Relay's records
 * are then judged against this, not against what relay says about itself.
 *
 * Bundles execute as one unit and their transactions are recorded one after another, so a tip transaction sits
 * right after the user transactions of its bundle (one, or a pack's lead and riders, up to four): that adjacency is
 * how a tip on chain is tied to the transactions it paid for, without asking relay. The bundle id computed from them
 * and the tip must then be one of the lead's attempts in relay's record.
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
  /** The bundle's first user transaction (its lead), or null. */
  userSignature: string | null;
  /** Every user transaction of its bundle, in order (a pack's lead and riders); empty when it landed alone. */
  userSignatures: string[];
  /** The bundle id of (users..., tip), when bundled. */
  bundleId: string | null;
}

/** The most user transactions a bundle carries (Jito: five transactions, the tip one of them). */
const MAX_BUNDLE_USERS = 4;

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
        // The user transactions right before it, back to the bundle's first (a tip or a gap ends the walk).
        const users: string[] = [];
        for (let i = seen.index - 1; users.length < MAX_BUNDLE_USERS; i--) {
          const before = byIndex.get(i);
          if (!before || before.payer === this.tipper) break;
          users.unshift(before.signature);
        }
        tips.push({
          signature: seen.signature,
          slot: seen.slot,
          userSignature: users[0] ?? null,
          userSignatures: users,
          bundleId: users.length > 0 ? bundleIdOf([...users, seen.signature]) : null,
        });
      }
    }
    return { landings, tips };
  }
}
