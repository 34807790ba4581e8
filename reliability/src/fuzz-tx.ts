import { createPrivateKey, sign } from 'node:crypto';
import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { base58 } from './crash-wire';

/**
 * Nearly valid transactions: real signed transfers (from the stack's funded payer, on a fresh blockhash) taken
 * apart on the wire: truncated, bit-flipped, unsigned, oversize, mis-encoded or mislabelled. A request carrying a
 * corrupt one, or one whose text is not in the encoding the request names, must be refused; the suite asserts
 * none of those is ever accepted.
 */

export type TxMutation =
  | { kind: 'valid' }
  | { kind: 'valid-base58' }
  | { kind: 'base64-unpadded' }
  | { kind: 'truncate'; at: number }
  | { kind: 'flip-signature'; bit: number }
  | { kind: 'flip-message'; bit: number }
  | { kind: 'unsigned' }
  | { kind: 'append'; bytes: number[] }
  | { kind: 'oversize'; size: number }
  | { kind: 'signature-count'; value: number[] }
  | { kind: 'version'; byte: number }
  | { kind: 'as-base58-labelled-base64' }
  | { kind: 'as-base64-labelled-base58' }
  | { kind: 'base64url' }
  | { kind: 'base64-whitespace'; at: number }
  | { kind: 'base64-cut'; at: number }
  | { kind: 'base64-bad-char'; at: number; char: string }
  | { kind: 'base58-bad-char'; at: number; char: string };

export const MUTATION_KINDS: TxMutation['kind'][] = [
  'valid',
  'valid-base58',
  'base64-unpadded',
  'truncate',
  'flip-signature',
  'flip-message',
  'unsigned',
  'append',
  'oversize',
  'signature-count',
  'version',
  'as-base58-labelled-base64',
  'as-base64-labelled-base58',
  'base64url',
  'base64-whitespace',
  'base64-cut',
  'base64-bad-char',
  'base58-bad-char',
];

export interface EncodedTx {
  /** The string for the request. */
  text: string;
  /** What `text` really is. */
  format: 'base64' | 'base58';
  /** The encoding the request should name when it names none itself (a mislabelling mutation lies here). */
  label: 'base64' | 'base58';
  /** The bytes are not an intact signed transaction (or the text is not valid in its format). */
  corrupt: boolean;
}

export const PACKET_DATA_SIZE = 1232;

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function signer(payer: Keypair) {
  return createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(payer.secretKey.subarray(0, 32))]),
    format: 'der',
    type: 'pkcs8',
  });
}

/**
 * A signed SystemProgram transfer from `payer` to a new account, like the testkit's `transfer()` but signed with
 * node:crypto: web3.js signs and then re-verifies in JavaScript, which made refilling the pool a large share of
 * the run's CPU.
 */
export function fastTransfer(payer: Keypair, blockhash: string, lamports: number): Buffer {
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash });
  // Above the rent-exempt minimum so the new recipient account is valid.
  tx.add(
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 890_880 + lamports,
    }),
  );
  const message = tx.serializeMessage();
  return Buffer.concat([Buffer.from([1]), sign(null, message, signer(payer)), message]);
}

