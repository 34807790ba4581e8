// @solrelay/sidecar's public surface, by name. What is not listed here is internal to the sidecar (stage modules,
// tracker helpers, crash hooks) and may change without notice.

// The service: environment → config → running sidecar.
export { startSidecar, loadKeypair, type Sidecar, type SidecarOptions } from './service';
export { configFromEnv, DEFAULTS, type SidecarConfig } from './config';
export {
  applyV8Flags,
  HEAP_GROWING_PERCENT,
  MEMORY_MODES,
  memoryModeFlags,
  memoryModeFlagsFromEnv,
  parseMemoryMode,
  type MemoryMode,
} from './runtime/memory-mode';

// The transaction path behind the API (the facade over the stages), and its records.
export {
  Relay,
  toTxRecord,
  type RelayOptions,
  type CrashPointName,
  type AgentConnection,
  type TrackKind,
} from './relay';
export {
  SpendLedger,
  storeCodec,
  type AttemptDecision,
  type AttemptStage,
  type StoreOp,
  type StoreState,
  type StoredAttempt,
  type StoredTx,
} from './store/records';
export {
  ChangeFeed,
  InMemoryTxStore,
  JournalTxStore,
  SpendLimitReached,
  StoreConflict,
  isStoreConflict,
  type StoreChange,
  type SpendLimit,
  type StoreCounts,
  type TxChange,
  type TxEvent,
  type TxExpectation,
  type TxQueries,
  type TxStore,
} from './store/store';
export { PgTxStore, type PgTxStoreOptions } from './store/pg-store';

// Building blocks, each usable on its own.
export {
  Journal,
  JournalClosedError,
  JournalCorruptError,
  type JournalCodec,
  type JournalOptions,
  type JournalRecovery,
} from './journal/journal';
export { LifecycleLog, type LifecycleLogOptions, type LifecycleLogRecovery } from './lifecycle/log';
export { EventHub, type EventHubOptions, type HubEvent, type SubscribeOptions } from './events/hub';
export { PolicyStore } from './policy/policy-store';
export { Metrics } from './metrics';
export { createRequestListener } from './http/app';
export { SIGNATURE_FEE_LAMPORTS, TipSigner, type TipTransaction } from './engine/tip-tx';
export {
  PACKET_DATA_SIZE,
  WireFormatError,
  decodeTransactionString,
  firstInvalidSignature,
  parseTransaction,
  type ParsedInstruction,
  type ParsedTransaction,
} from './wire/transaction';
export { SignatureVerifier, type SignatureProblem } from './wire/signature-verifier';

// Upstream clients: Solana JSON-RPC (web3.js), Yellowstone gRPC, the block engine (JSON-RPC and gRPC).
export { SolanaRpc, type RecentBlockhash, type SolanaRpcOptions } from './upstream/solana-rpc';
export {
  GeyserStream,
  type GeyserSlotStatus,
  type GeyserSlotUpdate,
  type GeyserStreamOptions,
  type GeyserTransactionStatus,
} from './upstream/geyser-stream';
export {
  type BlockEngineTransport,
  type BundleRejection,
  type BundleResultMessage,
  type InflightBundleStatus,
  type InflightStatus,
  type SendBundleResult,
} from './upstream/block-engine';
export { JsonRpcBlockEngine, type JsonRpcBlockEngineOptions } from './upstream/block-engine-jsonrpc';
export {
  EngineRegions,
  leaderRegions,
  type EngineRegion,
  type EngineRegionsConfig,
  type RegionedLeaders,
} from './upstream/engine-regions';
export { GrpcBlockEngine, type LeaderSchedule, type NextScheduledLeader } from './upstream/block-engine-grpc';
export {
  BoundForwarder,
  bindEngineTraffic,
  probeLocalAddress,
  type EngineBinding,
} from './upstream/local-address';

// PostgreSQL: connection and schema migrations (also `@solrelay/sidecar/pg`, without the service). No store yet.
export * from './pg';
