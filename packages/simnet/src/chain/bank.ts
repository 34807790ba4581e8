// The napi class under LiteSVM's JS wrapper. The wrapper only takes web3.js objects and re-serializes them (and for
// legacy transactions verifies signatures in JS); the napi class takes wire bytes. litesvm is pinned at 0.8.0 and
// has no "exports" map, so this path is stable for that version.
import { Account, FailedTransactionMetadata, LiteSvm } from 'litesvm/dist/internal.js';
import bs58 from 'bs58';
import { transactionErrorFromLiteSvm } from './errors';
import type { TransactionErrorJson } from './types';
import type { ParsedTransaction } from './wire';

export interface ExecutionResult {
  err: TransactionErrorJson | null;
  logs: string[];
  unitsConsumed: number;
}

/** Account state captured before a write, so a bundle or a dead slot can put it back. null = did not exist. */
export type AccountSnapshot = Map<string, Account | null>;
/** One captured account (LiteSVM's). */
export type BankAccount = Account;

export interface AccountData {
  lamports: number;
  /** Owner program, raw 32 bytes. */
  owner: Uint8Array;
  data: Uint8Array;
  executable: boolean;
  rentEpoch: number;
}

const SYSTEM_PROGRAM = new Uint8Array(32);
const EMPTY = new Uint8Array(0);
/** SPL Memo v3 (the one wallets and most programs use) and the original SPL Memo v1. */
export const MEMO_PROGRAM_ID = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr';
export const MEMO_V1_PROGRAM_ID = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';

/**
 * The account state, executed for real by LiteSVM 0.8.0 from wire bytes (as a VersionedTransaction, which covers
 * legacy messages too). LiteSVM's own blockhash check (it accepts only its single latest blockhash) and transaction
 * history are off: the cluster keeps Solana's 150-block blockhash queue and the signature-status cache itself.
 * Fees, balances and program execution are LiteSVM's.
 */
export class Bank {
  private readonly svm = new LiteSvm();
  private readonly keys = new Map<string, Uint8Array>();

  constructor(private readonly sigverify: boolean) {
    this.svm.setBlockhashCheck(false);
    this.svm.setTransactionHistory(0n);
    this.svm.setSigverify(sigverify);
    this.replaceMemoProgram();
  }

  /**
   * LiteSVM 0.8.0 bundles the SPL Memo v3 ELF, and running it corrupts the native heap: after a few invocations
   * (executed or simulated) the process dies with `std::bad_alloc`, which no JS code can catch. Memo v1's ELF,
   * bundled too, runs cleanly, so the v3 address executes v1's code: a memo still has to be valid UTF-8 (else
   * `InvalidInstructionData`), and the transaction executes and charges its fee as on mainnet. Not modelled: v3's
   * rule that every account passed to a memo instruction must have signed (`MissingRequiredSignature`) and its
   * `Signed by` / `Memo (len N)` log lines.
   */
  private replaceMemoProgram(): void {
    const v1 = this.svm.getAccount(this.key(MEMO_V1_PROGRAM_ID));
    if (!v1) throw new Error(`LiteSVM has no ${MEMO_V1_PROGRAM_ID} program to stand in for SPL Memo v3`);
    this.svm.setAccount(
      this.key(MEMO_PROGRAM_ID),
      new Account(v1.lamports(), v1.data(), v1.owner(), true, v1.rentEpoch()),
    );
  }

  execute(parsed: ParsedTransaction): ExecutionResult {
    return this.guard(() => toResult(this.svm.sendVersionedTransaction(parsed.wire)));
  }

  /**
   * Bytes reach LiteSVM only after the strict parse in wire.ts (its napi binding aborts on undecodable input); an
   * error LiteSVM does throw as a JS exception is answered as a refused transaction rather than thrown into the
   * slot clock.
   */
  private guard(run: () => ExecutionResult): ExecutionResult {
    try {
      return run();
    } catch (error) {
      return {
        err: 'SanitizeFailure',
        logs: [`simnet: the bank refused the transaction: ${(error as Error).message}`],
        unitsConsumed: 0,
      };
    }
  }

  /** Run without committing. `sigVerify` false also lets a transaction with a replaced blockhash through. */
  simulate(wire: Uint8Array, sigVerify: boolean): ExecutionResult {
    this.svm.setSigverify(sigVerify);
    try {
      return this.guard(() => {
        const outcome = this.svm.simulateVersionedTransaction(wire);
        return toResult(outcome instanceof FailedTransactionMetadata ? outcome : outcome.meta());
      });
    } finally {
      this.svm.setSigverify(this.sigverify);
    }
  }

  getBalance(address: string): number {
    return Number(this.svm.getBalance(this.key(address)) ?? 0n);
  }

  getAccount(address: string): AccountData | null {
    const account = this.svm.getAccount(this.key(address));
    return account ? accountData(account) : null;
  }

  /** Credit lamports out of thin air (the faucet and prefunded accounts). */
  credit(address: string, lamports: number): void {
    this.svm.setAccount(this.key(address), this.credited(this.svm.getAccount(this.key(address)), lamports));
  }

  /** `account` (or a new system account) with `lamports` more. */
  credited(account: Account | null, lamports: number): Account {
    if (!account) return new Account(BigInt(lamports), EMPTY, SYSTEM_PROGRAM, false, 0n);
    return new Account(
      account.lamports() + BigInt(lamports),
      account.data(),
      account.owner(),
      account.executable(),
      account.rentEpoch(),
    );
  }

  /** Record the current state of `addresses` into `snapshot`, keeping the first capture of each address. */
  capture(addresses: Iterable<string>, snapshot: AccountSnapshot): void {
    for (const address of addresses) {
      if (!snapshot.has(address)) snapshot.set(address, this.svm.getAccount(this.key(address)));
    }
  }

  restore(snapshot: AccountSnapshot): void {
    for (const [address, account] of snapshot) {
      this.svm.setAccount(this.key(address), account ?? new Account(0n, EMPTY, SYSTEM_PROGRAM, false, 0n));
    }
  }

  private key(address: string): Uint8Array {
    let key = this.keys.get(address);
    if (!key) {
      key = bs58.decode(address);
      if (this.keys.size > 50_000) this.keys.clear();
      this.keys.set(address, key);
    }
    return key;
  }
}

/** A LiteSVM account (a captured snapshot entry, say) as plain data. */
export function accountData(account: Account): AccountData {
  return {
    lamports: Number(account.lamports()),
    owner: account.owner(),
    data: account.data(),
    executable: account.executable(),
    rentEpoch: Number(account.rentEpoch()),
  };
}

function toResult(outcome: FailedTransactionMetadata | { logs(): string[]; computeUnitsConsumed(): bigint }) {
  if (outcome instanceof FailedTransactionMetadata) {
    const meta = outcome.meta();
    return {
      err: transactionErrorFromLiteSvm(outcome.err()),
      logs: meta.logs(),
      unitsConsumed: Number(meta.computeUnitsConsumed()),
    };
  }
  return { err: null, logs: outcome.logs(), unitsConsumed: Number(outcome.computeUnitsConsumed()) };
}
