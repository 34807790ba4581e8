import { ConcurrencyLimiter } from '../src';

const never = new Promise<void>(() => undefined);

test('runBefore: a waiter that gives up leaves the queue and its task never runs; the next waiter gets the slot', async () => {
  const limiter = new ConcurrencyLimiter(1);
  let finishFirst: () => void = () => undefined;
  const first = limiter.run(() => new Promise<string>((r) => (finishFirst = () => r('first'))));
  let giveUp: () => void = () => undefined;
  const ran: string[] = [];
  const quitter = limiter.runBefore(new Promise<void>((r) => (giveUp = r)), async () => {
    ran.push('quitter');
  });
  const patient = limiter.runBefore(never, async () => {
    ran.push('patient');
    return 'patient';
  });
  expect(limiter.queued).toBe(2);
  giveUp();
  await expect(quitter).resolves.toEqual({ ran: false });
  expect(limiter.queued).toBe(1);
  finishFirst();
  await expect(first).resolves.toBe('first');
  await expect(patient).resolves.toEqual({ ran: true, value: 'patient' });
  expect(ran).toEqual(['patient']);
  expect(limiter.active).toBe(0);
});

test('a freed slot goes to the oldest waiter; a newcomer cannot take it in between', async () => {
  const limiter = new ConcurrencyLimiter(1);
  const order: string[] = [];
  let finish: () => void = () => undefined;
  const held = limiter.run(() => new Promise<void>((r) => (finish = r)));
  const waiting = limiter.run(async () => void order.push('waiter'));
  finish();
  const newcomer = limiter.run(async () => void order.push('newcomer'));
  await Promise.all([held, waiting, newcomer]);
  expect(order).toEqual(['waiter', 'newcomer']);
});
