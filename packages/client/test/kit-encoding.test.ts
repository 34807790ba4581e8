import {
  AccountRole,
  appendTransactionMessageInstruction,
  address,
  blockhash,
  compileTransaction,
  createTransactionMessage,
  generateKeyPairSigner,
  getBase64EncodedWireTransaction,
  partiallySignTransactionMessageWithSigners,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  type Address,
  type KeyPairSigner,
  type TransactionSigner,
} from '@solana/kit';
import { encodeTransactions, type KitTransaction } from '../src';

/**
 * @solana/kit transactions (`{ messageBytes, signatures }`) are accepted as they are: the client writes the same wire
 * bytes kit's own encoder writes, for legacy and v0 messages, whatever order the signatures record lists its keys in.
 */

const SYSTEM_PROGRAM = address('11111111111111111111111111111111');
const BLOCKHASH = blockhash('EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N');

/** A System transfer built by hand (kit's program clients live in other packages). */
function transfer(from: TransactionSigner, to: TransactionSigner, lamports: bigint) {
  const data = new Uint8Array(12);
  const view = new DataView(data.buffer);
  view.setUint32(0, 2, true); // SystemInstruction::Transfer
  view.setBigUint64(4, lamports, true);
  return {
    programAddress: SYSTEM_PROGRAM,
    accounts: [
      { address: from.address, role: AccountRole.WRITABLE_SIGNER as const, signer: from },
      { address: to.address, role: AccountRole.WRITABLE_SIGNER as const, signer: to },
    ],
    data,
  };
}

function message(version: 'legacy' | 0, payer: KeyPairSigner, other: KeyPairSigner) {
  return pipe(
    // Typed as v0 either way (kit's builders take no union of versions); the bytes follow the runtime version.
    createTransactionMessage({ version: version as 0 }),
    (m) => setTransactionMessageFeePayerSigner(payer, m),
    (m) =>
      setTransactionMessageLifetimeUsingBlockhash({ blockhash: BLOCKHASH, lastValidBlockHeight: 100n }, m),
    (m) => appendTransactionMessageInstruction(transfer(payer, other, 1_000n), m),
  );
}

let payer: KeyPairSigner;
let other: KeyPairSigner;

beforeAll(async () => {
  [payer, other] = await Promise.all([generateKeyPairSigner(), generateKeyPairSigner()]);
});

test.each(['legacy', 0] as const)(
  'a signed kit transaction (%s message) is sent as the bytes kit itself would send',
  async (version) => {
    const signed = await signTransactionMessageWithSigners(message(version, payer, other));
    expect(encodeTransactions([signed])).toEqual({
      transactions: [getBase64EncodedWireTransaction(signed)],
      encoding: 'base64',
    });
  },
);

test('signatures go in the order of the message’s signer keys, not the record’s key order', async () => {
  const signed = await signTransactionMessageWithSigners(message(0, payer, other));
  const reversed: KitTransaction = {
    messageBytes: signed.messageBytes,
    signatures: Object.fromEntries(Object.entries(signed.signatures).reverse()),
  };
  expect(Object.keys(reversed.signatures)).not.toEqual(Object.keys(signed.signatures));
  expect(encodeTransactions([reversed]).transactions).toEqual([getBase64EncodedWireTransaction(signed)]);
});

test('a kit transaction that is not fully signed is refused, naming the missing signer', async () => {
  const compiled = compileTransaction(message(0, payer, other));
  expect(() => encodeTransactions([compiled])).toThrow(/not fully signed: no signature for/);

  // Partly signed: only the other signer's signature is missing.
  const partly = await partiallySignTransactionMessageWithSigners(message(0, payer, other));
  const onlyPayer: KitTransaction = {
    messageBytes: partly.messageBytes,
    signatures: { ...partly.signatures, [other.address]: null },
  };
  expect(() => encodeTransactions([onlyPayer])).toThrow(
    new RegExp(`not fully signed: no signature for ${other.address}`),
  );
});

test('malformed kit-shaped input gets a precise TypeError', async () => {
  const signed = await signTransactionMessageWithSigners(message(0, payer, other));
  const [payerAddress] = Object.keys(signed.signatures) as Address[];
  const cases: Array<[KitTransaction, RegExp]> = [
    [{ messageBytes: new Uint8Array(), signatures: {} }, /not a Solana message/],
    [{ messageBytes: Uint8Array.of(0x80, 1, 0, 0, 5), signatures: {} }, /not a Solana message/],
    [
      {
        messageBytes: signed.messageBytes,
        signatures: { [payerAddress!]: signed.signatures[payerAddress!]! },
      },
      /2 signer\(s\) but signatures has 1/,
    ],
    [
      {
        messageBytes: signed.messageBytes,
        signatures: { ...signed.signatures, [payerAddress!]: new Uint8Array(10) },
      },
      /is not 64 bytes/,
    ],
    [
      { messageBytes: signed.messageBytes, signatures: { 'not-an-address!': null, x: null } },
      /not an address/,
    ],
  ];
  for (const [input, expected] of cases) {
    expect(() => encodeTransactions([input])).toThrow(TypeError);
    expect(() => encodeTransactions([input])).toThrow(expected);
  }
});
