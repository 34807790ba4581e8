import type { Keypair } from '@solana/web3.js';
import { RelayError, relayErrorJson, type ErrorBody, type TipperStatus } from '@solrelay/core';
import type { RelayPorts } from '../context';
import { TIP_LANDING_HORIZON_SLOTS } from '../chain/tip-life';
import { TipSigner } from '../engine/tip-tx';
import type { StoredAttempt, StoredTx } from '../store/records';
import { availableOf, describeShortfall, tipCost, tipperLoads, tipperOf } from './tipper-funds';

/** A balance read of one tipper: lamports at `confirmed`, and the slot the answer describes. */
export interface TipperReading {
  pubkey: string;
  lamports: number;
  contextSlot: number;
}

/** A tip reserved on a tipper for an attempt being built: `journaled()` once the attempt is, `cancel()` if not. */
export interface TipReservation {
  readonly pubkey: string;
  readonly signer: TipSigner;
  journaled(): void;
  cancel(): void;
}

interface Tipper {
  readonly pubkey: string;
  readonly signer: TipSigner;
  balance: number | null;
  /** The slot the balance read describes (its `context.slot`). */
  readSlot: number;
  /** What its attempts may still take, and how many are in flight, as of the last scan. */
  reserved: number;
  inFlight: number;
  /** When an attempt last took it (a counter): the least recently used goes next. */
  lastUsed: number;
  /** Reservations not yet seen by a scan: their lamports and count. */
  liveLamports: number;
  liveCount: number;
  /** Its own tip transaction failed: passed over until its balance covers `needs` beyond what is reserved. */
  hold: { needs: number; reason: string } | null;
  /** What it lacked for the tip that last waited on it; 0 once it can pay that tip. */
  shortfall: number;
}

/** A reservation not yet seen by a scan of the records. */
interface Live {
  tipper: Tipper;
  lamports: number;
  /** Tips in flight it adds (0 for a raise of one already counted). */
  count: number;
  journaled: boolean;
}

/** A refused tip keeps /status paused this long after the last refusal, unless a tipper can pay it before. */
const WANTING_TTL_MS = 15_000;

/**
 * The tipper pool (`KEYPAIR_PATH` lists one or more keypair files). Every bundle write-locks its tip transaction's
 * signer, so one tipper puts all of relay's bundles in one auction group; with several, each attempt takes the one
 * used longest ago that can pay it, and bundles in flight together lock different accounts.
 *
 * Funds: an attempt is built only when its tipper's balance (last `confirmed` read) covers what its attempts may
 * still take after that read (`tipper-funds.ts`), plus this tip and fee, plus the rent-exempt minimum. The
 * reservation counts at once (so concurrent submits cannot both spend the same lamports); a scan of the records at
 * each balance read replaces the reservations it can see. When no tipper can pay, the submit is refused with
 * RELAY_E_TIPPER_UNDERFUNDED naming the closest tipper and its shortfall: the transaction waits, it never fails for
 * relay's own wallet. A tipper whose own tip transaction failed (the engine said so, or the balance behind relay's
 * back could not pay it) is held until a read shows it covered.
 */
export class TipperPool {
  private readonly tippers: Tipper[];
  private readonly byKey = new Map<string, Tipper>();
  /** Other hosts' tippers seen in the last balance pass (see `fleetTippers`). */
  private fleet = new Set<string>();
  private readonly live = new Set<Live>();
  private uses = 0;
  /** The last tip no tipper could pay (what keeps submission paused), and when it was refused. */
  private wanting: { need: number; at: number } | null = null;
  private pausedReason: string | null = null;

  constructor(
    private readonly d: Pick<RelayPorts, 'chain' | 'log' | 'metrics' | 'now' | 'policy' | 'store'>,
    keypairs: readonly Keypair[],
  ) {
    this.tippers = keypairs.map((keypair) => ({
      pubkey: keypair.publicKey.toBase58(),
      signer: new TipSigner(keypair),
      balance: null,
      readSlot: 0,
      reserved: 0,
      inFlight: 0,
      liveLamports: 0,
      liveCount: 0,
      lastUsed: 0,
      hold: null,
      shortfall: 0,
    }));
    for (const t of this.tippers) this.byKey.set(t.pubkey, t);
  }

