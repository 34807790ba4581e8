export * from './wire/transaction';
export * from './journal/journal';
