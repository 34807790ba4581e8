import { admissionDecision } from '../src/admission';

const base = { sendRatePerSecond: 8, slotMs: 400, slotsLeft: 150, reserveSlots: 20 };

test('accepted while its turn comes before the deadline less the reserve', () => {
  // (150 - 20) slots x 400 ms = 52 s; at 8 bundles/s that is 416 sends.
  expect(admissionDecision({ ...base, ahead: 0 })).toEqual({ ok: true, expectedWaitMs: 125 });
  expect(admissionDecision({ ...base, ahead: 415 })).toEqual({ ok: true, expectedWaitMs: 52_000 });
});

test('refused once it could only be sent after that, with how long the backlog needs to drain', () => {
  expect(admissionDecision({ ...base, ahead: 416 })).toEqual({
    ok: false,
    expectedWaitMs: 52_125,
    availableMs: 52_000,
    retryAfterMs: 1000,
  });
  const far = admissionDecision({ ...base, ahead: 499 });
  expect(far).toMatchObject({ ok: false, expectedWaitMs: 62_500, retryAfterMs: 10_500 });
});

test('one region at one bundle a second admits about fifty', () => {
  const one = { ...base, sendRatePerSecond: 1 };
  expect(admissionDecision({ ...one, ahead: 51 }).ok).toBe(true);
  expect(admissionDecision({ ...one, ahead: 52 }).ok).toBe(false);
});

test('a short deadline keeps half of it in reserve, not the whole reserve', () => {
  // 20 slots: 10 kept, 10 x 400 ms = 4 s to be sent in.
  expect(admissionDecision({ ...base, slotsLeft: 20, ahead: 0 })).toEqual({ ok: true, expectedWaitMs: 125 });
  expect(admissionDecision({ ...base, slotsLeft: 20, ahead: 32 })).toMatchObject({
    ok: false,
    availableMs: 4_000,
  });
  expect(admissionDecision({ ...base, slotsLeft: 0, ahead: 0 })).toMatchObject({ ok: false, availableMs: 0 });
});
