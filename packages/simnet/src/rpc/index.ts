export { startRpcServer, type RpcServerOptions, type RpcServerHandle } from './server';
export { RpcMethods, RpcError, SOLANA_CORE_VERSION, parseCommitment } from './methods';
