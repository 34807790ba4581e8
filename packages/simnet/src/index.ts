export * from './chain';
export * from './rpc';
export * from './geyser';
export * from './engine';
export * from './llm';
export { Faults, DEFAULT_FAULTS, type FaultSettings, type FaultActions, type FaultCounts } from './faults';
export { Rng } from './rng';
export { MAINNET_TIP_ACCOUNTS } from './tip-accounts';
export { adminRoutes, type AdminTargets } from './admin';
export { startHttpServer, type RouteHandler, type StartedHttpServer } from './http';
export {
  startSimnet,
  formatEnvLines,
  endpointLines,
  type Simnet,
  type SimnetOptions,
  type SimnetEndpoints,
  type SimnetPorts,
  type RegionEndpoints,
} from './simnet';
