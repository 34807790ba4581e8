import { ComputeBudgetProgram, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { Rng, TestKeypair, createTransferTx, signatureOf } from '@solrelay/simnet';

/** What a `hot` transaction asks (SetComputeUnitLimit): a swap's budget, so it ranks per CU as the pool's swaps do. */
export const HOT_TX_COMPUTE_UNITS = 200_000;

/** The range a `heavy` transaction's SetComputeUnitLimit is drawn from: mainnet's swaps and aggregator routes. */
export const HEAVY_TX_COMPUTE_UNITS = { min: 200_000, max: 1_400_000 } as const;

/**
 * The `n`th `heavy` transaction's compute-unit limit for `seed`: log-uniform over 200,000–1,400,000 (the cap),
 * rounded to 1,000, so most ask a few hundred thousand and a few ask near the cap, as swaps and multi-hop routes do
 * on mainnet (the spread is an assumption; its median is ~530k). A function of (seed, n) only, so every strategy
 * of a scenario sends the same limits.
 */
export function heavyComputeUnits(seed: number, n: number): number {
  const u = new Rng(seed).fork(`heavy-cu-${n}`).next();
  const { min, max } = HEAVY_TX_COMPUTE_UNITS;
  return Math.min(max, Math.round((min * Math.pow(max / min, u)) / 1_000) * 1_000);
}

/**
 * What a user transaction touches. `uncontended`: a transfer from a funded payer to one of 64 recipients, locking
 * nothing anyone else bids on. `hot`: the same transfer plus a write to one of the engine's hot accounts, asking a
 * swap's compute (SetComputeUnitLimit 200,000): the swap-on-a-busy-pool case of the tip-per-CU auction. Without the
 * limit it would ask ~6,000 CU and outrank the pool's swaps 30 to 1 per lamport, so "hot" would measure nothing. `hot` needs a simnet whose engine models hot
 * accounts (`simnet.engine.hotAccounts`); until then a scenario asking for it is skipped, never faked. `heavy`: the
 * `hot` transaction asking a mainnet-like spread of compute instead of 200,000 ({@link heavyComputeUnits}).
 */
export type UserTxKind = 'uncontended' | 'hot' | 'heavy';

export interface UserTx {
  wire: Uint8Array;
  base64: string;
  signature: string;
  payer: string;
  /** Lamports moved to the recipient (and hot account), so fees can be read from the payer's balance delta. */
  moved: number;
}

export class HotAccountsUnavailable extends Error {
  constructor() {
    super(
      'this simnet has no hot accounts (simnet.engine.hotAccounts); hot scenarios need the auction-model branch',
    );
  }
}

/**
 * Signed user transactions from seeded payers (node:crypto Ed25519, so a burst of 500 is signed in milliseconds).
 * Every transaction moves a distinct amount, so every signature is distinct.
 */
export class UserTxFactory {
  readonly payers: TestKeypair[];
  private readonly recipients: string[];
  private counter = 0;

  constructor(
    readonly kind: UserTxKind,
    seed: number,
    options: { payers?: number; hotAccounts?: readonly string[] } = {},
  ) {
    if (kind !== 'uncontended' && !options.hotAccounts?.length) throw new HotAccountsUnavailable();
    this.seed = seed;
    const rng = new Rng(seed);
    this.payers = Array.from({ length: options.payers ?? 32 }, () => TestKeypair.generate(rng));
    this.recipients = Array.from({ length: 64 }, () => TestKeypair.generate(rng).publicKey);
    this.hotAccounts = options.hotAccounts ?? [];
  }

  private readonly hotAccounts: readonly string[];
  private readonly seed: number;

  /** One transfer; `tip` adds a transfer to a Jito tip account inside the same transaction (tip included). */
  make(blockhash: string, tip?: { account: string; lamports: number }): UserTx {
    const n = this.counter++;
    const payer = this.payers[n % this.payers.length] as TestKeypair;
    // Above the rent-exempt minimum, so a new recipient account is valid when the transfer executes.
    const amount = 891_000 + n;
    const transfers = [{ to: this.recipients[n % this.recipients.length] as string, lamports: amount }];
    let moved = amount;
    if (this.kind !== 'uncontended') {
      // Above the rent-exempt minimum: a hot account the chain has not funded yet is created by the first write (1
      // lamport to an unfunded account fails with InsufficientFundsForRent, and nothing lands).
      transfers.push({ to: this.hotAccounts[n % this.hotAccounts.length] as string, lamports: 891_000 });
      moved += 891_000;
    }
    if (tip) transfers.push({ to: tip.account, lamports: tip.lamports });
    const wire =
      this.kind === 'uncontended'
        ? createTransferTx({ from: payer, transfers, recentBlockhash: blockhash })
        : swapLike(
            payer,
            transfers,
            blockhash,
            this.kind === 'heavy' ? heavyComputeUnits(this.seed, n) : HOT_TX_COMPUTE_UNITS,
          );
    return {
      wire,
      base64: Buffer.from(wire).toString('base64'),
      signature: signatureOf(wire),
      payer: payer.publicKey,
      moved,
    };
  }

  /** A tip transaction (a transfer to a tip account) signed by `tipper`, for a bundle [user tx, tip tx]. */
  static tipTx(tipper: TestKeypair, account: string, lamports: number, blockhash: string): string {
    const wire = createTransferTx({
      from: tipper,
      transfers: [{ to: account, lamports }],
      recentBlockhash: blockhash,
    });
    return Buffer.from(wire).toString('base64');
  }
}

/** The transfers of a `hot` / `heavy` transaction with a swap's compute-unit limit in front, signed by the payer. */
function swapLike(
  payer: TestKeypair,
  transfers: ReadonlyArray<{ to: string; lamports: number }>,
  blockhash: string,
  units: number,
): Uint8Array {
  const signer = payer.toWeb3();
  const tx = new Transaction({ feePayer: signer.publicKey, recentBlockhash: blockhash });
  tx.add(ComputeBudgetProgram.setComputeUnitLimit({ units }));
  for (const t of transfers)
    tx.add(
      SystemProgram.transfer({
        fromPubkey: signer.publicKey,
        toPubkey: new PublicKey(t.to),
        lamports: t.lamports,
      }),
    );
  tx.sign(signer);
  return tx.serialize();
}