  /** The signer of the tipper `pubkey`, or null when it is not in the pool. */
  signerOf(pubkey: string | null): TipSigner | null {
    return pubkey === null ? null : (this.byKey.get(pubkey)?.signer ?? null);
  }

  /** Every tipper's address, in `KEYPAIR_PATH` order (the stream watches them all). */
  get pubkeys(): string[] {
    return this.tippers.map((t) => t.pubkey);
  }

  /**
   * A fleet's other tippers: those that signed other hosts' attempts whose tips may still take (as of the last balance
   * pass), not in this pool. The stream watches them too, so a host already follows a tip it may adopt.
   */
  get fleetTippers(): string[] {
    return [...this.fleet];
  }

  /** Why submission is paused (no tipper can pay a minimal tip, or the tip a transaction waits with), or null. */
  get paused(): string | null {
    return this.pausedReason;
  }

  /** Whether a fresh balance read is wanted now (paused or holding): funding is then noticed within a slot or so. */
  get wantsFreshBalance(): boolean {
    return this.pausedReason !== null || this.tippers.some((t) => t.hold !== null);
  }

  status(): TipperStatus[] {
    return this.tippers.map((t) => {
      const reserved = this.reservedOf(t);
      return {
        pubkey: t.pubkey,
        balance_lamports: t.balance,
        reserved_lamports: reserved,
        in_flight: this.inFlightOf(t),
        available_lamports: t.balance === null ? null : Math.max(0, availableOf(t.balance, reserved)),
        held_reason: t.hold?.reason ?? null,
      };
    });
  }

  /** Per tipper: what it lacked for the tip that last waited on it (0 once it can pay that). For /metrics. */
  shortfalls(): Array<{ pubkey: string; lamports: number }> {
    return this.tippers.map((t) => ({ pubkey: t.pubkey, lamports: t.shortfall }));
  }

  /**
   * Balance reads (a reading describing an older slot than the last one is ignored: behind a load balancer a
   * lagging node answers from the past). Then what every tipper has reserved is counted again from the records.
   */
  async setBalances(readings: readonly TipperReading[]): Promise<void> {
    // Reservations already journaled are counted from the records (read at this same moment); those still being
    // built stay counted as live.
    const journaled = [...this.live].filter((l) => l.journaled);
    const records: Array<Pick<StoredTx, 'attempts'>> = await this.d.store.held();
    // A fleet's hosts may share tippers: what the others' attempts may still take counts too (none on one host).
    // Unreadable (the database away): the balances still apply; no tip is built meanwhile (the outage gate holds
    // new tips until the database is back), and the next pass reads them again.
    // How far back another host's attempt may still have a live tip: the tracker's horizon (a tip lives 151 blocks
    // past its blockhash; slots outnumber blocks where leaders skip). `mayStillDebit` then decides from the attempt.
    const read = await this.d.store
      .otherHostsTips(this.d.chain.slot - TIP_LANDING_HORIZON_SLOTS)
      .catch(() => null);
    const others = read ?? [];
    for (const attempt of others) records.push({ attempts: [attempt] });
    // Unread (the database away): the stream keeps following the tippers it followed.
    if (read)
      this.fleet = new Set(read.map(tipperOf).filter((k): k is string => k !== null && !this.byKey.has(k)));
    for (const reading of readings) {
      const t = this.byKey.get(reading.pubkey);
      if (!t || reading.contextSlot < t.readSlot) continue;
      t.balance = reading.lamports;
      t.readSlot = reading.contextSlot;
    }
    this.rescan(records, journaled);
    for (const t of this.tippers) {
      if (t.balance === null) continue;
      const available = availableOf(t.balance, this.reservedOf(t));
      if (t.hold && available >= t.hold.needs) {
        this.d.log.info({ tipper: t.pubkey, balance: t.balance }, 'tipper funded again: used again');
        t.hold = null;
      }
      if (t.shortfall > 0 && (!this.wanting || available >= this.wanting.need)) t.shortfall = 0;
    }
    this.refresh();
  }

