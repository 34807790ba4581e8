export * from './chain/types';
export { Faults, DEFAULT_FAULTS, type FaultSettings } from './faults';
export { Rng } from './rng';
export { MAINNET_TIP_ACCOUNTS } from './tip-accounts';
