import { createPrivateKey, randomInt, sign } from 'node:crypto';
import { encodeBase58 } from '@solrelay/core';
import { ComputeBudgetProgram, type Keypair, type PublicKey } from '@solana/web3.js';
import bs58 from 'bs58';

/**
 * Compute-unit limits used as per-transaction nonces: [BASE, BASE + SPAN). The tip transaction needs ~300 CU (150 for
 * the transfer, 150 for the ComputeBudget instruction), and the block engine ranks a bundle by tip per *requested*
 * compute unit: every unit asked for beyond that dilutes the tip's rank. So the limits stay under 1,400 (the old
 * span up to 1,001,000 asked ~500,000 on average and bought a third of the rank its tip paid for). 950 values keep
 * tips apart: two tips repeat only with the same account, amount and blockhash 950 tips apart, over 475 tips a
 * second on one blockhash (it is refreshed every 2 s; the engine takes a bundle a second per region).
 */
const CU_NONCE_BASE = 450;
const CU_NONCE_SPAN = 950;
/** The most compute a tip transaction of relay's requests (its SetComputeUnitLimit): what pricing counts before it is built. */
export const TIP_TX_MAX_COMPUTE_UNITS = CU_NONCE_BASE + CU_NONCE_SPAN - 1;

/** Base fee of a one-signature transaction, lamports. */
export const SIGNATURE_FEE_LAMPORTS = 5000;

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface TipTransaction {
  wire: Uint8Array;
  /** Its signature, base58 (its id). */
  signature: string;
}

/**
 * Signs with node:crypto (native ed25519, ~20x faster than web3.js's JS signer); the bytes are identical.
 */
export class TipSigner {
  readonly publicKey: PublicKey;
  private readonly publicKeyBase58: string;
  private readonly publicKeyBytes: Buffer;
  private readonly privateKey: ReturnType<typeof createPrivateKey>;
  private counter = randomInt(CU_NONCE_SPAN);

  constructor(keypair: Keypair) {
    this.publicKey = keypair.publicKey;
    this.publicKeyBase58 = keypair.publicKey.toBase58();
    this.publicKeyBytes = Buffer.from(keypair.publicKey.toBytes());
    const seed = Buffer.from(keypair.secretKey.subarray(0, 32));
    this.privateKey = createPrivateKey({
      key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]),
      format: 'der',
      type: 'pkcs8',
    });
  }

  /**
   * A transfer of `lamports` from the tipper to `tipAccount`. Every tip transaction must differ from every other
   * one (two identical ones would make the second bundle "already processed", and each attempt needs its own bundle
   * id), even on the same blockhash and across transactions. A compute-unit limit drawn from a per-process counter
   * (random start, so restarts do not replay it) makes each one unique at no cost. DESIGN suggests a memo; the SPL
   * memo program crashes LiteSVM 0.8.0 (std::bad_alloc after a few calls), so the simulated cluster could not run it.
   *
   * The legacy message is written byte by byte (the layout web3.js compiles for these two instructions; a test
   * checks it against web3.js): building it through web3.js's `Transaction` cost ~1.5 ms per tip, most of the
   * submit path.
   */
  build(input: {
    tipAccount: string;
    lamports: number;
    blockhash: string;
    /** The requested CU (SetComputeUnitLimit) to sign with; by default the next of the nonce values. */
    computeUnits?: number;
  }): TipTransaction {
    // The layout lists the tipper and the tip account as two keys; one key listed twice is an invalid transaction.
    if (input.tipAccount === this.publicKeyBase58)
      throw new Error('a tip transaction cannot pay the tipper itself');
    const units = input.computeUnits ?? CU_NONCE_BASE + (this.counter++ % CU_NONCE_SPAN);
    const message = Buffer.alloc(TIP_MESSAGE_BYTES);
    let at = 0;
    // Header: one signer (the tipper, writable); two read-only unsigned accounts (the programs).
    message[at++] = 1;
    message[at++] = 0;
    message[at++] = 2;
    // Account keys in web3.js's order: the signer, the writable tip account, then the read-only programs sorted
    // by their base58 names (System's "111…" before "ComputeBudget…").
    message[at++] = 4;
    at += this.publicKeyBytes.copy(message, at);
    at += keyBytes(input.tipAccount).copy(message, at);
    at += SYSTEM_PROGRAM.copy(message, at);
    at += COMPUTE_BUDGET_PROGRAM.copy(message, at);
    at += keyBytes(input.blockhash).copy(message, at);
    message[at++] = 2; // instructions
    // SetComputeUnitLimit { units: u32 }: program 3, no accounts, data [2, units LE].
    message[at++] = 3;
    message[at++] = 0;
    message[at++] = 5;
    message[at++] = 2;
    message.writeUInt32LE(units, at);
    at += 4;
    // System Transfer { lamports: u64 }: program 2, accounts [0 from, 1 to], data [2 u32 LE, lamports u64 LE].
    message[at++] = 2;
    message[at++] = 2;
    message[at++] = 0;
    message[at++] = 1;
    message[at++] = 12;
    message.writeUInt32LE(2, at);
    at += 4;
    message.writeBigUInt64LE(BigInt(input.lamports), at);
    const signature = sign(null, message, this.privateKey);
    const wire = Buffer.concat([Buffer.from([1]), signature, message]);
    return { wire, signature: encodeBase58(signature) };
  }
}

const SYSTEM_PROGRAM = Buffer.alloc(32);
const COMPUTE_BUDGET_PROGRAM = Buffer.from(ComputeBudgetProgram.programId.toBytes());
/** 3 header + 1 + 4 keys + blockhash + 1 + (1+1+1+5) + (1+1+2+1+12). */
const TIP_MESSAGE_BYTES = 3 + 1 + 4 * 32 + 32 + 1 + 8 + 17;

const keyCache = new Map<string, Buffer>();

/** 32 bytes of a base58 key or blockhash (tip accounts and blockhashes repeat: cached, bounded). */
function keyBytes(base58: string): Buffer {
  let bytes = keyCache.get(base58);
  if (!bytes) {
    bytes = Buffer.from(bs58.decode(base58));
    if (bytes.length !== 32) throw new Error(`not a 32-byte key: ${base58}`);
    if (keyCache.size >= 256) keyCache.clear();
    keyCache.set(base58, bytes);
  }
  return bytes;
}
