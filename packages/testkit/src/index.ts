export * from './sse';
export * from './stack';
export * from './process';
