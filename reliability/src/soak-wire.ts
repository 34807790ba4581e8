import { createPrivateKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { PublicKey, type Keypair } from '@solana/web3.js';

/** RFC 8410 PKCS#8 prefix of an ed25519 private key; the 32-byte seed follows. */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SYSTEM_PROGRAM = Buffer.alloc(32);

/**
 * Signed SystemProgram transfers built byte by byte and signed with node:crypto: about a hundred times cheaper
 * than web3.js's pure-JS ed25519, so a load generator sharing two cores with the sidecar spends its time on
 * the sidecar, not on itself. The bytes are an ordinary legacy transaction any Solana parser accepts.
 */
export class TransferFactory {
  private readonly key: KeyObject;
  private readonly payer: Buffer;
  private cachedHash: { text: string; bytes: Buffer } | null = null;

  constructor(
    payer: Keypair,
    private readonly blockhash: () => string,
  ) {
    this.payer = Buffer.from(payer.publicKey.toBytes());
    this.key = createPrivateKey({
      key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(payer.secretKey.subarray(0, 32))]),
      format: 'der',
      type: 'pkcs8',
    });
  }

  /** One transfer of `lamports` (default: above rent-exemption) to a fresh random address, as base64. */
  transfer(lamports = 900_000 + Math.floor(Math.random() * 100_000)): string {
    const hash = this.hashBytes();
    const data = Buffer.alloc(12);
    data.writeUInt32LE(2, 0); // SystemInstruction::Transfer
    data.writeBigUInt64LE(BigInt(lamports), 4);
    const message = Buffer.concat([
      Buffer.from([1, 0, 1]), // 1 signer, 0 read-only signed, 1 read-only unsigned (the program)
      Buffer.from([3]),
      this.payer,
      randomBytes(32),
      SYSTEM_PROGRAM,
      hash,
      Buffer.from([1, 2, 2, 0, 1, 12]), // one instruction: program #2, accounts [0, 1], 12 bytes of data
      data,
    ]);
    const signature = sign(null, message, this.key);
    return Buffer.concat([Buffer.from([1]), signature, message]).toString('base64');
  }

  private hashBytes(): Buffer {
    const text = this.blockhash();
    if (this.cachedHash?.text !== text) {
      this.cachedHash = { text, bytes: Buffer.from(new PublicKey(text).toBytes()) };
    }
    return this.cachedHash.bytes;
  }
}
