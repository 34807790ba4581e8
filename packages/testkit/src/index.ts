export * from './sse';
export * from './stack';
