export * from './types';
export {
  SimCluster,
  BLOCKHASH_VALID_BLOCKS,
  type SimClusterOptions,
  type ConsensusMode,
  type ConsensusPhase,
  type MigrationOptions,
} from './cluster';
export { LEADER_WINDOW_SLOTS } from './leaders';
export {
  encodeTransactionError,
  describeTransactionError,
  transactionErrorName,
  isRecordedError,
} from './errors';
export { parseTransaction, verifySignatures, type ParsedTransaction } from './wire';
export {
  TestKeypair,
  createTransferTx,
  signatureOf,
  fundedKeypair,
  type Transfer,
  type TransferTxOptions,
} from './testing';
