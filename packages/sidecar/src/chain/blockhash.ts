import type { StoredTx } from '../store/records';
import type { SolanaRpc } from '../upstream/solana-rpc';

/** Blockhash and durable-nonce liveness of user transactions, read from RPC (validity cached briefly per blockhash). */
export class BlockhashChecks {
  private readonly validity = new Map<string, { valid: boolean; checkedAt: number }>();

  constructor(
    private readonly rpc: SolanaRpc,
    private readonly now: () => number,
  ) {}

  /** true / false from RPC (cached briefly per blockhash), or null when RPC cannot say right now. */
  async stillValid(blockhash: string): Promise<boolean | null> {
    const cached = this.validity.get(blockhash);
    const now = this.now();
    if (cached && (!cached.valid || now - cached.checkedAt < 1000)) return cached.valid;
    try {
      const valid = await this.rpc.isBlockhashValid(blockhash);
      this.validity.set(blockhash, { valid, checkedAt: now });
      if (this.validity.size > 10_000) {
        const oldest = this.validity.keys().next().value as string;
        this.validity.delete(oldest);
      }
      return valid;
    } catch {
      return null; // RPC down: accept now, the expiry check decides later
    }
  }

  /**
   * Whether a user transaction can no longer be processed: its blockhash is invalid (at `commitment`; `finalized`
   * is the proof that no fork can still take it) or its durable nonce has moved on.
   */
  async anyUserBlockhashDead(
    tx: StoredTx,
    commitment: 'processed' | 'finalized' = 'processed',
  ): Promise<boolean> {
    for (let i = 0; i < tx.signatures.length; i++) {
      const nonce = tx.nonce_accounts[i];
      if (nonce) {
        try {
          const value = await this.rpc.getNonceValue(nonce);
          if (value !== null && value !== tx.blockhashes[i]) return true;
        } catch {
          /* unknown: not proof */
        }
        continue;
      }
      const blockhash = tx.blockhashes[i] as string;
      if (commitment === 'finalized') {
        try {
          if (!(await this.rpc.isBlockhashValid(blockhash, 'finalized'))) return true;
        } catch {
          /* unknown: not proof */
        }
        continue;
      }
      if ((await this.stillValid(blockhash)) === false) return true;
    }
    return false;
  }
}
