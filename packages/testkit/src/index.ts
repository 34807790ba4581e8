export * from './sse';
export * from './stack';
export * from './process';
export * from './seed';
export * from './postgres';
