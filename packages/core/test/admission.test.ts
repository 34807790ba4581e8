import { admissionDecision } from '../src/admission';

const base = { sendRatePerSecond: 8, slotMs: 400, slotsLeft: 150, backlogSlots: 150, reserveSlots: 20 };
const fifo = (ahead: number) => ({ ...base, ahead, waiting: ahead });

test('accepted while its turn comes before the deadline less the reserve', () => {
  // (150 - 20) slots x 400 ms = 52 s; at 8 bundles/s that is 416 sends.
  expect(admissionDecision(fifo(0))).toEqual({ ok: true, expectedWaitMs: 125 });
  expect(admissionDecision(fifo(415))).toEqual({ ok: true, expectedWaitMs: 52_000 });
});

test('refused once it could only be sent after that, with how long the backlog needs to drain', () => {
  expect(admissionDecision(fifo(416))).toEqual({
    ok: false,
    expectedWaitMs: 52_125,
    availableMs: 52_000,
    retryAfterMs: 1000,
  });
  expect(admissionDecision(fifo(499))).toMatchObject({
    ok: false,
    expectedWaitMs: 62_500,
    retryAfterMs: 10_500,
  });
});

test('one region at one bundle a second admits about fifty', () => {
  const one = { ...base, sendRatePerSecond: 1 };
  expect(admissionDecision({ ...one, ahead: 51, waiting: 51 }).ok).toBe(true);
  expect(admissionDecision({ ...one, ahead: 52, waiting: 52 }).ok).toBe(false);
});

test('a high-priority arrival counts only what goes before it, but may not push the backlog past its deadline', () => {
  // 300 normal ones wait; a high one goes first: its own turn is at once.
  expect(admissionDecision({ ...base, ahead: 0, waiting: 300 })).toEqual({ ok: true, expectedWaitMs: 125 });
  // With 416 waiting, one more at the front would push the last of them past 52 s.
  expect(admissionDecision({ ...base, ahead: 0, waiting: 416 })).toMatchObject({
    ok: false,
    retryAfterMs: 1000,
  });
});

test('a short deadline keeps half of it in reserve, not the whole reserve', () => {
  // 20 slots: 10 kept, 10 x 400 ms = 4 s to be sent in.
  const short = { ...base, slotsLeft: 20 };
  expect(admissionDecision({ ...short, ahead: 0, waiting: 0 })).toEqual({ ok: true, expectedWaitMs: 125 });
  expect(admissionDecision({ ...short, ahead: 32, waiting: 32 })).toMatchObject({
    ok: false,
    availableMs: 4_000,
  });
  expect(admissionDecision({ ...base, slotsLeft: 0, ahead: 0, waiting: 0 })).toMatchObject({
    ok: false,
    availableMs: 0,
  });
});