  /**
   * Reserve a tip on the tipper that should pay it: of those not held whose balance covers it, the one used longest
   * ago (then the one with fewer tips in flight). Throws RELAY_E_TIPPER_UNDERFUNDED when none can (RELAY_E_NOT_READY
   * before any balance is read).
   */
  reserve(tipLamports: number): TipReservation {
    const need = tipCost(tipLamports);
    // No balance read yet (just started, or RPC down since): nothing is known to be affordable. Not an underfunded
    // tipper: the transaction waits for readiness, like any submit before the inputs are in.
    if (this.tippers.every((t) => t.balance === null))
      throw new RelayError('RELAY_E_NOT_READY', { reason: "the tippers' balances have not been read yet" });
    let chosen: Tipper | null = null;
    for (const t of this.tippers) {
      if (t.balance === null || t.hold || availableOf(t.balance, this.reservedOf(t)) < need) continue;
      if (
        !chosen ||
        t.lastUsed < chosen.lastUsed ||
        (t.lastUsed === chosen.lastUsed && this.inFlightOf(t) < this.inFlightOf(chosen))
      )
        chosen = t;
    }
    if (!chosen) {
      const error = this.underfunded(need);
      this.wanting = { need, at: this.d.now() };
      const closest = this.byKey.get(error.details.tipper) as Tipper;
      closest.shortfall = error.details.shortfall_lamports;
      this.d.metrics.tipperUnderfunded.inc({ tipper: closest.pubkey });
      this.refresh();
      throw error;
    }
    const tipper = chosen;
    tipper.lastUsed = ++this.uses;
    const live: Live = { tipper, lamports: need, count: 1, journaled: false };
    this.live.add(live);
    tipper.liveLamports += need;
    tipper.liveCount++;
    if (this.wanting && need >= this.wanting.need) this.wanting = null;
    this.refresh();
    return {
      pubkey: tipper.pubkey,
      signer: tipper.signer,
      journaled: () => {
        live.journaled = true;
      },
      // Once journaled, the attempt is in the records: it stays counted until a scan sees it there.
      cancel: () => {
        if (!live.journaled && this.drop(live)) this.refresh();
      },
    };
  }

  /**
   * Reserve `extraLamports` more on the tipper `pubkey` (a pack's tip raised before its first send, signed by the same
   * tipper): null when that tipper is held, unread or cannot cover it beside what it has reserved (the tip is then not
   * raised). `journaled()` once the raised attempt is, `cancel()` if not.
   */
  raise(pubkey: string, extraLamports: number): TipReservation | null {
    const tipper = this.byKey.get(pubkey);
    if (!tipper || tipper.balance === null || tipper.hold) return null;
    if (availableOf(tipper.balance, this.reservedOf(tipper)) < extraLamports) return null;
    // Counted in lamports only: the attempt it raises is already one of the tipper's tips in flight.
    const live: Live = { tipper, lamports: extraLamports, count: 0, journaled: false };
    this.live.add(live);
    tipper.liveLamports += extraLamports;
    return {
      pubkey,
      signer: tipper.signer,
      journaled: () => {
        live.journaled = true;
      },
      cancel: () => {
        if (!live.journaled && this.drop(live)) this.refresh();
      },
    };
  }

  /**
   * Relay's own tip transaction could not execute (the engine's simulation named it, or its tipper's balance cannot
   * pay it): an operator fault, never the user's. That tipper is passed over until a balance read covers the tip.
   */
  tipFailed(attempt: StoredAttempt, detail: string): void {
    const pubkey = tipperOf(attempt);
    if (pubkey !== null) this.d.metrics.tipperTipFailures.inc({ tipper: pubkey });
    const t = pubkey === null ? undefined : this.byKey.get(pubkey);
    if (!t) {
      this.d.log.warn(
        { tipper: pubkey, detail },
        'a tip transaction of a tipper no longer in the pool failed',
      );
      return;
    }
    const needs = tipCost(attempt.tip_lamports);
    t.hold = {
      needs,
      reason:
        `relay's tip transaction from tipper ${t.pubkey} could not execute (${detail}); the tipper is passed ` +
        `over until its balance covers ${needs} lamports beyond what is reserved and the rent-exempt minimum`,
    };
    this.refresh();
  }

