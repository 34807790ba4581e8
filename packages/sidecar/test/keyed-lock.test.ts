import { KeyedLock } from '../src/util/keyed-lock';

test('work on one key runs one at a time, in order; other keys run alongside', async () => {
  const lock = new KeyedLock();
  const log: string[] = [];
  const step = (name: string, ms: number) => async () => {
    log.push(`${name}:start`);
    await new Promise((r) => setTimeout(r, ms));
    log.push(`${name}:end`);
  };
  await Promise.all([
    lock.run('a', step('a1', 20)),
    lock.run('a', step('a2', 1)),
    lock.run('b', step('b1', 5)),
  ]);
  expect(log.indexOf('a1:end')).toBeLessThan(log.indexOf('a2:start'));
  expect(log.indexOf('b1:end')).toBeLessThan(log.indexOf('a1:end'));
});

test('isBusy is false as soon as the awaited work has finished, and true while it runs', async () => {
  const lock = new KeyedLock();
  let release!: () => void;
  const running = lock.run('k', () => new Promise<void>((r) => (release = r)));
  expect(lock.isBusy('k')).toBe(true);
  await new Promise((r) => setImmediate(r)); // the work starts on a later tick
  expect(lock.isBusy('k')).toBe(true);
  release();
  await running;
  expect(lock.isBusy('k')).toBe(false);
});

test('a failing piece of work does not block the next one', async () => {
  const lock = new KeyedLock();
  await expect(lock.run('k', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  await expect(lock.run('k', async () => 42)).resolves.toBe(42);
  expect(lock.isBusy('k')).toBe(false);
});
