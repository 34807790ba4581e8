export * from './wire/transaction';
export * from './journal/journal';
export * from './events/hub';
export * from './lifecycle/log';