  /** The refusal of a tip no tipper can pay: named after the tipper closest to paying it. */
  private underfunded(need: number): RelayError<'RELAY_E_TIPPER_UNDERFUNDED'> {
    const known = this.tippers.filter((t) => t.balance !== null);
    const usable = known.filter((t) => !t.hold);
    const closest = this.closest(usable.length > 0 ? usable : known);
    const balance = closest.balance as number;
    const reserved = this.reservedOf(closest);
    const pool = this.tippers.length > 1 ? ` (the closest of ${this.tippers.length} tippers)` : '';
    return new RelayError('RELAY_E_TIPPER_UNDERFUNDED', {
      reason:
        usable.length === 0
          ? (closest.hold?.reason ?? '')
          : describeShortfall(closest.pubkey, balance, reserved, this.inFlightOf(closest), need) + pool,
      tipper: closest.pubkey,
      balance_lamports: balance,
      reserved_lamports: reserved,
      needed_lamports: need,
      shortfall_lamports: Math.max(0, need - availableOf(balance, reserved)),
    });
  }

  /** The refusal, as a transaction's journaled `last_error`. */
  static lastError(error: RelayError<'RELAY_E_TIPPER_UNDERFUNDED'>): ErrorBody['error'] {
    return relayErrorJson('RELAY_E_TIPPER_UNDERFUNDED', error.details);
  }

  private closest(tippers: Tipper[]): Tipper {
    let best = tippers[0] as Tipper;
    for (const t of tippers)
      if (
        availableOf(t.balance as number, this.reservedOf(t)) >
        availableOf(best.balance as number, this.reservedOf(best))
      )
        best = t;
    return best;
  }

  /**
   * Why submission is paused, if it is: every tipper is held; or none can pay a minimal tip; or a transaction waits
   * with a tip none can pay (refused within the last WANTING_TTL_MS). Logged when it starts and ends.
   */
  private refresh(): void {
    const now = this.d.now();
    if (this.wanting && now - this.wanting.at > WANTING_TTL_MS) this.wanting = null;
    const known = this.tippers.filter((t) => t.balance !== null);
    let reason: string | null = null;
    if (known.length > 0) {
      const usable = known.filter((t) => !t.hold);
      if (usable.length === 0) {
        reason = known.map((t) => t.hold?.reason).join('; ');
      } else {
        const closest = this.closest(usable);
        const available = availableOf(closest.balance as number, this.reservedOf(closest));
        const minimal = tipCost(this.d.policy()['min-tip']);
        if (this.wanting && available >= this.wanting.need) this.wanting = null;
        const need = this.wanting ? this.wanting.need : available < minimal ? minimal : null;
        if (need !== null)
          reason =
            (this.wanting ? 'a transaction waits for funds: ' : 'no tipper can pay even a min-tip tip: ') +
            describeShortfall(
              closest.pubkey,
              closest.balance as number,
              this.reservedOf(closest),
              this.inFlightOf(closest),
              need,
            );
      }
    }
    if ((reason === null) !== (this.pausedReason === null)) {
      if (reason) this.d.log.warn({ reason }, 'submission paused: tipper underfunded');
      else this.d.log.info('submission resumed: tipper funded');
    }
    this.pausedReason = reason;
  }

  /** Count again, from the records, what every tipper's attempts may still take after its last read. */
  private rescan(records: ReadonlyArray<Pick<StoredTx, 'attempts'>>, journaled: readonly Live[]): void {
    const readSlots = new Map(this.tippers.map((t) => [t.pubkey, t.readSlot]));
    const loads = tipperLoads(records, readSlots, this.d.chain);
    for (const t of this.tippers) {
      const load = loads.get(t.pubkey);
      t.reserved = load?.reserved ?? 0;
      t.inFlight = load?.inFlight ?? 0;
    }
    // Journaled reservations are in the records (the store applies a change before it resolves): the scan counted
    // them. The others are still being built.
    for (const l of journaled) this.drop(l);
  }

  private drop(live: Live): boolean {
    if (!this.live.delete(live)) return false;
    live.tipper.liveLamports -= live.lamports;
    live.tipper.liveCount -= live.count;
    return true;
  }

  private reservedOf(t: Tipper): number {
    return t.reserved + t.liveLamports;
  }

  private inFlightOf(t: Tipper): number {
    return t.inFlight + t.liveCount;
  }
}