function shortVec(n: number): number[] {
  const out: number[] = [];
  let v = n;
  for (;;) {
    const byte = v & 0x7f;
    v >>= 7;
    if (v === 0) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

/**
 * The bytes around the data: signature count, one signature, header, account count, two keys, blockhash,
 * instruction count, program index, account-index count.
 */
const OVERSIZE_FIXED_BYTES = 1 + 64 + 3 + 1 + 32 + 32 + 32 + 1 + 1 + 1;

/**
 * The data length that makes the transaction at least `size` bytes. The data's own length prefix grows from one
 * to three bytes with the data, so it is counted rather than assumed (a fixed 3-byte guess made "oversize"
 * transactions of exactly 1,232 bytes, which are valid: the flake of issue #19).
 */
export function oversizeDataLength(size: number): number {
  const total = (data: number) => OVERSIZE_FIXED_BYTES + shortVec(data).length + data;
  let data = Math.max(0, size - OVERSIZE_FIXED_BYTES - 3);
  while (total(data) < size) data++;
  return data;
}

/**
 * A well-formed legacy transaction of at least `size` bytes (exactly `size` unless the data's length prefix
 * grows by a byte right there), properly signed by `payer`: one instruction to a random program carrying the
 * data. The sidecar must refuse it for its size alone when `size` is above a packet.
 */
export function oversizeTransaction(payer: Keypair, blockhash: string, size: number): Buffer {
  const program = Keypair.generate().publicKey;
  const dataLength = oversizeDataLength(size);
  const message = Buffer.concat([
    Buffer.from([1, 0, 1]),
    Buffer.from(shortVec(2)),
    payer.publicKey.toBuffer(),
    program.toBuffer(),
    new PublicKey(blockhash).toBuffer(),
    Buffer.from(shortVec(1)),
    Buffer.from([1]),
    Buffer.from(shortVec(0)),
    Buffer.from(shortVec(dataLength)),
    Buffer.alloc(dataLength, 7),
  ]);
  const signature = sign(null, message, signer(payer));
  const wire = Buffer.concat([Buffer.from([1]), signature, message]);
  if (wire.length < size)
    throw new Error(`oversizeTransaction built ${wire.length} bytes, asked for ${size}`);
  return wire;
}

/** Apply a mutation to a valid signed transfer (`wire`). */
export function mutate(
  wire: Buffer,
  mutation: TxMutation,
  context: { payer: Keypair; blockhash: string },
): EncodedTx {
  const b64 = (bytes: Buffer) => bytes.toString('base64');
  const b64tx = (text: string, corrupt: boolean): EncodedTx => ({
    text,
    format: 'base64',
    label: 'base64',
    corrupt,
  });
  const refuse = (bytes: Buffer): EncodedTx => b64tx(b64(bytes), true);
  const at = (n: number, length: number) => ((n % length) + length) % length;
  switch (mutation.kind) {
    case 'valid':
      return b64tx(b64(wire), false);
    case 'valid-base58':
      return { text: base58(wire), format: 'base58', label: 'base58', corrupt: false };
    case 'base64-unpadded':
      // Still the same bytes: a lenient decoder may accept it, so it is not a must-refuse case.
      return b64tx(b64(wire).replace(/=+$/, ''), false);
    case 'truncate':
      return refuse(wire.subarray(0, at(mutation.at, wire.length)));
    case 'flip-signature': {
      const copy = Buffer.from(wire);
      const bit = at(mutation.bit, 512);
      copy[1 + (bit >> 3)] = (copy[1 + (bit >> 3)] as number) ^ (1 << (bit & 7));
      return refuse(copy);
    }
    case 'flip-message': {
      const copy = Buffer.from(wire);
      const bit = at(mutation.bit, (copy.length - 65) * 8);
      const index = 65 + (bit >> 3);
      copy[index] = (copy[index] as number) ^ (1 << (bit & 7));
      return refuse(copy);
    }
    case 'unsigned': {
      const copy = Buffer.from(wire);
      copy.fill(0, 1, 65);
      return refuse(copy);
    }
    case 'append':
      return refuse(Buffer.concat([wire, Buffer.from(mutation.bytes.length ? mutation.bytes : [0])]));
    case 'oversize':
      return refuse(
        oversizeTransaction(
          context.payer,
          context.blockhash,
          PACKET_DATA_SIZE + 1 + (mutation.size % (64 * 1024)),
        ),
      );
    case 'signature-count':
      return refuse(Buffer.concat([Buffer.from(mutation.value), wire.subarray(1)]));
    case 'version': {
      // A versioned-message prefix other than v0 (0x80): an unsupported version.
      const byte = 0x81 + (mutation.byte % 0x7f);
      return refuse(Buffer.concat([wire.subarray(0, 65), Buffer.from([byte]), wire.subarray(65)]));
    }
    case 'as-base58-labelled-base64':
      return { text: base58(wire), format: 'base58', label: 'base64', corrupt: false };
    case 'as-base64-labelled-base58':
      return { text: b64(wire), format: 'base64', label: 'base58', corrupt: false };
    case 'base64url': {
      const text = b64(wire).replace(/\+/g, '-').replace(/\//g, '_');
      return b64tx(text, text !== b64(wire));
    }
    case 'base64-whitespace': {
      const text = b64(wire);
      const i = at(mutation.at, text.length);
      return b64tx(`${text.slice(0, i)}\n${text.slice(i)}`, true);
    }
    case 'base64-cut': {
      const text = b64(wire);
      return b64tx(text.slice(0, at(mutation.at, text.length)), true);
    }
    case 'base64-bad-char': {
      const text = b64(wire);
      const i = at(mutation.at, text.length - 2);
      return b64tx(`${text.slice(0, i)}${mutation.char}${text.slice(i + 1)}`, true);
    }
    case 'base58-bad-char': {
      const text = base58(wire);
      const i = at(mutation.at, text.length);
      return {
        text: `${text.slice(0, i)}${mutation.char}${text.slice(i + 1)}`,
        format: 'base58',
        label: 'base58',
        corrupt: true,
      };
    }
  }
}
