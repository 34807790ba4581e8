import { createPrivateKey, randomInt, sign } from 'node:crypto';
import { ComputeBudgetProgram, type Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import bs58 from 'bs58';

/** Compute-unit limits used as per-transaction nonces: [BASE, BASE + SPAN). A transfer needs ~300 CU. */
const CU_NONCE_BASE = 1_000;
const CU_NONCE_SPAN = 1_000_000;

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
  private readonly privateKey: ReturnType<typeof createPrivateKey>;
  private counter = randomInt(CU_NONCE_SPAN);

  constructor(keypair: Keypair) {
    this.publicKey = keypair.publicKey;
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
   */
  build(input: { tipAccount: string; lamports: number; blockhash: string }): TipTransaction {
    const tx = new Transaction({ feePayer: this.publicKey, recentBlockhash: input.blockhash });
    const nonce = CU_NONCE_BASE + (this.counter++ % CU_NONCE_SPAN);
    tx.add(
      ComputeBudgetProgram.setComputeUnitLimit({ units: nonce }),
      SystemProgram.transfer({
        fromPubkey: this.publicKey,
        toPubkey: new PublicKey(input.tipAccount),
        lamports: input.lamports,
      }),
    );
    const message = tx.serializeMessage();
    const signature = sign(null, message, this.privateKey);
    tx.addSignature(this.publicKey, signature);
    return { wire: tx.serialize({ verifySignatures: false }), signature: bs58.encode(signature) };
  }
}
