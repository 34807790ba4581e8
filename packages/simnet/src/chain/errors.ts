import type { TransactionErrorJson } from './types';

/**
 * Solana's `TransactionError` variants in declaration order. The position is the bincode variant index that the
 * Yellowstone stream sends (u32 LE), so the order must match solana-sdk exactly; never reorder.
 */
const TRANSACTION_ERROR_VARIANTS = [
  'AccountInUse',
  'AccountLoadedTwice',
  'AccountNotFound',
  'ProgramAccountNotFound',
  'InsufficientFundsForFee',
  'InvalidAccountForFee',
  'AlreadyProcessed',
  'BlockhashNotFound',
  'InstructionError', // (u8 instruction index, InstructionError)
  'CallChainTooDeep',
  'MissingSignatureForFee',
  'InvalidAccountIndex',
  'SignatureFailure',
  'InvalidProgramForExecution',
  'SanitizeFailure',
  'ClusterMaintenance',
  'AccountBorrowOutstanding',
  'WouldExceedMaxBlockCostLimit',
  'UnsupportedVersion',
  'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit',
  'WouldExceedAccountDataBlockLimit',
  'TooManyAccountLocks',
  'AddressLookupTableNotFound',
  'InvalidAddressLookupTableOwner',
  'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex',
  'InvalidRentPayingAccount',
  'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit',
  'DuplicateInstruction', // (u8)
  'InsufficientFundsForRent', // { account_index: u8 }
  'MaxLoadedAccountsDataSizeExceeded',
  'InvalidLoadedAccountsDataSizeLimit',
  'ResanitizationNeeded',
  'ProgramExecutionTemporarilyRestricted', // { account_index: u8 }
  'UnbalancedTransaction',
  'ProgramCacheHitMaxLimit',
  'CommitCancelled',
] as const;

/** Solana's `InstructionError` variants in declaration order (bincode index = position). */
const INSTRUCTION_ERROR_VARIANTS = [
  'GenericError',
  'InvalidArgument',
  'InvalidInstructionData',
  'InvalidAccountData',
  'AccountDataTooSmall',
  'InsufficientFunds',
  'IncorrectProgramId',
  'MissingRequiredSignature',
  'AccountAlreadyInitialized',
  'UninitializedAccount',
  'UnbalancedInstruction',
  'ModifiedProgramId',
  'ExternalAccountLamportSpend',
  'ExternalAccountDataModified',
  'ReadonlyLamportChange',
  'ReadonlyDataModified',
  'DuplicateAccountIndex',
  'ExecutableModified',
  'RentEpochModified',
  'NotEnoughAccountKeys',
  'AccountDataSizeChanged',
  'AccountNotExecutable',
  'AccountBorrowFailed',
  'AccountBorrowOutstanding',
  'DuplicateAccountOutOfSync',
  'Custom', // (u32)
  'InvalidError',
  'ExecutableDataModified',
  'ExecutableLamportChange',
  'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId',
  'CallDepth',
  'MissingAccount',
  'ReentrancyNotAllowed',
  'MaxSeedLengthExceeded',
  'InvalidSeeds',
  'InvalidRealloc',
  'ComputationalBudgetExceeded',
  'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure',
  'ProgramFailedToComplete',
  'ProgramFailedToCompile',
  'Immutable',
  'IncorrectAuthority',
  'BorshIoError', // (String) in the bincode layout this stream uses
  'AccountNotRentExempt',
  'InvalidAccountOwner',
  'ArithmeticOverflow',
  'UnsupportedSysvar',
  'IllegalOwner',
  'MaxAccountsDataAllocationsExceeded',
  'MaxAccountsExceeded',
  'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits',
] as const;

/**
 * LiteSVM 0.8.0 reports the data-less variants as numbers of its own `const enum`s, which skip the variants that
 * carry data. Its .d.ts enums have no usable runtime object, so these tables restate their numbering.
 */
const LITESVM_FIELDLESS_TX_ERRORS = TRANSACTION_ERROR_VARIANTS.filter(
  (name) =>
    name !== 'InstructionError' &&
    name !== 'DuplicateInstruction' &&
    name !== 'InsufficientFundsForRent' &&
    name !== 'ProgramExecutionTemporarilyRestricted',
);
// LiteSVM's table also orders these two differently from solana-sdk (ResanitizationNeeded before the data-size ones).
const LITESVM_TX_ERROR_ORDER: readonly string[] = (() => {
  const names = [...LITESVM_FIELDLESS_TX_ERRORS] as string[];
  const moved = names.splice(names.indexOf('ResanitizationNeeded'), 1);
  names.splice(names.indexOf('MaxLoadedAccountsDataSizeExceeded') + 1, 0, ...moved);
  return names;
})();
const LITESVM_FIELDLESS_IX_ERRORS: readonly string[] = [
  ...INSTRUCTION_ERROR_VARIANTS.filter((name) => name !== 'Custom' && name !== 'BorshIoError'),
  'BorshIoError',
];

interface LiteSvmInstructionError {
  index: number;
  err(): number | { code: number } | { msg: string };
}

