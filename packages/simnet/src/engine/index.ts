export {
  BlockEngine,
  DroppedReason,
  NO_LEADER_MESSAGE,
  type BlockEngineOptions,
  type BlockEngineEvents,
  type TrackedBundle,
  type BundleFailure,
  type InflightStatus,
  type AdmitDecision,
  type SubmitResult as BundleSubmitResult,
} from './engine';
export {
  Auction,
  DEFAULT_HOT_ACCOUNTS,
  DEFAULT_REGIMES,
  MAINNET_MIN_REQUESTED_CU,
  REFERENCE_BUNDLE_CU,
  drawMainnetComputeUnits,
  type ComputeProfile,
  type BackgroundBid,
  MIN_TIP_LAMPORTS,
  REGIMES,
  TIP_QUANTILES,
  tipQuantile,
  type AuctionOptions,
  type Regime,
  type RegimeParams,
  type SlotAuction,
} from './auction';
export {
  AUCTION_TICK_MS,
  DEFAULT_BLOCK_LIMITS,
  DEFAULT_INSTRUCTION_COMPUTE_UNIT_LIMIT,
  MAX_BLOCK_UNITS,
  MAX_COMPUTE_UNIT_LIMIT,
  MAX_WRITABLE_ACCOUNT_UNITS,
  SIMD_0286_BLOCK_UNITS,
  SlotBudget,
  simd0306AccountUnits,
  type BlockLimits,
  groupBids,
  rankBids,
  requestedComputeUnits,
  resolveSlot,
  runTick,
  ticksPerSlot,
  tipPerCu,
  type Bid,
  type SlotResolution,
  type TickLoss,
} from './auction-model';
export {
  TipFloor,
  percentile,
  toJitoTipFloor,
  type JitoTipFloorEntry,
  type TipFloorLamports,
  type TipFloorOptions,
  type TipFloorSnapshot,
} from './tip-floor';
export { RateLimiter, RATE_LIMIT_MESSAGES, type RateLimitOptions, type RateDecision } from './rate-limit';
export {
  BundleErrors,
  DONT_FRONT_PREFIX,
  MAX_BUNDLE_TRANSACTIONS,
  carriesDontFront,
  violatesDontFront,
  validateBundle,
  type BundleRejection,
  type ValidBundle,
  type ValidationResult,
} from './validate';
export { deriveBundleId, decodeWire, type WireEncoding } from './wire';
export { engineJsonRpcRoutes } from './json-rpc';
export {
  startGrpcEngine,
  TOO_MANY_RESULT_STREAMS,
  type GrpcEngineOptions,
  type StartedGrpcEngine,
  type TlsMaterial,
} from './grpc';
export { TEST_ONLY_TLS_CERT_PEM, TEST_ONLY_TLS_KEY_PEM, writeCaCertFile } from './tls';
export {
  JITO_MAINNET_REGIONS,
  DEFAULT_CROSS_REGION_DELAY_MS,
  MAINNET_STAKE_SHARE_BY_REGION,
  REGION_COORDINATES,
  assignRegions,
  regionDistanceKm,
  regionLatencyMs,
  regionNames,
  type RegionStake,
} from './regions';
