export * from './sse';
export * from './stack';
export * from './ports';
export * from './sidecar';
export * from './process';
export * from './seed';
export * from './postgres';