/** Convert the value LiteSVM's `FailedTransactionMetadata.err()` returns into Solana's JSON-RPC form. */
export function transactionErrorFromLiteSvm(raw: unknown): TransactionErrorJson {
  if (typeof raw === 'number') return LITESVM_TX_ERROR_ORDER[raw] ?? `UnknownTransactionError(${raw})`;
  if (raw && typeof raw === 'object') {
    const kind = raw.constructor?.name ?? '';
    if ('err' in raw && typeof (raw as LiteSvmInstructionError).err === 'function') {
      const { index } = raw as LiteSvmInstructionError;
      const inner = (raw as LiteSvmInstructionError).err();
      if (typeof inner === 'number') {
        return { InstructionError: [index, LITESVM_FIELDLESS_IX_ERRORS[inner] ?? 'InvalidError'] };
      }
      if ('code' in inner) return { InstructionError: [index, { Custom: inner.code }] };
      return { InstructionError: [index, { BorshIoError: inner.msg }] };
    }
    if ('accountIndex' in raw) {
      const name = kind.includes('Restricted')
        ? 'ProgramExecutionTemporarilyRestricted'
        : 'InsufficientFundsForRent';
      return { [name]: { account_index: (raw as { accountIndex: number }).accountIndex } };
    }
    if ('index' in raw) return { DuplicateInstruction: (raw as { index: number }).index };
  }
  return 'InvalidError';
}

/** The variant name of an error, e.g. "InstructionError" for `{InstructionError: [...]}`. */
export function transactionErrorName(err: TransactionErrorJson): string {
  return typeof err === 'string' ? err : (Object.keys(err)[0] ?? 'Unknown');
}

/**
 * Errors that Solana still records in a block (the fee is charged and the signature gets a status). Any other error
 * means the leader drops the transaction: no fee, no status.
 */
const RECORDED_ERRORS = new Set<string>([
  'InstructionError',
  'InsufficientFundsForRent',
  'DuplicateInstruction',
  'ProgramAccountNotFound',
  'InvalidProgramForExecution',
  'ProgramExecutionTemporarilyRestricted',
  'MaxLoadedAccountsDataSizeExceeded',
  'InvalidLoadedAccountsDataSizeLimit',
  'UnbalancedTransaction',
]);

export function isRecordedError(err: TransactionErrorJson): boolean {
  return RECORDED_ERRORS.has(transactionErrorName(err));
}

/**
 * Bincode bytes of a TransactionError, as Yellowstone's `TransactionError.err` carries them: u32 LE variant index,
 * then the payload (u8 instruction index + u32 LE InstructionError variant (+ u32 code for Custom); u8 for the
 * account-index variants).
 */
export function encodeTransactionError(err: TransactionErrorJson): Uint8Array {
  const bytes: number[] = [];
  const u32 = (n: number): void => {
    bytes.push(n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff);
  };
  const name = transactionErrorName(err);
  const variant = (TRANSACTION_ERROR_VARIANTS as readonly string[]).indexOf(name);
  u32(variant < 0 ? (TRANSACTION_ERROR_VARIANTS as readonly string[]).indexOf('SanitizeFailure') : variant);
  if (typeof err === 'string') return Uint8Array.from(bytes);
  const payload = (err as Record<string, unknown>)[name];
  if (name === 'InstructionError' && Array.isArray(payload)) {
    const [index, inner] = payload as [number, string | Record<string, unknown>];
    bytes.push(index & 0xff);
    const innerName = typeof inner === 'string' ? inner : (Object.keys(inner)[0] ?? 'GenericError');
    const innerVariant = (INSTRUCTION_ERROR_VARIANTS as readonly string[]).indexOf(innerName);
    u32(innerVariant < 0 ? 0 : innerVariant);
    if (innerName === 'Custom' && typeof inner === 'object') u32(Number(inner.Custom));
    if (innerName === 'BorshIoError') {
      const text = new TextEncoder().encode(
        typeof inner === 'object' ? String(inner.BorshIoError ?? '') : '',
      );
      u32(text.length);
      u32(0); // bincode strings carry a u64 length
      bytes.push(...text);
    }
  } else if (name === 'DuplicateInstruction') {
    bytes.push(Number(payload) & 0xff);
  } else if (payload && typeof payload === 'object' && 'account_index' in payload) {
    bytes.push(Number((payload as { account_index: number }).account_index) & 0xff);
  }
  return Uint8Array.from(bytes);
}

/** A one-line human message like Agave's (used in JSON-RPC error messages and logs). */
export function describeTransactionError(err: TransactionErrorJson): string {
  const name = transactionErrorName(err);
  const fixed: Record<string, string> = {
    BlockhashNotFound: 'Blockhash not found',
    AlreadyProcessed: 'This transaction has already been processed',
    AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
    InsufficientFundsForFee: 'Insufficient funds for fee',
    SignatureFailure: 'Transaction did not pass signature verification',
    SanitizeFailure: 'Transaction failed to sanitize accounts offsets correctly',
  };
  if (fixed[name]) return fixed[name];
  if (typeof err === 'object' && name === 'InstructionError') {
    const [index, inner] = err.InstructionError as [number, string | Record<string, unknown>];
    const detail =
      typeof inner === 'string'
        ? inner
        : 'Custom' in inner
          ? `custom program error: 0x${Number(inner.Custom).toString(16)}`
          : JSON.stringify(inner);
    return `Error processing Instruction ${index}: ${detail}`;
  }
  return typeof err === 'string' ? err : JSON.stringify(err);
}
