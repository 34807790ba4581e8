import { TestKeypair, createTransferTx, signatureOf } from '@solrelay/simnet';

export interface SignedTx {
  /** JSON body for POST /tx/enqueue. */
  body: string;
  signature: string;
}

/**
 * Pre-signed transfers (node:crypto Ed25519, ~12k/s on this machine; web3.js's JS signer would cap the load
 * generator near 800/s). Each has a distinct lamports amount, so every signature is distinct.
 */
export class TxFactory {
  readonly payers: TestKeypair[];
  private readonly recipients: string[];
  private counter = 0;

  constructor(payerCount: number, recipientCount = 64) {
    this.payers = Array.from({ length: payerCount }, () => TestKeypair.generate());
    this.recipients = Array.from({ length: recipientCount }, () => TestKeypair.generate().publicKey);
  }

  /** `extra` fields go into the enqueue body (priority, expiry_slots, ...). */
  make(count: number, blockhash: string, extra: Record<string, unknown> = {}): SignedTx[] {
    const out: SignedTx[] = [];
    for (let i = 0; i < count; i++) {
      const n = this.counter++;
      const wire = createTransferTx({
        from: this.payers[n % this.payers.length] as TestKeypair,
        // Above the rent-exempt minimum, so a new recipient account is valid when the transfer executes.
        transfers: [{ to: this.recipients[n % this.recipients.length] as string, lamports: 891_000 + n }],
        recentBlockhash: blockhash,
      });
      out.push({
        body: JSON.stringify({
          transaction: Buffer.from(wire).toString('base64'),
          encoding: 'base64',
          ...extra,
        }),
        signature: signatureOf(wire),
      });
    }
    return out;
  }
}
