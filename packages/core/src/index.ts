/**
 * @solrelay/core: relay's pure decision core. No I/O, no timers, no environment, no clock: time,
 * slots and randomness are always inputs.
 */
export * from './api';
export * from './base58';
export * from './bundle-id';
export * from './errors';
export * from './event-cursor';
export * from './events';
export * from './lamports';
export * from './leaders';
export * from './lifecycle';
export * from './oracle';
export * from './outcomes';
export * from './policy';
export * from './policy-bounds';
export * from './reflex';
export * from './states';
export * from './vocabulary';
export * from './webhooks';
export * from './regions';
export * from './admission';
export * from './packing';
export * from './consensus';
export * from './pricing';
export * from './landing';
