export { startGeyserServer, type GeyserServerOptions, type GeyserServerHandle } from './server';
export { findGeyserProto, loadGeyserService } from './proto';
export { matchesTransaction, parseFilters, type TransactionFilter, type StreamFilters } from './filters';
