import bs58 from 'bs58';
import { COMPUTE_BUDGET_PROGRAM, requestedComputeUnits } from '../engine/auction-model';
import { MEMO_PROGRAM_ID, MEMO_V1_PROGRAM_ID } from './bank';
import { readCompactU16, type ParsedTransaction } from './wire';

/** One compiled instruction of a message: indexes into the account keys, and its data. */
export interface CompiledInstruction {
  programIdIndex: number;
  accounts: number[];
  data: Uint8Array;
}

export interface AddressTableLookup {
  accountKey: string;
  writableIndexes: number[];
  readonlyIndexes: number[];
}

/** A message decoded for JSON-RPC (getTransaction, getBlock `full`) and fee accounting. */
export interface DecodedMessage {
  version: 'legacy' | 0;
  header: {
    numRequiredSignatures: number;
    numReadonlySignedAccounts: number;
    numReadonlyUnsignedAccounts: number;
  };
  accountKeys: string[];
  recentBlockhash: string;
  instructions: CompiledInstruction[];
  /** v0 only. */
  addressTableLookups: AddressTableLookup[];
}

function byteArray(bytes: Uint8Array, offset: number): [Uint8Array, number] {
  const [length, prefix] = readCompactU16(bytes, offset);
  const start = offset + prefix;
  if (start + length > bytes.length) throw new Error('truncated message');
  return [bytes.subarray(start, start + length), start + length];
}

/**
 * Decode serialized message bytes (legacy or v0), as getFeeForMessage receives them and as a transaction carries
 * them. Throws on bytes that are not a whole message.
 */
export function decodeMessageBytes(message: Uint8Array, knownKeys?: string[]): DecodedMessage {
  let offset = 0;
  const versioned = ((message[0] ?? 0) & 0x80) !== 0;
  if (versioned) {
    if (((message[0] as number) & 0x7f) !== 0) throw new Error('unsupported message version');
    offset += 1;
  }
  if (offset + 3 > message.length) throw new Error('truncated message');
  const header = {
    numRequiredSignatures: message[offset] as number,
    numReadonlySignedAccounts: message[offset + 1] as number,
    numReadonlyUnsignedAccounts: message[offset + 2] as number,
  };
  offset += 3;
  const [keyCount, keyPrefix] = readCompactU16(message, offset);
  offset += keyPrefix;
  if (offset + 32 * keyCount + 32 > message.length) throw new Error('truncated message');
  const accountKeys: string[] = knownKeys ?? [];
  if (!knownKeys)
    for (let i = 0; i < keyCount; i++)
      accountKeys.push(bs58.encode(message.subarray(offset + 32 * i, offset + 32 * (i + 1))));
  offset += 32 * keyCount;
  const recentBlockhash = bs58.encode(message.subarray(offset, offset + 32));
  offset += 32;
  if (header.numRequiredSignatures === 0 || header.numRequiredSignatures > keyCount)
    throw new Error('invalid message header');
  const [instructionCount, instructionPrefix] = readCompactU16(message, offset);
  offset += instructionPrefix;
  const instructions: CompiledInstruction[] = [];
  for (let i = 0; i < instructionCount; i++) {
    const programIdIndex = message[offset];
    if (programIdIndex === undefined) throw new Error('truncated message');
    const [accounts, afterAccounts] = byteArray(message, offset + 1);
    const [data, afterData] = byteArray(message, afterAccounts);
    instructions.push({ programIdIndex, accounts: [...accounts], data });
    offset = afterData;
  }
  const addressTableLookups: AddressTableLookup[] = [];
  if (versioned) {
    const [lookupCount, lookupPrefix] = readCompactU16(message, offset);
    offset += lookupPrefix;
    for (let i = 0; i < lookupCount; i++) {
      if (offset + 32 > message.length) throw new Error('truncated message');
      const accountKey = bs58.encode(message.subarray(offset, offset + 32));
      const [writable, afterWritable] = byteArray(message, offset + 32);
      const [readonly, afterReadonly] = byteArray(message, afterWritable);
      addressTableLookups.push({
        accountKey,
        writableIndexes: [...writable],
        readonlyIndexes: [...readonly],
      });
      offset = afterReadonly;
    }
  }
  return {
    version: versioned ? 0 : 'legacy',
    header,
    accountKeys,
    recentBlockhash,
    instructions,
    addressTableLookups,
  };
}

/** The message of a transaction `parseTransaction` accepted. */
export function decodeMessage(parsed: ParsedTransaction): DecodedMessage {
  return decodeMessageBytes(parsed.messageBytes, parsed.accountKeys);
}

/** Agave's fee_structure lamports_per_signature. */
export const LAMPORTS_PER_SIGNATURE = 5_000;
const MICRO_LAMPORTS_PER_LAMPORT = 1_000_000n;

/** What a message asks of the compute budget program, and the fee it owes (Agave `calculate_fee`). */
export interface FeeDetails {
  /** SetComputeUnitPrice, micro-lamports per CU (0 when absent). */
  computeUnitPrice: number;
  /** SetComputeUnitLimit if present, else the default for its instructions (SIMD-0170), capped at 1.4M. */
  computeUnitLimit: number;
  /** ceil(price × limit / 1,000,000). */
  priorityFee: number;
  /** 5,000 × signatures + priority fee. */
  fee: number;
}

/**
 * The fee Agave charges for a message: `lamports_per_signature` × its signatures (the header's
 * numRequiredSignatures; precompile signatures are not counted here) plus the prioritization fee,
 * ceil(SetComputeUnitPrice × compute-unit limit / 10^6) (`compute_budget_limits.rs` get_prioritization_fee).
 * The last SetComputeUnitPrice / SetComputeUnitLimit wins if repeated (Agave refuses duplicates; LiteSVM then
 * fails the transaction, and its fee is what it would have been).
 */
export function feeDetails(message: DecodedMessage): FeeDetails {
  let price = 0n;
  let limit: number | null = null;
  const programs: string[] = [];
  for (const instruction of message.instructions) {
    const program = message.accountKeys[instruction.programIdIndex] ?? '';
    programs.push(program);
    if (program !== COMPUTE_BUDGET_PROGRAM) continue;
    const data = instruction.data;
    if (data[0] === 2 && data.length === 5) {
      limit = Buffer.from(data).readUInt32LE(1);
    } else if (data[0] === 3 && data.length === 9) {
      price = Buffer.from(data).readBigUInt64LE(1);
    }
  }
  const computeUnitLimit = requestedComputeUnits(programs, limit);
  const priority =
    (price * BigInt(computeUnitLimit) + MICRO_LAMPORTS_PER_LAMPORT - 1n) / MICRO_LAMPORTS_PER_LAMPORT;
  const priorityFee = Number(priority);
  return {
    computeUnitPrice: Number(price),
    computeUnitLimit,
    priorityFee,
    fee: message.header.numRequiredSignatures * LAMPORTS_PER_SIGNATURE + priorityFee,
  };
}

/** Agave's `extract_and_fmt_memos`: every SPL Memo (v1 or v3) instruction as `[len] text`, joined by "; "; null if none. */
export function extractMemo(message: DecodedMessage): string | null {
  const memos: string[] = [];
  for (const instruction of message.instructions) {
    const program = message.accountKeys[instruction.programIdIndex];
    if (program !== MEMO_PROGRAM_ID && program !== MEMO_V1_PROGRAM_ID) continue;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(instruction.data);
    } catch {
      text = '(unparseable)';
    }
    memos.push(`[${instruction.data.length}] ${text}`);
  }
  return memos.length > 0 ? memos.join('; ') : null;
}
