import { Semaphore, SemaphoreTimeout } from '../src/util/semaphore';

test('a semaphore lets `capacity` holders in at once, the rest in arrival order as places free', async () => {
  const gate = new Semaphore(2);
  const order: string[] = [];
  const releases: Array<() => void> = [];
  const take = (name: string) =>
    gate.acquire().then((release) => {
      order.push(name);
      releases.push(release);
    });
  const all = [take('a'), take('b'), take('c'), take('d')];
  await Promise.resolve();
  await Promise.resolve();
  expect(order).toEqual(['a', 'b']);
  expect(gate.queued).toBe(2);
  releases[0]!();
  releases[0]!(); // a second call frees nothing more
  await new Promise((r) => setImmediate(r));
  expect(order).toEqual(['a', 'b', 'c']);
  expect(gate.inUse).toBe(2);
  releases[1]!();
  releases[2]!();
  await Promise.all(all);
  expect(order).toEqual(['a', 'b', 'c', 'd']);
  releases[3]!();
  expect(gate.inUse).toBe(0);
  expect(() => new Semaphore(0)).toThrow(RangeError);
});

test('run releases its place when the work throws', async () => {
  const gate = new Semaphore(1);
  await expect(gate.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  expect(gate.inUse).toBe(0);
  await expect(gate.run(async () => 7)).resolves.toBe(7);
});

test('a wait with a timeout gives up with SemaphoreTimeout and leaves the queue as it was', async () => {
  jest.useFakeTimers();
  try {
    const gate = new Semaphore(1);
    const release = await gate.acquire();
    const late = gate.acquire(50);
    const patient = gate.acquire();
    expect(gate.queued).toBe(2);
    jest.advanceTimersByTime(50);
    await expect(late).rejects.toBeInstanceOf(SemaphoreTimeout);
    expect(gate.queued).toBe(1);
    release();
    (await patient)();
    expect(gate.inUse).toBe(0);
  } finally {
    jest.useRealTimers();
  }
});
