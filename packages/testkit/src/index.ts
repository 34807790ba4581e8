export * from './sse';
export * from './stack';
export * from './sidecar';
export * from './process';
export * from './seed';
